"""Server benchmark (issue 3): the HTTP paths of the object server beside their anchors.

Cases, each interleaved with its anchors (A B A B) and reported as medians:

- ``big_put``: one 1 GiB PUT in strict mode, sent with ``sendfile`` from a file in the page
  cache, MiB/s vs a raw write+fsync of the same size on the same disk (target >= 0.9x);
- ``big_get``: one 1 GiB GET drained by a raw socket, MiB/s vs nginx with sendfile
  (target >= 0.8x) and vs a naive Tornado handler (target >= 1.0x);
- ``ranged_get``: random 64 KiB ``Range`` GETs of that object, 16 connections, requests/s
  vs nginx serving the same bytes;
- ``small_put``: 4 KiB PUTs to fresh keys from 64 connections, objects/s, strict and
  balanced, each vs the naive Tornado PUT handler in the same durability;
- ``small_get``: 4 KiB GETs from 64 connections, requests/s vs the naive handler
  (target >= 1.0x) and, for reference, vs nginx.

The server is the real one (``python -m service``, started through the tests'
``ServerProcess``) with default settings apart from durability; the load comes from wrk
(one thread) or raw sockets, so client and server share the 2 cores the same way for the
server and its anchors.

Thread-safety: a script; one thread.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

from bench import (
    FULL,
    KIB,
    MIB,
    Profile,
    Row,
    compare,
    interleave,
    make_data_file,
    missing_row,
    scratch_dir,
)
from bench.anchors import (
    NaiveServer,
    Nginx,
    cpu_seconds,
    ensure_tools,
    raw_small_files,
    raw_write_fsync,
)
from bench.loadgen import HttpConnection, LoadResult, LoadSpec, basic_auth, run_load
from tests.serverproc import ServerProcess, free_port

BUCKET = "bench"
SMALL_BYTES = 4 * KIB
RANGE_BYTES = 64 * KIB


def size_label(size: int) -> str:
    """``1 GiB``, ``128 MiB``, ``4 KiB``: sizes as the tables name them."""
    for unit, scale in (("GiB", 1024 * MIB), ("MiB", MIB), ("KiB", KIB)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def start_servers(stack: ExitStack, *specs: tuple[str, str]) -> list[ServerProcess]:
    """Real servers, one per ``(directory, durability)``, each with bucket ``bench``.

    They start (and, when ``stack`` closes, stop) in parallel: a start-up costs seconds of
    imports and a graceful stop writes a snapshot, and the smoke test has a time budget.
    """
    servers = [
        ServerProcess(
            data_dir=Path(directory) / "data", env_overrides={"SERVICE_DURABILITY": durability}
        )
        for directory, durability in specs
    ]
    with ThreadPoolExecutor(len(servers)) as pool:
        stack.callback(_stop_all, servers)
        list(pool.map(_start, servers))
    return servers


def start_server(stack: ExitStack, directory: str, durability: str) -> ServerProcess:
    """One server as ``start_servers`` makes them."""
    return start_servers(stack, (directory, durability))[0]


def _start(server: ServerProcess) -> None:
    server.start()
    with server.client() as client:
        client.post("/buckets", json={"name": BUCKET}).raise_for_status()


def _stop_all(servers: list[ServerProcess]) -> None:
    with ThreadPoolExecutor(len(servers)) as pool:
        list(pool.map(lambda server: server.stop(), servers))


def object_path(key: str) -> str:
    return f"/api/v1/buckets/{BUCKET}/objects/{key}"


def auth_headers(server: ServerProcess) -> dict[str, str]:
    return basic_auth(server.access_key, server.secret_key)


def put_from_file(
    server: ServerProcess, key: str, fd: int, segments: Sequence[tuple[int, int]]
) -> float:
    """Seconds for one PUT whose body is ``segments`` of ``fd``, on a new connection."""
    headers = {**auth_headers(server), "Content-Type": "application/octet-stream"}
    with HttpConnection(server.port) as connection:
        started = time.perf_counter()
        response = connection.upload("PUT", object_path(key), headers, fd, segments)
        elapsed = time.perf_counter() - started
    if response.status != 200:
        raise RuntimeError(f"PUT {key}: {response.status} {response.body[:300]!r}")
    return elapsed


def delete_object(server: ServerProcess, key: str) -> None:
    """Delete ``key`` (untimed): a round that frees what it wrote leaves the disk as an
    anchor that deletes its file does (see ``bench.multipart_bench``)."""
    with HttpConnection(server.port) as connection:
        response = connection.request("DELETE", object_path(key), auth_headers(server), b"")
    if response.status != 204:
        raise RuntimeError(f"DELETE {key}: {response.status} {response.body[:300]!r}")


def download(port: int, path: str, headers: dict[str, str], expected: int) -> float:
    """Seconds for one GET of ``path`` on a new connection, the body drained."""
    with HttpConnection(port) as connection:
        started = time.perf_counter()
        response = connection.download(path, headers)
        elapsed = time.perf_counter() - started
    if response.status != 200 or response.body_bytes != expected:
        raise RuntimeError(f"GET {path}: {response.status}, {response.body_bytes} bytes")
    return elapsed


@dataclass
class Rig:
    """Everything the cases share: servers, anchors and the data files, for one run."""

    profile: Profile
    scratch: str
    www: str
    """Served by nginx and the strict naive server: ``big.bin`` and ``small.bin``."""
    big_fd: int
    strict: ServerProcess
    balanced: ServerProcess
    naive_strict: NaiveServer
    naive_balanced: NaiveServer
    nginx: Nginx | None
    missing: dict[str, str]
    big_stored: bool = False

    def loads(
        self,
        loads: dict[str, tuple[LoadSpec, int]],
        extra: dict[str, Callable[[], float]] | None = None,
    ) -> dict[str, list[Measured]]:
        """Run each ``(spec, pid of the process under load)``, interleaved and repeated.

        ``extra`` cases (anchors that are not HTTP loads) take their turn in each round.
        """
        collected: dict[str, list[Measured]] = {name: [] for name in loads}

        def case(name: str) -> Callable[[], float]:
            spec, pid = loads[name]

            def measure() -> float:
                before = cpu_seconds(pid)
                result = run_load(spec, self.profile.load_tool)
                used = cpu_seconds(pid) - before
                collected[name].append(Measured(result, used / max(1, result.requests) * 1e6))
                return result.requests_per_second

            return measure

        cases = {name: case(name) for name in loads}
        interleave({**cases, **(extra or {})}, self.profile.repeats)
        return collected


@dataclass(frozen=True)
class Measured:
    """One load run and the CPU time its target spent per request."""

    result: LoadResult
    cpu_us_per_request: float


def rates(runs: list[Measured]) -> list[float]:
    return [run.result.requests_per_second for run in runs]


def pid_of(server: ServerProcess | NaiveServer | Nginx) -> int:
    process = server.process
    if process is None:
        raise RuntimeError("the server is not running")
    return process.pid


@contextmanager
def rig(profile: Profile, *, install_tools: bool = False) -> Iterator[Rig]:
    """Start two servers (strict, balanced), two naive servers and nginx when installed."""
    missing = ensure_tools(install=install_tools)
    with scratch_dir("server-") as scratch, ExitStack() as stack:
        www = os.path.join(scratch, "www")
        os.makedirs(www)
        make_data_file(os.path.join(www, "big.bin"), profile.big_bytes)
        with open(os.path.join(www, "small.bin"), "wb") as file:
            file.write(os.urandom(SMALL_BYTES))
        big_fd = os.open(os.path.join(www, "big.bin"), os.O_RDONLY)
        stack.callback(os.close, big_fd)
        naive_balanced_root = os.path.join(scratch, "naive-balanced")
        os.makedirs(naive_balanced_root)
        nginx = None
        if "nginx" not in missing:
            nginx = Nginx(www, os.path.join(scratch, "nginx"), free_port())
            stack.enter_context(nginx)
        naive_strict = NaiveServer(www, free_port(), "strict")
        naive_balanced = NaiveServer(naive_balanced_root, free_port(), "balanced")
        stack.enter_context(naive_strict)
        stack.enter_context(naive_balanced)
        strict, balanced = start_servers(
            stack,
            (os.path.join(scratch, "strict"), "strict"),
            (os.path.join(scratch, "balanced"), "balanced"),
        )
        yield Rig(
            profile=profile,
            scratch=scratch,
            www=www,
            big_fd=big_fd,
            strict=strict,
            balanced=balanced,
            naive_strict=naive_strict,
            naive_balanced=naive_balanced,
            nginx=nginx,
            missing=missing,
        )


def _store_big(rig: Rig) -> None:
    if not rig.big_stored:
        put_from_file(rig.strict, "big", rig.big_fd, [(0, rig.profile.big_bytes)])
        rig.big_stored = True


def big_put(rig: Rig) -> list[Row]:
    size = rig.profile.big_bytes
    anchor_dir = os.path.join(rig.scratch, "raw")
    os.makedirs(anchor_dir, exist_ok=True)
    seconds = interleave(
        {
            "raw": lambda: raw_write_fsync(anchor_dir, size),
            "put": lambda: put_from_file(rig.strict, "big", rig.big_fd, [(0, size)]),
            "raw_hashed": lambda: raw_write_fsync(anchor_dir, size, hashed=True),
        },
        rig.profile.repeats,
    )
    rig.big_stored = True
    mib = size / MIB
    speed = {name: [mib / value for value in values] for name, values in seconds.items()}
    label = f"{size_label(size)} PUT, strict"
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
    label = f"{size_label(size)} GET"
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


def nginx_row(rig: Rig, make: Callable[[], Row], label: str) -> Row:
    """The row against nginx, or a row saying nginx is not installed."""
    if rig.nginx is None:
        return missing_row(f"{label} vs nginx", rig.missing["nginx"])
    return make()


def _load_notes(measured: dict[str, list[Measured]]) -> str:
    """Tool, each target's CPU time per request and p99, and any errors.

    CPU µs/request is the steadiest figure on a shared machine: another engineer's tests
    steal cores (requests/s drops) but hardly change what one request costs.
    """
    parts = []
    for name, runs in measured.items():
        errors = sum(run.result.errors for run in runs)
        cpu = statistics.median(run.cpu_us_per_request for run in runs)
        p99 = statistics.median(run.result.p99_ms for run in runs)
        parts.append(
            f"{name} {cpu:,.0f} µs CPU/req, p99 {p99:.0f} ms"
            + (f", {errors} ERRORS" if errors else "")
        )
    tool = next(iter(measured.values()))[0].result.tool
    return f"{tool}; " + "; ".join(parts)


def ranged_get(rig: Rig) -> list[Row]:
    size = rig.profile.big_bytes
    label = f"random 64 KiB ranged GET, {rig.profile.ranged_connections} conns"
    if rig.nginx is None:
        return [missing_row(f"{label} vs nginx", rig.missing["nginx"])]
    _store_big(rig)
    base = LoadSpec(
        port=rig.nginx.port,
        path="/big.bin",
        range_span=size,
        range_length=RANGE_BYTES,
        connections=rig.profile.ranged_connections,
        seconds=rig.profile.load_seconds,
    )
    runs = rig.loads(
        {
            "server": (_on_server(base, rig.strict, object_path("big")), pid_of(rig.strict)),
            "nginx": (base, pid_of(rig.nginx)),
        }
    )
    return [
        compare(
            label,
            rates(runs["server"]),
            "req/s",
            anchor="nginx",
            anchor_values=rates(runs["nginx"]),
            notes=_load_notes(runs),
        )
    ]


def _on_server(spec: LoadSpec, server: ServerProcess, path: str) -> LoadSpec:
    """The same load aimed at our server: its port, the object's path, credentials."""
    return replace(spec, port=server.port, path=path, headers=auth_headers(server))


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

    runs = rig.loads(
        {
            "strict": (_on_server(naive, rig.strict, key), pid_of(rig.strict)),
            "naive strict": (naive, pid_of(rig.naive_strict)),
            "balanced": (_on_server(naive, rig.balanced, key), pid_of(rig.balanced)),
            "naive balanced": (
                replace(naive, port=rig.naive_balanced.port),
                pid_of(rig.naive_balanced),
            ),
        },
        extra={"raw": raw_files},
    )
    rows = [
        compare(
            f"4 KiB PUT, {mode}, {connections} conns",
            rates(runs[mode]),
            "objects/s",
            anchor=f"naive Tornado PUT, {mode}",
            anchor_values=rates(runs[f"naive {mode}"]),
            notes=_load_notes({mode: runs[mode], f"naive {mode}": runs[f"naive {mode}"]}),
        )
        for mode in ("strict", "balanced")
    ]
    rows.insert(
        1,
        compare(
            f"4 KiB PUT, strict, {connections} conns",
            rates(runs["strict"]),
            "objects/s",
            anchor=f"raw write+fsync+rename+dir fsync, {connections} threads",
            anchor_values=raw,
        ),
    )
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
        "server": (_on_server(naive, rig.strict, object_path("small")), pid_of(rig.strict)),
        "naive": (naive, pid_of(rig.naive_strict)),
    }
    if rig.nginx is not None:
        loads["nginx"] = (replace(naive, port=rig.nginx.port, path="/small.bin"), pid_of(rig.nginx))
    runs = rig.loads(loads)
    label = f"4 KiB GET, {connections} conns"
    return [
        compare(
            label,
            rates(runs["server"]),
            "req/s",
            anchor="naive Tornado",
            anchor_values=rates(runs["naive"]),
            target=1.0,
            notes=_load_notes(runs),
        ),
        nginx_row(
            rig,
            lambda: compare(
                label,
                rates(runs["server"]),
                "req/s",
                anchor="nginx",
                anchor_values=rates(runs["nginx"]),
            ),
            label,
        ),
    ]


CASES: dict[str, Callable[[Rig], list[Row]]] = {
    "big_put": big_put,
    "big_get": big_get,
    "ranged_get": ranged_get,
    "small_put": small_put,
    "small_get": small_get,
}


def run(
    profile: Profile = FULL, cases: Sequence[str] | None = None, *, install_tools: bool = False
) -> list[Row]:
    """Run ``cases`` (default: all, in order) on one rig; one row per figure."""
    rows: list[Row] = []
    with rig(profile, install_tools=install_tools) as bench_rig:
        for name in cases or CASES:
            rows += CASES[name](bench_rig)
    return rows
