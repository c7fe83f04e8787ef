"""The crash matrix's audit log: kinds whose operation writes it, and the check of every
recovered machine that holds one.

The audit log writes through the engine's ``FileSystem`` seam, so a SimFS power cut or I/O
error lands in it like in the journal. This module adds, for the matrix:

- kinds: ``audit_append`` (records in groups across segment rolls, each group awaited as a
  request awaits its record), ``audit_prune`` (old segments removed behind a signed anchor),
  ``audit_recovery`` (the start after a torn write: the torn line is cut), and two with two
  serving processes' logs on one data dir (``service.audit.shared``): ``audit_shared`` (the
  two take turns at the chain's end, each rolling segments under the other) and
  ``audit_peer_recovery`` (one was SIGKILLed in the middle of its append, leaving a whole
  line the head does not know and a torn one; the other's next append repairs the tail
  under the lock and goes on);
- a check on every recovered machine of those kinds: the log opens (cutting a torn tail),
  its chain verifies from the anchor (or the genesis) to its end, every record whose append
  was acknowledged is there unchanged when the image is firm (strict: always), and the chain
  goes on: one more record appends and the whole still verifies.

Acknowledged records are known by their request ids (two processes' records interleave in
an order only the lock decides).

Thread-safety: none; one event loop per scenario (the log's own thread does its file work,
one step at a time).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from service.audit.log import AuditLog, AuditUnavailableError
from service.audit.record import seal
from service.audit.segments import AUDIT_DIRNAME, list_segments, read_anchor, segment_name
from service.audit.shared import HEAD_NAME, Head
from tests.crash.checkkit import Verdict
from tests.crash.enginekit import DATA_DIR, SimMachine

Step = Callable[[SimMachine, dict[str, Any]], Awaitable[None]]

SECRET = b"k" * 32
SEGMENT_BYTES = 600
"""About two records per segment: every group of appends rolls one."""
OLD = "2020-01-01T00:00:00.000Z"
NEW = "2999-01-01T00:00:00.000Z"


def fields(index: int, time: str) -> dict[str, Any]:
    return {
        "time": time,
        "request_id": f"req-{index:04d}",
        "principal": {"user_id": "u_1", "access_key_id": "bk_1"},
        "source": "10.0.0.1",
        "method": "PUT",
        "path": f"/api/v1/buckets/plain/objects/k{index}",
        "bucket": "plain",
        "key": f"k{index}",
        "version_id": None,
        "action": "object:write",
        "status": 200,
        "bytes": index,
    }


def open_log(machine: SimMachine) -> AuditLog:
    return AuditLog(
        machine.fs,
        DATA_DIR,
        secret=SECRET,
        strict=machine.durability == "strict",
        retention_seconds=3600.0,
        segment_bytes=SEGMENT_BYTES,
        readers=machine.running.executor,
    )


def _acked(machine: SimMachine) -> dict[str, tuple[int, str]]:
    """Request id -> (``bytes``, ``time``) of every record whose append was acknowledged."""
    acked: dict[str, tuple[int, str]] = machine.log.upkeep.setdefault("audit", {})
    return acked


def _serial(machine: SimMachine) -> int:
    """A new request number (request ids are unique across crashes and processes)."""
    counter: list[int] = machine.log.upkeep.setdefault("audit_serial", [0])
    counter[0] += 1
    return counter[0]


async def append_group(machine: SimMachine, log: AuditLog, count: int, time: str) -> None:
    """``count`` records appended together; acknowledged (noted) once their wait ends, as a
    request is answered once its record is durable (balanced: once written)."""
    acked = _acked(machine)
    pending = []
    for _ in range(count):
        record = fields(_serial(machine), time)
        pending.append((record, log.append(record)))
    for _, wait in pending:
        if wait is not None:
            await wait
    if machine.durability != "strict":
        await log.flush()
        if log.failed:
            return  # written nowhere: a balanced request answered so is the mode's risk
    for record, _ in pending:
        acked[record["request_id"]] = (record["bytes"], record["time"])


async def open_logs(machine: SimMachine, context: dict[str, Any]) -> list[AuditLog]:
    """Two serving processes' logs of one data dir (each its own handles and lock hold)."""
    logs = [open_log(machine), open_log(machine)]
    for log in logs:
        await log.open()
    context["audit_logs"] = logs
    return logs


def kill(log: AuditLog) -> None:
    """What a SIGKILL leaves of a process's log: its lock hold ends, nothing else runs."""
    assert log._writer is not None
    log._writer.close()
    log._thread.shutdown(wait=False)


