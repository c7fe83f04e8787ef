"""A process that appends to an audit log, as a serving process does: the other side of
``tests/audit/test_audit_shared.py``, which runs two of these on one data dir at once.

``python -m tests.audit.appender DATA_DIR NAME COUNT [CRASH_POINT] [SEGMENT_BYTES]
[DURABILITY]`` opens the log, appends ``COUNT`` records (request ids ``NAME-0``, ...) in
groups of 3, and prints ``ack <request id> <sequence>`` for each once the log says it holds it
(strict: on disk; balanced: written), as a request would then be answered. ``CRASH_POINT``
(``name`` or ``name:N``, ``-`` for none) SIGKILLs the process at that point's Nth hit, as
``SERVICE_CRASH_POINT`` does a server. It starts appending when its stdin gives a line, so
that the test can start both processes before either writes.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from fsseam.fs import RealFileSystem
from service.audit.log import AuditLog
from service.common.timefmt import now_ms, rfc3339_ms
from service.engine.core import install_crash_hook

SECRET = b"s" * 32
GROUP = 3


def fields(name: str, index: int) -> dict[str, Any]:
    return {
        "time": rfc3339_ms(now_ms()),
        "request_id": f"{name}-{index}",
        "principal": {"user_id": "u_1", "access_key_id": "bk_1"},
        "source": "127.0.0.1",
        "method": "GET",
        "path": f"/api/v1/buckets/b/objects/{name}{index}",
        "bucket": "b",
        "key": f"{name}{index}",
        "version_id": None,
        "action": "object:read",
        "status": 200,
        "bytes": index,
    }


async def main(data_dir: str, name: str, count: int, segment_bytes: int, strict: bool) -> None:
    log = AuditLog(
        RealFileSystem(),
        data_dir,
        secret=SECRET,
        strict=strict,
        retention_seconds=86400.0,
        segment_bytes=segment_bytes,
    )
    await log.open()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    for start in range(0, count, GROUP):
        indices = range(start, min(start + GROUP, count))
        waits = [(index, log.append(fields(name, index))) for index in indices]
        if not strict:
            await log.flush()
        for index, wait in waits:
            sequence = await wait if wait is not None else 0
            print(f"ack {name}-{index} {sequence}", flush=True)
    await log.close()


if __name__ == "__main__":
    directory, who, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
    point = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] != "-" else None
    size = int(sys.argv[5]) if len(sys.argv) > 5 else 16 * 1024 * 1024
    durability = sys.argv[6] if len(sys.argv) > 6 else "strict"
    install_crash_hook(point)
    asyncio.run(main(directory, who, total, size, durability == "strict"))
