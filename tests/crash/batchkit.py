"""The batch upload on a simulated machine: ``put_batch`` runs ``service.ops.batch.store_batch``
as the HTTP handler does (a tar stream, one shared sync, every commit in flight together) and
records each member's fate in the machine's ledger.

Kept apart from ``enginekit`` (which holds the other operations) so that module stays small.

Thread-safety: as ``SimMachine``: one event loop.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Sequence

from service.common.api_errors import status_of
from service.ops import batch
from service.ops.batch import BatchLimits, MemberFailure
from tests.crash.enginekit import Result, SimMachine, answer
from tests.crash.model import Fate

Member = tuple[str, bytes, dict[str, str]]
"""A member's key, bytes and pax records."""


def tar_of(members: Sequence[Member]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        for key, data, records in members:
            info = tarfile.TarInfo(key)
            info.size = len(data)
            info.pax_headers = dict(records)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


async def put_batch(machine: SimMachine, bucket: str, members: Sequence[Member]) -> Result:
    """One batch upload of ``members`` into ``bucket``; every member's fate goes to the
    ledger: a stored member is acknowledged, a member refused alone (4xx) changed nothing,
    and when the request as a whole did not answer 200 each member may or may not be there
    (a 4xx of the whole request commits nothing, which the ledger also allows)."""
    engine = machine.running
    limits = BatchLimits(max_member_bytes=engine.config.max_object_bytes)
    source = io.BytesIO(tar_of(members))
    result = await answer(batch.store_batch(engine, bucket, "", source, limits))
    if result.ok:
        for (key, data, _), outcome in zip(members, result.value, strict=True):
            if isinstance(outcome, MemberFailure):
                fate = Fate.of_status(status_of(outcome.error))
            else:
                fate = Fate.ACKED
            machine.ledger.put(bucket, key, data, fate)
    else:
        for key, data, _ in members:
            machine.ledger.put(bucket, key, data, result.fate)
    await machine.settle()
    return machine._note(f"batch {bucket} ({len(members)} members)", result)
