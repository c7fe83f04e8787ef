"""The event-loop side of parts written in place (the file work: ``service.storage.direct``).

Which part may be written straight into its upload's file, and how the object is made of
that file at ``complete``:

- ``claim``: a part of declared length ``1..S`` (``S`` the session's
  ``recommended_part_size``) goes to ``(n - 1) * S``, unless part ``n`` is stored in place
  already (a re-sent part never overwrites stored bytes: it takes its own file, and the
  stored one stays intact for a reader until the new record replaces it) or is being
  written in place by another request. Anything else (a longer part, a body of unknown
  length, an upload being completed) takes the old path: its own payload file.
- ``part_stored``: after a part's record, the object's SHA-256 is carried over the parts
  stored in place from part 1 on, reading their regions back (page cache) off the event
  loop, with the hash state kept at every part boundary; a part replaced after it was
  hashed cuts the state back to the boundary before it. This runs in one background task
  per upload (so an upload's hashing runs in one order), which the part's answer does not
  wait for: a client sending parts in parallel would otherwise get its answers in lockstep
  behind the hash of every part before them, and leave the network idle meanwhile
  (measured: four 32 MiB parts in flight, about 0.15 s idle per round of four). A failure
  to read only stops it (``complete`` reads what is left).
- ``take``: at ``complete``, when the manifest is parts ``1..k``, each but the last of
  ``S`` bytes, each stored in place at its offset or in its own file (copied into place
  then), and no part stored in place lies past the object's end, the file is sealed into
  the object (``PayloadStore.seal_direct``); else None, and ``complete`` joins the parts.
  In-place writes still in flight are waited for first (a while; then the join, which
  reads only stored regions).
- ``drop``: the file goes with its upload (completed, aborted, expired), once the record
  that closed the upload is durable (balanced: after a journal sync); files of uploads
  found closed are removed on the next use (``sweep``) and by the GC, as after a crash.

With several serving processes (``SERVICE_WORKERS``) the parts of one upload land on
different processes, so a claim is also an OFD lock on the part's region of the file
(``service.storage.region_locks``), taken off the event loop once the file exists and
checked against the state read afresh (a part stored meanwhile by another process is never
overwritten). The writer carries the hash over every part, its own and those whose records
workers send it (``note_committed``), and ``complete`` runs there (workers forward it,
``service.procs.forward``): it takes a lock on the whole file, which waits for the parts in
flight on any process and keeps new claims off until the completion is committed. Workers
neither hash nor remove files: a worker's answer waits for nothing but its own part.

Thread-safety: event-loop thread only; each upload's file jobs run under its lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from journal import JournalError
from service.engine.core import Engine
from service.meta import PartInfo, UploadSession
from service.meta.records import PART_STORED
from service.storage import StagedPayload, region_locks
from service.storage.direct import RegionWriter, SealPlan, is_direct_id, parse_direct_id
from service.storage.region_locks import RegionLock

log = logging.getLogger("service.multipart")

IN_FLIGHT_WAIT_SECONDS = 5.0
"""How long ``take`` waits for in-place writes still in flight before joining instead."""


@dataclass(frozen=True, slots=True)
class _Hashed:
    """A part folded into the object's SHA-256, and the state just after it."""

    number: int
    payload_id: str
    end: int
    digest: hashlib._Hash
    """Never updated: copied before use."""


@dataclass
class _Upload:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    writing: set[int] = field(default_factory=set)
    """Part numbers being written in place by requests of this process."""
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    hashed: list[_Hashed] = field(default_factory=list)
    hashing: asyncio.Task[None] | None = None
    """The background task carrying the hash over stored parts, while it runs."""
    sealing: RegionLock | None = None
    """The lock on the whole file ``complete`` holds until it is committed (shared)."""
    again: bool = False
    """A part was stored while ``hashing`` ran: it looks once more before it ends."""