def audit_kinds(base_setup: Step, must: Callable[[Any], Awaitable[Any]]) -> dict[str, Any]:
    """``(setup, operation, config overrides)`` of the audit kinds, by name."""
    del must

    async def audit_setup(machine: SimMachine, context: dict[str, Any]) -> None:
        await base_setup(machine, context)
        log = open_log(machine)
        await log.open()
        await append_group(machine, log, 3, OLD)
        context["audit"] = log

    async def appends(machine: SimMachine, context: dict[str, Any]) -> None:
        log: AuditLog = context["audit"]
        with contextlib.suppress(AuditUnavailableError):
            for _ in range(3):
                await append_group(machine, log, 2, NEW)

    async def prune_setup(machine: SimMachine, context: dict[str, Any]) -> None:
        await audit_setup(machine, context)
        log: AuditLog = context["audit"]
        for _ in range(3):
            await append_group(machine, log, 2, OLD)
        await append_group(machine, log, 2, NEW)

    async def prune(machine: SimMachine, context: dict[str, Any]) -> None:
        log: AuditLog = context["audit"]
        with contextlib.suppress(OSError):  # the background job logs it and tries again
            await log.prune()

    async def torn_setup(machine: SimMachine, context: dict[str, Any]) -> None:
        await audit_setup(machine, context)
        log: AuditLog = context["audit"]
        await log.close()
        (_, newest), *_ = reversed(list_segments(machine.fs, f"{DATA_DIR}/{AUDIT_DIRNAME}"))
        out = machine.fs.open_append(newest)
        out.write(b'{"action":"object:write","bucket":"pl')  # a write a crash cut short
        out.close()

    async def reopen(machine: SimMachine, context: dict[str, Any]) -> None:
        log = open_log(machine)
        # A start that fails would exit the process; the next start tries again.
        with contextlib.suppress(Exception):
            await log.open()
        await log.close()

    async def shared_setup(machine: SimMachine, context: dict[str, Any]) -> None:
        await base_setup(machine, context)
        first, _ = await open_logs(machine, context)
        await append_group(machine, first, 3, OLD)

    async def shared_appends(machine: SimMachine, context: dict[str, Any]) -> None:
        # Turns in a fixed order (a crash scenario replays identically); the real processes
        # of tests/audit/test_audit_shared.py append at once.
        for turn in range(6):
            log: AuditLog = context["audit_logs"][turn % 2]
            with contextlib.suppress(AuditUnavailableError):
                await append_group(machine, log, 2, NEW)

    async def peer_killed_setup(machine: SimMachine, context: dict[str, Any]) -> None:
        await base_setup(machine, context)
        victim, _ = await open_logs(machine, context)
        await append_group(machine, victim, 3, OLD)
        kill(victim)  # in the middle of its next append: one whole line, one torn
        directory = f"{DATA_DIR}/{AUDIT_DIRNAME}"
        head = Head.decode(machine.fs.read_bytes(f"{directory}/{HEAD_NAME}"))
        assert head is not None and head.segment is not None
        _, line = seal(fields(_serial(machine), NEW), head.next, head.prev)
        out = machine.fs.open_append(f"{directory}/{segment_name(head.segment)}")
        out.write(line + line[: len(line) // 2])
        out.close()

    async def survivor_appends(machine: SimMachine, context: dict[str, Any]) -> None:
        survivor: AuditLog = context["audit_logs"][1]
        with contextlib.suppress(AuditUnavailableError):
            for _ in range(2):
                await append_group(machine, survivor, 2, NEW)

    return {
        "audit_append": (audit_setup, appends, {}),
        "audit_prune": (prune_setup, prune, {}),
        "audit_recovery": (torn_setup, reopen, {}),
        "audit_shared": (shared_setup, shared_appends, {}),
        "audit_peer_recovery": (peer_killed_setup, survivor_appends, {}),
    }


async def check_audit(machine: SimMachine, verdict: Verdict, *, firm: bool) -> None:
    """The recovered log opens, verifies, keeps every acknowledged record, and goes on."""
    if "audit" not in machine.log.upkeep:
        return
    log = open_log(machine)
    try:
        await log.open()
        result = await log.verify()
        verdict.check(
            result.ok, f"audit chain broken at {result.first_bad_sequence}: {result.problem}"
        )
        anchor, signed = read_anchor(log.fs, log.directory, SECRET)
        verdict.check(signed, "the audit anchor's signature does not check out")
        if firm:
            records, _ = await log.page(0, 10_000, None, None)
            held = {record["request_id"]: record["bytes"] for record in records}
            pruned = anchor.sequence > 1
            for request_id, (size, time) in sorted(_acked(machine).items()):
                if pruned and time == OLD and request_id not in held:
                    continue  # behind the signed anchor
                verdict.check(
                    held.get(request_id) == size,
                    f"acknowledged audit record {request_id} is lost or changed",
                )
        await append_group(machine, log, 1, NEW)
        again = await log.verify()
        verdict.check(again.ok, f"the audit chain does not go on after recovery: {again.problem}")
    finally:
        with contextlib.suppress(Exception):
            await log.close()
