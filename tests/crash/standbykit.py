"""The standby's apply in the crash matrix: a standby on its own simulated disk, copying
from an in-process primary, cut at every file operation and crash point of its bootstrap and
of its following.

The primary is an ordinary ``SimMachine`` (never crashed here). ``SimPrimarySource`` hands
the standby what the primary's feed would serve (its signing secret, newest snapshot and
payload files, read from the primary's simulated disk) and ``StandbyMachine.follow`` hands
it the primary's journal frames, a few records per batch, as the follower does with each
records answer (``StandbyCommitter.apply_batch``: payloads copied, verified and durable, then
the records appended and applied, then synced; the small payloads inline, as the feed
sends them, a part written in place by the bulk route). The standby runs the real
``StandbyCommitter``, bootstrap and ``PayloadFetcher``; only the transport differs
(``service.replication.source``). The primary keeps, for the standby, the payloads that
records after its position released (a reader hold, as the feed's slot does).

The checks on each recovered standby (``check_standby``):

- the restart succeeds (a bootstrap cut short resumes), and the standby's journal is a prefix
  of the primary's, record for record, from the primary's snapshot on;
- every record a finished batch confirmed is still there (a sync primary acknowledges its
  writes on that confirmation);
- the state the standby started with is its journal's (index included), and every version
  and part it holds reads back with its size and SHA-256, none quarantined;
- following again reaches the primary's end with the primary's exact state, and after the GC
  the payload files are exactly the referenced ones (a cut batch's copies were orphans).

Thread-safety: none; each scenario runs in its own event loop.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from fsseam.durable import read_file
from fsseam.simfs import ManualClock, SimFileSystem
from journal.model import Durability
from journal.snapshot import list_snapshots
from journal.tail import LogTail, split_frames
from service.archive.refs import PayloadRef, record_payload
from service.auth import load_or_create_server_secret
from service.auth.server_secret import SERVER_SECRET_FILENAME
from service.engine.core import Engine, OwnState
from service.index.opening import BOOT_ID_PATH
from service.meta import encode_snapshot
from service.replication.bootstrap import PrimaryLink, bootstrap_from
from service.replication.committer import StandbyCommitter
from service.replication.payloads import PayloadFetcher
from service.replication.wire import BATCH_BYTES, INLINE_MAX_BYTES, MAX_RECORD_BYTES, NOT_HELD
from service.storage.direct import parse_direct_id, read_region
from tests.crash.checkkit import Verdict, check_files_after_gc
from tests.crash.enginekit import ProbeEngine, SimMachine, crash_config
from tests.crash.indexkit import index_problems, journal_truth
from tests.crash.simindex import sim_index_factory

LINK = PrimaryLink("http://primary.invalid", "bk_crash", "sk_crash", "sb_crash")
"""Never dialled: the standby kinds copy through ``SimPrimarySource``."""
BATCH_RECORDS = 3
"""Records per simulated records answer (so a crash may fall between two batches)."""
HOLD = "standby:sb_crash"


class SimPrimarySource:
    """What the primary's feed serves, read from its simulated disk (``PrimarySource``)."""

    def __init__(self, primary: SimMachine) -> None:
        self._primary = primary

    def secret(self) -> bytes:
        data_dir = self._primary.config.data_dir
        found = read_file(self._primary.fs, os.path.join(data_dir, SERVER_SECRET_FILENAME))
        assert found is not None, "the primary has no signing secret"
        return found

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[tuple[int, Iterable[bytes]]]:
        found = list_snapshots(self._primary.fs, self._primary.config.journal_dir)
        if not found:
            yield 0, ()
            return
        sequence, path = found[0]  # newest first
        data = read_file(self._primary.fs, path)
        assert data is not None
        half = len(data) // 2
        yield sequence, (data[:half], data[half:])

    def payloads(self, group: list[PayloadRef]) -> Iterator[tuple[str, int, Iterable[bytes]]]:
        """A bulk payloads answer (a payload the primary no longer holds: ``NOT_HELD``)."""
        for ref in group:
            data = self._read(ref)
            if data is None:
                yield ref.payload_id, NOT_HELD, ()
            else:
                half = len(data) // 2
                yield ref.payload_id, len(data), (data[:half], data[half:])

    def inline(self, refs: list[PayloadRef]) -> dict[str, bytes]:
        """The small payloads a records answer carries (as the feed picks them)."""
        found = {}
        for ref in refs:
            if ref.size <= INLINE_MAX_BYTES and parse_direct_id(ref.payload_id) is None:
                data = self._read(ref)
                if data is not None:
                    found[ref.payload_id] = data
        return found

    def _read(self, ref: PayloadRef) -> bytes | None:
        store, fs = self._primary.running.store, self._primary.fs
        located = parse_direct_id(ref.payload_id)
        if located is not None:
            upload_id, offset, size = located
            path = store.direct_file(upload_id)
            return b"".join(bytes(window) for window in read_region(fs, path, offset, size))
        if ref.payload_id in self._primary.running.quarantined:
            return None
        return read_file(fs, store.layout.payload_path(ref.payload_id))

    def records(self, first: int) -> list[Any]:
        """The primary's durable records from ``first`` on (at most ``BATCH_RECORDS``), as
        frames split the way the follower splits a records answer."""
        last = min(self._primary.journal.last_sequence(), first + BATCH_RECORDS - 1)
        if last < first:
            return []
        tail = LogTail(self._primary.fs, self._primary.config.journal_dir, MAX_RECORD_BYTES)
        try:
            frames = tail.read(first, last, BATCH_BYTES)
        finally:
            tail.close()
        return split_frames(b"".join(frame.frame for frame in frames), first, MAX_RECORD_BYTES)


