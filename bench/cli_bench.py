"""The ``svc`` command line (issue 15): big copies, many small files, an unchanged mirror.

In one run against a strict server, each case interleaved with its anchor (A B A B, medians):

- ``svc cp`` of one big file (1 GiB in the full profile) beside ``curl -T`` of the same file
  (target >= 0.9x MiB/s). Twice: with the default (parallel multipart parts, resumable) and
  with ``--multipart-threshold`` above the size (one streamed PUT, like curl's). The
  default again against a server with ``SERVICE_WORKERS=1``, where the server writes each
  part once, in place (several serving processes keep the old path: docs/architecture.md).
- ``svc cp -r`` of a tree of 4 KiB files (10,000 in the full profile) beside a plain
  sequential loop of ``ServiceClient`` ``bucket.put`` over the same files in this process
  (target >= 3x files/s). svc's figure includes its own start-up. By default svc sends such
  files in batch uploads (docs/batch.md); the same copy with ``--no-batch`` (one PUT per
  file, as before batches) is a row of its own, beside the same loop.
- ``svc mirror`` of the same tree once it is stored unchanged: seconds (target < 10 s) and
  the command's peak RSS (target < 100 MiB, its ``VmHWM``), beside ``svc ls -r`` of
  the stored tree and the peak RSS of ``svc --version``.
- Start-up: the wall time of ``svc --version`` (imports only) and of ``svc ls`` of a small
  bucket (imports, the alias, one request), beside ``python -c pass`` (the interpreter
  alone) and ``curl`` of the same listing (no target: it says what every command pays).

Each timed run removes what it stored afterwards (untimed), as the other benches do, so every
round writes to a comparable disk. svc runs as installed: ``pip install`` compiles a package's
modules to bytecode, so the bench compiles ``service/`` first (``compileall``); otherwise an
environment with ``PYTHONDONTWRITEBYTECODE=1`` would have every run compile from source.

Thread-safety: a script; the commands under test are child processes.
"""

from __future__ import annotations

import compileall
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from bench import (
    FULL,
    GIB,
    KIB,
    MIB,
    REPO,
    Profile,
    Row,
    compare,
    interleave,
    limit_row,
    make_data_file,
    scratch_dir,
)
from bench.anchors import cpu_seconds
from bench.memory_bench import peak_rss_mib
from bench.server_bench import BUCKET, size_label, start_server
from service.client import ServiceClient
from tests.serverproc import ServerProcess

#: How many 4 KiB files each profile copies and mirrors.
FILES = {"full": 10_000, "quick": 2_000, "smoke": 40}
FILES_PER_DIR = 100
SMALL = 4 * KIB


def svc_command() -> list[str]:
    installed = shutil.which("svc", path=str(Path(sys.executable).parent))
    return [installed] if installed else [sys.executable, "-m", "service.cli"]


