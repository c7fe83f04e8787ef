"""The server secret: 32 random bytes in the data dir, the key every signature derives from.

Bearer tokens, presigned URLs and share tokens are HMACs under keys derived from this
secret. It is made once, at the first start, and kept in ``<data_dir>/server-secret``
(owner-only, written atomically through the seam). Deleting the file and restarting rotates
it: every token, presigned URL and share link then fails as invalid; nothing else is lost.

Thread-safety: blocking I/O; call once at startup, before the event loop serves requests.
"""

from __future__ import annotations

import os
import secrets

from fsseam.fs import FileSystem
from service.auth.auth_errors import ServerSecretError
from service.auth.private_file import read_private_file, write_private_file

SERVER_SECRET_FILENAME = "server-secret"
SERVER_SECRET_BYTES = 32


def load_or_create_server_secret(fs: FileSystem, data_dir: str) -> bytes:
    """The data dir's server secret, created (and made durable) if there is none yet.

    Raises ``ServerSecretError`` if the file exists with the wrong length.
    """
    path = os.path.join(data_dir, SERVER_SECRET_FILENAME)
    if fs.exists(path):
        secret = read_private_file(fs, path)
        if len(secret) != SERVER_SECRET_BYTES:
            raise ServerSecretError(
                f"{path} holds {len(secret)} bytes, not {SERVER_SECRET_BYTES}; restore it from"
                " a backup, or delete it to invalidate all tokens and signed URLs"
            )
        return secret
    fs.mkdir(data_dir)
    for name in fs.listdir(data_dir):
        # A write a crash cut short (``fsseam.durable.replace_file``'s temporary names).
        if name.startswith(SERVER_SECRET_FILENAME + ".") and name.endswith(".tmp"):
            fs.unlink(os.path.join(data_dir, name))
    secret = secrets.token_bytes(SERVER_SECRET_BYTES)
    write_private_file(fs, path, secret)
    return secret
