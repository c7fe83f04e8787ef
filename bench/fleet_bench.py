"""Media fleet benchmark: the same 4 videos packaged by the server alone, by 1 worker, by 2.

Three setups, each a fresh server (one serving process) with the same 4 source videos:
``embedded`` (no queue: packaging in the server's own worker processes, its default of one
job at a time), ``fleet x1`` and ``fleet x2`` (``SERVICE_MEDIA_QUEUE`` on a real
``redis-server``, with 1 or 2 ``python -m service.media.worker`` processes of concurrency 1).
The setups run interleaved (A B C A B C) ``profile.repeats`` times; figures are medians.

Measured, per setup: the wall time from submitting the 4 jobs to the last completed; the
CPU seconds of the server's process tree (``utime + stime`` of the server and of its reaped
children: the embedded packagers) and of the workers' trees (pool processes and packagers),
read from ``/proc``, which load on the machine does not inflate the way it does wall time.
From them:

- CPU a job costs on the fleet path (worker + the server's share: serving the source,
  storing the outputs, the attempt calls) against in the server: target <= 1.15x;
- the server's CPU per packaged minute of video with a fleet (what the node keeps doing);
- one worker's rate in video minutes packaged per minute: from the wall time, and from the
  worker's CPU (what one core of its own would do; load on a shared machine stretches wall
  time, not CPU time). docs/media.md sizes a fleet from it. With 2 cores, 2 workers cannot
  show scaling beyond the machine;
- the CPU per job outside the packager (the same code on both paths): what the hop adds.

Thread-safety: a script.
"""

from __future__ import annotations

import contextlib
import fractions
import json
import os
import random
import statistics
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import FULL, Profile, Row, scratch_dir
from bench.server_rig import process_tree
from service.media.video_outputs import MASTERS
from tests.fleet.fleetkit import RedisServer, Worker
from tests.serverproc import ServerProcess

VIDEOS = 4
BUCKET = "fleet"
TARGET_RATIO = 1.15
CLK_TCK = os.sysconf("SC_CLK_TCK")
JOB_TIMEOUT = 3600.0
"""Seconds the 4 jobs of one run may take (a loaded machine is slow, never this slow)."""
CHECK_SECONDS = 5.0
"""How often the bench looks for a failed job while it waits (one request per job)."""


@dataclass(frozen=True)
class VideoSize:
    width: int
    height: int
    seconds: int
    fps: int = 25


SIZES = {
    "smoke": VideoSize(64, 48, 2, 10),
    "quick": VideoSize(320, 180, 8),
    "full": VideoSize(640, 360, 30),
}


def make_video(path: Path, size: VideoSize, seed: int) -> bytes:
    """An H.264 MP4 whose picture (noise, panning) moves every frame, so encoding costs
    what busy real video does, different per ``seed``."""
    import av

    width, height = size.width, size.height
    base = random.Random(seed).randbytes(width * 2 * height * 2)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fractions.Fraction(size.fps))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for index in range(size.seconds * size.fps):
            dx, dy = index % width, (index * 2) % height
            frame = av.VideoFrame(width, height, "yuv420p")
            rows = (base[(y + dy) * width * 2 + dx :][:width] for y in range(height))
            luma = frame.planes[0]
            stride = luma.line_size
            luma.update(b"".join(row.ljust(stride, b"\0") for row in rows))
            for plane in frame.planes[1:]:
                plane.update(bytes([128]) * plane.buffer_size)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path.read_bytes()


@dataclass(frozen=True)
class Cpu:
    """CPU seconds of a process tree: its processes' own, and their reaped children's (the
    packagers: each job's ``service.media.video_worker`` is reaped by the server when
    embedded, by the worker's pool process on a fleet)."""

    own: float
    packaging: float

    @property
    def total(self) -> float:
        return self.own + self.packaging

    def __sub__(self, other: Cpu) -> Cpu:
        return Cpu(self.own - other.own, self.packaging - other.packaging)

    def __add__(self, other: Cpu) -> Cpu:
        return Cpu(self.own + other.own, self.packaging + other.packaging)


def tree_cpu(pid: int) -> Cpu:
    """CPU of ``pid`` and its live descendants, their reaped children apart."""
    own = children = 0
    for each in process_tree(pid):
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        own += int(fields[11]) + int(fields[12])  # utime stime
        children += int(fields[13]) + int(fields[14])  # cutime cstime
    return Cpu(own / CLK_TCK, children / CLK_TCK)


