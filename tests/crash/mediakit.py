"""The crash matrix's media fleet kind: a job's attempt records under every fault.

Setup (no faults): a packaging job, its attempt 1 running on a worker, and that attempt's
output uploaded as an open multipart session. The operation is what the fleet runner does
when the lease lapses and another worker wins: ``VideoAttemptEnded`` 1, ``Started`` 2,
``Accepted`` 2 (naming the session), the session completed (the publish), ``Finished`` 2.
It stops at the first commit that fails, as the runner does.

A second kind, ``fleet_outputs``: the same job's attempt 1 sends its outputs in one request
(``POST /videos/jobs/{id}/outputs``): a tar stream staged as a batch's is, then one open
session per file holding it as part 1 (``service.media.fleet_outputs``). Each session is in
the ledger as an upload the client started and filled; a request that did not answer leaves
sessions nobody knows (allowed, as many as the files), and every part of every open session
must still hold its bytes; no output is ever an object.

After every recovery the job must be in one of the states the live engine went through
(replay gives back exactly a state that was, never a mix), no earlier than the last one a
commit acknowledged when the image keeps what was acknowledged; a ``completed`` job's
output object exists, and a publishing one's output is still an open session or already the
object (the next start finishes the publish).

Thread-safety: none; one event loop per scenario.
"""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from typing import Any

from service.media.fleet_outputs import open_output_uploads
from service.meta import records
from service.ops.batch import BatchLimits, stage_batch
from tests.crash.batchkit import tar_of
from tests.crash.checkkit import Verdict
from tests.crash.enginekit import OWNER, Result, SimMachine, answer, part_of
from tests.crash.model import Fate

Step = Callable[[SimMachine, dict[str, Any]], Awaitable[None]]

JOB = "vj_crash0000000000000"
PREFIX = f"videos/{JOB}/"
MASTER = "hls/master.m3u8"
OUTPUTS = [
    (MASTER, b"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nstream_0.m3u8\n"),
    ("hls/stream_0_00000.ts", bytes(range(188)) * 1500),  # over 256 KiB: streamed
    ("dash/manifest.mpd", b"<MPD/>\n"),
]
PARAMS = {
    "formats": ["hls"],
    "renditions": None,
    "segment_seconds": 4.0,
    "hls_segment_type": "mpegts",
}
AT = 1_700_000_000_000


def job_state(machine: SimMachine) -> tuple[str, int, bool, bool] | None:
    job = machine.running.state.media.job(JOB)
    if job is None:
        return None
    return (job.status, job.attempts, job.active, job.publishing is not None)


FLOW: list[tuple[str, int, bool, bool] | None] = [
    None,
    ("queued", 0, False, False),
    ("processing", 1, True, False),
    ("queued", 1, False, False),
    ("processing", 2, True, False),
    ("processing", 2, False, True),
    ("completed", 2, False, False),
]
"""The job's states, in order, as the setup and the operation's commits make them."""


async def _commit(machine: SimMachine, event: dict[str, Any]) -> bool:
    """Commit as the runner does; note how far the acknowledged commits took the job."""
    result: Result = await answer(machine.running.commit(event))
    accepted = result.ok and result.value.ok
    if accepted:
        reached = FLOW.index(job_state(machine))
        upkeep = machine.log.upkeep
        upkeep["fleet_acked"] = max(upkeep.get("fleet_acked", 0), reached)
    await machine.settle()
    return accepted


async def _attempt_running(machine: SimMachine) -> None:
    """The job, and its attempt 1 claimed by a worker (no faults)."""
    created = records.video_job_created(
        job_id=JOB,
        bucket="plain",
        key="a",
        created_by=OWNER,
        params=PARAMS,
        output_prefix=PREFIX,
        at=AT,
    )
    assert await _commit(machine, created)
    started = records.video_attempt_started(
        job_id=JOB, attempt=1, worker="w1", host="h1", at=AT + 1
    )
    assert await _commit(machine, started)