class Runner:
    """Runs ``svc`` with its config in a private HOME and ``SVC_URL`` naming the server."""

    def __init__(self, server: ServerProcess, home: str) -> None:
        self.server = server
        self.env = {
            **os.environ,
            "HOME": home,
            "XDG_CONFIG_HOME": os.path.join(home, ".config"),
            "SVC_URL": server.connection_string,
        }

    def run(self, *args: str) -> tuple[float, float]:
        """Seconds and peak RSS (MiB) of one ``svc args``; an error stops the bench."""
        started = time.perf_counter()
        child = subprocess.Popen(
            [*svc_command(), *args],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        peak = PeakWatcher(child.pid)
        _, stderr = child.communicate()
        elapsed = time.perf_counter() - started
        peak.stop()
        if child.returncode != 0:
            raise RuntimeError(f"svc {' '.join(args)} exited {child.returncode}: {stderr!r}")
        return elapsed, peak.mib


class PeakWatcher:
    """The peak RSS of a running child, read from its ``VmHWM`` every few milliseconds.

    Not ``wait4``'s ``ru_maxrss``: that keeps the maximum across ``exec``, so it reports the
    forking parent's size (this bench process) whenever that is larger than the command's.
    ``VmHWM`` belongs to the address space, which ``exec`` replaces; reads are counted only
    once the child runs svc (its command line names it).
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.mib = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.is_set():
            try:
                cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
                if b"svc" in cmdline or b"service.cli" in cmdline:
                    self.mib = max(self.mib, peak_rss_mib(self.pid))
            except (OSError, RuntimeError):
                return  # exited (or a zombie without memory): the last read stands
            time.sleep(0.005)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def curl_put(server: ServerProcess, path: str, key: str) -> float:
    url = f"{server.api}/buckets/{BUCKET}/objects/{key}"
    credentials = f"{server.access_key}:{server.secret_key}"
    started = time.perf_counter()
    subprocess.run(
        ["curl", "-sS", "-f", "-o", "/dev/null", "-u", credentials, "-T", path, url], check=True
    )
    return time.perf_counter() - started


def big_copy(
    runner: Runner, profile: Profile, directory: str, marker: str = "", single_put: bool = True
) -> list[Row]:
    """``marker``: what sets this server apart, for the labels; ``single_put``: measure the
    one-PUT variant too."""
    server = runner.server
    size = profile.big_bytes
    data = os.path.join(directory, "big.bin")
    if not os.path.exists(data):
        make_data_file(data, size)
    client = ServiceClient(server.connection_string)
    bucket = client.bucket(BUCKET)
    rounds = iter(range(1_000_000))
    # Every round writes a new object onto fresh blocks: deleting one before the next round
    # would hand the next writer just-freed blocks, which this disk writes 3-4x faster.
    written: list[str] = []

    def svc(*flags: str) -> float:
        key = f"big-svc-{next(rounds)}"
        seconds, _ = runner.run("cp", *flags, data, f"env/{BUCKET}/{key}")
        written.append(key)
        return size / MIB / seconds

    def curl() -> float:
        key = f"big-curl-{next(rounds)}"
        seconds = curl_put(server, data, key)
        written.append(key)
        return size / MIB / seconds

    single = ("--multipart-threshold", str(size + 1))
    cases = {"multipart": svc, "single": lambda: svc(*single), "curl": curl}
    if not single_put:
        del cases["single"]
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    results = interleave(
        {name: server_cpu_of(server, case, cpu[name]) for name, case in cases.items()},
        profile.repeats,
    )
    for key in written:
        bucket.delete(key)
    client.close()
    label = size_label(size)
    rows = [
        compare(
            f"svc cp {label} (default: parallel multipart, resumable){marker}",
            results["multipart"],
            "MiB/s",
            anchor=f"curl -T {label}",
            anchor_values=results["curl"],
            target=0.9,
            notes=f"includes the server's complete; {cpu_per_gib(cpu, size)}",
        ),
    ]
    if not single_put:
        return rows
    return [
        *rows,
        compare(
            f"svc cp {label} --multipart-threshold above the size (one PUT)",
            results["single"],
            "MiB/s",
            anchor=f"curl -T {label}",
            anchor_values=results["curl"],
            target=0.9,
        ),
    ]


def server_cpu_of(
    server: ServerProcess, case: Callable[[], float], into: list[float]
) -> Callable[[], float]:
    """``case``, noting the CPU seconds the server's processes spent meanwhile in ``into``."""

    def measured() -> float:
        assert server.process is not None
        pid = server.process.pid
        before = cpu_seconds(pid)
        result = case()
        into.append(cpu_seconds(pid) - before)
        return result

    return measured


def cpu_per_gib(cpu: dict[str, list[float]], size: int) -> str:
    """``server CPU s/GiB: multipart 4.1, curl 2.0`` (medians)."""
    per = {name: statistics.median(values) * GIB / size for name, values in cpu.items() if values}
    return "server CPU s/GiB: " + ", ".join(f"{name} {value:.1f}" for name, value in per.items())


def make_tree(root: str, count: int) -> list[str]:
    """``count`` files of 4 KiB in folders of 100; their keys relative to ``root``."""
    keys = []
    for index in range(count):
        key = f"d{index // FILES_PER_DIR:04d}/f{index:06d}.bin"
        path = os.path.join(root, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as file:
            file.write(os.urandom(SMALL))
        keys.append(key)
    return keys


def small_files(runner: Runner, profile: Profile, directory: str) -> list[Row]:
    count = FILES.get(profile.name, FILES["full"])
    tree = os.path.join(directory, "tree")
    keys = make_tree(tree, count)
    client = ServiceClient(runner.server.connection_string)
    bucket = client.bucket(BUCKET)
    rounds = iter(range(1_000_000))

    def clear(prefix: str) -> None:
        runner.run("rm", "-r", "--jobs", "16", f"env/{BUCKET}/{prefix}")

    def svc(*flags: str) -> float:
        prefix = f"cp-{next(rounds)}/"
        seconds, _ = runner.run("cp", "-r", *flags, tree + "/", f"env/{BUCKET}/{prefix}")
        clear(prefix)
        return count / seconds

    def loop() -> float:
        prefix = f"loop-{next(rounds)}/"
        started = time.perf_counter()
        for key in keys:
            bucket.put(prefix + key, Path(tree, key))
        seconds = time.perf_counter() - started
        clear(prefix)
        return count / seconds

    copies = interleave(
        {"svc": svc, "unbatched": lambda: svc("--no-batch"), "loop": loop}, profile.repeats
    )
    runner.run("cp", "-r", tree + "/", f"env/{BUCKET}/mirror/")

    peaks: list[float] = []

    def mirror() -> float:
        seconds, rss = runner.run("mirror", tree, f"env/{BUCKET}/mirror")
        peaks.append(rss)
        return seconds

    def listing() -> float:
        return runner.run("ls", "-r", f"env/{BUCKET}/mirror")[0]

    mirrors = interleave({"mirror": mirror, "ls": listing}, profile.repeats)
    baseline = runner.run("--version")[1]
    client.close()
    return [
        compare(
            f"svc cp -r, {count:,} files of 4 KiB (default: batch uploads)",
            copies["svc"],
            "files/s",
            anchor="sequential ServiceClient put loop",
            anchor_values=copies["loop"],
            target=3.0,
            notes="svc's time includes its start-up",
        ),
        compare(
            f"svc cp -r --no-batch, {count:,} files of 4 KiB (one PUT per file)",
            copies["unbatched"],
            "files/s",
            anchor="sequential ServiceClient put loop",
            anchor_values=copies["loop"],
            notes="svc's time includes its start-up",
        ),
        limit_row(
            f"svc mirror, unchanged tree of {count:,} files",
            statistics.median(mirrors["mirror"]),
            "s",
            10.0,
            anchor="svc ls -r of the stored tree",
            anchor_value=statistics.median(mirrors["ls"]),
        ),
        limit_row(
            "peak RSS of that svc mirror",
            max(peaks),
            "MiB",
            100.0,
            anchor="svc --version",
            anchor_value=baseline,
        ),
    ]


def startup(runner: Runner, profile: Profile) -> list[Row]:
    server = runner.server
    listing = f"{server.api}/buckets/{BUCKET}/objects?limit=10"
    credentials = f"{server.access_key}:{server.secret_key}"

    def timed(command: list[str]) -> Callable[[], float]:
        def case() -> float:
            started = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=runner.env)
            return time.perf_counter() - started

        return case

    svc = svc_command()
    results = interleave(
        {
            "python": timed([sys.executable, "-c", "pass"]),
            "version": timed([*svc, "--version"]),
            "ls": timed([*svc, "ls", f"env/{BUCKET}"]),
            "curl": timed(["curl", "-sS", "-f", "-o", "/dev/null", "-u", credentials, listing]),
        },
        max(3, profile.repeats * 3),
    )
    return [
        compare(
            "svc --version (start-up: imports only)",
            results["version"],
            "s",
            anchor="python -c pass",
            anchor_values=results["python"],
            lower_is_better=True,
        ),
        compare(
            "svc ls of a bucket (start-up + one listing)",
            results["ls"],
            "s",
            anchor="curl of the same listing",
            anchor_values=results["curl"],
            lower_is_better=True,
        ),
    ]


def run(profile: Profile = FULL, cases: list[str] | None = None) -> list[Row]:
    """Every case (``startup``, ``big``, ``small``) or those named, against one strict
    server."""
    wanted = cases or ["startup", "big", "small"]
    compileall.compile_dir(os.path.join(REPO, "service"), quiet=1)
    rows: list[Row] = []
    with ExitStack() as stack:
        directory = stack.enter_context(scratch_dir("cli-"))
        server = start_server(stack, os.path.join(directory, "server"), "strict")
        runner = Runner(server, os.path.join(directory, "home"))
        if "startup" in wanted:
            rows += startup(runner, profile)
        if "big" in wanted:
            rows += big_copy(runner, profile, directory)
            one = start_server(stack, os.path.join(directory, "server1"), "strict", "1")
            runner_one = Runner(one, os.path.join(directory, "home1"))
            rows += big_copy(runner_one, profile, directory, ", SERVICE_WORKERS=1", False)
        if "small" in wanted:
            rows += small_files(runner, profile, directory)
    return rows
