"""Scale benchmark: one bucket of N objects, this code beside the in-memory design (issue 12).

``run()`` populates N objects quickly, in process, through the engine's own commit path
(ObjectStored events from 2,048 committers, each awaiting its next commit as soon as the
last returned, in balanced mode, so group commit batches them and no fsync is paid per
batch; the payload ids name no file and no payload is written: HEAD and listings read
metadata only, and the disk holds only metadata). Then, over HTTP, for this tree (object
versions in the LMDB index) and, up to ``ANCHOR_LIMIT`` objects, for the in-memory design
(the tree at ``ANCHOR_COMMIT``, extracted with ``git archive``, on a data dir of the same N
objects that its own engine committed, ``bench/scale_anchor_populate.py``: it cannot read
this tree's snapshots), one after the other:

- start -> healthy after a clean stop, and after a SIGKILL;
- RSS and anonymous RSS after start (``/proc/<pid>/status`` VmRSS, RssAnon);
- a 1,000-key listing page at the start, middle and end of the bucket (median wall time of
  10, and the server's CPU time per request: what the page costs on a quiet core; the
  page after a key is asked with the contract's cursor), a page of one directory in the
  middle (prefix ``dNNNNN/`` and delimiter ``/``: its 1,000 keys) and a page of the top
  level with the delimiter alone (1,000 common prefixes, each found by one seek);
- 4 KiB GET requests/s of one real object (16 connections; the version lookup is the part
  that differs, and small GETs are where its cost would show), and HEAD requests/s of a
  populated key in the middle of the bucket (metadata only: the lookup is all it does;
  driven by the Python load generator, as wrk cannot read HEAD answers, so the figure is
  bounded by the generator too, equally for both designs);
- and the index's bytes on disk per object;
- then, for this tree, a start with the index deleted: it rebuilds the index from the
  journal's snapshot (the populate ends with one, as a server writes one every
  ``snapshot_every`` records), streamed, and its peak anonymous RSS, sampled every 20 ms,
  shows whether the rebuild's memory grows with N;
- beside them, this tree's start and memory on an empty data dir (the floor: a process
  that imports, binds and opens an empty journal and index).

N: 1,000,000 in the full profile, 100,000 in ``--quick``, 2,000 in the smoke test, or
``--objects N``. ``--keep DIR`` populates into DIR and keeps it (``--populate-only``: and
measures nothing), ``--reuse DIR`` measures DIR again without populating (for a 10 M
bucket, whose populate takes tens of minutes, measured again on a quiet machine:
docs/benchmarks.md). Targets (issue 12): start <= 2 s and anonymous RSS <= 100 MiB at
10 M, index <= 300 bytes/object, listing page <= 20 ms.

Thread-safety: a script.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

from bench import REPO, Profile, Row, scratch_dir
from bench.loadgen import LoadSpec, basic_auth, run_load
from bench.scale_objects import (
    BUCKET,
    CONCURRENT_COMMITS,
    POPULATE_SETTINGS,
    bucket_fields,
    object_fields,
    object_key,
)
from service.config import Config
from service.engine.core import Engine
from service.engine.journaled import JournalCommitter, journaled_engine
from service.http.bucket_handlers import encode_cursor
from service.index.opening import INDEX_DIRNAME
from service.meta import legacy_bucket_id, records
from tests.serverproc import ServerProcess

SIZES = {"full": 1_000_000, "quick": 100_000, "smoke": 2_000}
ANCHOR_COMMIT = "8c42459"
"""The last commit before the index: the in-memory design."""
ANCHOR_LIMIT = 1_000_000
"""The in-memory design is measured up to this N only (about 1.3 KB of RAM per object and
tens of seconds per start: 13 GB at 10 M); above it the empty data dir is the anchor."""
MARKER = "scale-bench.json"
"""In a kept directory: its N and how long its populate took (``--keep``/``--reuse``)."""
REBUILD_TIMEOUT = 3600.0
"""Seconds a start that rebuilds the index may take (10 M objects on a busy machine)."""
PAGE_REPEATS = 10
"""Requests of each listing page measured."""
PROBE_KEY = "probe-4k"
"""A real 4 KiB object (the populated ones name no payload file) for the GET load."""


async def _populate(data_dir: str, count: int) -> None:
    """Commit ``count`` ObjectStored events through the engine (balanced mode).

    ``CONCURRENT_COMMITS`` committers each await their next commit as soon as the last one
    returned, so the journal always has a full window waiting to join its next group-commit
    batch (one journal batch and one index transaction per batch) and no batch waits for the
    slowest commit of the previous one; the committers draw their objects from one shared
    counter, so the journal holds them in key order. The cycle collector's thresholds are
    raised while it runs: the engine's commit path makes no garbage cycles worth tracing
    at every 700 allocations (the default), and the whole run is one short-lived process.
    """
    engine, journal = _engine(data_dir)
    await engine.start()
    await engine.commit(
        # Any well-shaped identity will do.
        records.bucket_created(**bucket_fields(), bucket_id=legacy_bucket_id(BUCKET, 1))
    )
    numbers = iter(range(count))

    async def committer() -> None:
        for i in numbers:
            await engine.commit(records.object_stored(**object_fields(i)))

    thresholds = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    try:
        await asyncio.gather(*(committer() for _ in range(CONCURRENT_COMMITS)))
    finally:
        gc.set_threshold(*thresholds)
    await journal.snapshot()  # as a server does every ``snapshot_every`` records
    await engine.stop()


def _anchor_data_dir(anchor: Path, scratch: str, count: int) -> Path:
    """A data dir of ``count`` objects populated by the in-memory design's own engine
    (``bench/scale_anchor_populate.py``: it cannot read this tree's snapshots)."""
    data_dir = Path(scratch) / "in-memory-data"
    subprocess.run(
        [
            sys.executable,
            str(Path(REPO) / "bench" / "scale_anchor_populate.py"),
            str(data_dir),
            str(count),
        ],
        check=True,
        env={**os.environ, "PYTHONPATH": str(anchor)},
        capture_output=True,
    )
    return data_dir


def _engine(data_dir: str) -> tuple[Engine, JournalCommitter]:
    """The populate's engine: balanced, no GC pass and no snapshot of its own accord."""
    return journaled_engine(Config(data_dir=data_dir, **POPULATE_SETTINGS))


async def _snapshot(data_dir: str) -> None:
    """Write a journal snapshot of a populated data dir (one kept before populates took
    one), so that a rebuild of its index streams a snapshot of every object."""
    engine, journal = _engine(data_dir)
    await engine.start()
    await journal.snapshot()
    await engine.stop()


class TreeServer(ServerProcess):
    """A server started from another source tree (``root``) on the same data dir."""

    root: Path = Path(REPO)

    def start(self, timeout: float = 600.0, extra_env: Mapping[str, str] | None = None) -> None:
        self.starts += 1
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-server-{self.starts}.log"
        env = {**self.environment(), **(extra_env or {})}
        env["PYTHONPATH"] = str(self.root)
        with self.log_path.open("wb") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "service"],
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=str(self.root),
            )
        self.wait_ready(timeout)


