"""The server bench's rig: real servers and their anchors for one run, and shared helpers.

``rig`` starts what the server cases need (a strict and a balanced server for each
``SERVICE_WORKERS`` setting, the naive and the floor anchors in both durabilities, nginx when
installed) and ``Rig.loads`` runs HTTP loads interleaved, noting the CPU time each process
under load spent per request and, for our servers, how many requests each serving process
answered (its own count in the multiprocess metrics files: ``shared_metrics``). The helpers
(starting servers, PUT from a file, GET drained) are shared by the other sections.

CPU placement of the load generator: by default wrk runs where the scheduler puts it, on the
same 2 cores as the server ("shared cores"); a load run with ``cpus`` set runs wrk under
``taskset -c`` ("pinned": wrk stays on that core; the servers may still use both).

Thread-safety: a script; one thread (servers start and stop on a small pool).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench import (
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
    FloorServer,
    NaiveServer,
    Nginx,
    cpu_seconds,
    descendants,
    ensure_tools,
)
from bench.loadgen import HttpConnection, LoadResult, LoadSpec, basic_auth, run_load
from bench.peer import SeaweedFS, ensure_weed
from bench.peer import version as weed_version
from service.procs.shared_metrics import requests_per_process
from tests.serverproc import ServerProcess, free_port

BUCKET = "bench"
SMALL_BYTES = 4 * KIB
RANGE_BYTES = 64 * KIB
WORKER_SETTINGS: tuple[str | None, ...] = (None, "1")
"""``SERVICE_WORKERS`` of the servers under test: unset (the server's default), and one."""
PINNED_CPUS = "1"
"""``taskset -c`` list of the load generator in the "pinned" rows."""
RSS_LIMIT_MIB = 150
RSS_PER_EXTRA_PROCESS_MIB = 40
"""Issue 13's memory target: peak RSS of all processes together during 1 GiB transfers below
150 MiB plus 40 MiB per process beyond the first."""
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
    ``workers``: ``SERVICE_WORKERS`` (None: the server's default, one process per CPU; said
    explicitly, since ``ServerProcess`` otherwise runs one process as the tests want).
    """
    extra = {"SERVICE_WORKERS": workers or str(default_processes())}
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


def default_processes() -> int:
    """What ``SERVICE_WORKERS`` unset means on this machine: the CPU count."""
    return os.cpu_count() or 1


def start_server(
    stack: ExitStack, directory: str, durability: str, workers: str | None = None
) -> ServerProcess:
    """One server as ``start_servers`` makes them."""
    return start_servers(stack, (directory, durability), workers=workers)[0]


def _start(server: ServerProcess) -> None:
    server.start(timeout=120)  # a loaded machine starts slowly (argon2 at bootstrap)
    # /health answers once the writer serves; the supervisor forks the workers after it and
    # then prints its listening line (a single process prints it as it starts serving).
    deadline = time.monotonic() + 60
    while "service listening on" not in server.logs():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the serving processes did not start:\n{server.logs()}")
        time.sleep(0.1)
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
class Setting:
    """The servers under test of one ``SERVICE_WORKERS`` setting (None: unset)."""

    workers: str | None
    strict: ServerProcess
    balanced: ServerProcess
    idle: MemorySampler | None = None
    """The strict server's processes' memory right after start (one sample)."""
    busy: MemorySampler | None = None
    """The same, sampled during the 1 GiB PUTs and GETs (``big_put``, ``big_get``)."""
    big_stored: bool = False

    @property
    def name(self) -> str:
        """Short name in notes and case keys: ``default(2)`` or ``workers=1``."""
        if self.workers is None:
            return f"default({default_processes()})"
        return f"workers={self.workers}"

    def label(self, text: str, cpus: str | None = None) -> str:
        """A row's measurement, marked with ``SERVICE_WORKERS`` when it is set and with the
        load generator's CPU placement when pinned."""
        if self.workers is not None:
            text = f"{text}, SERVICE_WORKERS={self.workers}"
        return text if cpus is None else f"{text}, load pinned to CPU {cpus}"


Load = tuple[LoadSpec, int, str | None]
"""A load, the pid whose process tree serves it, and that server's metrics directory (None:
an anchor, which counts nothing per process)."""


@dataclass
class Rig:
    """Everything the cases share: servers, anchors and the data files, for one run."""

    profile: Profile
    scratch: str
    www: str
    """Served by nginx and the strict naive server: ``big.bin`` and ``small.bin``."""
    big_fd: int
    settings: list[Setting]
    naive_strict: NaiveServer
    naive_balanced: NaiveServer
    floor_strict: FloorServer
    floor_balanced: FloorServer
    nginx: Nginx | None
    missing: dict[str, str]
    peer: SeaweedFS | None = None
    """The peer store (``bench.peer``), None when weed is not installed."""
    peer_version: str = "?"
    peer_big_stored: bool = False
    big_puts: int = 0

    @property
    def pinned(self) -> str | None:
        """The CPU list of the pinned rows, or None where the profile runs none (smoke)."""
        return None if self.profile.name == "smoke" else PINNED_CPUS

    def loads(
        self,
        loads: dict[str, Load],
        extra: dict[str, Callable[[], float]] | None = None,
        cpus: str | None = None,
    ) -> dict[str, list[Measured]]:
        """``interleaved_loads`` with this run's profile."""
        return interleaved_loads(self.profile, loads, extra, cpus)


def interleaved_loads(
    profile: Profile,
    loads: dict[str, Load],
    extra: dict[str, Callable[[], float]] | None = None,
    cpus: str | None = None,
) -> dict[str, list[Measured]]:
    """Run each load, interleaved and repeated, wrk under ``taskset -c cpus`` if given.

    ``extra`` cases (anchors that are not HTTP loads) take their turn in each round.
    """
    collected: dict[str, list[Measured]] = {name: [] for name in loads}

    def case(name: str) -> Callable[[], float]:
        spec, pid, metrics_dir = loads[name]
        spec = replace(spec, cpus=cpus)

        def measure() -> float:
            counted = requests_per_process(metrics_dir) if metrics_dir else {}
            before = cpu_seconds(pid)
            result = run_load(spec, profile.load_tool)
            used = cpu_seconds(pid) - before
            split = {}
            if metrics_dir:
                after = requests_per_process(metrics_dir)
                split = {each: after[each] - counted.get(each, 0) for each in after}
                split = {each: count for each, count in split.items() if count}
            cpu = used / max(1, result.requests) * 1e6
            collected[name].append(Measured(result, cpu, split))
            return result.requests_per_second

        return measure

    cases = {name: case(name) for name in loads}
    interleave({**cases, **(extra or {})}, profile.repeats)
    return collected


@dataclass(frozen=True)
class Measured:
    """One load run and the CPU time its target spent per request."""

    result: LoadResult
    cpu_us_per_request: float
    split: dict[int, int] = field(default_factory=dict)
    """Requests each serving process answered during the load (our multi-process servers)."""


def rates(runs: list[Measured]) -> list[float]:
    """Answered requests per second (errors and refusals do not count)."""
    return [
        (run.result.requests - run.result.errors) / run.result.seconds if run.result.seconds else 0
        for run in runs
    ]


def rates_of(runs: dict[str, list[Measured]], name: str) -> list[float] | None:
    """``rates`` of the load ``name``, None if it did not run (nginx not installed)."""
    return rates(runs[name]) if name in runs else None


def cpu_per_request(runs: list[Measured]) -> list[float]:
    return [run.cpu_us_per_request for run in runs]


def pid_of(server: ServerProcess | NaiveServer | Nginx) -> int:
    process = server.process
    if process is None:
        raise RuntimeError("the server is not running")
    return process.pid


def on_anchor(spec: LoadSpec, anchor: NaiveServer | Nginx, **changes: object) -> Load:
    """The load aimed at an anchor (``changes``: its port, path)."""
    return (replace(spec, **changes), pid_of(anchor), None)  # type: ignore[arg-type]


def metrics_dir(server: ServerProcess) -> str:
    """Where a multi-process server's processes keep their counts (``shared_metrics``)."""
    return os.path.join(str(server.data_dir), "run", "metrics")


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc)."""
    return descendants(pid)


def tree_memory_mib(pid: int) -> tuple[float, float]:
    """``(PSS, RSS)`` of ``pid`` and its descendants now, summed, in MiB. PSS counts a page
    shared by n processes as 1/n in each, so its sum is the memory they use together; the
    RSS sum counts such pages (the code and data a fork shares) once per process."""
    pss = rss = 0
    for each in process_tree(pid):
        try:
            with open(f"/proc/{each}/smaps_rollup") as rollup:
                for line in rollup:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1])
                    elif line.startswith("Rss:"):
                        rss += int(line.split()[1])
        except FileNotFoundError:
            continue
    return pss * KIB / MIB, rss * KIB / MIB


class MemorySampler:
    """Samples ``tree_memory_mib`` every ``SAMPLE_SECONDS`` on a thread while running (a
    ``with`` block) and keeps the peaks; the sampler costs about 1 % of a core."""

    SAMPLE_SECONDS = 0.1

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_pss = self.peak_rss = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        pss, rss = tree_memory_mib(self.pid)
        self.peak_pss, self.peak_rss = max(self.peak_pss, pss), max(self.peak_rss, rss)

    def __enter__(self) -> MemorySampler:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.SAMPLE_SECONDS):
            self.sample()


def tree_peak_rss_mib(pid: int) -> float:
    """The summed peak RSS (``VmHWM``) of ``pid`` and its descendants, in MiB: an upper bound
    of their peak together (each one's peak may come at another moment, and pages a fork
    shares count in each)."""
    total_kib = 0
    for each in process_tree(pid):
        try:
            with open(f"/proc/{each}/status") as status:
                total_kib += next(
                    int(line.split()[1]) for line in status if line.startswith("VmHWM:")
                )
        except (FileNotFoundError, StopIteration):
            continue
    return total_kib * KIB / MIB


@contextmanager
def rig(
    profile: Profile,
    *,
    install_tools: bool = False,
    workers: Sequence[str | None] = WORKER_SETTINGS,
) -> Iterator[Rig]:
    """Start a strict and a balanced server per ``workers`` setting, two naive and two floor
    servers, and nginx when installed."""
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
        peer = None
        weed_missing = ensure_weed(install=install_tools)
        if weed_missing is None:
            ports = [free_port() for _ in range(6)]
            peer = stack.enter_context(SeaweedFS(os.path.join(scratch, "weed"), ports))
            with open(os.path.join(www, "small.bin"), "rb") as file:
                peer_put(peer, "/bench/small", file.read())
        else:
            missing["weed"] = weed_missing
        settings = []
        for number, setting in enumerate(workers):
            strict, balanced = start_servers(
                stack,
                (os.path.join(scratch, f"strict-{number}"), "strict"),
                (os.path.join(scratch, f"balanced-{number}"), "balanced"),
                workers=setting,
            )
            idle = MemorySampler(pid_of(strict))
            idle.sample()
            busy = MemorySampler(pid_of(strict))
            settings.append(Setting(setting, strict, balanced, idle=idle, busy=busy))
        yield Rig(
            profile=profile,
            scratch=scratch,
            www=www,
            big_fd=big_fd,
            settings=settings,
            naive_strict=naive_strict,
            naive_balanced=naive_balanced,
            floor_strict=floor_strict,
            floor_balanced=floor_balanced,
            nginx=nginx,
            missing=missing,
            peer=peer,
            peer_version=weed_version() if peer is not None else "?",
        )


def peer_put(
    peer: SeaweedFS,
    path: str,
    body: bytes = b"",
    *,
    fd: int | None = None,
    segments: Sequence[tuple[int, int]] = (),
) -> float:
    """Seconds for one PUT to the peer's filer (``body``, or ``segments`` of ``fd``)."""
    with HttpConnection(peer.port) as connection:
        started = time.perf_counter()
        if fd is None:
            response = connection.request("PUT", path, {}, body)
        else:
            response = connection.upload("PUT", path, {}, fd, segments)
        elapsed = time.perf_counter() - started
    if response.status not in (200, 201):
        raise RuntimeError(f"SeaweedFS PUT {path}: {response.status} {response.body[:300]!r}")
    return elapsed


