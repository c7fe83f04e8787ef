"""Server benchmark (issues 3 and 13): the HTTP paths of the object server beside anchors.

Cases, each interleaved with its anchors (A B A B) and reported as medians:

- ``big_put``: one 1 GiB PUT in strict mode, sent with ``sendfile`` from a file in the page
  cache, MiB/s vs a raw write+fsync of the same size on the same disk (target >= 0.9x); every
  round stores a new key and the anchor writes a new file, so both land on fresh blocks;
- ``big_get``: one 1 GiB GET drained by a raw socket, MiB/s vs nginx with sendfile
  (target >= 0.8x) and vs a naive Tornado handler (target >= 1.0x);
- ``ranged_get``: random 64 KiB ``Range`` GETs of that object, 16 connections, requests/s
  vs nginx (target >= 0.4x) and the naive handler serving the same bytes;
- ``small_put``: 4 KiB PUTs to fresh keys from 64 connections, objects/s, strict (vs the
  naive Tornado PUT, target >= 1.5x) and balanced (vs nginx's WebDAV PUT, target >= 0.4x),
  each also beside the naive handler and the bare-delegate floor in the same durability;
- ``small_get``: 4 KiB GETs from 64 connections, requests/s vs nginx (target >= 0.15x) and
  the naive handler (target >= 1.0x).

Every load also reports the CPU time per request of each process under load; the small GET
and PUT get rows of their own for it, beside the naive handler and the floor (a bare Tornado
``HTTPMessageDelegate`` doing the same file work, ``bench.anchors.FloorServer``).

The server is the real one (``python -m service``, started through the tests'
``ServerProcess``) with default settings apart from durability and the upload slots (raised
so that 64 connections of one user are not refused: the bench measures throughput, not
admission control); the load comes from wrk (one thread) or raw sockets, so client and
server share the 2 cores the same way for the server and its anchors. Rates count answered
requests only (2xx/3xx). The whole run is made once per ``SERVICE_WORKERS`` setting
(``WORKER_SETTINGS``: the default, then 1); rows of the second say so in their label.

Thread-safety: a script; one thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace

import httpx

from bench import FULL, MIB, Profile, Row, compare, interleave
from bench.anchors import raw_small_files, raw_write_fsync
from bench.loadgen import LoadSpec
from bench.server_rig import (
    BUCKET,
    RANGE_BYTES,
    SMALL_BYTES,
    WORKER_SETTINGS,
    Measured,
    Rig,
    auth_headers,
    cpu_per_request,
    download,
    load_notes,
    nginx_row,
    object_path,
    on_server,
    pid_of,
    put_from_file,
    rates,
    rig,
    size_label,
    start_server,
)

__all__ = [
    "BUCKET",
    "CASES",
    "SMALL_BYTES",
    "auth_headers",
    "download",
    "object_path",
    "put_from_file",
    "run",
    "size_label",
    "start_server",
]


def _store_big(rig: Rig) -> None:
    if not rig.big_stored:
        put_from_file(rig.strict, "big", rig.big_fd, [(0, rig.profile.big_bytes)])
        rig.big_stored = True


def big_put(rig: Rig) -> list[Row]:
    size = rig.profile.big_bytes
    anchor_dir = os.path.join(rig.scratch, "raw")
    os.makedirs(anchor_dir, exist_ok=True)

    def put_new_key() -> float:
        # A new key each round: overwriting would free the last round's blocks for this one.
        rig.big_puts += 1
        return put_from_file(rig.strict, f"big-{rig.big_puts}", rig.big_fd, [(0, size)])

    seconds = interleave(
        {
            "raw": lambda: raw_write_fsync(anchor_dir, size),
            "put": put_new_key,
            "raw_hashed": lambda: raw_write_fsync(anchor_dir, size, hashed=True),
        },
        rig.profile.repeats,
    )
    mib = size / MIB
    speed = {name: [mib / value for value in values] for name, values in seconds.items()}
    label = rig.label(f"{size_label(size)} PUT, strict, fresh blocks")
    return [
        compare(
            label,
            speed["put"],
            "MiB/s",
            anchor="raw write+fsync",
            anchor_values=speed["raw"],
            target=0.9,
        ),
        compare(
            label,
            speed["put"],
            "MiB/s",
            anchor="raw write+SHA-256+fsync, one thread",
            anchor_values=speed["raw_hashed"],
        ),
    ]


def big_get(rig: Rig) -> list[Row]:
    size = rig.profile.big_bytes
    _store_big(rig)
    server_get: Callable[[], float] = lambda: download(  # noqa: E731
        rig.strict.port, object_path("big"), auth_headers(rig.strict), size
    )
    cases: dict[str, Callable[[], float]] = {
        "server": server_get,
        "naive": lambda: download(rig.naive_strict.port, "/files/big.bin", {}, size),
    }
    if rig.nginx is not None:
        nginx_port = rig.nginx.port
        cases["nginx"] = lambda: download(nginx_port, "/big.bin", {}, size)
    for warm in cases.values():
        warm()
    seconds = interleave(cases, rig.profile.repeats)
    mib = size / MIB
    speed = {name: [mib / value for value in values] for name, values in seconds.items()}
    label = rig.label(f"{size_label(size)} GET")
    rows = [
        nginx_row(
            rig,
            lambda: compare(
                label,
                speed["server"],
                "MiB/s",
                anchor="nginx sendfile",
                anchor_values=speed["nginx"],
                target=0.8,
            ),
            label,
        )
    ]
    rows.append(
        compare(
            label,
            speed["server"],
            "MiB/s",
            anchor="naive Tornado, 256 KiB chunks",
            anchor_values=speed["naive"],
            target=1.0,
        )
    )
    return rows


def ranged_get(rig: Rig) -> list[Row]:
    size = rig.profile.big_bytes
    label = rig.label(f"random 64 KiB ranged GET, {rig.profile.ranged_connections} conns")
    _store_big(rig)
    base = LoadSpec(
        port=rig.naive_strict.port,
        path="/files/big.bin",
        range_span=size,
        range_length=RANGE_BYTES,
        connections=rig.profile.ranged_connections,
        seconds=rig.profile.load_seconds,
    )
    loads = {
        "server": (on_server(base, rig.strict, object_path("big")), pid_of(rig.strict)),
        "naive": (base, pid_of(rig.naive_strict)),
    }
    if rig.nginx is not None:
        loads["nginx"] = (replace(base, port=rig.nginx.port, path="/big.bin"), pid_of(rig.nginx))
    runs = rig.loads(loads)
    return [
        nginx_row(
            rig,
            lambda: compare(
                label,
                rates(runs["server"]),
                "req/s",
                anchor="nginx",
                anchor_values=rates(runs["nginx"]),
                target=0.4,
                notes=load_notes(runs),
            ),
            label,
        ),
        compare(
            label,
            rates(runs["server"]),
            "req/s",
            anchor="naive Tornado",
            anchor_values=rates(runs["naive"]),
        ),
    ]


def cpu_rows(rig: Rig, label: str, runs: dict[str, list[Measured]], mode: str = "") -> list[Row]:
    """CPU µs per request of the server beside the naive handler and the floor."""
    suffix = f" {mode}" if mode else ""
    server = runs[mode or "server"]
    return [
        compare(
            rig.label(f"CPU per request, {label}"),
            cpu_per_request(server),
            "µs",
            anchor=anchor,
            anchor_values=cpu_per_request(runs[f"{name}{suffix}"]),
            lower_is_better=True,
        )
        for name, anchor in (
            ("naive", "naive Tornado handler"),
            ("floor", "bare HTTPMessageDelegate floor"),
        )
    ]


def small_put(rig: Rig) -> list[Row]:
    connections = rig.profile.small_connections
    naive = LoadSpec(
        port=rig.naive_strict.port,
        path="/files/small-put",
        method="PUT",
        body_bytes=SMALL_BYTES,
        unique_paths=True,
        connections=connections,
        seconds=rig.profile.load_seconds,
    )
    key = object_path("small-put")
    raw_dir = os.path.join(rig.scratch, "raw-small")
    os.makedirs(raw_dir, exist_ok=True)
    raw: list[float] = []

    def raw_files() -> float:
        raw.append(raw_small_files(raw_dir, SMALL_BYTES, connections, rig.profile.load_seconds))
        return raw[-1]

    loads = {
        "strict": (on_server(naive, rig.strict, key), pid_of(rig.strict)),
        "naive strict": (naive, pid_of(rig.naive_strict)),
        "floor strict": (replace(naive, port=rig.floor_strict.port), pid_of(rig.floor_strict)),
        "balanced": (on_server(naive, rig.balanced, key), pid_of(rig.balanced)),
        "naive balanced": (
            replace(naive, port=rig.naive_balanced.port),
            pid_of(rig.naive_balanced),
        ),
        "floor balanced": (
            replace(naive, port=rig.floor_balanced.port),
            pid_of(rig.floor_balanced),
        ),
    }
    if rig.nginx is not None:
        loads["nginx dav"] = (
            replace(naive, port=rig.nginx.port, path="/dav/small-put"),
            pid_of(rig.nginx),
        )
    runs = rig.loads(loads, extra={"raw": raw_files})
    strict_label = rig.label(f"4 KiB PUT, strict, {connections} conns")
    balanced_label = rig.label(f"4 KiB PUT, balanced, {connections} conns")
    rows = [
        compare(
            strict_label,
            rates(runs["strict"]),
            "objects/s",
            anchor="naive Tornado PUT, strict",
            anchor_values=rates(runs["naive strict"]),
            target=1.5,
            notes=load_notes({name: runs[name] for name in runs if "strict" in name}),
        ),
        compare(
            strict_label,
            rates(runs["strict"]),
            "objects/s",
            anchor=f"raw write+fsync+rename+dir fsync, {connections} threads",
            anchor_values=raw,
        ),
        compare(
            balanced_label,
            rates(runs["balanced"]),
            "objects/s",
            anchor="naive Tornado PUT, balanced",
            anchor_values=rates(runs["naive balanced"]),
            notes=load_notes({name: runs[name] for name in runs if "balanced" in name}),
        ),
        nginx_row(
            rig,
            lambda: compare(
                balanced_label,
                rates(runs["balanced"]),
                "objects/s",
                anchor="nginx WebDAV PUT (no fsync)",
                anchor_values=rates(runs["nginx dav"]),
                target=0.4,
                notes=load_notes({"nginx dav": runs["nginx dav"]}),
            ),
            balanced_label,
        ),
    ]
    rows += cpu_rows(rig, "4 KiB PUT, strict", runs, "strict")
    rows += cpu_rows(rig, "4 KiB PUT, balanced", runs, "balanced")
    return rows


def small_get(rig: Rig) -> list[Row]:
    connections = rig.profile.small_connections
    with open(os.path.join(rig.www, "small.bin"), "rb") as file:
        content = file.read()
    with httpx.Client(base_url=rig.strict.api, auth=rig.strict.auth) as client:
        client.put(f"/buckets/{BUCKET}/objects/small", content=content).raise_for_status()
    naive = LoadSpec(
        port=rig.naive_strict.port,
        path="/files/small.bin",
        connections=connections,
        seconds=rig.profile.load_seconds,
    )
    loads = {
        "server": (on_server(naive, rig.strict, object_path("small")), pid_of(rig.strict)),
        "naive": (naive, pid_of(rig.naive_strict)),
        "floor": (replace(naive, port=rig.floor_strict.port), pid_of(rig.floor_strict)),
    }
    if rig.nginx is not None:
        loads["nginx"] = (replace(naive, port=rig.nginx.port, path="/small.bin"), pid_of(rig.nginx))
    runs = rig.loads(loads)
    label = rig.label(f"4 KiB GET, {connections} conns")
    return [
        compare(
            label,
            rates(runs["server"]),
            "req/s",
            anchor="naive Tornado",
            anchor_values=rates(runs["naive"]),
            target=1.0,
            notes=load_notes(runs),
        ),
        nginx_row(
            rig,
            lambda: compare(
                label,
                rates(runs["server"]),
                "req/s",
                anchor="nginx",
                anchor_values=rates(runs["nginx"]),
                target=0.15,
            ),
            label,
        ),
        *cpu_rows(rig, "4 KiB GET", runs),
    ]


CASES: dict[str, Callable[[Rig], list[Row]]] = {
    "big_put": big_put,
    "big_get": big_get,
    "ranged_get": ranged_get,
    "small_put": small_put,
    "small_get": small_get,
}


def run(
    profile: Profile = FULL,
    cases: Sequence[str] | None = None,
    *,
    install_tools: bool = False,
    workers: Sequence[str | None] | None = None,
) -> list[Row]:
    """Run ``cases`` (default: all, in order) on one rig per ``SERVICE_WORKERS`` setting
    (default ``WORKER_SETTINGS``; the smoke profile only the server's default)."""
    if workers is None:
        workers = WORKER_SETTINGS[:1] if profile.name == "smoke" else WORKER_SETTINGS
    rows: list[Row] = []
    for setting in workers:
        with rig(profile, install_tools=install_tools, workers=setting) as bench_rig:
            for name in cases or CASES:
                rows += CASES[name](bench_rig)
    return rows
