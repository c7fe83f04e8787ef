"""Multipart benchmark (issues 5 and 13): a parallel multipart upload beside a single PUT.

In one run, interleaved (single PUT, multipart, copy; three rounds), on a strict server:

- a 512 MiB upload (half the profile's big size) through ``/multipart`` in 8 MiB parts
  (declared at ``init``, so the server writes each part once, in place), 4 parts in flight
  on 4 keep-alive connections, timed from ``init`` to the answer of ``complete``; its MiB/s
  beside a single PUT of the same bytes (target >= 1.0x);
- how long ``complete`` alone takes (seal the upload's file: finish the SHA-256, fsync,
  link; or, where parts are not written in place, append or join them) beside a plain
  copy + fsync of a file of that size on the same disk (target <= 1.5x).

Bodies are sent with ``sendfile`` from a data file in the page cache, as in the server bench.

Everything writes fresh blocks: every round stores new keys and keeps them, and the copy
anchor writes a new file each round and keeps it. On this machine's virtual disk that
matters more than anything we measure: a GiB written to space freed a moment ago goes at
about 1.4 GB/s, a GiB to space not written for a while at about 360 MB/s (``dd`` of 1 GiB +
fsync, consecutive runs). The run is made once per ``SERVICE_WORKERS`` setting
(``server_bench.WORKER_SETTINGS``).

Thread-safety: ``upload_multipart`` runs its part uploads on its own threads, one
connection each; everything else is one thread.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass

from bench import (
    FULL,
    MIB,
    Profile,
    Row,
    compare,
    file_windows,
    interleave,
    make_data_file,
    scratch_dir,
)
from bench.anchors import copy_fsync
from bench.loadgen import HttpConnection
from bench.server_rig import (
    BUCKET,
    WORKER_SETTINGS,
    auth_headers,
    put_from_file,
    size_label,
    start_server,
)
from tests.serverproc import ServerProcess

PARALLEL = 4


@dataclass(frozen=True)
class MultipartTiming:
    total: float
    """Seconds from ``init`` sent to ``complete`` answered."""
    complete: float
    """Seconds ``complete`` took alone."""


def _call_json(server: ServerProcess, path: str, body: dict[str, object], status: int) -> dict:  # type: ignore[type-arg]
    headers = {**auth_headers(server), "Content-Type": "application/json"}
    with HttpConnection(server.port) as connection:
        response = connection.request("POST", path, headers, json.dumps(body).encode())
    if response.status != status:
        raise RuntimeError(f"POST {path}: {response.status} {response.body[:300]!r}")
    result: dict = json.loads(response.body)  # type: ignore[type-arg]
    return result


def upload_multipart(
    server: ServerProcess,
    key: str,
    fd: int,
    file_size: int,
    size: int,
    part_bytes: int,
    parallel: int = PARALLEL,
) -> MultipartTiming:
    """Upload ``size`` bytes of the repeated data file as ``key`` through multipart."""
    started = time.perf_counter()
    init = {"bucket": BUCKET, "key": key, "part_size": part_bytes}
    upload_id = _call_json(server, "/api/v1/multipart/init", init, 201)["upload_id"]
    numbers = iter(range(1, -(-size // part_bytes) + 1))
    lock = threading.Lock()
    etags: dict[int, str] = {}

    def sender() -> None:
        with HttpConnection(server.port) as connection:
            while True:
                with lock:
                    number = next(numbers, None)
                if number is None:
                    return
                first = (number - 1) * part_bytes
                response = connection.upload(
                    "PUT",
                    f"/api/v1/multipart/{upload_id}/part?partNumber={number}",
                    auth_headers(server),
                    fd,
                    file_windows(first, min(part_bytes, size - first), file_size),
                )
                if response.status != 200:
                    raise RuntimeError(f"part {number}: {response.status} {response.body[:300]!r}")
                etags[number] = json.loads(response.body)["etag"]

    with ThreadPoolExecutor(parallel) as pool:
        for future in [pool.submit(sender) for _ in range(parallel)]:
            future.result()
    parts = [{"part_number": number, "etag": etags[number]} for number in sorted(etags)]
    complete_started = time.perf_counter()
    _call_json(server, f"/api/v1/multipart/{upload_id}/complete", {"parts": parts}, 200)
    done = time.perf_counter()
    return MultipartTiming(total=done - started, complete=done - complete_started)


def run(profile: Profile = FULL) -> list[Row]:
    """Both rows for each ``SERVICE_WORKERS`` setting (the smoke profile: the default only)."""
    settings = WORKER_SETTINGS[:1] if profile.name == "smoke" else WORKER_SETTINGS
    rows: list[Row] = []
    for workers in settings:
        rows += run_once(profile, workers)
    return rows


def run_once(profile: Profile, workers: str | None) -> list[Row]:
    size = max(profile.part_bytes, profile.big_bytes // 2)
    with scratch_dir("multipart-") as scratch, ExitStack() as stack:
        data = make_data_file(os.path.join(scratch, "data.bin"), size)
        fd = os.open(data, os.O_RDONLY)
        stack.callback(os.close, fd)
        copies = os.path.join(scratch, "copies")
        os.makedirs(copies)
        server = start_server(stack, os.path.join(scratch, "server"), "strict", workers)
        timings: list[MultipartTiming] = []
        keys = itertools.count()

        def multipart() -> float:
            key = f"multipart-{next(keys)}"
            timings.append(upload_multipart(server, key, fd, size, size, profile.part_bytes))
            return timings[-1].total

        def single() -> float:
            return put_from_file(server, f"single-{next(keys)}", fd, [(0, size)])

        seconds = interleave(
            {
                "single": single,
                "multipart": multipart,
                "copy": lambda: copy_fsync(data, copies),
            },
            profile.repeats,
        )
    mib = size / MIB
    label = size_label(size)
    marker = "" if workers is None else f", SERVICE_WORKERS={workers}"
    return [
        compare(
            f"{label} multipart, {size_label(profile.part_bytes)} parts, {PARALLEL} in parallel"
            + marker,
            [mib / value for value in seconds["multipart"]],
            "MiB/s",
            anchor=f"single {label} PUT, same run",
            anchor_values=[mib / value for value in seconds["single"]],
            target=1.0,
        ),
        compare(
            f"complete of {label} (seal: SHA-256 of the rest + fsync){marker}",
            [timing.complete for timing in timings],
            "s",
            anchor="file copy + fsync",
            anchor_values=seconds["copy"],
            target=1.5,
            lower_is_better=True,
        ),
    ]