class SimStandbyCommitter(StandbyCommitter):
    """The real standby committer, bootstrapping from an in-process primary one copy at a
    time (so every run passes the same file operations in the same order)."""

    def __init__(self, own: OwnState, source: SimPrimarySource, index_factory: Any) -> None:
        super().__init__(own, LINK, index_factory)
        self.source = source

    def bootstrap(self, engine: Engine) -> int:
        return bootstrap_from(engine, self.source, connections=1)


@dataclass
class Confirmed:
    """The last record a finished batch confirmed, across the standby's restarts."""

    sequence: int = 0


class StandbyMachine(SimMachine):
    """A simulated computer running a standby of ``source``'s primary."""

    def __init__(
        self,
        durability: Durability,
        source: SimPrimarySource,
        *,
        fs: SimFileSystem | None = None,
        clock: ManualClock | None = None,
        confirmed: Confirmed | None = None,
    ) -> None:
        super().__init__(durability, fs=fs, clock=clock, config=crash_config(durability))
        self.source = source
        self.confirmed = confirmed if confirmed is not None else Confirmed()

    async def boot(self) -> ProbeEngine:
        own = OwnState()
        committer = SimStandbyCommitter(own, self.source, sim_index_factory(self.fs))
        engine = ProbeEngine(self.config, committer, own, fs=self.fs, clock=self.clock)
        engine.attempted = self.log.attempted
        engine.executor.shutdown(wait=True)
        engine.executor = ThreadPoolExecutor(1, thread_name_prefix="crash-standby")
        self.engine, self._journal = engine, committer
        try:
            await engine.start()
            if committer.start_sweep is not None:
                await committer.start_sweep  # the orphans' sweep is part of the recovery here
        except BaseException:
            await self.abandon()
            raise
        return engine

    @property
    def standby(self) -> StandbyCommitter:
        committer = self.journal
        assert isinstance(committer, StandbyCommitter)
        return committer

    async def follow(self) -> None:
        """Apply the primary's records in batches until it has no more."""
        while True:
            shipped = self.source.records(self.standby.last_sequence() + 1)
            if not shipped:
                return
            refs = [ref for each in shipped if (ref := record_payload(each.event())) is not None]
            fetcher = PayloadFetcher(self.running, self.source, connections=1)
            inline = self.source.inline(refs)
            await self.standby.apply_batch(shipped, refs, inline, fetcher)
            self.confirmed.sequence = self.standby.last_sequence()

    def successor(self, fs: SimFileSystem) -> StandbyMachine:
        return StandbyMachine(
            self.durability,
            self.source,
            fs=fs,
            clock=ManualClock(self.clock.now),
            confirmed=Confirmed(self.confirmed.sequence),
        )


def fresh_disk() -> SimFileSystem:
    fs = SimFileSystem(clock=ManualClock())
    fs.write_bytes(BOOT_ID_PATH, b"standby-boot-0")  # the simulated kernel's boot id
    return fs


# -- kinds ------------------------------------------------------------------------------

