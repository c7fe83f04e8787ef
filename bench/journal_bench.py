"""Journal benchmark: group-commit append rates, raw fsync rate, replay rate and memory.

``run()`` measures, in one process and on the disk that holds the repository:

- append rate (records/s) with 1, 16 and 256 concurrent writers, strict and balanced;
- beside it, the raw rate of write+fsync of 100-byte records on the same disk, so the
  journal's numbers can be read against what the disk can do at that moment. Raw and
  journal runs are interleaved (A B A B ...) and each figure is the median of 3 runs,
  because a shared machine's disk speed drifts;
- replay of 1,000,000 small records (open + full ``replay()``), median of 3 subprocesses
  that also report CPU time (the machine may be shared: wall time then includes waiting
  for a core) and peak RSS, next to the RSS of a subprocess that only imports the journal.

Targets: strict with 256 writers >= 20x strict with 1; replay >= 500,000 records/s.
``python bench/journal_bench.py`` prints a markdown table. Takes about a minute.

Thread-safety: a script; runs its own event loops.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from journal import Journal, JournalOptions, RealFileSystem  # noqa: E402
from journal.framing import encode_event  # noqa: E402

SCRATCH = os.path.join(REPO, ".bench-tmp")
RUN_SECONDS = 0.6
REPEATS = 3
WRITERS = (1, 16, 256)
REPLAY_RECORDS = 1_000_000
REPLAY_BATCH = 10_000

_EVENT = {"type": "ObjectStored", "bucket": "photos", "key": "2026/11/img-0001.jpg", "size": 4096}


def _raw_fsync_rate(directory: str) -> float:
    """write+fsync of 100-byte records, one at a time, through the same seam."""
    fs = RealFileSystem()
    file = fs.create(os.path.join(directory, "raw.bin"))
    record = b"r" * 100
    count = 0
    started = time.perf_counter()
    deadline = started + RUN_SECONDS
    try:
        while time.perf_counter() < deadline:
            file.write(record)
            file.fsync()
            count += 1
    finally:
        file.close()
    return count / (time.perf_counter() - started)


async def _append_rate(directory: str, durability: str, writers: int) -> tuple[float, float]:
    """Records/s and mean records per batch with ``writers`` concurrent appenders."""
    journal = Journal.open(directory, JournalOptions(durability=durability))  # type: ignore[arg-type]
    list(journal.replay())
    stop = False

    async def writer() -> int:
        done = 0
        while not stop:
            await journal.append(_EVENT)
            done += 1
        return done

    tasks = [asyncio.create_task(writer()) for _ in range(writers)]
    started = time.perf_counter()
    await asyncio.sleep(RUN_SECONDS)
    stop = True
    counts = await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    stats = journal.stats()
    await journal.close()
    return sum(counts) / elapsed, stats.appends / max(1, stats.batches)


def _build_log(directory: str, records: int) -> None:
    """Write ``records`` small records in large batches through the journal's own writer."""
    journal = Journal.open(directory, JournalOptions(durability="balanced"))
    body = encode_event(_EVENT)
    writer = journal._writer  # bench-only shortcut: 1M single appends would take minutes
    for first in range(1, records + 1, REPLAY_BATCH):
        count = min(REPLAY_BATCH, records - first + 1)
        writer.write_batch(first, [body] * count)
    asyncio.run(journal.close())