def media_kinds(base_setup: Step, must: Callable[[Any], Awaitable[Any]]) -> dict[str, Any]:
    """``(setup, operation, config overrides)`` of the media fleet kinds, by name."""

    async def fleet_setup(machine: SimMachine, context: dict[str, Any]) -> None:
        await base_setup(machine, context)
        await _attempt_running(machine)
        upload = await must(machine.start_upload("plain", PREFIX + MASTER))
        upload_id = upload.value.upload_id
        part = part_of(await must(machine.put_part(upload_id, 1, b"#EXTM3U\n")))
        context["fleet"] = (upload_id, [(1, part.sha256)])

    async def fleet_attempts(machine: SimMachine, context: dict[str, Any]) -> None:
        upload_id, parts = context["fleet"]
        steps = [
            records.video_attempt_ended(job_id=JOB, attempt=1, reason="lease_expired", at=AT + 2),
            records.video_attempt_started(job_id=JOB, attempt=2, worker="w2", host="h2", at=AT + 3),
            records.video_attempt_accepted(
                job_id=JOB, attempt=2, uploads={MASTER: upload_id}, at=AT + 4
            ),
        ]
        for event in steps:
            if not await _commit(machine, event):
                return
        if not (await machine.complete_upload(upload_id, parts)).ok:
            return
        await _commit(
            machine,
            records.video_attempt_finished(
                job_id=JOB,
                attempt=2,
                status="completed",
                outputs={"hls": PREFIX + MASTER},
                error=None,
                at=AT + 5,
            ),
        )

    async def outputs_setup(machine: SimMachine, context: dict[str, Any]) -> None:
        await base_setup(machine, context)
        await _attempt_running(machine)
        machine.log.upkeep.pop("fleet_acked")  # this kind checks the sessions, not the job

    async def fleet_outputs(machine: SimMachine, context: dict[str, Any]) -> None:
        await send_outputs(machine, OUTPUTS)

    return {
        "fleet_attempts": (fleet_setup, fleet_attempts, {}),
        "fleet_outputs": (outputs_setup, fleet_outputs, {}),
    }


async def send_outputs(machine: SimMachine, files: list[tuple[str, bytes]]) -> Result:
    """One outputs request of ``files`` (name, bytes), as ``fleet_handlers`` runs it; each
    file's fate goes to the ledger as an upload started and its part 1 stored."""
    engine = machine.running
    source = io.BytesIO(tar_of([(name, data, {}) for name, data in files]))
    limits = BatchLimits(max_member_bytes=engine.config.max_object_bytes)

    async def send() -> dict[str, Any]:
        entries = await stage_batch(engine, "plain", PREFIX, source, limits)
        return await open_output_uploads(
            engine,
            owner=OWNER,
            room=len(files),
            bucket="plain",
            prefix=PREFIX,
            entries=entries,
            still_running=lambda: True,
        )

    result = await answer(send())
    ledger = machine.ledger
    for name, data in files:
        if result.ok:
            upload_id = result.value[name]["upload_id"]
            ledger.upload_started(upload_id, "plain", PREFIX + name, Fate.ACKED)
            ledger.part_stored(upload_id, 1, data, Fate.ACKED)
        else:  # none, some or all of the sessions may be there, holding their file
            ledger.upload_started(None, "plain", PREFIX + name, result.fate)
    await machine.settle()
    return machine._note(f"outputs of {JOB} ({len(files)} files)", result)


def check_media(machine: SimMachine, verdict: Verdict, *, firm: bool) -> None:
    """The recovered job against the states the live engine went through (docstring): at
    most one commit past the last acknowledged one (its answer may be what was lost), and,
    when the image keeps what was acknowledged, no earlier than that."""
    acked = machine.log.upkeep.get("fleet_acked")
    if acked is None:
        return
    found = job_state(machine)
    verdict.check(found in FLOW[: acked + 2], f"fleet job: recovered as {found}, past {acked}")
    if firm and found in FLOW:
        verdict.check(FLOW.index(found) >= acked, f"fleet job: {found} is behind {FLOW[acked]}")
    engine = machine.running
    stored = engine.state.head_object("plain", PREFIX + MASTER)
    if found is not None and found[0] == "completed":
        verdict.check(stored is not None, "fleet job: completed without its output")
    if found is not None and found[3]:
        job = engine.state.media.job(JOB)
        assert job is not None and job.publishing is not None
        session = engine.state.get_upload(job.publishing[MASTER])
        verdict.check(
            session is not None or stored is not None,
            "fleet job: publishing, but its output is neither a session nor an object",
        )
