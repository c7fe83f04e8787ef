"""What a standby costs and how fast it copies (issue 25): lag, sync and async beside no
standby, bootstrap beside ``cp -a``, restore beside a copy of the same archive; all in one
run, interleaved A B A B, medians reported.

Servers, all strict on this machine's default processes:

- three primaries under load: ``none`` (no standby), ``async`` and ``sync``
  (``SERVICE_REPLICATION=sync``, its timeout raised so a big body is never refused), each of
  the last two followed by its own standby;
- a ``source`` primary with an archive (``SERVICE_ARCHIVE``), populated with big and small
  objects, that fresh standbys bootstrap from and whose archive is restored.

Figures:

- the 4 KiB PUT load (the server bench's, ``bench.server_rig``) on each of the three primaries:
  requests/s and the primary's CPU µs per request, sync and async each beside ``none``
  (target: sync >= 0.7x without a standby);
- lag under that load: while it runs on the ``async`` primary, a probe PUTs one object after
  another and times each from its acknowledgement on the primary to its first 200 on the
  standby (polled every ``PROBE_POLL_SECONDS``): p50 and p99 over every probe of every round
  (target: p99 < 1 s);
- one big PUT (``profile.big_bytes``: 1 GiB in the full profile) on each primary, MB/s;
- bootstrap: a fresh standby of ``source`` (a new data dir each round, so its writes go to
  fresh blocks), MB/s of the source's data dir, timed from the standby's own log lines
  (bootstrap start to end: the signing secret, snapshot and every payload, verified and
  fsynced), beside ``cp -a`` of the same data dir to a new directory and a ``sync -f``
  (target >= 0.8x); the process start and the index build are in the notes;
- restore: ``python -m service restore`` of the source's archive into a new data dir (the
  whole process, start included) beside ``cp -a`` of the same archive and a ``sync -f``;
- promotion: only when the server has the route (``/api/v1/replication/promote``); the time
  from the request to the first PUT the promoted standby accepts.

Thread-safety: a script; the lag probe runs on its own thread during a load.
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
    FULL,
    KIB,
    MIB,
    REPO,
    Profile,
    Row,
    compare,
    make_data_file,
    missing_row,
    scratch_dir,
)
from bench.loadgen import LoadSpec, run_load
from bench.server_rig import (
    BENCH_ENV,
    BUCKET,
    cpu_per_request,
    default_processes,
    interleaved_loads,
    load_notes,
    object_path,
    on_server,
    put_from_file,
    rates,
    size_label,
)
from tests.serverproc import ServerProcess

SMALL_BYTES = 4 * KIB
SYNC_TARGET = 0.7
BOOTSTRAP_TARGET = 0.8
LAG_LIMIT_SECONDS = 1.0
PROBE_POLL_SECONDS = 0.005
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
    """On its own thread: PUT a fresh object on the primary, then poll the standby until it
    serves it; every lag in seconds."""

    def __init__(self, primary: ServerProcess, standby: ServerProcess) -> None:
        self._primary, self._standby = primary, standby
        self.lags: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._count = 0

    def __enter__(self) -> LagProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with api(self._primary) as primary, api(self._standby) as standby:
            while not self._stop.is_set():
                self._count += 1
                path = f"/buckets/{BUCKET}/objects/probe-{os.getpid()}-{self._count}"
                primary.put(path, content=b"probe").raise_for_status()
                acknowledged = time.perf_counter()
                while standby.head(path).status_code != 200:
                    time.sleep(PROBE_POLL_SECONDS)
                self.lags.append(time.perf_counter() - acknowledged)


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
    """Fresh standbys of ``source``, one per round, each in a new data dir."""

    def __init__(self, source: ServerProcess, directory: str) -> None:
        self._source, self._directory = source, directory
        self.walls: list[float] = []
        self.seconds: list[float] = []
        self.rounds = 0

    def once(self) -> float:
        """Seconds of the bootstrap proper (its log lines); the whole start in ``walls``."""
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
        finally:
            standby.stop()
        self.seconds.append(proper if proper is not None else self.walls[-1])
        return self.seconds[-1]


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


def promotion_built() -> bool:
    """Whether the server has the promotion route (built after this section was)."""
    return "/replication/promote" in (Path(REPO) / "service" / "app.py").read_text()


def promote(standby: ServerProcess) -> float:
    """Seconds from the promotion request to the first PUT the promoted standby accepts."""
    with api(standby) as client:
        started = time.perf_counter()
        client.post("/replication/promote").raise_for_status()
        while client.put(f"/buckets/{BUCKET}/objects/after-promotion", content=b"x").is_error:
            time.sleep(0.01)
        return time.perf_counter() - started


# -- the section ----------------------------------------------------------------------------


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
    with scratch_dir("replication-") as directory, ExitStack() as stack:
        big = make_data_file(os.path.join(directory, "big.bin"), profile.big_bytes)
        big_fd = os.open(big, os.O_RDONLY)
        stack.callback(os.close, big_fd)
        servers = stack.enter_context(pairs(directory))
        source = ServerProcess(
            Path(directory) / "source" / "data",
            env_overrides=env(SERVICE_ARCHIVE=os.path.join(directory, "archive")),
        )
        stack.callback(source.stop)
        start(source)
        written = populate(source, profile, directory)
        wait_for("the archive to catch up", lambda: archived(source))
        source_dir = str(source.data_dir)
        archive = os.path.join(directory, "archive")

        loads = {name: on_server(put, servers[name], object_path(f"put-{name}")) for name in LOADED}
        lag, lags = lag_case(profile, put, servers["async"], servers["async standby"])
        bigs: dict[str, list[float]] = {name: [] for name in LOADED}

        def big_put(name: str) -> Callable[[], float]:
            def case() -> float:
                key = f"big-{name}-{len(bigs[name])}"
                seconds = put_from_file(servers[name], key, big_fd, [(0, profile.big_bytes)])
                bigs[name].append(profile.big_bytes / seconds / 1e6)
                return bigs[name][-1]

            return case

        boots = Bootstraps(source, directory)
        copies: list[float] = []
        restores: list[float] = []
        archive_copies: list[float] = []
        counter = iter(range(1_000_000))

        def copy_case() -> float:
            copies.append(copy_tree(source_dir, os.path.join(directory, f"cp-{next(counter)}")))
            return copies[-1]

        def restore_case() -> float:
            target = os.path.join(directory, f"restored-{next(counter)}")
            restores.append(restore(archive, target))
            return restores[-1]

        def archive_copy_case() -> float:
            target = os.path.join(directory, f"archive-copy-{next(counter)}")
            archive_copies.append(copy_tree(archive, target))
            return archive_copies[-1]

        extra = {
            "lag": lag,
            **{f"big {name}": big_put(name) for name in LOADED},
            "bootstrap": boots.once,
            "cp -a": copy_case,
            "restore": restore_case,
            "cp -a archive": archive_copy_case,
        }
        runs = interleaved_loads(profile, loads, extra)
        data_bytes = tree_bytes(source_dir)
        archive_bytes = tree_bytes(archive)
        promotion = promote(servers["async standby"]) if promotion_built() else None

    rows: list[Row] = []
    for name in ("sync", "async"):
        notes = load_notes({name: runs[name], "none": runs["none"]})
        rows.append(
            compare(
                f"4 KiB PUT, strict, {name} standby, {connections} conns",
                rates(runs[name]),
                "requests/s",
                anchor="the same, no standby",
                anchor_values=rates(runs["none"]),
                target=SYNC_TARGET if name == "sync" else None,
                notes=notes,
            )
        )
        rows.append(
            compare(
                f"CPU per request on the primary, 4 KiB PUT, {name} standby",
                cpu_per_request(runs[name]),
                "µs",
                anchor="the same, no standby",
                anchor_values=cpu_per_request(runs["none"]),
                lower_is_better=True,
            )
        )
    put_p50 = statistics.median(run.result.p50_ms for run in runs["async"]) / 1000
    lag_note = f"{len(lags)} probes, polled every {PROBE_POLL_SECONDS * 1000:g} ms"
    rows.append(
        {
            **compare(
                f"lag p50, acknowledged on the primary -> readable on the standby, "
                f"async, under the 4 KiB PUT load, {connections} conns",
                [percentile(lags, 50)],
                "s",
                anchor="the load's PUT p50 latency on the primary",
                anchor_values=[put_p50],
            ),
            "notes": lag_note,
        }
    )
    p99 = percentile(lags, 99)
    rows.append(
        {
            "measurement": "lag p99, the same",
            "value": p99,
            "unit": "s",
            "anchor": "",
            "anchor_value": None,
            "ratio": None,
            "target": f"< {LAG_LIMIT_SECONDS:g} s",
            "met": "yes" if p99 < LAG_LIMIT_SECONDS else "NO",
            "runs": [percentile(lags, 99)],
            "notes": lag_note,
        }
    )
    label = size_label(profile.big_bytes)
    for name in ("sync", "async"):
        rows.append(
            compare(
                f"{label} PUT, strict, {name} standby",
                bigs[name],
                "MB/s",
                anchor="the same, no standby",
                anchor_values=bigs["none"],
                notes="sync: acknowledged once the standby holds the body, fsynced"
                if name == "sync"
                else "",
            )
        )
    mb = data_bytes / 1e6
    rows.append(
        compare(
            f"bootstrap of a fresh standby, {mb:,.0f} MB data dir ({written / 1e6:,.0f} MB "
            "of objects)",
            [mb / seconds for seconds in boots.seconds],
            "MB/s",
            anchor="cp -a of the same data dir + sync -f, to a new directory",
            anchor_values=[mb / seconds for seconds in copies],
            target=BOOTSTRAP_TARGET,
            notes="timed by the standby's log (bootstrap start to end); process start to "
            f"caught up: {statistics.median(boots.walls):.1f} s median",
        )
    )
    amb = archive_bytes / 1e6
    rows.append(
        compare(
            f"restore of the archive ({amb:,.0f} MB), python -m service restore",
            [amb / seconds for seconds in restores],
            "MB/s",
            anchor="cp -a of the same archive + sync -f, to a new directory",
            anchor_values=[amb / seconds for seconds in archive_copies],
            notes="the whole command, its interpreter's start included",
        )
    )
    if promotion is None:
        rows.append(missing_row("promotion time", "promotion is not built on this branch yet"))
    else:
        rows.append(
            {
                **missing_row("promotion time, request to the first PUT accepted", ""),
                "value": promotion,
                "unit": "s",
                "target": "< 2 s",
                "met": "yes" if promotion < 2 else "NO",
                "runs": [promotion],
            }
        )
    return rows