@dataclass
class Claim:
    """The right of one request to write part ``number`` in place."""

    upload_id: str
    number: int
    offset: int
    limit: int
    region: int
    """The stride: the bytes from ``offset`` no other part of the upload is written to."""
    released: bool = False
    lock: RegionLock | None = None
    """Held while the part is written and recorded (several processes only)."""
    opened: RegionWriter | None = None
    """The region's writer, opened with the lock (several processes only)."""


def stored_in_place(parts: Sequence[PartInfo]) -> bool:
    """Whether any of ``parts`` is written in its upload's file."""
    return any(is_direct_id(part.payload_id) for part in parts)


class DirectParts:
    """The in-place parts of one engine's open uploads; see the module docstring."""

    def __init__(
        self, engine: Engine, completing: AbstractSet[str], *, shared: bool, hashes: bool
    ) -> None:
        self._engine = engine
        self._completing = completing
        """The uploads whose ``complete`` runs now (``service.multipart.uploads``)."""
        self._uploads: dict[str, _Upload] = {}
        self.shared = shared
        """Several serving processes: claims are region locks too (module docstring)."""
        self.enabled = not shared or region_locks.supported()
        self.hashes = hashes
        """Whether this process hashes stored parts and removes files (not a worker)."""
        self._swept = False

    async def claim(self, session: UploadSession, number: int, length: int | None) -> Claim | None:
        """A claim to write part ``number`` of ``length`` bytes in place, or None."""
        claim = self._claim_here(session, number, length)
        if claim is None or not self.shared:
            return claim
        engine = self._engine
        try:
            claim.opened, claim.lock = await engine.run_blocking(self._open_locked, claim)
        except OSError as exc:
            log.warning("claiming part %d of upload %s failed: %s", number, claim.upload_id, exc)
        except BaseException:
            self.release(claim)
            raise
        if claim.lock is None or not self._still_free(session.upload_id, number):
            self.release(claim)
            return None
        return claim

    def writer(self, claim: Claim) -> Callable[[], RegionWriter]:
        """What opens the claimed region (runs on the executor)."""
        opened = claim.opened
        if opened is not None:
            return lambda: opened
        store = self._engine.store
        return lambda: store.open_direct_part(claim.upload_id, claim.offset, claim.limit)

    def release(self, claim: Claim) -> None:
        """The claiming request is done writing (stored, refused or dropped); idempotent."""
        if claim.released:
            return
        claim.released = True
        if claim.opened is not None:
            claim.opened.discard()  # no-op once the part was finished
        if claim.lock is not None:
            claim.lock.release()
        upload = self._uploads.get(claim.upload_id)
        if upload is None:
            return
        upload.writing.discard(claim.number)
        if not upload.writing:
            upload.idle.set()
            if not self.hashes:
                del self._uploads[claim.upload_id]  # a worker keeps nothing else of it

    async def part_stored(self, session: UploadSession) -> None:
        """Start carrying the object's hash over the parts now stored in place, in the
        background (module docstring)."""
        if not self.hashes:
            return
        await self.sweep()
        upload_id = session.upload_id
        if not self._open(upload_id) or not stored_in_place(
            self._engine.state.upload_parts(upload_id)
        ):
            return
        upload = self._uploads.setdefault(upload_id, _Upload())
        if upload.hashing is not None and not upload.hashing.done():
            upload.again = True
            return
        upload.again = False
        upload.hashing = asyncio.get_running_loop().create_task(self._hash(session, upload))

    async def take(self, session: UploadSession, parts: Sequence[PartInfo]) -> StagedPayload | None:
        """The object of ``parts`` (the manifest, in order) made of the upload's file, or
        None when it is not laid out for that. Raises OSError when sealing failed."""
        if not self.enabled or not stored_in_place(parts):
            return None
        upload_id = session.upload_id
        upload = self._uploads.setdefault(upload_id, _Upload())
        if upload.writing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(upload.idle.wait(), IN_FLIGHT_WAIT_SECONDS)
            if upload.writing:
                log.info("upload %s still has parts in flight; complete joins", upload_id)
                return None
        async with upload.lock:
            if self.shared and not await self._lock_whole(upload_id, upload):
                return None
            plan = self._plan(session, upload, parts)
            if plan is None:
                return None
            return await self._engine.run_blocking(self._engine.store.seal_direct, upload_id, plan)

    def completed(self, upload_id: str) -> None:
        """``complete`` is over (committed or not): new claims may be taken again."""
        upload = self._uploads.get(upload_id)
        if upload is not None and upload.sealing is not None:
            upload.sealing.release()
            upload.sealing = None

    async def note_committed(self, event: Mapping[str, Any]) -> None:
        """The writer committed a worker's event: hash a part it stored in place."""
        if event.get("type") != PART_STORED or not is_direct_id(str(event.get("payload_id"))):
            return
        session = self._engine.state.get_upload(str(event.get("upload_id")))
        if session is not None:
            await self.part_stored(session)

    async def drop(self, upload_id: str) -> None:
        """Remove the upload's file (its upload is closed)."""
        if not self.hashes:
            return  # only the writer removes files
        upload = self._uploads.pop(upload_id, None)
        if upload is not None:
            async with upload.lock:
                await self._remove(upload_id)
        else:
            await self._remove(upload_id)

    async def sweep(self) -> None:
        """Remove the files of uploads found closed (once per process, then as they go)."""
        if not self.hashes:
            return
        state = self._engine.state
        for upload_id in [u for u in self._uploads if state.get_upload(u) is None]:
            await self.drop(upload_id)
        if self._swept:
            return
        self._swept = True
        try:
            on_disk = await self._engine.run_blocking(self._engine.store.direct_uploads)
        except OSError as exc:
            log.warning("listing the upload files failed: %s", exc)
            return
        for upload_id in on_disk:
            if state.get_upload(upload_id) is None:
                await self.drop(upload_id)

    # -- internals --------------------------------------------------------------------

    def _claim_here(self, session: UploadSession, number: int, length: int | None) -> Claim | None:
        """The claim as far as this process can tell (its own requests, its state)."""
        stride = session.recommended_part_size
        engine = self._engine
        if not self.enabled or length is None or not 0 < length <= stride or stride <= 0:
            return None
        if session.upload_id in self._completing:
            return None
        offset = (number - 1) * stride
        if offset + length > engine.config.max_object_bytes:
            return None  # no object can reach there: not worth a sparse file that far
        if self._stored_in_place(session.upload_id, number):
            return None
        upload = self._uploads.setdefault(session.upload_id, _Upload())
        if number in upload.writing:
            return None
        upload.writing.add(number)
        upload.idle.clear()
        return Claim(session.upload_id, number, offset, length, stride)

    def _stored_in_place(self, upload_id: str, number: int) -> bool:
        part = self._stored(upload_id).get(number)
        return part is not None and is_direct_id(part.payload_id)

    def _open_locked(self, claim: Claim) -> tuple[RegionWriter, RegionLock | None]:
        """The region's writer (the file made if new) and a lock on the part's region."""
        writer = self._engine.store.open_direct_part(claim.upload_id, claim.offset, claim.limit)
        try:
            lock = region_locks.try_lock(writer.path, claim.offset, claim.region)
        except BaseException:
            writer.discard()
            raise
        if lock is None:
            writer.discard()
        return writer, lock

    def _still_free(self, upload_id: str, number: int) -> bool:
        """Under the lock, against the state read afresh: the upload is open and part
        ``number`` is not stored in place (by another process, meanwhile)."""
        engine = self._engine
        engine.begin_request()
        return self._open(upload_id) and not self._stored_in_place(upload_id, number)

    async def _lock_whole(self, upload_id: str, upload: _Upload) -> bool:
        """Wait (a while) for parts in flight on any process, and keep new ones off."""
        path = self._engine.store.direct_file(upload_id)
        try:
            lock = await self._engine.run_blocking(
                region_locks.lock_when_free, path, 0, 0, IN_FLIGHT_WAIT_SECONDS
            )
        except OSError as exc:
            log.warning("locking the file of upload %s failed: %s", upload_id, exc)
            return False
        if lock is None:
            log.info("upload %s still has parts in flight; complete joins", upload_id)
            return False
        if upload.sealing is not None:
            upload.sealing.release()
        upload.sealing = lock
        return True

    async def _hash(self, session: UploadSession, upload: _Upload) -> None:
        upload_id = session.upload_id
        try:
            while True:
                upload.again = False
                async with upload.lock:
                    if not self._open(upload_id):
                        return
                    self._cut(upload_id, upload)
                    await self._advance(session, upload)
                if not upload.again:
                    return
        except (OSError, RuntimeError) as exc:
            # The hash is a head start only: ``complete`` reads what is left. (RuntimeError:
            # the executor was shut down by a stop.)
            log.warning("hashing parts of upload %s failed: %s", upload_id, exc)

    def _open(self, upload_id: str) -> bool:
        engine = self._engine
        return upload_id not in self._completing and engine.state.get_upload(upload_id) is not None

    def _stored(self, upload_id: str) -> dict[int, PartInfo]:
        return {part.part_number: part for part in self._engine.state.upload_parts(upload_id)}

    def _cut(self, upload_id: str, upload: _Upload) -> None:
        """Keep the hashed boundaries whose parts are still the stored ones."""
        stored = self._stored(upload_id)
        keep = 0
        for hashed in upload.hashed:
            current = stored.get(hashed.number)
            if current is None or current.payload_id != hashed.payload_id:
                break
            keep += 1
        del upload.hashed[keep:]

    async def _advance(self, session: UploadSession, upload: _Upload) -> None:
        upload_id, stride = session.upload_id, session.recommended_part_size
        engine = self._engine
        while self._open(upload_id):
            number = len(upload.hashed) + 1
            end = upload.hashed[-1].end if upload.hashed else 0
            part = self._stored(upload_id).get(number)
            if (
                end != (number - 1) * stride
                or part is None
                or part.payload_id in engine.quarantined
            ):
                return  # a short part ends the object; or the next part is not here
            located = parse_direct_id(part.payload_id)
            if located is None or located[1] != end:
                return
            digest = upload.hashed[-1].digest.copy() if upload.hashed else hashlib.sha256()
            await engine.run_blocking(engine.store.hash_direct, upload_id, digest, end, part.size)
            if self._stored(upload_id).get(number) is not part:
                return  # replaced meanwhile: the next part_stored cuts back and goes on
            upload.hashed.append(_Hashed(number, part.payload_id, end + part.size, digest))

    def _plan(
        self, session: UploadSession, upload: _Upload, parts: Sequence[PartInfo]
    ) -> SealPlan | None:
        stride = session.recommended_part_size
        copies: list[tuple[str, int]] = []
        end = 0
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            if part.part_number != index + 1 or (not last and part.size != stride):
                return None
            located = parse_direct_id(part.payload_id)
            if located is None:
                copies.append((part.payload_id, end))
            elif located[1] != end or located[2] != part.size:
                return None
            end += part.size
        for number, part in self._stored(session.upload_id).items():
            if number > len(parts) and is_direct_id(part.payload_id):
                return None  # the object's exact length would cut a stored part
        self._cut(session.upload_id, upload)
        usable = 0
        for hashed, part in zip(upload.hashed, parts, strict=False):
            if hashed.payload_id != part.payload_id:
                break
            usable += 1
        if usable:
            last_hashed = upload.hashed[usable - 1]
            return SealPlan(copies, last_hashed.end, last_hashed.digest.copy(), end)
        return SealPlan(copies, 0, hashlib.sha256(), end)

    async def _remove(self, upload_id: str) -> None:
        engine = self._engine
        try:
            # Balanced: the record that closed the upload may not be on disk yet; were the
            # file gone and the record lost, the reopened upload's parts would be too.
            await engine.committer.sync()
        except JournalError as exc:
            log.warning("keeping the file of upload %s (journal sync: %s)", upload_id, exc)
            return
        try:
            await engine.run_blocking(engine.store.remove_direct, upload_id)
        except OSError as exc:
            log.warning("removing the file of upload %s failed: %s", upload_id, exc)
