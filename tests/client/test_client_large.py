"""Large transfers against a private server: resuming across restarts, bounded memory.

Slow: each test moves hundreds of MiB (or a GiB) through a real server. The memory test runs
the client in a subprocess so its peak RSS (``ru_maxrss``) is the client's alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from service.client import ServiceClient, ServiceError

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MiB = 1024 * 1024
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def random_file(path: pathlib.Path, size: int) -> str:
    """Write ``size`` random bytes to ``path`` and return their SHA-256."""
    digest = hashlib.sha256()
    with path.open("wb") as file:
        for _ in range(size // (8 * MiB)):
            block = os.urandom(8 * MiB)
            digest.update(block)
            file.write(block)
    return digest.hexdigest()


def part_puts(log: str) -> int:
    """Part uploads the server answered, from its access log."""
    return sum(1 for line in log.splitlines() if "method=PUT" in line and "/multipart/" in line)


def test_a_200_mib_upload_rides_out_a_server_crash_and_yields_the_right_sha256(
    server_factory: Callable[..., Any], tmp_path: pathlib.Path
) -> None:
    server = server_factory(SERVICE_DURABILITY="balanced")
    source = tmp_path / "source.bin"
    expected = random_file(source, 200 * MiB)
    restarted = threading.Event()
    restarter: list[threading.Thread] = []

    def progress(done: int, total: int | None) -> None:
        if total and done >= total // 3 and not restarter:
            # cut every connection mid-upload: the server dies and comes back
            thread = threading.Thread(target=lambda: (server.restart(crash=True), restarted.set()))
            restarter.append(thread)
            thread.start()

    with ServiceClient(server.connection_string, backoff=0.2, part_retries=10) as client:
        client.buckets.create("big")
        bucket = client.bucket("big")
        obj = bucket.upload_multipart(
            "big.bin", source, part_size=8 * MiB, max_parallel=4, progress=progress
        )
        restarter[0].join()
        assert restarted.is_set()
        assert obj.size_bytes == 200 * MiB and obj.sha256_checksum == expected
        assert bucket.head("big.bin").sha256 == expected
        download = tmp_path / "download.bin"
        bucket.get("big.bin").write_to_file(download)
    digest = hashlib.sha256()
    with download.open("rb") as file:
        while block := file.read(8 * MiB):
            digest.update(block)
    assert digest.hexdigest() == expected


def test_an_interrupted_upload_resumes_from_its_upload_id_skipping_stored_parts(
    server_factory: Callable[..., Any], tmp_path: pathlib.Path
) -> None:
    server = server_factory(SERVICE_DURABILITY="balanced")
    source = tmp_path / "source.bin"
    expected = random_file(source, 200 * MiB)
    killed: list[threading.Thread] = []

    def progress(done: int, total: int | None) -> None:
        if total and done >= total // 2 and not killed:
            killed.append(threading.Thread(target=server.kill))
            killed[0].start()

    with ServiceClient(server.connection_string, retries=0, part_retries=0) as client:
        client.buckets.create("big")
        bucket = client.bucket("big")
        with pytest.raises(ServiceError) as raised:
            bucket.upload_multipart(
                "big.bin",
                source,
                part_size=8 * MiB,
                max_parallel=4,
                progress=progress,
                keep_on_error=True,
            )
    upload_id = raised.value.upload_id
    assert upload_id is not None
    killed[0].join()
    server.start()
    with ServiceClient(server.connection_string) as client:
        bucket = client.bucket("big")
        stored = bucket.get_multipart_upload(upload_id).status().parts
        assert 0 < len(stored) < 25
        obj = bucket.upload_multipart("big.bin", source, part_size=8 * MiB, upload_id=upload_id)
        assert obj.sha256_checksum == expected and obj.size_bytes == 200 * MiB
    log_path = server.data_dir.parent / f"{server.data_dir.name}-server-2.log"
    resumed_log = log_path.read_text()
    deadline = time.monotonic() + 10
    while "/complete status=200" not in resumed_log and time.monotonic() < deadline:
        time.sleep(0.1)  # the access log is written in batches: wait for the last ones
        resumed_log = log_path.read_text()
    kept = sum(1 for part in stored if part.size_bytes == 8 * MiB)
    assert part_puts(resumed_log) == 25 - kept


MEMORY_SCRIPT = textwrap.dedent(
    """
    import hashlib, json, os, resource, sys
    from service.client import ServiceClient

    connection, path, target = sys.argv[1:4]
    SIZE = 1 << 30

    def peak_mib():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def stream():
        block = os.urandom(1 << 20)
        for _ in range(SIZE >> 20):
            yield block

    figures = {}
    with ServiceClient(connection, timeout=300) as client:
        client.buckets.create("mem")
        bucket = client.bucket("mem")
        bucket.put("warm-up", b"x")
        figures["baseline"] = peak_mib()
        bucket.put("streamed", stream())
        figures["put_stream"] = peak_mib()
        bucket.upload_multipart("parts", path, part_size=16 << 20, max_parallel=4)
        figures["multipart_file"] = peak_mib()
        with bucket.get("parts") as obj:
            count = sum(len(chunk) for chunk in obj.iter_bytes())
        figures["get_stream"] = peak_mib()
        bucket.get("streamed").write_to_file(target)
        figures["get_to_file"] = peak_mib()
        # last, because ru_maxrss only grows: a stream buffers one part per upload slot
        bucket.upload_multipart("parts-stream", stream(), part_size=8 << 20, max_parallel=4)
        figures["multipart_stream"] = peak_mib()
    figures["downloaded"] = count
    print(json.dumps(figures))
    """
)


def test_client_memory_stays_flat_moving_a_gib(
    server_factory: Callable[..., Any], tmp_path: pathlib.Path
) -> None:
    server = server_factory(SERVICE_DURABILITY="balanced")
    source = tmp_path / "gib.bin"
    random_file(source, 1024 * MiB)
    target = tmp_path / "downloaded.bin"
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, server.connection_string, str(source), str(target)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    print("client peak RSS (MiB) after each phase:", figures)
    assert figures["downloaded"] == 1024 * MiB
    assert target.stat().st_size == 1024 * MiB
    growth = figures["get_to_file"] - figures["baseline"]
    # 1 GiB moved four ways; the client's peak grows by a few chunks, never by the object
    assert growth < 64, figures
    # a stream is cut into parts: at most max_parallel (4) parts of 8 MiB, plus the one
    # being filled, each briefly copied once
    assert figures["multipart_stream"] - figures["baseline"] < 4 * 8 * 2 + 16 + 48, figures
