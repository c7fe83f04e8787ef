"""The engine: one data dir's payloads and metadata as one serving process sees them.

Every role has the same payload side: the file-system seam, the executor that blocking work
goes to, the payload store (the only owner of payload files) and its caches, the payloads
quarantined after failing verification, and the access keys' uses not yet journaled. Two
parts are the role's choice (``service.roles``), made once when the engine is built; the
engine itself never asks which role it serves:

- ``Committer``: where ``commit(event)`` goes. ``JournalCommitter``
  (``service.engine.journaled``) appends it to this process's journal and applies it; a
  worker's ``LinkCommitter`` (``service.procs.link_committer``) sends it to the writer.
- ``StateSource``: where ``state`` is read. ``OwnState`` (below) is the state this process
  applies committed records to; a worker's ``SharedIndexState``
  (``service.procs.shared_state``) is the writer's index, read-only, looked at again in
  each request.

A fourth role adds its own implementations (a standby following a shipped journal: its own
state, and a committer that refuses every mutation); docs/architecture.md, "Roles".

Mutations go through ``commit`` only; ``state`` changes only when a committed record is
applied (``service.engine.applier``). Payload files an event released (overwritten or
deleted objects, replaced parts) leave the small-body cache at once and are removed by the
committer once the releasing record may no longer be lost.

Thread-safety: all methods run on the event-loop thread; blocking work goes to
``self.executor``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from fsseam import crashpoints
from fsseam.durable import make_dirs_durably
from fsseam.fs import FileSystem, RealFileSystem
from journal import JournalStats
from service.config import Config
from service.engine.key_usage import KeyUsage
from service.engine.quarantine import Quarantine
from service.events.feed import EventFeed
from service.meta import MetaState, Outcome
from service.storage import PayloadCache, PayloadIntegrity, PayloadStore
from service.storage.groupsync import GroupSync
from service.storage.hop_batch import HopBatch

log = logging.getLogger("service.engine")

T = TypeVar("T")


# -- the parts a role chooses ---------------------------------------------------------


class Committer(Protocol):
    """Where this process's mutations are committed."""

    replay_seconds: float
    """How long the start took to bring the state up to date (0 where nothing replays)."""

    @property
    def read_only_reason(self) -> str | None:
        """Why no mutation is accepted until a restart; None while they are."""
        ...

    async def start(self, engine: Engine) -> None:
        """Ready to commit (a journal: replayed, its crash left-overs handled)."""

    async def stop(self) -> None:
        """Commit nothing more; what was committed is durable when this returns."""

    async def commit(self, event: dict[str, Any]) -> Outcome:
        """Commit ``event``; the outcome of applying it (``service.engine.errors`` refuses)."""
        ...

    def ensure_writable(self) -> None:
        """Refuse a mutation up front when commits are refused now."""

    def release(self, payload_ids: list[str]) -> None:
        """Payload files no record references any more: remove them (where this process
        owns the files) once the releasing record may no longer be lost."""

    def last_sequence(self) -> int:
        """The sequence of the last record committed, as this process knows it."""
        ...

    async def sync(self) -> None:
        """Make every record committed so far durable (before a file they released goes)."""

    def journal_stats(self) -> JournalStats | None:
        """The journal's figures, where this process keeps it (else None)."""
        ...


class StateSource(Protocol):
    """Where this process reads the metadata state."""

    def current(self) -> MetaState:
        """The state a request reads now."""
        ...

    def begin_request(self) -> None:
        """A request begins: the state it reads must show every commit answered so far."""

    async def start(self, engine: Engine) -> None:
        """Ready to be read."""

    async def stop(self) -> None:
        """Release what reading needed."""


class OwnState:
    """The state this process applies committed records to (its committer, or a standby's
    follower, sets ``state`` at start and applies to it); always up to date here."""

    def __init__(self) -> None:
        self.state = MetaState()

    def current(self) -> MetaState:
        return self.state

    def begin_request(self) -> None:
        """Nothing to check: every commit answered so far was applied here."""

    async def start(self, engine: Engine) -> None:
        """The committer fills ``state`` as it replays."""

    async def stop(self) -> None:
        """Nothing held."""


# -- the engine -----------------------------------------------------------------------


