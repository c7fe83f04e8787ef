"""The archive with real server processes: ship while serving, lose the data dir, restore,
start on the restored dir, read everything back; with one serving process and with two.

The primary is SIGKILLed before the restore (a lost machine), so what the archive holds is
exactly what the shipper had made durable there; the restore is run as an operator would,
``python -m service restore``, and checked with ``python -m service archive verify``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.serverproc import REPO_ROOT, ServerProcess


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
    )


def wait_archived(client: httpx.Client, timeout: float = 30.0) -> int:
    """Wait until the archive holds every committed record; its sequence."""
    deadline = time.monotonic() + timeout
    while True:
        status = client.get("/replication").json()
        archive = status["archive"]
        if archive["archived_sequence"] >= status["last_sequence"] > 0:
            assert archive["last_error"] is None
            return int(archive["archived_sequence"])
        assert time.monotonic() < deadline, status
        time.sleep(0.1)


def populate(client: httpx.Client) -> dict[str, bytes]:
    assert client.post("/buckets", json={"name": "photos"}).status_code == 201
    assert (
        client.post("/buckets", json={"name": "versions", "versioning_enabled": True})
    ).status_code == 201
    bodies: dict[str, bytes] = {}
    for n in range(20):
        body = os.urandom(1000 + n * 97)
        key = f"photos/p{n:02d}.bin"
        assert client.put(f"/buckets/photos/objects/p{n:02d}.bin", content=body).is_success
        bodies[key] = body
    for n in range(3):
        body = f"version {n}".encode()
        assert client.put("/buckets/versions/objects/doc", content=body).is_success
    bodies["versions/doc"] = body
    assert client.delete("/buckets/photos/objects/p00.bin").status_code == 204
    bodies.pop("photos/p00.bin")
    big = os.urandom(3 * 1024 * 1024 + 11)
    assert client.put("/buckets/photos/objects/big.bin", content=big).is_success
    bodies["photos/big.bin"] = big
    return bodies


def listing(client: httpx.Client) -> dict[str, object]:
    return {
        "photos": client.get("/buckets/photos/objects").json(),
        "versions": client.get("/buckets/versions/versions").json(),
        "users": client.get("/users").json(),
        # ``last_used_at`` is noted in memory and journaled in batches (once a minute), so a
        # restore shows the last journaled use: everything else of a key is exact.
        "keys": [
            {name: value for name, value in key.items() if name != "last_used_at"}
            for key in client.get("/access-keys").json()["access_keys"]
        ],
    }


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_lost_primary_is_restored_from_its_archive(tmp_path: Path, workers: str) -> None:
    archive = tmp_path / "archive"
    primary = ServerProcess(
        tmp_path / "primary",
        env_overrides={"SERVICE_ARCHIVE": str(archive), "SERVICE_WORKERS": workers},
    )
    primary.start()
    try:
        with primary.client() as client:
            bodies = populate(client)
            presigned = client.post(
                "/presign", json={"bucket": "photos", "key": "p05.bin", "method": "GET"}
            ).json()["url"]
            archived = wait_archived(client)
            before = listing(client)
    finally:
        primary.kill()
    shutil.rmtree(primary.data_dir)  # the disk is gone

    verified = cli("archive", "verify", "--archive", str(archive))
    assert verified.returncode == 0, verified.stderr
    assert f"..{archived}" in verified.stdout
    restored = tmp_path / "restored"
    done = cli("restore", "--archive", str(archive), "--data-dir", str(restored))
    assert done.returncode == 0, done.stderr
    assert f"restored record {archived}" in done.stdout

    server = ServerProcess(restored, env_overrides={"SERVICE_WORKERS": workers})
    server.start()
    try:
        with server.client() as client:
            assert listing(client) == before
            for key, body in bodies.items():
                bucket, _, name = key.partition("/")
                got = client.get(f"/buckets/{bucket}/objects/{name}")
                assert got.status_code == 200 and got.content == body, key
            # Signed before the loss, with the archived signing secret: still valid.
            path = presigned.split("://", 1)[1].split("/", 1)[1]
            assert httpx.get(f"{server.url}/{path}").content == bodies["photos/p05.bin"]
    finally:
        server.stop()


def test_restore_and_verify_fail_in_one_line(tmp_path: Path) -> None:
    missing = cli("archive", "verify", "--archive", str(tmp_path / "nothing"))
    assert missing.returncode == 1
    assert missing.stderr.count("\n") == 1 and "Traceback" not in missing.stderr
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    nothing, busy = str(tmp_path / "nothing"), str(tmp_path / "busy")
    refused = cli("restore", "--archive", nothing, "--data-dir", busy)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith("service: ") and refused.stderr.count("\n") == 1
    bad = cli("restore", "--archive", "x", "--data-dir", "y", "--to-sequence", "\uff11\uff12")
    assert bad.returncode == 2 and "not a record sequence" in bad.stderr


def archive_status(client: httpx.Client) -> dict[str, object]:
    archive: dict[str, object] = client.get("/replication").json()["archive"]
    return archive


def archived_records(archive: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in (archive / "records").iterdir()}


def test_an_archive_of_another_history_is_refused_and_left_alone(tmp_path: Path) -> None:
    """Two primaries pointed at one archive: the second must never append its records
    after the first's (a restore would replay them onto the other's state). The first,
    started again, goes on with its own archive."""
    archive = tmp_path / "archive"
    first = ServerProcess(tmp_path / "first", env_overrides={"SERVICE_ARCHIVE": str(archive)})
    first.start()
    try:
        with first.client() as client:
            assert client.post("/buckets", json={"name": "mine"}).status_code == 201
            for n in range(3):
                assert client.put(f"/buckets/mine/objects/k{n}", content=b"x" * n).is_success
            wait_archived(client)
    finally:
        assert first.stop() == 0
    before = archived_records(archive)

    second = ServerProcess(tmp_path / "second", env_overrides={"SERVICE_ARCHIVE": str(archive)})
    second.start()
    try:
        with second.client() as client:
            assert client.post("/buckets", json={"name": "theirs"}).status_code == 201
            for n in range(40):  # past the first's end, so it could have "followed" it
                assert client.put(f"/buckets/theirs/objects/k{n}", content=b"y").is_success
            deadline = time.monotonic() + 30
            while "another history" not in str(archive_status(client)["last_error"]):
                assert time.monotonic() < deadline, archive_status(client)
                time.sleep(0.2)
            assert client.get("/buckets/theirs/objects/k1").content == b"y"  # it serves
    finally:
        assert second.stop() == 0
    assert archived_records(archive) == before

    first.start()
    try:
        with first.client() as client:
            assert client.put("/buckets/mine/objects/more", content=b"z").is_success
            wait_archived(client)  # no error: its own history goes on
    finally:
        first.stop()
    assert verify_ok(archive)


def verify_ok(archive: Path) -> bool:
    verified = cli("archive", "verify", "--archive", str(archive))
    return verified.returncode == 0
