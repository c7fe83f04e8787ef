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
requests only (2xx/3xx).

Every server figure is measured for each ``SERVICE_WORKERS`` setting (``WORKER_SETTINGS``:
unset, the server's default of one process per CPU, and 1), both servers running side by
side and their loads interleaved with the anchors in the same rounds (A B A' B'...); rows of
the one-process server say ``SERVICE_WORKERS=1``. The notes give each serving process's
share of the requests. The small GET and the balanced small PUT are measured again with wrk
pinned to one CPU (``taskset``; rows say "load pinned to CPU 1"), beside the naive handler
pinned the same way. ``big_get`` ends with the memory rows: the peak memory of all of a server's
processes together while the 1 GiB PUTs and GETs ran (PSS summed over the process tree,
sampled every 0.1 s; the RSS sum beside it), against 150 MiB + 40 MiB per extra process.


Thread-safety: a script; one thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from functools import partial

import httpx

from bench import FULL, MIB, Profile, Row, compare, interleave, limit_row
from bench.anchors import raw_small_files, raw_write_fsync
from bench.loadgen import LoadSpec
from bench.server_rig import (
    BUCKET,
    RANGE_BYTES,
    RSS_LIMIT_MIB,
    RSS_PER_EXTRA_PROCESS_MIB,
    SMALL_BYTES,
    WORKER_SETTINGS,
    Load,
    Measured,
    Rig,
    Setting,
    auth_headers,
    cpu_per_request,
    download,
    load_notes,
    nginx_row,
    object_path,
    on_anchor,
    on_peer,
    on_server,
    peer_put,
    peer_row,
    pid_of,
    process_tree,
    put_from_file,
    rates,
    rates_of,
    rig,
    size_label,
    start_server,
    store_peer_big,
    tree_peak_rss_mib,
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


def _store_big(setting: Setting, rig: Rig) -> None:
    if not setting.big_stored:
        put_from_file(setting.strict, "big", rig.big_fd, [(0, rig.profile.big_bytes)])
        setting.big_stored = True


@contextmanager
def sampling(rig: Rig) -> Iterator[None]:
    """Sample every setting's strict server's memory meanwhile (``Setting.busy``)."""
    with ExitStack() as stack:
        for setting in rig.settings:
            assert setting.busy is not None
            stack.enter_context(setting.busy)
        yield


def big_put(rig: Rig) -> list[Row]:
    size = rig.profile.big_bytes
    anchor_dir = os.path.join(rig.scratch, "raw")
    os.makedirs(anchor_dir, exist_ok=True)

    def put_new_key(setting: Setting) -> Callable[[], float]:
        def put() -> float:
            # A new key each round: overwriting would free the last round's blocks for this.
            rig.big_puts += 1
            return put_from_file(setting.strict, f"big-{rig.big_puts}", rig.big_fd, [(0, size)])

        return put

    cases: dict[str, Callable[[], float]] = {
        "raw": lambda: raw_write_fsync(anchor_dir, size),
        **{f"put {setting.name}": put_new_key(setting) for setting in rig.settings},
        "raw_hashed": lambda: raw_write_fsync(anchor_dir, size, hashed=True),
    }
    peer = rig.peer
    if peer is not None:

        def put_peer() -> float:
            rig.big_puts += 1  # a new key each round, as ours
            path = f"/bench/big-{rig.big_puts}?fsync=true"
            return peer_put(peer, path, fd=rig.big_fd, segments=[(0, size)])

        cases["peer"] = put_peer
    with sampling(rig):
        seconds = interleave(cases, rig.profile.repeats)
    mib = size / MIB
    speed = {name: [mib / value for value in values] for name, values in seconds.items()}
    rows = []
    for setting in rig.settings:
        label = setting.label(f"{size_label(size)} PUT, strict, fresh blocks")
        put = speed[f"put {setting.name}"]
        rows += [
            compare(
                label,
                put,
                "MiB/s",
                anchor="raw write+fsync",
                anchor_values=speed["raw"],
                target=0.9,
            ),
            compare(
                label,
                put,
                "MiB/s",
                anchor="raw write+SHA-256+fsync, one thread",
                anchor_values=speed["raw_hashed"],
            ),
            peer_row(rig, label, put, "MiB/s", speed.get("peer"), fsync=True),
        ]
    return rows


def big_get(rig: Rig) -> list[Row]:
    size = rig.profile.big_bytes
    cases: dict[str, Callable[[], float]] = {}
    for setting in rig.settings:
        _store_big(setting, rig)
        cases[f"server {setting.name}"] = partial(
            download, setting.strict.port, object_path("big"), auth_headers(setting.strict), size
        )
    cases["naive"] = lambda: download(rig.naive_strict.port, "/files/big.bin", {}, size)
    if rig.peer is not None:
        store_peer_big(rig)
        peer_port = rig.peer.port
        cases["peer"] = lambda: download(peer_port, "/bench/big.bin", {}, size)
    if rig.nginx is not None:
        nginx_port = rig.nginx.port
        cases["nginx"] = lambda: download(nginx_port, "/big.bin", {}, size)
    with sampling(rig):
        for warm in cases.values():
            warm()
        seconds = interleave(cases, rig.profile.repeats)
    mib = size / MIB
    speed = {name: [mib / value for value in values] for name, values in seconds.items()}
    rows = []
    for setting in rig.settings:
        label = setting.label(f"{size_label(size)} GET")
        server = speed[f"server {setting.name}"]
        rows.append(
            nginx_row(
                rig,
                label,
                server,
                "MiB/s",
                speed.get("nginx"),
                anchor="nginx sendfile",
                target=0.8,
            )
        )
        rows.append(
            compare(
                label,
                server,
                "MiB/s",
                anchor="naive Tornado, 256 KiB chunks",
                anchor_values=speed["naive"],
                target=1.0,
            )
        )
        rows.append(peer_row(rig, label, server, "MiB/s", speed.get("peer")))
    return rows + [memory_row(rig, setting) for setting in rig.settings]


def memory_row(rig: Rig, setting: Setting) -> Row:
    """The strict server's processes' memory together, peak during its 1 GiB PUTs and GETs
    (PSS summed, sampled every 0.1 s), against issue 13's limit."""
    assert setting.idle is not None and setting.busy is not None
    processes = len(process_tree(pid_of(setting.strict)))
    limit = RSS_LIMIT_MIB + RSS_PER_EXTRA_PROCESS_MIB * (processes - 1)
    row = limit_row(
        setting.label(
            f"{size_label(rig.profile.big_bytes)} PUTs and GETs, peak memory of "
            + ("its one process (PSS)" if processes == 1 else f"all {processes} processes (PSS)")
        ),
        setting.busy.peak_pss,
        "MiB",
        limit,
        anchor="same, right after start",
        anchor_value=setting.idle.peak_pss,
    )
    row["notes"] = (
        f"RSS summed: {setting.busy.peak_rss:.0f} MiB peak, {setting.idle.peak_rss:.0f} after "
        f"start (counts the pages a fork shares once per process); summed VmHWM "
        f"{tree_peak_rss_mib(pid_of(setting.strict)):.0f} MiB (every process's own peak)"
    )
    return row


def ranged_get(rig: Rig) -> list[Row]:
    size = rig.profile.big_bytes
    base = LoadSpec(
        port=rig.naive_strict.port,
        path="/files/big.bin",
        range_span=size,
        range_length=RANGE_BYTES,
        connections=rig.profile.ranged_connections,
        seconds=rig.profile.load_seconds,
    )
    loads: dict[str, Load] = {}
    for setting in rig.settings:
        _store_big(setting, rig)
        loads[f"server {setting.name}"] = on_server(base, setting.strict, object_path("big"))
    loads["naive"] = on_anchor(base, rig.naive_strict)
    if rig.nginx is not None:
        loads["nginx"] = on_anchor(base, rig.nginx, port=rig.nginx.port, path="/big.bin")
    store_peer_big(rig)
    loads.update(on_peer(base, rig, "/bench/big.bin"))
    runs = rig.loads(loads)
    nginx_runs = {name: runs[name] for name in ("nginx",) if name in runs}
    rows = []
    for setting in rig.settings:
        label = setting.label(f"random 64 KiB ranged GET, {rig.profile.ranged_connections} conns")
        server = runs[f"server {setting.name}"]
        rows += [
            nginx_row(
                rig,
                label,
                rates(server),
                "req/s",
                rates_of(runs, "nginx"),
                anchor="nginx",
                target=0.4,
                notes=load_notes({f"server {setting.name}": server, **nginx_runs}),
            ),
            compare(
                label,
                rates(server),
                "req/s",
                anchor="naive Tornado",
                anchor_values=rates(runs["naive"]),
                notes=load_notes({f"server {setting.name}": server, "naive": runs["naive"]}),
            ),
            peer_rate_row(rig, setting, label, server, runs, "req/s"),
        ]
        rows += cpu_rows(setting, "random 64 KiB ranged GET", server, runs)
    return rows


def peer_rate_row(
    rig: Rig,
    setting: Setting,
    label: str,
    server: list[Measured],
    runs: dict[str, list[Measured]],
    unit: str,
    name: str = "peer",
    *,
    fsync: bool = False,
) -> Row:
    """Our load's rate against the peer's load ``name`` of the same rounds, with both CPU
    notes (a row saying why when the peer did not run)."""
    notes = ""
    if name in runs:
        notes = load_notes({f"server {setting.name}": server, "SeaweedFS": runs[name]})
    return peer_row(rig, label, rates(server), unit, rates_of(runs, name), fsync=fsync, notes=notes)


def cpu_rows(
    setting: Setting, label: str, server: list[Measured], anchors: dict[str, list[Measured]]
) -> list[Row]:
    """CPU µs per request of the server (all its processes) beside the naive handler, the
    floor and the peer store, those of them that ran this load."""
    return [
        compare(
            setting.label(f"CPU per request, {label}"),
            cpu_per_request(server),
            "µs",
            anchor=anchor,
            anchor_values=cpu_per_request(anchors[name]),
            lower_is_better=True,
        )
        for name, anchor in (
            ("naive", "naive Tornado handler"),
            ("floor", "bare HTTPMessageDelegate floor"),
            ("peer", "SeaweedFS filer (weed, one process)"),
        )
        if name in anchors
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

    loads: dict[str, Load] = {}
    for setting in rig.settings:
        loads[f"strict {setting.name}"] = on_server(naive, setting.strict, key)
    loads["naive strict"] = on_anchor(naive, rig.naive_strict)
    loads["floor strict"] = on_anchor(naive, rig.floor_strict, port=rig.floor_strict.port)
    loads.update(on_peer(naive, rig, "/bench/strict-put", "?fsync=true", name="peer strict"))
    balanced = balanced_put_loads(rig, naive, key)
    runs = rig.loads({**loads, **balanced}, extra={"raw": raw_files})
    rows = []
    for setting in rig.settings:
        strict = runs[f"strict {setting.name}"]
        label = setting.label(f"4 KiB PUT, strict, {connections} conns")
        rows += [
            compare(
                label,
                rates(strict),
                "objects/s",
                anchor="naive Tornado PUT, strict",
                anchor_values=rates(runs["naive strict"]),
                target=1.5,
                notes=load_notes(
                    {
                        f"strict {setting.name}": strict,
                        "naive strict": runs["naive strict"],
                        "floor strict": runs["floor strict"],
                    }
                ),
            ),
            compare(
                label,
                rates(strict),
                "objects/s",
                anchor=f"raw write+fsync+rename+dir fsync, {connections} threads",
                anchor_values=raw,
            ),
            peer_rate_row(
                rig, setting, label, strict, runs, "objects/s", "peer strict", fsync=True
            ),
        ]
    rows += balanced_put_rows(rig, runs)
    if rig.pinned is not None:
        pinned = rig.loads(only_pinned(balanced_put_loads(rig, naive, key)), cpus=rig.pinned)
        rows += balanced_put_rows(rig, pinned, rig.pinned)
    for setting in rig.settings:
        strict_anchors = {"naive": runs["naive strict"], "floor": runs["floor strict"]}
        balanced_anchors = {"naive": runs["naive balanced"], "floor": runs["floor balanced"]}
        for anchors, peer in ((strict_anchors, "peer strict"), (balanced_anchors, "peer balanced")):
            if peer in runs:
                anchors["peer"] = runs[peer]
        rows += cpu_rows(
            setting, "4 KiB PUT, strict", runs[f"strict {setting.name}"], strict_anchors
        )
        rows += cpu_rows(
            setting, "4 KiB PUT, balanced", runs[f"balanced {setting.name}"], balanced_anchors
        )
    return rows


def only_pinned(loads: dict[str, Load]) -> dict[str, Load]:
    """The loads measured again with the generator pinned: our servers and the naive handler
    (the pinned rows compare the placements; the full set of anchors is in the shared rows,
    and leaving the rest out keeps the full profile under 10 minutes)."""
    return {
        name: load
        for name, load in loads.items()
        if not name.startswith(("floor", "nginx", "peer"))
    }


def balanced_put_loads(rig: Rig, naive: LoadSpec, key: str) -> dict[str, Load]:
    loads: dict[str, Load] = {}
    for setting in rig.settings:
        loads[f"balanced {setting.name}"] = on_server(naive, setting.balanced, key)
    loads["naive balanced"] = on_anchor(naive, rig.naive_balanced, port=rig.naive_balanced.port)
    loads["floor balanced"] = on_anchor(naive, rig.floor_balanced, port=rig.floor_balanced.port)
    if rig.nginx is not None:
        loads["nginx dav"] = on_anchor(naive, rig.nginx, port=rig.nginx.port, path="/dav/small-put")
    loads.update(on_peer(naive, rig, "/bench/balanced-put", name="peer balanced"))
    return loads


def balanced_put_rows(
    rig: Rig, runs: dict[str, list[Measured]], cpus: str | None = None
) -> list[Row]:
    connections = rig.profile.small_connections
    rows = []
    for setting in rig.settings:
        server = runs[f"balanced {setting.name}"]
        label = setting.label(f"4 KiB PUT, balanced, {connections} conns", cpus)
        rows += [
            compare(
                label,
                rates(server),
                "objects/s",
                anchor="naive Tornado PUT, balanced",
                anchor_values=rates(runs["naive balanced"]),
                notes=load_notes(
                    {
                        f"balanced {setting.name}": server,
                        **{
                            name: runs[name]
                            for name in ("naive balanced", "floor balanced", "nginx dav")
                            if name in runs
                        },
                    }
                ),
            ),
        ]
        if cpus is None:
            rows.append(
                nginx_row(
                    rig,
                    label,
                    rates(server),
                    "objects/s",
                    rates_of(runs, "nginx dav"),
                    anchor="nginx WebDAV PUT (no fsync)",
                    target=0.4,
                )
            )
            rows.append(
                peer_rate_row(rig, setting, label, server, runs, "objects/s", "peer balanced")
            )
    return rows


def small_get(rig: Rig) -> list[Row]:
    connections = rig.profile.small_connections
    with open(os.path.join(rig.www, "small.bin"), "rb") as file:
        content = file.read()
    for setting in rig.settings:
        with httpx.Client(base_url=setting.strict.api, auth=setting.strict.auth) as client:
            client.put(f"/buckets/{BUCKET}/objects/small", content=content).raise_for_status()
    naive = LoadSpec(
        port=rig.naive_strict.port,
        path="/files/small.bin",
        connections=connections,
        seconds=rig.profile.load_seconds,
    )
    loads: dict[str, Load] = {
        f"server {setting.name}": on_server(naive, setting.strict, object_path("small"))
        for setting in rig.settings
    }
    loads["naive"] = on_anchor(naive, rig.naive_strict)
    loads["floor"] = on_anchor(naive, rig.floor_strict, port=rig.floor_strict.port)
    if rig.nginx is not None:
        loads["nginx"] = on_anchor(naive, rig.nginx, port=rig.nginx.port, path="/small.bin")
    loads.update(on_peer(naive, rig, "/bench/small"))
    runs = rig.loads(loads)
    rows = small_get_rows(rig, runs)
    if rig.pinned is not None:
        pinned = rig.loads(only_pinned(loads), cpus=rig.pinned)
        rows += small_get_rows(rig, pinned, rig.pinned)
    for setting in rig.settings:
        rows += cpu_rows(setting, "4 KiB GET", runs[f"server {setting.name}"], runs)
    return rows


def small_get_rows(rig: Rig, runs: dict[str, list[Measured]], cpus: str | None = None) -> list[Row]:
    rows = []
    for setting in rig.settings:
        server = runs[f"server {setting.name}"]
        label = setting.label(f"4 KiB GET, {rig.profile.small_connections} conns", cpus)
        anchors: dict[str, list[Measured]] = {
            name: runs[name] for name in ("naive", "floor", "nginx") if name in runs
        }
        rows += [
            compare(
                label,
                rates(server),
                "req/s",
                anchor="naive Tornado",
                anchor_values=rates(runs["naive"]),
                target=1.0,
                notes=load_notes({f"server {setting.name}": server, **anchors}),
            ),
        ]
        if cpus is None:
            rows.append(
                nginx_row(
                    rig,
                    label,
                    rates(server),
                    "req/s",
                    rates_of(runs, "nginx"),
                    anchor="nginx",
                    target=0.15,
                )
            )
            rows.append(peer_rate_row(rig, setting, label, server, runs, "req/s"))
    return rows


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
    """Run ``cases`` (default: all, in order) with a server pair per ``SERVICE_WORKERS``
    setting (default ``WORKER_SETTINGS``; the smoke profile only the server's default)."""
    if workers is None:
        workers = WORKER_SETTINGS[:1] if profile.name == "smoke" else WORKER_SETTINGS
    rows: list[Row] = []
    with rig(profile, install_tools=install_tools, workers=workers) as bench_rig:
        for name in cases or CASES:
            rows += CASES[name](bench_rig)
    return rows
