"""Media memory benchmark: peak RSS of 8 concurrent variant renders of a 49-megapixel PNG.

One fresh server gets a 7000x7000 RGB PNG (a smooth picture with some texture, so it
compresses like a photo rather than like a flat colour), then 8 clients ask at once for 8
different variants of it (widths 800, 850, ... so the variant cache cannot share work). The
resident memory of the server and every process under it (image render workers included) is
sampled every 20 ms; the table gives it idle (before), at its peak, and 3 s after the last
answer, when the memory of the renders should have been given back.

The ceiling is the server's idle RSS plus ``SERVICE_IMAGE_MEMORY_BUDGET`` plus 256 MiB of
headroom (the render processes' own interpreters and the encoders' buffers); "after" must be
back within 128 MiB of idle. See docs/media.md "Memory".

Thread-safety: a script; the 8 requests run on their own threads.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx

from bench import FULL, KIB, MIB, Profile, Row, limit_row, scratch_dir
from bench.server_bench import BUCKET, start_server
from tests.serverproc import ServerProcess

SIDE = 7000
"""49 megapixels, just under the default pixel cap of 50 million."""
CONCURRENT = 8
SAMPLE_SECONDS = 0.02
SETTLE_SECONDS = 5.0
HEADROOM_MIB = 256
AFTER_SLACK_MIB = 128
DEFAULT_BUDGET_MIB = 512


def make_png(path: str) -> str:
    """The 49-megapixel PNG, made once per scratch dir (a few seconds)."""
    from PIL import Image, ImageFilter

    if os.path.exists(path):
        return path
    ramp = Image.linear_gradient("L").resize((SIDE, SIDE))
    noise = Image.effect_noise((SIDE // 8, SIDE // 8), 40).resize((SIDE, SIDE))
    texture = noise.filter(ImageFilter.GaussianBlur(2))
    picture = Image.merge("RGB", (ramp, ramp.rotate(90), texture))
    picture.save(path, format="PNG", compress_level=1)
    return path


def tree_rss_mib(root: int) -> float:
    """Resident memory of ``root`` and all its descendants, in MiB."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    total_kib, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total_kib += int(line.split()[1])
        except OSError:
            continue
    return total_kib * KIB / MIB


class Sampler:
    """Samples ``tree_rss_mib`` on a thread and keeps the peak."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss_mib(self.pid))
            time.sleep(SAMPLE_SECONDS)


def _client(server: ServerProcess) -> httpx.Client:
    return httpx.Client(base_url=server.api, auth=server.auth, timeout=600.0)


def render_all(server: ServerProcess) -> list[int]:
    def one(index: int) -> int:
        width = 800 + 50 * index
        with _client(server) as client:
            got = client.get(f"/buckets/{BUCKET}/images/big.png", params={"width": width})
            return got.status_code

    with ThreadPoolExecutor(CONCURRENT) as pool:
        return list(pool.map(one, range(CONCURRENT)))


def run(profile: Profile = FULL) -> list[Row]:
    budget_mib = int(os.environ.get("SERVICE_IMAGE_MEMORY_BUDGET", DEFAULT_BUDGET_MIB * MIB))
    budget_mib //= MIB
    with scratch_dir("media-") as scratch, ExitStack() as stack:
        png = make_png(os.path.join(scratch, "big.png"))
        server = start_server(stack, os.path.join(scratch, "server"), "balanced")
        assert server.process is not None
        pid = server.process.pid
        with _client(server) as client:
            put = client.put(f"/buckets/{BUCKET}/objects/big.png", content=Path(png).read_bytes())
            put.raise_for_status()
        time.sleep(1.0)
        idle = tree_rss_mib(pid)
        started = time.perf_counter()
        with Sampler(pid) as sampler:
            statuses = render_all(server)
            seconds = time.perf_counter() - started
            time.sleep(SETTLE_SECONDS)
        after = tree_rss_mib(pid)
        if statuses != [200] * CONCURRENT:
            raise RuntimeError(f"variant renders answered {statuses}")
        label = f"{CONCURRENT} concurrent variants of a {SIDE}x{SIDE} PNG"
        peak_row = limit_row(
            f"{label}: peak RSS (server + workers)",
            sampler.peak,
            "MiB",
            idle + budget_mib + HEADROOM_MIB,
            anchor="idle RSS",
            anchor_value=idle,
        )
        peak_row["notes"] = f"all 8 answered in {seconds:.1f} s; budget {budget_mib} MiB"
        after_row = limit_row(
            f"{label}: RSS {SETTLE_SECONDS:g} s after",
            after,
            "MiB",
            idle + AFTER_SLACK_MIB,
            anchor="idle RSS",
            anchor_value=idle,
        )
        return [peak_row, after_row]


if __name__ == "__main__":
    from bench.__main__ import markdown_table

    print(markdown_table(run()))
