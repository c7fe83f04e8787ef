"""The crash matrix's upkeep stores: the event log, webhook cursors, the scrub checkpoint.

All three write through the engine's ``FileSystem`` seam (``engine.fs``), so a SimFS power
cut or I/O error lands in them like in the journal. This module adds, for the matrix:

- kinds whose operation is an upkeep write: an event-log flush (small segments, so files
  roll), a webhook delivering pages and checkpointing its cursor, and a scrub pass that
  checkpoints after every version;
- checks run on every recovered machine (every crash state of every kind):
  * events: the feed holds each event of every acknowledged record exactly once, in sequence
    order, with no gap and no event of a record the journal lost;
  * webhook cursors: a cursor never points past an event the receiver did not acknowledge
    (redelivery allowed, skipping never), never falls behind a completed checkpoint, and
    delivery resumed from it reaches every event of the bucket;
  * scrub: a pass the crash interrupted continues and ends having checked every version it
    had not checked, and never lists an intact payload as corrupt.

The receiver of the webhook kind is in-process (``RecordingDispatcher._post`` notes the
event and acknowledges): the matrix needs a deterministic file-operation sequence, and the
real HTTP receiver is exercised by ``tests/events`` and the kill/restart workload.

Thread-safety: none; one event loop per scenario.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import service.upkeep.scrub
from service.events.scope import BucketScope
from service.meta import ObjectVersion
from service.meta.notification_state import Webhook
from service.ops import notifications as notifications_config
from service.upkeep.scrub import Scrubber
from service.upkeep.webhooks import WebhookDispatcher
from tests.crash.checkkit import Verdict
from tests.crash.enginekit import SimMachine

Step = Callable[[SimMachine, dict[str, Any]], Awaitable[None]]

HOOK = {
    "id": "h",
    "url": "http://hooks.example.invalid/x",
    "events": [],
    "prefix": "",
    "secret": "s",
}
"""Never contacted: ``RecordingDispatcher`` acknowledges in-process."""


class RecordingDispatcher(WebhookDispatcher):
    """The real dispatcher (cursors, checkpoints), acknowledging every POST in-process and
    noting the delivered sequences in the machine's log."""

    def __init__(self, machine: SimMachine) -> None:
        super().__init__(machine.running, machine.config)
        self.delivered: list[int] = machine.log.upkeep.setdefault("delivered", [])

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> str | None:
        self.delivered.append(int(json.loads(body)["sequence"]))
        return None


def _hook(machine: SimMachine) -> Webhook | None:
    hooks = machine.running.state.notifications.all_webhooks()
    return hooks[0] if hooks else None


@contextlib.contextmanager
def _checkpoint_every_version() -> Iterator[None]:
    saved = service.upkeep.scrub.CHECKPOINT_SECONDS
    service.upkeep.scrub.CHECKPOINT_SECONDS = 0.0
    try:
        yield
    finally:
        service.upkeep.scrub.CHECKPOINT_SECONDS = saved


# -- kinds ------------------------------------------------------------------------------


def upkeep_kinds(base_setup: Step, must: Callable[[Any], Awaitable[Any]]) -> dict[str, Any]:
    """``(setup, operation, config overrides)`` of the upkeep kinds, by name."""

    async def more_objects(machine: SimMachine) -> None:
        for index in range(4):
            await must(machine.put("plain", f"e{index}", b"event body %d" % index))
        await must(machine.put("vers", "a", b"va-three"))

    async def events_setup(machine: SimMachine, context: dict[str, Any]) -> None:
        await base_setup(machine, context)
        await more_objects(machine)

    async def event_flush(machine: SimMachine, context: dict[str, Any]) -> None:
        engine = machine.running
        with contextlib.suppress(OSError):  # the background job logs it and tries again
            await engine.events.flush(engine.run_blocking)
            await machine.put("plain", "after-flush", b"one more")
            await engine.events.flush(engine.run_blocking, sync=True)

    async def webhook_setup(machine: SimMachine, context: dict[str, Any]) -> None:
        await base_setup(machine, context)
        await notifications_config.set_webhooks(machine.running, "plain", [dict(HOOK)])
        machine.log.upkeep["hook"] = True
        await more_objects(machine)

    async def webhook_deliver(machine: SimMachine, context: dict[str, Any]) -> None:
        dispatcher = RecordingDispatcher(machine)
        hook = _hook(machine)
        assert hook is not None
        with contextlib.suppress(OSError):  # the housekeeping logs it and tries again
            await dispatcher.load()
            scope = dispatcher.scope_of(hook)
            assert scope is not None
            progress = dispatcher.progress(hook, scope)
            for _ in range(3):
                await dispatcher.deliver_page(hook, scope, progress, limit=2)
                await dispatcher.checkpoint()
                floor = machine.log.upkeep.get("cursor_floor", 0)
                machine.log.upkeep["cursor_floor"] = max(floor, progress.cursor)

    async def scrub_pass(machine: SimMachine, context: dict[str, Any]) -> None:
        scrubber = Scrubber(machine.running, machine.config)
        machine.log.upkeep["scrub"] = True
        with _checkpoint_every_version(), contextlib.suppress(OSError):
            await scrubber.start()
            scrubber.start_pass()
            await scrubber.finished()
        await scrubber.stop()

    return {
        "event_flush": (events_setup, event_flush, {"events_segment_events": 3}),
        "webhook_cursor": (webhook_setup, webhook_deliver, {}),
        "scrub": (events_setup, scrub_pass, {"scrub_rate_mbps": 1e6}),
    }


