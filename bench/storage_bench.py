"""Payload-store benchmark: a streamed PUT and a multipart join, each beside a plain anchor.

``run()`` measures, in one process and on the disk that holds the repository, 1 GiB each:

- PUT: ``StagingUpload`` fed 256 KiB chunks from the event loop, then ``finish`` and
  ``promote``, in strict durability (SHA-256, data fsync, rename, directory fsync), with the
  default 1 MiB coalescing and without coalescing (one executor job per 256 KiB chunk),
  and once more with coalescing but no early writeback (the disk gets the pages only at the
  final fsync), to show what ``WRITEBACK_BYTES`` buys;
- anchors for it, with plain ``os`` calls: write + fsync of the same chunks, and the same
  with SHA-256 of every chunk on the same thread (the least any checksummed PUT must do);
- join: ``PayloadStore.join`` of 128 parts of 8 MiB (strict: ends with an fsync);
- its anchor: a plain copy of a 1 GiB file (``shutil.copyfile``, as ``cp``) plus fsync.

All runs are interleaved (A B C ... then rotated: C D ... A B ...) and each figure is the
median of 3, because a shared machine's disk speed drifts. Outputs are removed untimed, and
the removal committed before the next case starts. Sources are in the page cache, as they are for a
join right after its parts were uploaded. ``python bench/storage_bench.py`` prints a
markdown table; it takes about a minute and needs about 4 GiB of free disk.

Thread-safety: a script; runs its own event loops.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from fsseam.fs import RealFileSystem  # noqa: E402
from service.storage import PayloadStore, StagingUpload, run_blocking  # noqa: E402

SCRATCH = os.path.join(REPO, ".bench-tmp")
MIB = 1024 * 1024
SIZE = 1024 * MIB
CHUNK = 256 * 1024
PART = 8 * MIB
REPEATS = 3
DISTINCT_CHUNKS = 16


async def _pipeline_put(
    store: PayloadStore, executor: ThreadPoolExecutor, chunks: list[bytes], coalesce: int
) -> float:
    started = time.perf_counter()
    upload = await StagingUpload.start(store, executor, coalesce_bytes=coalesce)
    for index in range(SIZE // CHUNK):
        await upload.write(chunks[index % len(chunks)])
    staged = await upload.finish()
    payload_id = store.new_payload_id()
    await run_blocking(executor, store.promote, staged, payload_id)
    elapsed = time.perf_counter() - started
    await run_blocking(executor, store.remove, [payload_id])
    _settle(store.layout.payload_dir(payload_id))
    return elapsed


def _raw_write_fsync(directory: str, chunks: list[bytes], *, hashed: bool) -> float:
    path = os.path.join(directory, "raw.bin")
    started = time.perf_counter()
    digest = hashlib.sha256()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        for index in range(SIZE // CHUNK):
            view = memoryview(chunks[index % len(chunks)])
            if hashed:
                digest.update(view)
            while view:
                view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - started
    os.unlink(path)
    _settle(directory)
    return elapsed


def _join(store: PayloadStore, part_ids: list[str]) -> float:
    started = time.perf_counter()
    staged = store.join(part_ids)
    elapsed = time.perf_counter() - started
    os.unlink(staged.path)
    _settle(store.layout.staging_dir)
    return elapsed


def _copy_fsync(source: str, directory: str) -> float:
    target = os.path.join(directory, "copy.bin")
    started = time.perf_counter()
    shutil.copyfile(source, target)
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - started
    os.unlink(target)
    _settle(directory)
    return elapsed


def _settle(directory: str) -> None:
    """Commit the last unlink now, untimed, so its cost (on a disk mounted with ``discard``,
    trimming 1 GiB) is not charged to whichever case runs next."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _prepare_parts(store: PayloadStore, directory: str) -> tuple[list[str], str]:
    """128 part payloads of 8 MiB, and one 1 GiB file holding the same bytes."""
    part_ids = []
    whole = os.path.join(directory, "whole.bin")
    with open(whole, "wb") as whole_file:
        for _ in range(SIZE // PART):
            data = os.urandom(PART)
            staging = store.create_staging()
            staging.write(data)
            payload_id = store.new_payload_id()
            store.promote(staging.finish(), payload_id)
            part_ids.append(payload_id)
            whole_file.write(data)
        os.fsync(whole_file.fileno())
    return part_ids, whole


def run() -> list[dict[str, Any]]:
    """Run every measurement; return one dict per table row (see module docstring)."""
    os.makedirs(SCRATCH, exist_ok=True)
    scratch = tempfile.mkdtemp(dir=SCRATCH, prefix="storage-")
    chunks = [os.urandom(CHUNK) for _ in range(DISTINCT_CHUNKS)]
    try:
        store = PayloadStore(
            os.path.join(scratch, "data"), fs=RealFileSystem(), durability="strict"
        )
        late_store = PayloadStore(
            os.path.join(scratch, "data-late"),
            fs=RealFileSystem(),
            durability="strict",
            writeback_bytes=0,
        )
        part_ids, whole = _prepare_parts(store, scratch)
        with ThreadPoolExecutor(max_workers=8) as executor:
            cases: dict[str, Callable[[], float]] = {
                "put": lambda: asyncio.run(_pipeline_put(store, executor, chunks, MIB)),
                "put_uncoalesced": lambda: asyncio.run(
                    _pipeline_put(store, executor, chunks, CHUNK)
                ),
                "put_late_writeback": lambda: asyncio.run(
                    _pipeline_put(late_store, executor, chunks, MIB)
                ),
                "raw": lambda: _raw_write_fsync(scratch, chunks, hashed=False),
                "raw_hashed": lambda: _raw_write_fsync(scratch, chunks, hashed=True),
                "join": lambda: _join(store, part_ids),
                "copy": lambda: _copy_fsync(whole, scratch),
            }
            seconds: dict[str, list[float]] = {name: [] for name in cases}
            names = list(cases)
            for repeat in range(REPEATS):
                # Rotate the order so that no case always follows the same neighbour.
                shift = repeat * 2 % len(names)
                for name in names[shift:] + names[:shift]:
                    seconds[name].append(cases[name]())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    median = {name: statistics.median(values) for name, values in seconds.items()}

    def row(name: str, label: str, anchor: str | None) -> dict[str, Any]:
        return {
            "name": label,
            "seconds": median[name],
            "mib_per_second": SIZE / MIB / median[name],
            "runs": seconds[name],
            "anchor": anchor,
            "ratio": None if anchor is None else median[name] / median[anchor],
        }

    return [
        row("raw", "raw write+fsync, 256 KiB chunks (anchor)", None),
        row("raw_hashed", "raw write+SHA-256+fsync, 256 KiB chunks", "raw"),
        row("put", "pipeline PUT strict, 256 KiB chunks, 1 MiB batches", "raw"),
        row("put_uncoalesced", "pipeline PUT strict, 256 KiB chunks, no coalescing", "raw"),
        row(
            "put_late_writeback",
            "pipeline PUT strict, 1 MiB batches, no early writeback",
            "raw",
        ),
        row("copy", "plain file copy + fsync (anchor)", None),
        row("join", "join 128 x 8 MiB parts, strict", "copy"),
    ]


def _markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| measurement (1 GiB) | median s | MiB/s | runs (s) | time vs anchor |",
        "|---|---:|---:|---|---:|",
    ]
    for row in rows:
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        runs = ", ".join(f"{value:.2f}" for value in row["runs"])
        lines.append(
            f"| {row['name']} | {row['seconds']:.2f} | {row['mib_per_second']:,.0f} | "
            f"{runs} | {ratio} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(_markdown(run()))
