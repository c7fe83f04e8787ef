"""The server bench's rig: real servers and their anchors for one run, and shared helpers.

``rig`` starts what the server cases need (a strict and a balanced server, the naive and the
floor anchors in both durabilities, nginx when installed) and ``Rig.loads`` runs HTTP loads
interleaved, noting the CPU time each process under load spent per request. The helpers
(starting servers, PUT from a file, GET drained) are shared by the other sections.

Thread-safety: a script; one thread (servers start and stop on a small pool).
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

from bench import KIB, MIB, Profile, Row, interleave, make_data_file, missing_row, scratch_dir
from bench.anchors import FloorServer, NaiveServer, Nginx, cpu_seconds, ensure_tools
from bench.loadgen import HttpConnection, LoadResult, LoadSpec, basic_auth, run_load
from tests.serverproc import ServerProcess, free_port

BUCKET = "bench"
SMALL_BYTES = 4 * KIB
RANGE_BYTES = 64 * KIB
WORKER_SETTINGS: tuple[str | None, ...] = (None, "1")
"""``SERVICE_WORKERS`` of each run: unset (the server's default), then one process."""
BENCH_ENV = {"SERVICE_MAX_UPLOADS_PER_USER": "256", "SERVICE_MAX_CONCURRENT_UPLOADS": "256"}
"""Upload slots for 64 connections of one user (the defaults would refuse most of them)."""


def size_label(size: int) -> str:
    """``1 GiB``, ``128 MiB``, ``4 KiB``: sizes as the tables name them."""
    for unit, scale in (("GiB", 1024 * MIB), ("MiB", MIB), ("KiB", KIB)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def start_servers(
    stack: ExitStack, *specs: tuple[str, str], workers: str | None = None
) -> list[ServerProcess]:
    """Real servers, one per ``(directory, durability)``, each with bucket ``bench``.

    They start (and, when ``stack`` closes, stop) in parallel: a start-up costs seconds of
    imports and a graceful stop writes a snapshot, and the smoke test has a time budget.
    ``workers``: ``SERVICE_WORKERS`` (None: unset, the server's default).
    """
    extra = {} if workers is None else {"SERVICE_WORKERS": workers}
    servers = [
        ServerProcess(
            data_dir=Path(directory) / "data",
            env_overrides={"SERVICE_DURABILITY": durability, **BENCH_ENV, **extra},
        )
        for directory, durability in specs
    ]
    with ThreadPoolExecutor(len(servers)) as pool:
        stack.callback(_stop_all, servers)
        list(pool.map(_start, servers))
    return servers


def start_server(
    stack: ExitStack, directory: str, durability: str, workers: str | None = None
) -> ServerProcess:
    """One server as ``start_servers`` makes them."""
    return start_servers(stack, (directory, durability), workers=workers)[0]


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
    floor_strict: FloorServer
    floor_balanced: FloorServer
    nginx: Nginx | None
    missing: dict[str, str]
    workers: str | None = None
    big_stored: bool = False
    big_puts: int = 0

    def label(self, text: str) -> str:
        """A row's measurement, marked with the run's ``SERVICE_WORKERS`` when it is set."""
        return text if self.workers is None else f"{text}, SERVICE_WORKERS={self.workers}"

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
    """Answered requests per second (errors and refusals do not count)."""
    return [
        (run.result.requests - run.result.errors) / run.result.seconds if run.result.seconds else 0
        for run in runs
    ]


def cpu_per_request(runs: list[Measured]) -> list[float]:
    return [run.cpu_us_per_request for run in runs]


def pid_of(server: ServerProcess | NaiveServer | Nginx) -> int:
    process = server.process
    if process is None:
        raise RuntimeError("the server is not running")
    return process.pid


@contextmanager
def rig(
    profile: Profile, *, install_tools: bool = False, workers: str | None = None
) -> Iterator[Rig]:
    """Start two servers (strict, balanced), two naive and two floor servers, and nginx
    when installed."""
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
        floor_strict = FloorServer(www, free_port(), "strict")
        floor_balanced = FloorServer(naive_balanced_root, free_port(), "balanced")
        for anchor in (naive_strict, naive_balanced, floor_strict, floor_balanced):
            stack.enter_context(anchor)
        strict, balanced = start_servers(
            stack,
            (os.path.join(scratch, "strict"), "strict"),
            (os.path.join(scratch, "balanced"), "balanced"),
            workers=workers,
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
            floor_strict=floor_strict,
            floor_balanced=floor_balanced,
            nginx=nginx,
            missing=missing,
            workers=workers,
        )


def nginx_row(rig: Rig, make: Callable[[], Row], label: str) -> Row:
    """The row against nginx, or a row saying nginx is not installed."""
    if rig.nginx is None:
        return missing_row(f"{label} vs nginx", rig.missing["nginx"])
    return make()


def load_notes(measured: dict[str, list[Measured]]) -> str:
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


def on_server(spec: LoadSpec, server: ServerProcess, path: str) -> LoadSpec:
    """The same load aimed at our server: its port, the object's path, credentials."""
    return replace(spec, port=server.port, path=path, headers=auth_headers(server))
