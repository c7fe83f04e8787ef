"""The one owner of a process's multipart uploads: ``Uploads``, made once by the role at start.

It holds what the uploads of one serving process share beyond the journaled state:

- ``completing``: the sessions whose ``complete`` runs now (parts, aborts and the reaper
  leave them alone; ``service.multipart.operations``);
- ``in_place``: the parts written in place in their upload's file, their claims, the
  object's hash carried over them and the file sealed at ``complete``
  (``service.multipart.in_place``);
- ``assemblies``: the per-process assembly of parts with files of their own
  (``service.multipart.assembly``).

The role chooses, once: whether other processes write parts of the same uploads (``shared``:
claims are then region locks every process sees too), and whether this process keeps the
uploads' files (``keeps_files``: carries the hash over stored parts, seals them at
``complete``, removes the files of closed uploads: the process that writes the journal;
a worker only writes parts).

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from service.engine.core import Engine
from service.multipart.assembly import Assemblies
from service.multipart.in_place import DirectParts


class Uploads:
    """The multipart uploads of one serving process (see the module docstring)."""

    def __init__(self, engine: Engine, *, shared: bool, keeps_files: bool) -> None:
        self.engine = engine
        self.completing: set[str] = set()
        """Sessions whose ``complete`` runs now (parts and aborts wait for it: 409)."""
        self.in_place = DirectParts(engine, self.completing, shared=shared, hashes=keeps_files)
        self.assemblies = Assemblies(engine, self.completing)

    async def note_committed(self, event: Mapping[str, Any]) -> None:
        """Another process's committed event (the writer hears of workers' parts)."""
        await self.in_place.note_committed(event)
