"""The unit of body I/O, shared by every path that moves payload bytes.

``CHUNK_BYTES`` (256 KiB) is at once the most a request body chunk from the HTTP connection
holds, the piece a stored body is read or copied in, the buffer a large GET is sent
through, and the size up to which a PUT's body is kept in memory and stored in one
executor job (and a GET's body read in one piece). One figure, so that a chunk that
arrives is a chunk that is written, and a small body is small on both paths.

Pure constants.
"""

from __future__ import annotations

from typing import Final

CHUNK_BYTES: Final = 256 * 1024