@dataclass
class Run:
    wall: float
    server: Cpu
    workers: Cpu

    @property
    def per_job(self) -> float:
        return (self.server.total + self.workers.total) / VIDEOS

    @property
    def hop_per_job(self) -> float:
        """CPU per job outside the packager: storing the outputs, and on a fleet the
        queue, the HTTP calls both sides, the worker's own work."""
        return (self.server.own + self.workers.own) / VIDEOS


class CreatedKeys:
    """The keys created in the bench's bucket, read off its event stream on a thread: the
    bench waits for the jobs' master playlists there instead of polling the jobs, since
    polling costs the server CPU in proportion to the wall time (80 requests a second at
    50 ms for 4 jobs), which is neither path's cost and would blur the comparison."""

    def __init__(self, server: ServerProcess) -> None:
        self.keys: set[str] = set()
        self._changed = threading.Condition()
        self._client = httpx.Client(
            base_url=server.api, auth=server.auth, timeout=httpx.Timeout(10.0, read=None)
        )
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the event stream did not open")

    def _read(self) -> None:
        with (
            contextlib.suppress(httpx.HTTPError),
            self._client.stream("GET", f"/buckets/{BUCKET}/events") as response,
        ):
            response.raise_for_status()
            self._ready.set()
            for line in response.iter_lines():
                if line.startswith("data: "):
                    with self._changed:
                        self.keys.add(json.loads(line[6:])["key"])
                        self._changed.notify_all()

    def wait(self, keys: set[str], timeout: float) -> bool:
        """Whether every one of ``keys`` was created within ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: keys <= self.keys, timeout)

    def close(self) -> None:
        self._client.close()
        self._thread.join(5)


def _raise_if_failed(api: httpx.Client, jobs: list[dict[str, Any]]) -> None:
    for job in jobs:
        state = api.get(f"/videos/jobs/{job['job_id']}").json()
        if state["status"] == "failed":
            raise RuntimeError(f"job failed: {state['error']}")


def package_all(server: ServerProcess, workers: list[Worker]) -> Run:
    """Submit the 4 jobs, wait for them; wall time and CPU of server and workers."""
    pids = [w.process.pid for w in workers if w.process is not None]
    assert server.process is not None
    created = CreatedKeys(server)
    server_before = tree_cpu(server.process.pid)
    workers_before = sum((tree_cpu(pid) for pid in pids), Cpu(0, 0))
    started = time.monotonic()
    with server.client() as api:
        jobs = []
        for index in range(VIDEOS):
            body = {"bucket": BUCKET, "key": f"v{index}.mp4", "formats": ["hls", "dash"]}
            answer = api.post("/videos/jobs", json=body)
            answer.raise_for_status()
            jobs.append(answer.json())
        masters = {job["output_prefix"] + name for job in jobs for name in MASTERS.values()}
        deadline = time.monotonic() + JOB_TIMEOUT
        while not created.wait(masters, CHECK_SECONDS):  # a failed job makes no master
            _raise_if_failed(api, jobs)
            if time.monotonic() > deadline:
                raise RuntimeError(f"the jobs took over {JOB_TIMEOUT} s")
        for job in jobs:  # completed is journaled right after the masters are stored
            while api.get(f"/videos/jobs/{job['job_id']}").json()["status"] == "processing":
                time.sleep(0.05)
        _raise_if_failed(api, jobs)
        run = Run(
            time.monotonic() - started,
            tree_cpu(server.process.pid) - server_before,
            sum((tree_cpu(pid) for pid in pids), Cpu(0, 0)) - workers_before,
        )
        created.close()
        for job in jobs:  # the next run stores its outputs afresh
            api.delete(f"/videos/jobs/{job['job_id']}").raise_for_status()
    return run


def run(profile: Profile = FULL) -> list[Row]:
    size = SIZES.get(profile.name, SIZES["full"])
    with scratch_dir("fleet-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        videos = [make_video(root / f"v{i}.mp4", size, i) for i in range(VIDEOS)]
        redis = RedisServer(root / "redis")
        redis.start()
        stack.callback(redis.kill)
        setups: dict[str, tuple[ServerProcess, list[Worker]]] = {}
        for name, count in (("embedded", 0), ("fleet x1", 1), ("fleet x2", 2)):
            env = {"SERVICE_WORKERS": "1"}
            if count:
                env["SERVICE_MEDIA_QUEUE"] = redis.url.replace("/0", f"/{count}")
            server = ServerProcess(root / name.replace(" ", "-") / "data", env_overrides=env)
            server.start()
            stack.callback(server.kill)
            with server.client() as api:
                api.post("/buckets", json={"name": BUCKET}).raise_for_status()
                for index, data in enumerate(videos):
                    api.put(f"/buckets/{BUCKET}/objects/v{index}.mp4", content=data)
            fleet = []
            for number in range(count):
                queue = redis.url.replace("/0", f"/{count}")
                worker = Worker(f"bench-{count}-{number}", queue, server.url, root)
                worker.start()
                stack.callback(worker.kill)
                fleet.append(worker)
            setups[name] = (server, fleet)
        package_all(*setups["fleet x2"])  # warm-up: imports, Celery's first connection
        runs: dict[str, list[Run]] = {name: [] for name in setups}
        for _ in range(max(1, profile.repeats)):
            for name, (server, fleet) in setups.items():
                runs[name].append(package_all(server, fleet))
    return rows(runs, size)


def _median(values: list[float]) -> float:
    return statistics.median(values)


def rows(runs: dict[str, list[Run]], size: VideoSize) -> list[Row]:
    minutes = VIDEOS * size.seconds / 60
    load = os.getloadavg()[0]
    embedded = _median([r.per_job for r in runs["embedded"]])
    result: list[Row] = []
    for name, measured in runs.items():
        result.append(
            {
                "measurement": f"4 videos ({size.width}x{size.height}, {size.seconds} s), {name}",
                "value": _median([r.wall for r in measured]),
                "unit": "s wall",
                "runs": [round(r.wall, 2) for r in measured],
                "notes": f"load {load:.1f}",
            }
        )
    fleet = runs["fleet x1"]
    per_job = _median([r.per_job for r in fleet])
    ratio = per_job / embedded if embedded else float("nan")
    pairs = [f.per_job / e.per_job for f, e in zip(fleet, runs["embedded"], strict=False)]
    result.append(
        {
            "measurement": "CPU per job, fleet (worker + server) vs in-server",
            "value": per_job,
            "unit": "CPU s",
            "anchor": "in-server",
            "anchor_value": embedded,
            "ratio": ratio,
            "target": f"<= {TARGET_RATIO}x",
            "met": "yes" if ratio <= TARGET_RATIO else "NO",
            "notes": f"each run's ratio to the in-server run beside it: "
            f"{', '.join(f'{pair:.2f}' for pair in pairs)}",
        }
    )
    server_share = _median([r.server.total for r in fleet]) / minutes
    result.append(
        {
            "measurement": "server CPU per packaged minute of video, with a fleet",
            "value": server_share,
            "unit": "CPU s/min",
            "anchor": "in-server",
            "anchor_value": embedded * VIDEOS / minutes,
        }
    )
    one = _median([r.wall for r in fleet])
    result.append(
        {
            "measurement": "one worker's rate (concurrency 1)",
            "value": minutes / (one / 60),
            "unit": "video min/min",
            "notes": f"{size.width}x{size.height}, HLS+DASH, default rendition; wall time, "
            f"so shared with the machine's load ({load:.1f})",
        }
    )
    hop = _median([r.hop_per_job for r in fleet])
    hop_anchor = _median([r.hop_per_job for r in runs["embedded"]])
    packaging = _median([r.per_job - r.hop_per_job for r in fleet])
    packaging_anchor = _median([r.per_job - r.hop_per_job for r in runs["embedded"]])
    result.append(
        {
            "measurement": "CPU per job outside the packager (the hop), fleet vs in-server",
            "value": hop,
            "unit": "CPU s",
            "anchor": "in-server",
            "anchor_value": hop_anchor,
            "notes": f"the packager is the same code on both paths; the hop adds "
            f"{(hop - hop_anchor) / embedded:.1%} of an in-server job's CPU"
            if embedded
            else "",
        }
    )
    result.append(
        {
            "measurement": "CPU per job in the packager, fleet vs in-server",
            "value": packaging,
            "unit": "CPU s",
            "anchor": "in-server",
            "anchor_value": packaging_anchor,
            "notes": "the same code on the same videos: what differs is the machine's load",
        }
    )
    worker_minutes = _median([r.workers.total for r in fleet]) / 60
    result.append(
        {
            "measurement": "one worker's rate on a core of its own (from its CPU)",
            "value": minutes / worker_minutes,
            "unit": "video min/min",
            "notes": "video minutes packaged per minute of the worker's CPU (packager included)",
        }
    )
    return result