def store_peer_big(rig: Rig) -> None:
    """The 1 GiB object on the peer, as ``big`` is on our servers (once per run)."""
    if rig.peer is not None and not rig.peer_big_stored:
        peer_put(rig.peer, "/bench/big.bin", fd=rig.big_fd, segments=[(0, rig.profile.big_bytes)])
        rig.peer_big_stored = True


def on_peer(
    spec: LoadSpec, rig: Rig, path: str, query: str = "", *, name: str = "peer"
) -> dict[str, Load]:
    """``{name: load}`` aimed at the peer's filer, or nothing when it did not start."""
    if rig.peer is None:
        return {}
    assert rig.peer.process is not None
    load = replace(spec, port=rig.peer.port, path=path, query=query, headers={})
    return {name: (load, rig.peer.process.pid, None)}


def peer_row(
    rig: Rig,
    label: str,
    values: list[float],
    unit: str,
    peer_values: list[float] | None,
    *,
    fsync: bool = False,
    notes: str = "",
) -> Row:
    """The row against the peer (target >= 1.0x), or one saying why it did not run."""
    if rig.peer is None or peer_values is None:
        return missing_row(f"{label} vs SeaweedFS", rig.missing.get("weed", "SeaweedFS not run"))
    anchor = f"SeaweedFS {rig.peer_version} filer" + (", ?fsync=true" if fsync else "")
    return compare(
        label, values, unit, anchor=anchor, anchor_values=peer_values, target=1.0, notes=notes
    )