def _memory(pid: int) -> tuple[float, float]:
    """(RSS, anonymous RSS) in MiB."""
    values: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "RssAnon"):
                values[name] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["RssAnon"]


def _timed_start(server: TreeServer, timeout: float = 600.0) -> float:
    started = time.perf_counter()
    server.start(timeout)
    return time.perf_counter() - started


def _cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far (``/proc/<pid>/stat``, clock ticks)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _page_ms(server: TreeServer, client: httpx.Client, **query: str) -> tuple[float, float]:
    """One 1,000-entry listing page, asked ``PAGE_REPEATS`` times: the median wall time
    and the server's mean CPU time per request, in ms (the CPU time is what the page costs
    on a quiet core; the wall time adds the load of the machine)."""
    assert server.process is not None
    params = {"limit": "1000", **query}
    times = []
    cpu_before = _cpu_seconds(server.process.pid)
    for _ in range(PAGE_REPEATS):
        started = time.perf_counter()
        response = client.get(f"{server.api}/buckets/{BUCKET}/objects", params=params)
        times.append((time.perf_counter() - started) * 1000)
        page = response.json() if response.status_code == 200 else {}
        if not (page.get("objects") or page.get("common_prefixes")):
            raise RuntimeError(f"listing failed: {response.status_code} {response.text[:200]}")
    cpu = (_cpu_seconds(server.process.pid) - cpu_before) * 1000 / PAGE_REPEATS
    return statistics.median(times), cpu


