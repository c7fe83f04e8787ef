"""Memory benchmark: the server's peak RSS while big bodies stream through it.

Each scenario gets a fresh strict server, so the peak (``VmHWM`` in
``/proc/<pid>/status``, the kernel's high-water mark of resident memory) belongs to that
scenario alone:

- a 2 GiB object PUT and then GET in full: peak RSS < 150 MiB;
- a 2 GiB multipart upload, 64 MiB parts, 4 in parallel, then ``complete``: peak < 200 MiB.

The anchor is the same server's peak RSS after start-up and one small request: what the
scenario added is the difference. The server runs one process (``SERVICE_WORKERS=1``), so one
``VmHWM`` is its whole peak; the server section reports the peak of all processes together
for the default setting (``server_bench.memory_row``). The contract says memory use of PUT
and GET does not depend on the object's size; this is the bench that would show it does.

Thread-safety: a script; the multipart upload runs its parts on its own threads.
"""

from __future__ import annotations

import os
import time
from contextlib import ExitStack

from bench import (
    FULL,
    GIB,
    KIB,
    MIB,
    Profile,
    Row,
    file_windows,
    limit_row,
    make_data_file,
    scratch_dir,
)
from bench.loadgen import HttpConnection
from bench.multipart_bench import PARALLEL, upload_multipart
from bench.server_bench import (
    auth_headers,
    download,
    object_path,
    put_from_file,
    size_label,
    start_server,
)
from tests.serverproc import ServerProcess

STREAM_LIMIT_MIB = 150
MULTIPART_LIMIT_MIB = 200
_DATA_FILE_BYTES = GIB
"""The data file is at most this big; longer bodies repeat it."""


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set size (``VmHWM``) in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * KIB / MIB
    raise RuntimeError(f"no VmHWM for process {pid}")


def _server_pid(server: ServerProcess) -> int:
    if server.process is None:
        raise RuntimeError("server is not running")
    return server.process.pid


def _idle_peak(server: ServerProcess) -> float:
    """Peak RSS after start-up plus one authenticated request (the anchor)."""
    with HttpConnection(server.port) as connection:
        response = connection.request("GET", "/api/v1/buckets", auth_headers(server))
    if response.status != 200:
        raise RuntimeError(f"GET /buckets: {response.status}")
    return peak_rss_mib(_server_pid(server))


def run(profile: Profile = FULL) -> list[Row]:
    size = profile.memory_bytes
    file_size = min(size, _DATA_FILE_BYTES)
    label = size_label(size)
    rows: list[Row] = []
    with scratch_dir("memory-") as scratch, ExitStack() as stack:
        data = make_data_file(os.path.join(scratch, "data.bin"), file_size)
        fd = os.open(data, os.O_RDONLY)
        stack.callback(os.close, fd)

        server = start_server(stack, os.path.join(scratch, "stream"), "strict", workers="1")
        idle = _idle_peak(server)
        started = time.perf_counter()
        put_from_file(server, "big", fd, file_windows(0, size, file_size))
        put_seconds = time.perf_counter() - started
        get_seconds = download(server.port, object_path("big"), auth_headers(server), size)
        row = limit_row(
            f"{label} PUT then GET, peak RSS",
            peak_rss_mib(_server_pid(server)),
            "MiB",
            STREAM_LIMIT_MIB,
            anchor="idle server peak RSS",
            anchor_value=idle,
        )
        row["notes"] = (
            f"PUT {size / MIB / put_seconds:,.0f} MiB/s, GET {size / MIB / get_seconds:,.0f} MiB/s"
        )
        rows.append(row)
        server.stop()

        server = start_server(stack, os.path.join(scratch, "multipart"), "strict", workers="1")
        idle = _idle_peak(server)
        timing = upload_multipart(
            server, "big", fd, file_size, size, profile.memory_part_bytes, PARALLEL
        )
        row = limit_row(
            f"{label} multipart, {size_label(profile.memory_part_bytes)} parts, "
            f"{PARALLEL} in parallel, peak RSS",
            peak_rss_mib(_server_pid(server)),
            "MiB",
            MULTIPART_LIMIT_MIB,
            anchor="idle server peak RSS",
            anchor_value=idle,
        )
        row["notes"] = (
            f"{size / MIB / timing.total:,.0f} MiB/s overall, complete {timing.complete:.1f} s"
        )
        rows.append(row)
    return rows