def nginx_row(
    rig: Rig,
    label: str,
    values: list[float],
    unit: str,
    nginx_values: list[float] | None,
    *,
    anchor: str,
    target: float,
    notes: str = "",
) -> Row:
    """The row against nginx (``nginx_values``), or a row saying nginx is not installed."""
    if rig.nginx is None or nginx_values is None:
        return missing_row(f"{label} vs nginx", rig.missing.get("nginx", "nginx not run"))
    return compare(
        label,
        values,
        unit,
        anchor=anchor,
        anchor_values=nginx_values,
        target=target,
        notes=notes,
    )


def load_notes(measured: dict[str, list[Measured]]) -> str:
    """Tool and placement, each target's CPU time per request, p99, its requests' split over
    its serving processes (when several answered), and any errors.

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
            + split_note(runs)
            + (f", {errors} ERRORS" if errors else "")
        )
    first = next(iter(measured.values()))[0].result
    return f"{first.tool}{'' if first.cpus is None else f' on CPU {first.cpus}'}; " + "; ".join(
        parts
    )


def split_note(runs: list[Measured]) -> str:
    """``, split 51/49 %``: each serving process's share of the requests over all ``runs``,
    largest first; empty for a single process."""
    totals: dict[int, int] = {}
    for run in runs:
        for pid, count in run.split.items():
            totals[pid] = totals.get(pid, 0) + count
    answered = sum(totals.values())
    if len(totals) < 2 or not answered:
        return ""
    shares = sorted((100 * count / answered for count in totals.values()), reverse=True)
    return ", split " + "/".join(f"{share:.0f}" for share in shares) + " %"


def on_server(spec: LoadSpec, server: ServerProcess, path: str) -> Load:
    """The same load aimed at our server: its port, the object's path, credentials."""
    return (
        replace(spec, port=server.port, path=path, headers=auth_headers(server)),
        pid_of(server),
        metrics_dir(server),
    )