_REPLAY_CHILD = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from journal import Journal
started, cpu_started = time.perf_counter(), time.process_time()
journal = Journal.open({directory!r})
count = sum(1 for _ in journal.replay())
elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
print(json.dumps({{"records": count, "seconds": elapsed, "cpu_seconds": cpu,
    "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}}))
"""

_BASELINE_CHILD = """
import json, resource, sys
sys.path.insert(0, {repo!r})
import journal
print(json.dumps({{"maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}}))
"""


def _child(source: str) -> dict[str, Any]:
    output = subprocess.run(
        [sys.executable, "-c", source], check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, Any] = json.loads(output)
    return result


def _replay(scratch: str, repeats: int) -> dict[str, Any]:
    directory = tempfile.mkdtemp(dir=scratch, prefix="replay-")
    _build_log(directory, REPLAY_RECORDS)
    runs = [_child(_REPLAY_CHILD.format(repo=REPO, directory=directory)) for _ in range(repeats)]
    baseline = _child(_BASELINE_CHILD.format(repo=REPO))
    shutil.rmtree(directory)
    assert all(run["records"] == REPLAY_RECORDS for run in runs)
    seconds = statistics.median(run["seconds"] for run in runs)
    cpu_seconds = statistics.median(run["cpu_seconds"] for run in runs)
    return {
        "name": "replay 1,000,000 records",
        "records_per_second": REPLAY_RECORDS / seconds,
        "records_per_cpu_second": REPLAY_RECORDS / cpu_seconds,
        "seconds": seconds,
        "peak_rss_mib": max(run["maxrss_kib"] for run in runs) / 1024,
        "baseline_rss_mib": baseline["maxrss_kib"] / 1024,
    }


def run(profile: Any = None) -> list[dict[str, Any]]:
    """Run every measurement; return one dict per table row (see module docstring).

    ``profile`` (``bench.Profile``, from ``python -m bench``) only sets the number of
    interleaved repeats (``--quick``: 1).
    """
    repeats = getattr(profile, "repeats", REPEATS)
    os.makedirs(SCRATCH, exist_ok=True)
    scratch = tempfile.mkdtemp(dir=SCRATCH, prefix="journal-")
    configs = [(mode, writers) for mode in ("strict", "balanced") for writers in WRITERS]
    raw: list[float] = []
    rates: dict[tuple[str, int], list[float]] = {config: [] for config in configs}
    batch_sizes: dict[tuple[str, int], list[float]] = {config: [] for config in configs}
    try:
        for repeat in range(repeats):
            for mode, writers in configs:
                run_dir = tempfile.mkdtemp(dir=scratch, prefix=f"{repeat}-")
                raw.append(_raw_fsync_rate(run_dir))  # A: the disk right now
                rate, batch = asyncio.run(_append_rate(run_dir, mode, writers))  # B: journal
                rates[mode, writers].append(rate)
                batch_sizes[mode, writers].append(batch)
                shutil.rmtree(run_dir)
        rows: list[dict[str, Any]] = [
            {
                "name": "raw write+fsync, 100-byte records",
                "records_per_second": statistics.median(raw),
            }
        ]
        for mode, writers in configs:
            rows.append(
                {
                    "name": f"append {mode}, {writers} writers",
                    "records_per_second": statistics.median(rates[mode, writers]),
                    "records_per_batch": statistics.median(batch_sizes[mode, writers]),
                }
            )
        rows.append(_replay(scratch, repeats))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


def _verdicts(rows: list[dict[str, Any]]) -> list[str]:
    by_name = {row["name"]: row for row in rows}
    strict_1 = by_name["append strict, 1 writers"]["records_per_second"]
    strict_256 = by_name["append strict, 256 writers"]["records_per_second"]
    ratio = strict_256 / strict_1
    replay_row = by_name["replay 1,000,000 records"]
    replay = replay_row["records_per_second"]
    return [
        f"strict-256 / strict-1 = {ratio:.1f}x "
        f"(target >= 20x: {'met' if ratio >= 20 else 'NOT met'})",
        f"replay = {replay:,.0f} records/s wall-clock "
        f"(target >= 500,000: {'met' if replay >= 500_000 else 'NOT met'}); "
        f"{replay_row['records_per_cpu_second']:,.0f} records per CPU-second",
        f"load average over the last minute at the end: {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} CPUs (other work on the machine slows the wall-clock figures)",
    ]


def _markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| measurement | records/s | records/batch | notes |", "|---|---:|---:|---|"]
    for row in rows:
        batch = row.get("records_per_batch")
        notes = ""
        if "peak_rss_mib" in row:
            notes = (
                f"{row['seconds']:.2f} s incl. open; "
                f"{row['records_per_cpu_second']:,.0f} records per CPU-second; "
                f"peak RSS {row['peak_rss_mib']:.0f} MiB "
                f"(import only: {row['baseline_rss_mib']:.0f} MiB)"
            )
        lines.append(
            f"| {row['name']} | {row['records_per_second']:,.0f} | "
            f"{'' if batch is None else f'{batch:.1f}'} | {notes} |"
        )
    return "\n".join(lines + [""] + [f"- {verdict}" for verdict in _verdicts(rows)])


if __name__ == "__main__":
    print(_markdown(run()))
