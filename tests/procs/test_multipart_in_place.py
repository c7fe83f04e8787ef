"""Parts written in place with two serving processes (``service.multipart.in_place``, shared
claims: ``service.storage.region_locks``): parts of one upload served by both processes land
in the upload's one file, a re-sent part never overwrites a stored one, ``complete`` (on the
writer) seals the file into the exact object, and abort removes it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.storage import region_locks
from tests.procs.prockit import answering_process
from tests.serverproc import ServerProcess

BUCKET = "inplace"
S = 1024 * 1024
"""The declared part size (the smallest a client may declare): the stride of the parts."""


@pytest.fixture(scope="module")
def strict(server: ServerProcess) -> ServerProcess:
    with server.client() as client:
        assert client.post("/buckets", json={"name": BUCKET}).status_code == 201
    return server


def fresh_client(server: ServerProcess) -> httpx.Client:
    """A client of its own connection: the kernel spreads new connections over the processes."""
    return server.client()


def start(server: ServerProcess, key: str) -> str:
    with server.client() as client:
        response = client.post(
            "/multipart/init", json={"bucket": BUCKET, "key": key, "part_size": S}
        )
    assert response.status_code == 201, response.text
    assert response.json()["recommended_part_size"] == S
    return str(response.json()["upload_id"])


def put_part(server: ServerProcess, upload_id: str, number: int, data: bytes) -> dict[str, Any]:
    with fresh_client(server) as client:
        response = client.put(
            f"/multipart/{upload_id}/part", params={"partNumber": number}, content=data
        )
    assert response.status_code == 200, response.text
    assert response.json()["etag"] == hashlib.sha256(data).hexdigest()
    return {**response.json(), "process": answering_process(response)}


def payload_files(server: ServerProcess) -> int:
    return sum(1 for path in (Path(server.data_dir) / "payloads").rglob("*") if path.is_file())


def upload_file(server: ServerProcess, upload_id: str) -> Path:
    return Path(server.data_dir) / "assembly" / f"{upload_id}.direct"


def test_parts_served_by_both_processes_land_in_one_file_and_seal_into_the_object(
    strict: ServerProcess,
) -> None:
    upload_id = start(strict, "spread")
    bodies = {n: os.urandom(S) for n in range(1, 16)}
    bodies[16] = os.urandom(4321)
    before = payload_files(strict)
    with ThreadPoolExecutor(4) as pool:
        parts = list(pool.map(lambda n: put_part(strict, upload_id, n, bodies[n]), bodies))
    assert len({part["process"] for part in parts}) == 2  # odds of one alone: 2 ** -15
    whole = b"".join(bodies[n] for n in sorted(bodies))
    assert upload_file(strict, upload_id).read_bytes() == whole
    assert payload_files(strict) == before  # no part has a file of its own
    inode = upload_file(strict, upload_id).stat().st_ino
    manifest = [{"part_number": p["part_number"], "etag": p["etag"]} for p in parts]
    with fresh_client(strict) as client:
        response = client.post(f"/multipart/{upload_id}/complete", json={"parts": manifest})
        assert response.status_code == 200, response.text
        assert response.json()["sha256_checksum"] == hashlib.sha256(whole).hexdigest()
        got = client.get(f"/buckets/{BUCKET}/objects/spread")
    assert got.content == whole
    payloads = (Path(strict.data_dir) / "payloads").rglob("*")
    assert any(p.is_file() and p.stat().st_ino == inode for p in payloads)  # sealed, not joined
    assert not upload_file(strict, upload_id).exists()


def test_a_part_resent_from_either_process_is_what_completes(strict: ServerProcess) -> None:
    upload_id = start(strict, "resent")
    for number in (1, 2):
        put_part(strict, upload_id, number, os.urandom(S))
    stored_region = upload_file(strict, upload_id).read_bytes()
    again = {n: os.urandom(S) for n in (1, 2)}
    with ThreadPoolExecutor(2) as pool:  # both stored in place: the new bytes go elsewhere
        list(pool.map(lambda item: put_part(strict, upload_id, *item), again.items()))
    assert upload_file(strict, upload_id).read_bytes() == stored_region
    last = os.urandom(S // 2)
    with ThreadPoolExecutor(4) as pool:  # one number four times at once, on any process
        sent = list(pool.map(lambda _: put_part(strict, upload_id, 3, last), range(4)))
    assert {part["etag"] for part in sent} == {hashlib.sha256(last).hexdigest()}
    whole = again[1] + again[2] + last
    manifest = [
        {"part_number": n, "etag": hashlib.sha256(data).hexdigest()}
        for n, data in ((1, again[1]), (2, again[2]), (3, last))
    ]
    with fresh_client(strict) as client:
        response = client.post(f"/multipart/{upload_id}/complete", json={"parts": manifest})
        assert response.status_code == 200, response.text
        assert response.json()["sha256_checksum"] == hashlib.sha256(whole).hexdigest()
        assert client.get(f"/buckets/{BUCKET}/objects/resent").content == whole


def test_abort_through_a_worker_removes_the_upload_file(strict: ServerProcess) -> None:
    upload_id = start(strict, "aborted")
    put_part(strict, upload_id, 1, os.urandom(S))
    assert upload_file(strict, upload_id).exists()
    for _ in range(4):  # from whichever process takes the connection
        with fresh_client(strict) as client:
            status = client.delete(f"/multipart/{upload_id}").status_code
        assert status in (204, 404)
    assert not upload_file(strict, upload_id).exists()


LOCK_HOLDER = textwrap.dedent(
    """
    import sys, time
    from service.storage import region_locks
    lock = region_locks.try_lock(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    print("held" if lock else "refused", flush=True)
    time.sleep(60)
    """
)


@pytest.mark.skipif(
    not region_locks.supported(),
    reason="no OFD locks on this OS (Linux >= 3.15): several processes keep per-part files",
)
def test_region_locks_conflict_across_processes_and_go_with_a_killed_holder(
    tmp_path: Path,
) -> None:
    path = tmp_path / "upload.direct"
    path.write_bytes(b"")
    here = region_locks.try_lock(str(path), 0, S)
    assert here is not None
    assert region_locks.try_lock(str(path), S - 1, S) is None  # overlaps, same process
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(path), str(S), str(S)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert region_locks.try_lock(str(path), S, 1) is None  # held by the other process
        assert region_locks.lock_when_free(str(path), 0, 0, 0.05) is None  # the whole file
    finally:
        holder.kill()
        holder.wait()
    here.release()
    whole = region_locks.lock_when_free(str(path), 0, 0, 5.0)  # the kill dropped its lock
    assert whole is not None
    whole.release()
