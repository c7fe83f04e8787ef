"""What the audit log costs (issue 28): small PUTs with the audit log on (the default) beside
the same with it off, and small GETs with reads recorded (``SERVICE_AUDIT_READS=1``) beside
the default (reads not recorded), all in one run, interleaved A B A B.

Strict servers on this machine's default processes: ``default`` (audit on, reads off),
``reads`` (audit on, reads on) and ``off`` (``SERVICE_AUDIT=0``); and two more GET pairs:
the same in balanced durability, and in strict with one serving process (the bound: every
process appends its own records, so two processes should cost what one does). Each load is
the server bench's 4 KiB load (``bench.server_rig``); rows give requests/s and the server's
CPU time per request, each beside its "off" twin (target: >= 0.9x, issue 28). In strict mode
a recorded request waits for its record's fsync (shared by the requests of a group, as the
journal's are), so the rows measure that wait too: on a loaded disk it, not the CPU, bounds
the rate (the CPU rows show the audit code's own cost).

Thread-safety: a script; one thread (servers start and stop on a small pool).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx

from bench import FULL, KIB, Profile, Row, compare, scratch_dir
from bench.loadgen import LoadSpec
from bench.server_rig import (
    BENCH_ENV,
    BUCKET,
    cpu_per_request,
    default_processes,
    interleaved_loads,
    load_notes,
    object_path,
    on_server,
    rates,
)
from tests.serverproc import ServerProcess

SMALL_BYTES = 4 * KIB
ONE_PROCESS = {"SERVICE_WORKERS": "1"}
BALANCED = {"SERVICE_DURABILITY": "balanced"}
VARIANTS: dict[str, dict[str, str]] = {
    "default": {},
    "reads": {"SERVICE_AUDIT_READS": "1"},
    "off": {"SERVICE_AUDIT": "0"},
    "default, balanced": BALANCED,
    "reads, balanced": {"SERVICE_AUDIT_READS": "1", **BALANCED},
    "default, one process": ONE_PROCESS,
    "reads, one process": {"SERVICE_AUDIT_READS": "1", **ONE_PROCESS},
}
"""Server name -> its settings (on top of strict durability, the machine's default
processes and the bench's slots)."""
PAIRS = (
    ("PUT, audit on", "PUT, audit off", "4 KiB PUT, strict, audit on (default)"),
    ("GET, reads recorded", "GET, reads not recorded", "4 KiB GET, SERVICE_AUDIT_READS=1"),
    (
        "GET, reads recorded, balanced",
        "GET, reads not recorded, balanced",
        "4 KiB GET, balanced, SERVICE_AUDIT_READS=1",
    ),
    (
        "GET, reads recorded, one process",
        "GET, reads not recorded, one process",
        "4 KiB GET, one process, SERVICE_AUDIT_READS=1",
    ),
)
"""(audited load, its twin, the row's label)."""
TARGET = 0.9


def start(directory: str, name: str) -> ServerProcess:
    env = {
        "SERVICE_DURABILITY": "strict",
        "SERVICE_WORKERS": str(default_processes()),
        **BENCH_ENV,
        **VARIANTS[name],
    }
    server = ServerProcess(data_dir=Path(directory) / name / "data", env_overrides=env)
    server.start(timeout=120)
    with server.client() as client:
        client.post("/buckets", json={"name": BUCKET}).raise_for_status()
        small = f"/buckets/{BUCKET}/objects/small"
        client.put(small, content=os.urandom(SMALL_BYTES)).raise_for_status()
    return server


def run(profile: Profile = FULL) -> list[Row]:
    connections = profile.small_connections
    put = LoadSpec(
        port=0,
        path="",
        method="PUT",
        body_bytes=SMALL_BYTES,
        unique_paths=True,
        connections=connections,
        seconds=profile.load_seconds,
    )
    get = LoadSpec(port=0, path="", connections=connections, seconds=profile.load_seconds)
    with scratch_dir("audit-") as directory, ExitStack() as stack:
        with ThreadPoolExecutor(len(VARIANTS)) as pool:
            servers = pool.map(lambda name: start(directory, name), VARIANTS)
            started = dict(zip(VARIANTS, servers, strict=True))
        for server in started.values():
            stack.callback(server.stop)
        loads = {
            "PUT, audit on": on_server(put, started["default"], object_path("small-put")),
            "PUT, audit off": on_server(put, started["off"], object_path("small-put")),
            "GET, reads recorded": on_server(get, started["reads"], object_path("small")),
            "GET, reads not recorded": on_server(get, started["default"], object_path("small")),
        }
        for variant in ("balanced", "one process"):
            loads[f"GET, reads recorded, {variant}"] = on_server(
                get, started[f"reads, {variant}"], object_path("small")
            )
            loads[f"GET, reads not recorded, {variant}"] = on_server(
                get, started[f"default, {variant}"], object_path("small")
            )
        runs = interleaved_loads(profile, loads)
        records = audit_records(started["reads"])
    rows: list[Row] = []
    for on, off, what in PAIRS:
        notes = load_notes({on: runs[on], off: runs[off]})
        rows.append(
            compare(
                f"{what}, {connections} conns",
                rates(runs[on]),
                "requests/s",
                anchor=f"the same, {off.split(', ')[1]}",
                anchor_values=rates(runs[off]),
                target=TARGET,
                notes=notes,
            )
        )
        rows.append(
            compare(
                f"CPU per request, {what}",
                cpu_per_request(runs[on]),
                "µs",
                anchor=f"the same, {off.split(', ')[1]}",
                anchor_values=cpu_per_request(runs[off]),
                lower_is_better=True,
                notes=f"{records} audit records written by the reads server"
                if on == "GET, reads recorded"
                else "",
            )
        )
    return rows


def audit_records(server: ServerProcess) -> int:
    """How many records the server's audit log holds (its verification counts them)."""
    with httpx.Client(base_url=server.api, auth=server.auth, timeout=120) as client:
        return int(client.get("/system/audit/verify").json()["records"])
