"""The event-loop side of multipart assembly: which upload has which assembly, and when to
grow, cut, seal or drop it (the file work: ``service.storage.assembly``).

- After a part is stored (``part_stored``), the upload's assembly is brought in line with
  the stored parts: cut back to the longest prefix whose parts are still the stored ones
  (a part replaced after it was assembled invalidates the prefix from there), then grown by
  every next part already stored. The first part starts an assembly. The request that
  stored the part waits for this, so an upload's file work stays in one order and a client
  with parts in flight keeps sending while it runs.
- ``take`` hands the assembly to ``complete``: the prefix the manifest names is kept, the
  rest of the manifest appended, the file sealed. None when nothing usable is assembled
  (then ``complete`` joins the parts, as it always could).
- ``drop`` removes the assembly of an upload closed without it (aborted, expired, or
  completed by a join); uploads found closed are dropped on every use as well.

An upload with parts written in place (``service.multipart.in_place``) has no assembly: its
file is the object already.

An assembly is a cache: any failure to grow one (a full disk, a part removed meanwhile)
only drops it, and the part's own answer is unaffected.

Thread-safety: event-loop thread only; each upload's file jobs run on the executor one at a
time, under that upload's lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from service.engine.core import Engine
from service.meta import PartInfo
from service.multipart.in_place import stored_in_place
from service.storage import StagedPayload
from service.storage.assembly import Assembly

log = logging.getLogger("service.multipart")


@dataclass
class _Tracked:
    assembly: Assembly | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Assemblies:
    """The assemblies of one process's open uploads (``service.multipart.uploads``)."""

    def __init__(self, engine: Engine, completing: AbstractSet[str]) -> None:
        self._engine = engine
        self._completing = completing
        """The uploads whose ``complete`` runs now (``service.multipart.uploads``)."""
        self._tracked: dict[str, _Tracked] = {}

    def __len__(self) -> int:
        return len(self._tracked)

    def assembled(self, upload_id: str) -> list[int]:
        """Part numbers assembled so far for ``upload_id`` (tests and diagnostics)."""
        tracked = self._tracked.get(upload_id)
        if tracked is None or tracked.assembly is None:
            return []
        return [part.number for part in tracked.assembly.parts]

    async def part_stored(self, upload_id: str) -> None:
        """Bring the upload's assembly in line with its stored parts (module docstring)."""
        await self._drop_closed()
        engine = self._engine
        if upload_id in self._completing or engine.state.get_upload(upload_id) is None:
            return
        if stored_in_place(engine.state.upload_parts(upload_id)):
            await self.drop(upload_id)
            return
        tracked = self._tracked.get(upload_id)
        if tracked is None:
            if not any(part.part_number == 1 for part in engine.state.upload_parts(upload_id)):
                return
            tracked = self._tracked[upload_id] = _Tracked()
        async with tracked.lock:
            if self._tracked.get(upload_id) is not tracked:
                return  # taken or dropped while we waited
            try:
                await self._catch_up(upload_id, tracked)
            except OSError as exc:
                log.warning("assembling upload %s failed, complete will join: %s", upload_id, exc)
                self._tracked.pop(upload_id, None)
                await self._discard(tracked)

    async def take(self, upload_id: str, parts: Sequence[PartInfo]) -> StagedPayload | None:
        """The object of ``parts`` (the manifest, in order) from the assembly, sealed; None
        when no prefix of it is assembled. Raises OSError when sealing fails (the file is
        gone then)."""
        tracked = self._tracked.pop(upload_id, None)
        if tracked is None:
            return None
        async with tracked.lock:
            assembly = tracked.assembly
            if assembly is None:
                return None
            usable = 0
            for have, want in zip(assembly.parts, parts, strict=False):
                if have.number != want.part_number or have.payload_id != want.payload_id:
                    break
                usable += 1
            if usable == 0:
                await self._discard(tracked)
                return None
            tail = [part.payload_id for part in parts[usable:]]
            return await self._engine.run_blocking(assembly.seal, usable, tail)

    async def drop(self, upload_id: str) -> None:
        """Remove the upload's assembly, if it has one."""
        tracked = self._tracked.pop(upload_id, None)
        if tracked is not None:
            async with tracked.lock:
                await self._discard(tracked)

    async def _drop_closed(self) -> None:
        state = self._engine.state
        for upload_id in [u for u in self._tracked if state.get_upload(u) is None]:
            await self.drop(upload_id)

    async def _catch_up(self, upload_id: str, tracked: _Tracked) -> None:
        engine = self._engine
        if tracked.assembly is None:
            tracked.assembly = await engine.run_blocking(engine.store.create_assembly, upload_id)
        assembly = tracked.assembly
        stored = {part.part_number: part for part in engine.state.upload_parts(upload_id)}
        keep = 0
        for part in assembly.parts:
            current = stored.get(part.number)
            if current is None or current.payload_id != part.payload_id:
                break
            keep += 1
        if keep < len(assembly.parts):
            await engine.run_blocking(assembly.keep, keep)
        while True:
            if upload_id in self._completing:
                return
            stored = {part.part_number: part for part in engine.state.upload_parts(upload_id)}
            following = stored.get(len(assembly.parts) + 1)
            if following is None or following.payload_id in engine.quarantined:
                return
            await engine.run_blocking(assembly.append, following.part_number, following.payload_id)

    async def _discard(self, tracked: _Tracked) -> None:
        assembly, tracked.assembly = tracked.assembly, None
        if assembly is not None:
            await self._engine.run_blocking(assembly.discard)
