"""Benchmarks: ``python -m bench`` (``make bench``) prints one markdown table per section.

Sections are modules with ``run() -> list[dict]``: each dict is one table row. This package
holds what the sections written here share: the size profiles (full, ``--quick``, and the
tiny one the smoke test uses), the scratch directory on the repository's disk, interleaved
repeats, and the shape of a row that sets a figure beside its anchor.

Why anchors: these machines are shared and noisy, so a lone MB/s means little. Every figure
is printed next to the same work done by something simple (raw disk write, nginx, a naive
Tornado handler) measured in the same run, interleaved A B A B, and the ratio of the medians
is what a target is set on. See docs/benchmarks.md.

Thread-safety: helpers for a single-threaded script; nothing here keeps state.

May import (docs/architecture.md, "Layers"): ``fsseam``, ``journal``, ``service.config``,
``service.meta``, ``service.auth``, ``service.storage``, ``service.index``,
``service.engine``, ``service.media``, ``service.http``, ``service.procs``, ``service.client``,
``tests``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRATCH = os.path.join(REPO, ".bench-tmp")
"""On the repository's disk, like the servers' data dirs, so anchors write to the same disk."""
KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

Row = dict[str, Any]


@dataclass(frozen=True)
class Profile:
    """Sizes and durations of one bench run: full, ``--quick`` or the smoke test's."""

    name: str
    big_bytes: int
    """Size of the large PUT/GET object and of the multipart upload."""
    repeats: int
    """Interleaved runs of each case; figures are medians over them."""
    load_seconds: float
    """Duration of each load-generator run (wrk rounds it to whole seconds, at least 1)."""
    load_tool: str | None
    """"wrk" or "python"; None: wrk when installed."""
    small_connections: int
    """Concurrent connections of the 4 KiB PUT and GET loads."""
    ranged_connections: int
    part_bytes: int
    memory_bytes: int
    """Size streamed up and down by the memory section."""
    memory_part_bytes: int


FULL = Profile(
    name="full",
    big_bytes=GIB,
    repeats=3,
    load_seconds=5,
    load_tool=None,
    small_connections=64,
    ranged_connections=16,
    part_bytes=8 * MIB,
    memory_bytes=2 * GIB,
    memory_part_bytes=64 * MIB,
)
QUICK = Profile(
    name="quick",
    big_bytes=128 * MIB,
    repeats=1,
    load_seconds=2,
    load_tool=None,
    small_connections=64,
    ranged_connections=16,
    part_bytes=8 * MIB,
    memory_bytes=256 * MIB,
    memory_part_bytes=32 * MIB,
)
SMOKE = Profile(
    name="smoke",
    big_bytes=4 * MIB,
    repeats=1,
    load_seconds=0.3,
    load_tool="python",
    small_connections=4,
    ranged_connections=2,
    part_bytes=MIB,
    memory_bytes=8 * MIB,
    memory_part_bytes=2 * MIB,
)


@contextmanager
def scratch_dir(prefix: str) -> Iterator[str]:
    """A fresh directory under ``SCRATCH``, removed afterwards whatever happens."""
    os.makedirs(SCRATCH, exist_ok=True)
    path = tempfile.mkdtemp(dir=SCRATCH, prefix=prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def make_data_file(path: str, size: int) -> str:
    """Write ``size`` incompressible bytes and fsync them.

    The fsync matters: otherwise the kernel writes this file back during the first measured
    run and steals the disk from it. The pages stay in the page cache, so senders read it
    at memory speed.
    """
    block = os.urandom(16 * MIB)
    with open(path, "wb") as file:
        written = 0
        while written < size:
            piece = block[: min(len(block), size - written)]
            file.write(piece)
            written += len(piece)
        file.flush()
        os.fsync(file.fileno())
    return path


def file_windows(start: int, length: int, file_size: int) -> list[tuple[int, int]]:
    """``(offset, length)`` windows of a data file that spell bytes ``start..start+length``
    of the endless stream made by repeating the file: a 2 GiB body from a 1 GiB file.

    >>> file_windows(3, 10, 8)
    [(3, 5), (0, 5)]
    """
    windows = []
    position, left = start, length
    while left > 0:
        offset = position % file_size
        count = min(left, file_size - offset)
        windows.append((offset, count))
        position += count
        left -= count
    return windows


def interleave(cases: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Run every case once per round, ``repeats`` rounds (A B A B), collecting the results."""
    results: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, case in cases.items():
            results[name].append(case())
    return results


def compare(
    measurement: str,
    values: list[float],
    unit: str,
    *,
    anchor: str | None = None,
    anchor_values: list[float] | None = None,
    target: float | None = None,
    lower_is_better: bool = False,
    notes: str = "",
) -> Row:
    """One table row: the median of ``values`` beside the median of its anchor.

    ``ratio`` is figure / anchor for both kinds of figure (rates and times), and ``target``
    bounds that ratio: from below for rates, from above when ``lower_is_better`` (times).
    """
    value = statistics.median(values)
    anchor_value = statistics.median(anchor_values) if anchor_values else None
    ratio = value / anchor_value if anchor_value else None
    row: Row = {
        "measurement": measurement,
        "value": value,
        "unit": unit,
        "anchor": anchor or "",
        "anchor_value": anchor_value,
        "ratio": ratio,
        "target": "",
        "met": "",
        "runs": values,
        "notes": notes,
    }
    if target is not None:
        row["target"] = f"{'<=' if lower_is_better else '>='} {target:g}x"
        if ratio is None:
            row["met"] = "n/a"
        else:
            met = ratio <= target if lower_is_better else ratio >= target
            row["met"] = "yes" if met else "NO"
    return row


def limit_row(
    measurement: str, value: float, unit: str, limit: float, *, anchor: str, anchor_value: float
) -> Row:
    """A row whose target is an absolute ceiling (memory), with its anchor for reading it."""
    return {
        "measurement": measurement,
        "value": value,
        "unit": unit,
        "anchor": anchor,
        "anchor_value": anchor_value,
        "ratio": None,
        "target": f"< {limit:g} {unit}",
        "met": "yes" if value < limit else "NO",
        "runs": [value],
        "notes": "",
    }


def missing_row(measurement: str, reason: str) -> Row:
    """A row that says why a measurement or its anchor could not run."""
    return {
        "measurement": measurement,
        "value": None,
        "unit": "",
        "anchor": "",
        "anchor_value": None,
        "ratio": None,
        "target": "",
        "met": "",
        "runs": [],
        "notes": reason,
    }