def _disk_bytes(path: Path) -> int:
    return sum(entry.stat().st_blocks * 512 for entry in path.rglob("*") if entry.is_file())


def measure(
    root: Path, data_dir: Path, count: int, seconds: float, *, rebuild: bool = False
) -> dict[str, float]:
    server = TreeServer(data_dir)
    server.root = root
    figures: dict[str, float] = {}
    _timed_start(server)  # the first start after populating bootstraps the admin user
    server.stop()
    figures["start after clean stop, s"] = _timed_start(server)
    assert server.process is not None
    figures["RSS, MiB"], figures["anonymous RSS, MiB"] = _memory(server.process.pid)
    with httpx.Client(auth=server.auth, timeout=60.0) as client:
        middle = object_key(count // 2).partition("/")[0] + "/"
        pages: dict[str, dict[str, str]] = {
            "1,000-key page at the start": {},
            "1,000-key page at the middle": {"cursor": encode_cursor(object_key(count // 2))},
            "1,000-key page at the end": {"cursor": encode_cursor(object_key(count - 1001))},
            "prefix + delimiter page (a middle directory)": {"prefix": middle, "delimiter": "/"},
            "delimiter-only page (1,000 common prefixes)": {"delimiter": "/"},
        }
        for label, query in pages.items():
            wall, cpu = _page_ms(server, client, **query)
            figures[f"{label}, ms"] = wall
            figures[f"{label.replace('page', 'page: server CPU', 1)}, ms"] = cpu
        probe = f"{server.api}/buckets/{BUCKET}/objects/{PROBE_KEY}"
        if client.put(probe, content=b"p" * 4096).status_code != 200:
            raise RuntimeError("PUT of the probe object failed")
    spec = LoadSpec(
        port=server.port,
        path=f"/api/v1/buckets/{BUCKET}/objects/{PROBE_KEY}",
        headers=basic_auth(*server.auth),
        connections=16,
        seconds=seconds,
    )
    result = run_load(spec)
    if result.errors:
        raise RuntimeError(f"{result.errors} errors in the GET load")
    figures["4 KiB GET, requests/s"] = result.requests / result.seconds
    head = replace(
        spec, method="HEAD", path=f"/api/v1/buckets/{BUCKET}/objects/{object_key(count // 2)}"
    )
    result = run_load(head, tool="python")  # wrk waits for a body after a HEAD's headers
    if result.errors:
        raise RuntimeError(f"{result.errors} errors in the HEAD load")
    figures["HEAD of a populated key (metadata only), requests/s"] = (
        result.requests / result.seconds
    )
    server.kill()
    figures["start after SIGKILL, s"] = _timed_start(server)
    server.stop()
    if rebuild:
        figures.update(_rebuild(server, data_dir))
    return figures


def _rebuild(server: TreeServer, data_dir: Path) -> dict[str, float]:
    """Start with the index deleted: the start rebuilds it from the journal's snapshot
    (streamed) and the records after it. Its time, and the peak anonymous RSS sampled
    every 20 ms while it runs."""
    shutil.rmtree(data_dir / INDEX_DIRNAME)
    peak = 0.0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.02):
            process = server.process
            if process is not None and process.poll() is None:
                with contextlib.suppress(OSError, KeyError):  # gone, or not exec'd yet
                    peak = max(peak, _memory(process.pid)[1])

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        seconds = _timed_start(server, REBUILD_TIMEOUT)
    finally:
        done.set()
        sampler.join()
    server.stop()
    return {
        "start rebuilding the deleted index, s": seconds,
        "peak anonymous RSS while rebuilding, MiB": peak,
    }


def empty_data_dir(data_dir: Path) -> dict[str, float]:
    """The floor: this tree's start and memory on an empty data dir (admin bootstrapped)."""
    server = TreeServer(data_dir)
    _timed_start(server)  # the first start bootstraps the admin user
    server.stop()
    figures = {"start after clean stop, s": _timed_start(server)}
    assert server.process is not None
    figures["RSS, MiB"], figures["anonymous RSS, MiB"] = _memory(server.process.pid)
    server.stop()
    return figures


@dataclass(frozen=True)
class ScaleOptions:
    """How ``python -m bench --only scale`` was asked to run (all optional)."""

    objects: int | None = None
    """N (default: by profile, ``SIZES``)."""
    keep: Path | None = None
    """Populate into this directory (new or empty) and keep it, for ``reuse`` later."""
    reuse: Path | None = None
    """Measure on a directory an earlier ``keep`` populated; populate nothing."""
    populate_only: bool = False
    """With ``keep``: stop after populating (measure later with ``reuse``)."""
    rebuild: bool = True
    """Measure a start that rebuilds the deleted index (minutes at 10 M on a busy machine)."""


def _populated(scale: ScaleOptions, default: int, scratch: Path) -> tuple[Path, int, float, str]:
    """The data dir to measure, its N, the populate's seconds and where they come from."""
    if scale.reuse is not None:
        marker = scale.reuse / MARKER
        if not marker.is_file():
            raise RuntimeError(f"{scale.reuse} was not populated by --keep (no {MARKER})")
        kept = json.loads(marker.read_text())
        data_dir = scale.reuse / "data"
        if scale.rebuild and not any((data_dir / "journal").glob("snapshot-*.snap")):
            asyncio.run(_snapshot(str(data_dir)))
        return data_dir, kept["objects"], kept["populate_seconds"], "an earlier run"
    count = scale.objects or default
    base = scale.keep if scale.keep is not None else scratch
    if scale.keep is not None and scale.keep.exists() and any(scale.keep.iterdir()):
        raise RuntimeError(f"{scale.keep} is not empty (measure it again with --reuse)")
    data_dir = base / "data"
    started = time.perf_counter()
    asyncio.run(_populate(str(data_dir), count))
    seconds = time.perf_counter() - started
    (base / MARKER).write_text(json.dumps({"objects": count, "populate_seconds": seconds}))
    return data_dir, count, seconds, "in process"


def run(profile: Profile, scale: ScaleOptions | None = None) -> list[Row]:
    scale = scale or ScaleOptions()
    with scratch_dir("scale-") as scratch:
        data_dir, count, populate_seconds, populated_by = _populated(
            scale, SIZES.get(profile.name, SIZES["quick"]), Path(scratch)
        )
        index_bytes = _disk_bytes(data_dir / INDEX_DIRNAME)
        if scale.populate_only:
            return [
                {
                    "measurement": f"populate {count:,} objects",
                    "index": populate_seconds,
                    "unit": "s",
                },
                {"measurement": "index bytes per object", "index": index_bytes / count},
            ]
        empty = empty_data_dir(Path(scratch) / "empty")
        ours = measure(Path(REPO), data_dir, count, profile.load_seconds, rebuild=scale.rebuild)
        theirs: dict[str, float] = {}
        if count <= ANCHOR_LIMIT:
            anchor = Path(scratch) / "in-memory-tree"
            anchor.mkdir()
            archive = subprocess.run(
                ["git", "-C", REPO, "archive", ANCHOR_COMMIT, "service", "journal", "fsseam"],
                check=True,
                capture_output=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(anchor)], input=archive, check=True)
            theirs = measure(
                anchor, _anchor_data_dir(anchor, scratch, count), count, profile.load_seconds
            )
    rows: list[Row] = [
        {
            "measurement": f"populate {count:,} objects ({populated_by})",
            "index": populate_seconds,
            "in-memory": None,
            "empty data dir": None,
            "unit": "s",
        },
        {
            "measurement": "index bytes per object",
            "index": index_bytes / count,
            "in-memory": None,
            "empty data dir": None,
            "unit": "bytes",
        },
    ]
    for name, value in ours.items():
        label, _, unit = name.rpartition(", ")
        rows.append(
            {
                "measurement": f"{label}, {count:,} objects",
                "index": value,
                "in-memory": theirs.get(name),
                "empty data dir": empty.get(name),
                "unit": unit,
            }
        )
    return rows
