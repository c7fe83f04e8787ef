"""The replication bench's rig (``bench.replication_bench``): its servers, the lag probe,
the populated source, bootstrap and restore rounds, and their anchors' copies.

Thread-safety: a script; the lag probe runs two threads of its own during a load.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path

import httpx

from bench import (
    KIB,
    MIB,
    REPO,
    Profile,
    make_data_file,
)
from bench.loadgen import LoadSpec, run_load
from bench.server_rig import (
    BENCH_ENV,
    BUCKET,
    default_processes,
    object_path,
    on_server,
)
from tests.serverproc import ServerProcess

SMALL_BYTES = 4 * KIB
LAG_LIMIT_SECONDS = 1.0
"""Issue 25: lag p99 under the small-PUT load below this."""
PROBE_POLL_SECONDS = 0.005
PROBE_EVERY_SECONDS = 0.05
LAG_GIVE_UP_SECONDS = 600.0
REPLICATION_TIMEOUT = "600"
"""The sync primary's ``SERVICE_REPLICATION_TIMEOUT``: a 1 GiB body travels to the standby
before its PUT is acknowledged, on a loaded machine."""
LOADED = ("none", "async", "sync")
MODES = {"none": "async", "async": "async", "sync": "sync"}
TS = re.compile(r"ts=(\S+)")


def env(**more: str) -> dict[str, str]:
    return {
        "SERVICE_DURABILITY": "strict",
        "SERVICE_WORKERS": str(default_processes()),
        "SERVICE_SCRUB_INTERVAL_DAYS": "3650",
        **BENCH_ENV,
        **more,
    }


def follow(primary: ServerProcess) -> dict[str, str]:
    return {
        "SERVICE_FOLLOW": primary.url,
        "SERVICE_FOLLOW_CREDENTIALS": f"{primary.access_key}:{primary.secret_key}",
    }


def api(server: ServerProcess) -> httpx.Client:
    return httpx.Client(base_url=server.api, auth=server.auth, timeout=600)


def status(server: ServerProcess) -> dict[str, object]:
    with api(server) as client:
        answer = client.get("/replication")
        answer.raise_for_status()
        return dict(answer.json())


def wait_for(what: str, ready: Callable[[], bool], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def caught_up(standby: ServerProcess, primary: ServerProcess) -> None:
    target = int(status(primary)["last_sequence"])  # type: ignore[call-overload]
    wait_for(
        "the standby to catch up",
        lambda: int(status(standby)["applied_sequence"]) >= target,  # type: ignore[call-overload]
    )


def start(server: ServerProcess) -> ServerProcess:
    server.start(timeout=300)
    return server


# -- the servers ----------------------------------------------------------------------------


@contextmanager
def pairs(directory: str) -> Iterator[dict[str, ServerProcess]]:
    """The three loaded primaries (``none``, ``async``, ``sync``), the two standbys
    (``async standby``, ``sync standby``), each primary with bucket ``bench``."""
    root = Path(directory)
    with ExitStack() as stack:
        primaries = {
            name: ServerProcess(
                root / name / "data",
                env_overrides=env(
                    SERVICE_REPLICATION=MODES[name],
                    SERVICE_REPLICATION_TIMEOUT=REPLICATION_TIMEOUT,
                ),
            )
            for name in LOADED
        }
        stack.callback(_stop_all, list(primaries.values()))
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(start, primaries.values()))
        standbys = {
            f"{name} standby": ServerProcess(
                root / f"{name}-standby" / "data", env_overrides=env(**follow(primaries[name]))
            )
            for name in ("async", "sync")
        }
        stack.callback(_stop_all, list(standbys.values()))
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(start, standbys.values()))
        for name in LOADED:
            with api(primaries[name]) as client:
                client.post("/buckets", json={"name": BUCKET}).raise_for_status()
        for name in ("async", "sync"):
            caught_up(standbys[f"{name} standby"], primaries[name])
        yield {**primaries, **standbys}


def _stop_all(servers: list[ServerProcess]) -> None:
    with ThreadPoolExecutor(len(servers)) as pool:
        list(pool.map(lambda server: server.stop(), servers))


# -- lag ------------------------------------------------------------------------------------


class LagProbe:
    """During a load: PUT a fresh object on the primary every ``PROBE_EVERY_SECONDS`` (one
    thread), and poll the standby for the oldest one it does not serve yet (another); every
    lag, from a probe's acknowledgement to the first poll that finds it, in seconds.

    The standby applies records in the journal's order, so once probe k reads there every
    earlier probe does too: polling the oldest pending one finds each at its first poll
    after it became readable. On leaving, the probes stop and the poller waits for the last
    one (the tail of the load's lag counts)."""

    def __init__(self, primary: ServerProcess, standby: ServerProcess) -> None:
        self._primary, self._standby = primary, standby
        self.lags: list[float] = []
        self._pending: list[tuple[str, float]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done_putting = threading.Event()
        self._threads = [
            threading.Thread(target=self._put, daemon=True),
            threading.Thread(target=self._poll, daemon=True),
        ]

    def __enter__(self) -> LagProbe:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _put(self) -> None:
        try:
            with api(self._primary) as primary:
                count = 0
                while not self._stop.wait(PROBE_EVERY_SECONDS):
                    count += 1
                    path = f"/buckets/{BUCKET}/objects/probe-{os.getpid()}-{id(self)}-{count}"
                    primary.put(path, content=b"probe").raise_for_status()
                    with self._lock:
                        self._pending.append((path, time.perf_counter()))
        finally:
            self._done_putting.set()

    def _poll(self) -> None:
        deadline = None
        with api(self._standby) as standby:
            while True:
                with self._lock:
                    oldest = self._pending[0] if self._pending else None
                if oldest is None:
                    if self._done_putting.is_set():
                        return
                    time.sleep(PROBE_POLL_SECONDS)
                    continue
                if standby.head(oldest[0]).status_code == 200:
                    self.lags.append(time.perf_counter() - oldest[1])
                    with self._lock:
                        self._pending.pop(0)
                    continue
                if self._done_putting.is_set():
                    deadline = deadline or time.monotonic() + LAG_GIVE_UP_SECONDS
                    if time.monotonic() > deadline:
                        raise RuntimeError("the standby never served the last probes")
                time.sleep(PROBE_POLL_SECONDS)


def lag_case(
    profile: Profile, spec: LoadSpec, primary: ServerProcess, standby: ServerProcess
) -> tuple[Callable[[], float], list[float]]:
    """An extra case of the interleaved rounds: the PUT load on ``primary`` with the probe
    running; the case returns the round's p99 lag, and every lag lands in the list."""
    lags: list[float] = []
    loaded = on_server(spec, primary, object_path("lag-put"))[0]

    def case() -> float:
        with LagProbe(primary, standby) as probe:
            run_load(loaded, profile.load_tool)
        lags.extend(probe.lags)
        return percentile(probe.lags, 99)

    return case, lags


def percentile(values: list[float], which: int) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[which - 1]


# -- bootstrap and restore ------------------------------------------------------------------


def populate(server: ServerProcess, profile: Profile, directory: str) -> int:
    """``profile.big_bytes`` in 1 MiB objects (at least 4) and small objects; bytes written."""
    big = max(4, profile.big_bytes // MIB)
    small = 50 if profile.name == "smoke" else 2000
    body = make_data_file(os.path.join(directory, "populate.bin"), MIB)
    with open(body, "rb") as file:
        one_mib = file.read()

    def put(number: int) -> int:
        with api(server) as client:
            for each in range(number, big + small, 8):
                data = (
                    one_mib[:-8] + each.to_bytes(8, "big")
                    if each < big
                    else os.urandom(SMALL_BYTES)
                )
                client.put(f"/buckets/{BUCKET}/objects/o{each}", content=data).raise_for_status()
        return 0

    with api(server) as client:
        client.post("/buckets", json={"name": BUCKET}).raise_for_status()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(8)))
    return big * MIB + small * SMALL_BYTES


def tree_bytes(path: str) -> int:
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            full = os.path.join(folder, name)
            if os.path.isfile(full) and not os.path.islink(full):
                total += os.path.getsize(full)
    return total


def copy_tree(source: str, target: str) -> float:
    """Seconds for ``cp -a`` of ``source`` (its files; sockets skipped) and ``sync -f``."""
    started = time.perf_counter()
    subprocess.run(
        ["cp", "-a", source, target], check=False, stderr=subprocess.DEVNULL
    )  # a live data dir's sockets cannot be copied; everything else is
    subprocess.run(["sync", "-f", target], check=True)
    return time.perf_counter() - started


def log_seconds(server: ServerProcess, first: str, last: str) -> float | None:
    """Seconds between the log lines holding ``first`` and ``last`` (their ``ts``)."""
    times = {}
    for line in server.logs().splitlines():
        for marker in (first, last):
            if marker in line and marker not in times and (found := TS.search(line)):
                times[marker] = datetime.fromisoformat(found.group(1).replace("Z", "+00:00"))
    if len(times) < 2:
        return None
    return (times[last] - times[first]).total_seconds()


class Bootstraps:
    """Fresh standbys of ``source``, one per round, each in a new data dir; each is then
    promoted (``promote``: the promotion time), and stopped."""

    def __init__(self, source: ServerProcess, directory: str) -> None:
        self._source, self._directory = source, directory
        self.walls: list[float] = []
        """Seconds from the standby's start to caught up with the source."""
        self.proper: list[float] = []
        """Seconds of the bootstrap itself (its log lines: the snapshot and its payloads)."""
        self.promotions: list[float] = []
        """Seconds from each one's promotion request to its first PUT accepted."""
        self.rounds = 0

    def once(self) -> float:
        """Seconds from the start of a fresh standby until it caught up with the source."""
        self.rounds += 1
        standby = ServerProcess(
            Path(self._directory) / f"boot-{self.rounds}" / "data",
            env_overrides=env(**follow(self._source)),
        )
        started = time.perf_counter()
        try:
            standby.start(timeout=600)
            caught_up(standby, self._source)
            self.walls.append(time.perf_counter() - started)
            proper = log_seconds(standby, "bootstrapping this standby", "bootstrapped at record")
            self.promotions.append(promote(standby))  # after the bootstrap's figures
        finally:
            standby.stop()
        self.proper.append(proper if proper is not None else float("nan"))
        return self.walls[-1]


def restore(archive: str, target: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "service", "restore", "--archive", archive, "--data-dir", target],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"restore failed: {done.stderr.strip()[-500:]}")
    return time.perf_counter() - started


def archived(source: ServerProcess) -> bool:
    got = status(source)
    archive = got.get("archive")
    return isinstance(archive, dict) and archive["archived_sequence"] >= got["last_sequence"]


# -- promotion ------------------------------------------------------------------------------


def promote(standby: ServerProcess) -> float:
    """Seconds from the promotion request to the first PUT the promoted standby accepts."""
    with api(standby) as client:
        started = time.perf_counter()
        client.post("/replication/promote").raise_for_status()
        while client.put(f"/buckets/{BUCKET}/objects/after-promotion", content=b"x").is_error:
            time.sleep(0.01)
        return time.perf_counter() - started


# -- the section ----------------------------------------------------------------------------