class Engine:
    """One data dir's payload side, and the committer and state source its role chose."""

    def __init__(
        self,
        config: Config,
        committer: Committer,
        states: StateSource,
        *,
        fs: FileSystem | None = None,
        clock: Callable[[], float] = time.time,
        key_usage: KeyUsage | None = None,
    ) -> None:
        """``fs`` and ``clock`` default to the real ones; crash tests pass a
        ``SimFileSystem`` and its manual clock, which the payload store's grace periods and
        staging TTL must read so that a test can age files. ``key_usage``: where access
        keys' uses are noted (by default kept here until journaled)."""
        self.config = config
        self.committer = committer
        self.states = states
        self.clock = clock
        self.fs: FileSystem = fs or RealFileSystem()
        # Created durably before anything goes into it: a power loss must not take the
        # data directory's own entry, and with it every synced file inside.
        make_dirs_durably(self.fs, config.data_dir)
        self.executor = ThreadPoolExecutor(
            max_workers=max(8, (os.cpu_count() or 2) * 4), thread_name_prefix="blocking"
        )
        self.store = PayloadStore(
            config.data_dir,
            fs=self.fs,
            durability=config.durability,
            clock=clock,
        )
        strict, fs_sync = config.durability == "strict", self.store.fs_sync
        self.payload_sync = (
            GroupSync(fs_sync, self.run_blocking) if strict and fs_sync is not None else None
        )
        """Strict small PUTs' shared file-system sync (``service.storage.groupsync``)."""
        self.small_writes = HopBatch(lambda: self.executor)
        """Small PUTs' file work that never waits for the disk, one hop per loop iteration
        (``service.storage.hop_batch``)."""
        self.integrity = PayloadIntegrity(self.fs, self.store.layout, None if strict else fs_sync)
        self.payload_cache = PayloadCache(config.small_object_cache_bytes)
        """Bodies of small payloads for GET (event-loop thread; see ``storage.cache``)."""
        self.quarantined = Quarantine()
        """Payloads that failed verification: never served (``service.engine.quarantine``)."""
        self.key_usage = key_usage if key_usage is not None else KeyUsage()
        """Access keys' uses not yet journaled (``service.engine.key_usage``)."""
        self.events = EventFeed(
            self.fs,
            os.path.join(config.data_dir, "events"),
            segment_events=config.events_segment_events,
            retention_seconds=config.events_retention_seconds,
            retention_count=config.events_retention_count,
            recent=config.events_recent,
        )
        """Object events derived from the records applied here (``service.events.feed``)."""
        self.started_at = time.time()
        self._background: list[asyncio.Task[None]] = []

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Make the state readable, then the committer ready (a journal replays)."""
        await self.states.start(self)
        await self.committer.start(self)

    async def stop(self) -> None:
        """Stop background work and the committer (a journal writes its final snapshot)."""
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.committer.stop()
        await self.states.stop()
        self.executor.shutdown(wait=True)
        if self.store.fs_sync is not None:
            self.store.fs_sync.close()

    def add_background_job(self, interval: float, job: Callable[[], Awaitable[Any]]) -> None:
        """Run ``job`` every ``interval`` seconds until ``stop``; failures are logged."""
        self._background.append(asyncio.create_task(self._every(interval, job)))

    def add_background_task(self, task: asyncio.Task[None]) -> None:
        """Cancel ``task`` at ``stop`` if it still runs."""
        self._background.append(task)

    async def _every(self, interval: float, job: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await job()
            except Exception:
                log.exception("background job %s failed", getattr(job, "__name__", job))

    # -- state ------------------------------------------------------------------------

    @property
    def state(self) -> MetaState:
        """The metadata state as this process reads it now (the role's state source)."""
        return self.states.current()

    def begin_request(self) -> None:
        """A request begins: the next read of ``state`` sees every commit answered so far."""
        self.states.begin_request()

    def key_last_used(self, access_key_id: str) -> int | None:
        """The key's last use (ms), journaled or only noted; None if never used."""
        return self.key_usage.last_used(self.state, access_key_id)

    # -- blocking work ----------------------------------------------------------------

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the engine's thread pool."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    # -- commit -----------------------------------------------------------------------

    @property
    def read_only_reason(self) -> str | None:
        """Why mutations are refused until a restart (a journal fault); None otherwise."""
        return self.committer.read_only_reason

    def ensure_writable(self) -> None:
        """Refuse a mutation up front when the committer refuses them now."""
        self.committer.ensure_writable()

    async def commit(self, event: dict[str, Any]) -> Outcome:
        """Commit ``event`` and return the outcome of applying it.

        Raises the engine's errors (``service.engine.errors``): ``ReadOnlyError`` when
        read-only, ``NotServingError`` while starting or stopping (or while the writer is
        away), and ``StorageFullError`` / ``CommitFailedError`` when the commit failed (the
        engine then turns read-only, fail-stop: the record's fate is decided by the next
        replay).
        """
        return await self.committer.commit(event)

    def release_payloads(self, payload_ids: Iterable[str]) -> None:
        """Payload files nothing references any more: out of the cache now, removed by the
        committer (off the event loop, once the releasing record may no longer be lost)."""
        ids = list(payload_ids)
        if not ids:
            return
        self.payload_cache.discard(ids)
        self.committer.release(ids)


def install_crash_hook(spec: str | None) -> None:
    """Arm a named crash point: ``name`` or ``name:N`` SIGKILLs this process at the Nth hit.

    Test-only (``SERVICE_CRASH_POINT``): lets the crash tests kill a real server at an exact
    point of its write path.
    """
    if not spec:
        return
    name, _, count_text = spec.partition(":")
    remaining = [int(count_text) if count_text else 1]

    def hook(point: str) -> None:
        if point != name:
            return
        remaining[0] -= 1
        if remaining[0] <= 0:
            os.kill(os.getpid(), signal.SIGKILL)

    crashpoints.set_hook(hook)