# -- checks after recovery --------------------------------------------------------------


async def check_events(machine: SimMachine, verdict: Verdict, *, firm: bool) -> None:
    """Every acknowledged record's event exactly once, in order, no gap, nothing extra."""
    engine = machine.running
    last = machine.journal.last_sequence()
    recorded: dict[int, bytes] = machine.log.upkeep.setdefault("events", {})
    for sequence in [s for s in recorded if s > last]:
        del recorded[sequence]  # its record is gone: the sequence is a new record's now
    feed = engine.events
    seen: list[tuple[int, bytes]] = []
    after = feed.covered_after
    while True:
        items, through = await feed.read(after, engine.executor, None, 1000)
        seen += [(item.sequence, item.body) for item in items]
        if through <= after:
            break
        after = through
    sequences = [sequence for sequence, _ in seen]
    verdict.check(
        all(a < b for a, b in itertools.pairwise(sequences)),
        f"events out of order or repeated: {sequences[:20]}",
    )
    verdict.check(
        not sequences or sequences[-1] <= last,
        f"event {sequences[-1] if sequences else 0} of a record past the journal's end {last}",
    )
    if firm:
        verdict.check(feed.covered_after == 0, f"event log lost its start ({feed.covered_after})")
    bodies = dict(seen)
    for sequence, body in sorted(recorded.items()):
        if sequence <= feed.covered_after:
            continue
        verdict.check(sequence in bodies, f"the event of acknowledged record {sequence} is lost")
        verdict.check(bodies.get(sequence, body) == body, f"the event of record {sequence} changed")


async def check_webhook(machine: SimMachine, verdict: Verdict) -> None:
    """The recovered cursor is at or after the last completed checkpoint and passes no
    wanted event the receiver did not acknowledge; resuming from it delivers every one."""
    if not machine.log.upkeep.get("hook"):
        return
    hook = _hook(machine)
    if hook is None:
        return  # the configuration itself was lost with an unacknowledged record
    delivered: list[int] = machine.log.upkeep.setdefault("delivered", [])
    dispatcher = RecordingDispatcher(machine)
    await dispatcher.load()
    scope = dispatcher.scope_of(hook)
    assert scope is not None  # a webhook goes with its bucket
    progress = dispatcher.progress(hook, scope)
    wanted = {
        sequence
        for sequence, event_type, key in await _bucket_events(machine, scope)
        if sequence > hook.start_after and hook.wants(event_type, key)
    }
    skipped = {s for s in wanted if s <= progress.cursor} - set(delivered)
    verdict.check(
        not skipped, f"webhook cursor {progress.cursor} is past undelivered events {skipped}"
    )
    # A completed checkpoint is kept, though never past the journal's end (balanced
    # durability may lose records whose events were delivered; see WebhookDispatcher.load).
    last = machine.journal.last_sequence()
    floor = min(machine.log.upkeep.get("cursor_floor", 0), last)
    verdict.check(progress.cursor >= floor, f"webhook cursor {progress.cursor} < {floor}")
    resumed_from = len(delivered)
    while await dispatcher.deliver_page(hook, scope, progress, limit=50):
        pass
    again = delivered[resumed_from:]
    verdict.check(again == sorted(set(again)), f"redelivery out of order: {again}")
    missing = wanted - set(delivered)
    verdict.check(not missing, f"webhook never delivered events {sorted(missing)}")


async def _bucket_events(machine: SimMachine, scope: BucketScope) -> list[tuple[int, str, str]]:
    engine = machine.running
    found: list[tuple[int, str, str]] = []
    after = engine.events.covered_after
    while True:
        items, through = await engine.events.read(after, engine.executor, scope, 1000)
        found += [(item.sequence, item.type, item.key) for item in items]
        if through <= after:
            return found
        after = through


async def check_scrub(machine: SimMachine, verdict: Verdict) -> None:
    """An interrupted pass continues and checks every version; no false corruption."""
    if not machine.log.upkeep.get("scrub"):
        return
    engine = machine.running
    scrubber = Scrubber(engine, machine.config)
    await scrubber.start()
    resumed = scrubber.running
    await scrubber.finished()
    await scrubber.stop()
    progress = scrubber.progress
    durable = machine.ledger.durable_payloads
    for entry in progress.corrupt:
        excused = machine.durability == "balanced" and entry.payload_id not in durable
        verdict.check(excused, f"scrub reports intact {entry.bucket}/{entry.key} corrupt")
    if not resumed:
        return
    versions = _payload_versions(machine)
    verdict.check(
        progress.objects_checked >= len(versions),
        f"resumed scrub checked {progress.objects_checked} of {len(versions)} versions",
    )


def _payload_versions(machine: SimMachine) -> list[ObjectVersion]:
    engine = machine.running
    return [
        entry.version
        for bucket in engine.state.list_buckets()
        for entry in engine.state.list_versions(bucket.name, limit=10_000).versions
        if entry.version.payload_id is not None
        and entry.version.payload_id not in engine.quarantined
    ]


async def check_upkeep(machine: SimMachine, verdict: Verdict, *, firm: bool) -> None:
    """All upkeep checks of a freshly recovered machine (before anything else runs)."""
    await check_events(machine, verdict, firm=firm)
    await check_webhook(machine, verdict)
    await check_scrub(machine, verdict)