Step = Callable[[SimMachine, dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class StandbyKind:
    """A primary's history, a standby's setup on it, and the standby's operation under test."""

    name: str
    setup: Callable[[dict[str, Any]], Awaitable[StandbyMachine]]
    operation: Callable[[StandbyMachine], Awaitable[None]]


def standby_kinds(
    durability_setup: Callable[[Durability], Awaitable[tuple[SimMachine, dict[str, Any]]]],
    more_writes: Step,
) -> dict[str, StandbyKind]:
    """``durability_setup``: a populated primary (with a snapshot); ``more_writes``: what it
    commits after the standby caught up (the records the following kind applies)."""

    async def primary_and_standby(context: dict[str, Any]) -> StandbyMachine:
        primary, primary_context = await durability_setup(context["durability"])
        context.update(primary_context)
        load_or_create_server_secret(primary.fs, primary.config.data_dir)  # as a server does
        context["primary"] = primary
        return StandbyMachine(context["durability"], SimPrimarySource(primary), fs=fresh_disk())

    async def followed_setup(context: dict[str, Any]) -> StandbyMachine:
        """A standby bootstrapped and caught up; then the primary writes more, keeping
        what those records release until the standby passed them (its slot)."""
        standby = await primary_and_standby(context)
        await standby.boot()
        await standby.follow()
        primary: SimMachine = context["primary"]
        holds = primary.journal.holds
        holds.add(HOLD, lambda: standby.confirmed.sequence + 1)
        holds.settle(HOLD)
        await more_writes(primary, context)
        return standby

    async def bootstrap(standby: StandbyMachine) -> None:
        await standby.boot()

    async def follow(standby: StandbyMachine) -> None:
        await standby.follow()

    return {
        kind.name: kind
        for kind in (
            StandbyKind("standby_bootstrap", primary_and_standby, bootstrap),
            StandbyKind("standby_follow", followed_setup, follow),
        )
    }


# -- checks -----------------------------------------------------------------------------


async def check_standby(
    standby: StandbyMachine, image: SimFileSystem, primary: SimMachine
) -> list[str]:
    """Restart a successor of ``standby`` on ``image`` and check it (module docstring)."""
    verdict = Verdict()
    successor = standby.successor(image)
    try:
        await successor.boot()
    except Exception as exc:  # a restart that cannot start is the finding
        return [f"the standby's restart raised {exc!r}"]
    try:
        await _check_prefix(successor, primary, verdict)
        if verdict.problems:
            return verdict.problems
        await successor.follow()
        engine = successor.running
        last, wanted = successor.standby.last_sequence(), primary.journal.last_sequence()
        verdict.check(last == wanted, f"following again stopped at {last}, not {wanted}")
        verdict.check(
            encode_snapshot(engine.state) == encode_snapshot(primary.running.state),
            "after following again the standby's state is not the primary's",
        )
        await check_payloads(successor, verdict)
        await check_files_after_gc(successor, verdict)
    finally:
        await successor.power_cut()
    return verdict.problems


async def _check_prefix(standby: StandbyMachine, primary: SimMachine, verdict: Verdict) -> None:
    engine = standby.running
    last = standby.standby.last_sequence()
    verdict.check(
        last >= standby.confirmed.sequence,
        f"the standby restarted at {last}, but {standby.confirmed.sequence} was confirmed",
    )
    verdict.check(last <= primary.journal.last_sequence(), f"the standby is ahead at {last}")
    journal = standby.standby.journal
    assert journal is not None
    base = journal.stats().last_snapshot_sequence
    if last > base:
        ours = LogTail(standby.fs, standby.config.journal_dir, MAX_RECORD_BYTES)
        theirs = LogTail(primary.fs, primary.config.journal_dir, MAX_RECORD_BYTES)
        try:
            mine = await engine.run_blocking(ours.read, base + 1, last, 1 << 30)
            truth = await engine.run_blocking(theirs.read, base + 1, last, 1 << 30)
        finally:
            ours.close()
            theirs.close()
        verdict.check(
            # Bodies: a frame's header also names its own journal's write batch.
            [r.body for r in mine] == [r.body for r in truth],
            f"the standby's records {base + 1}..{last} are not the primary's",
        )
    truth_state, _ = await journal_truth(standby.fs.crash_image("keep_unsynced"), standby.config)
    verdict.problems += index_problems(engine, truth_state)
    await check_payloads(standby, verdict)


async def check_payloads(standby: StandbyMachine, verdict: Verdict) -> None:
    """Every version and part the standby holds reads back exactly; none quarantined."""
    engine = standby.running
    verdict.check(not engine.quarantined, f"quarantined on the standby: {engine.quarantined}")
    held = []
    for bucket in engine.state.list_buckets():
        for entry in engine.state.list_versions(bucket.name, limit=10_000).versions:
            version = entry.version
            if not version.is_delete_marker and version.payload_id is not None:
                held.append((version.payload_id, version.size, version.sha256))
    for session in engine.state.uploads():
        for part in engine.state.upload_parts(session.upload_id):
            held.append((part.payload_id, part.size, part.sha256))
    for payload_id, size, sha256 in held:
        good = await engine.run_blocking(engine.store.verify, payload_id, size, sha256)
        verdict.check(good, f"payload {payload_id} is missing or damaged on the standby")
