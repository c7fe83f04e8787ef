"""An attempt's outputs sent in one tar stream (``POST /videos/jobs/{job_id}/outputs``),
with the test as the worker.

Each file becomes an open upload under the job's prefix, invisible until the completion
names it, and then an object with exactly its bytes, once. What is not an output of this
job's running attempt (another name, a link, a name twice, a broken stream, another token)
is refused as a whole and leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.fleet.fleetkit import RedisServer, open_sessions, take_task, versions
from tests.fleet.test_fleet_tokens import bearer, claim
from tests.fleet.test_fleet_workers import new_bucket, new_job
from tests.http.edgekit import finish_upload, held_upload, wait_continue
from tests.serverproc import ServerProcess

OUTPUTS = {
    "hls/stream_0_00000.ts": b"\x47" * 188 * 40,
    "hls/stream_0.m3u8": b"#EXTM3U\n#EXTINF:1,\nstream_0_00000.ts\n#EXT-X-ENDLIST\n",
    "hls/master.m3u8": b"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nstream_0.m3u8\n",
}
MASTER = [("hls/master.m3u8", b"#EXTM3U\n")]


def tar_of(files: list[tuple[str, bytes]], *, link: str | None = None, end: bool = True) -> bytes:
    """A tar stream of ``files`` in order (a name may repeat), ``link`` a symbolic link, the
    end-of-archive blocks unless ``end`` is false."""
    out = b""
    for name, data in files:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        out += info.tobuf(tarfile.USTAR_FORMAT) + data + bytes(-len(data) % 512)
    if link is not None:
        info = tarfile.TarInfo(link)
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        out += info.tobuf(tarfile.USTAR_FORMAT)
    return out + (bytes(1024) if end else b"")


def send(server: ServerProcess, job_id: str, token: str | None, body: bytes) -> httpx.Response:
    headers = {"Content-Type": "application/x-tar", **(bearer(token) if token else {})}
    return httpx.post(f"{server.api}/videos/jobs/{job_id}/outputs", content=body, headers=headers)


def payload_files(server: ServerProcess) -> set[Path]:
    """Every promoted payload file of the server."""
    return {path for path in server.data_dir.rglob("payloads/*/*/*") if path.is_file()}


def claimed(server: ServerProcess, redis: RedisServer, clip: bytes) -> tuple[dict[str, str], str]:
    """A job on a new bucket, claimed by the test: the job (and its task's claim token) and
    the attempt's lease token."""
    with server.client() as api:
        new_bucket(api, "out", clip, versioned=True)
        job = new_job(api, "out")
    job_id, _, claim_token = take_task(redis)
    granted = claim(server, job_id, claim_token)
    assert granted.status_code == 200, granted.text
    return {**job, "claim_token": claim_token}, granted.json()["token"]


@pytest.fixture
def running(
    fleet_server: Callable[..., ServerProcess], redis: RedisServer, clip: bytes
) -> tuple[ServerProcess, dict[str, str], str]:
    """A server, a job claimed by the test, and the attempt's lease token (the lease long:
    these tests are about what a running attempt may send, not about its lease)."""
    server = fleet_server(SERVICE_MEDIA_LEASE="600")
    job, token = claimed(server, redis, clip)
    return server, job, token


def test_outputs_in_one_request_are_open_uploads_until_the_completion_names_them(
    running: tuple[ServerProcess, dict[str, str], str],
) -> None:
    server, job, token = running
    prefix = job["output_prefix"]
    sent = send(server, job["job_id"], token, tar_of(list(OUTPUTS.items())))
    assert sent.status_code == 200, sent.text
    outputs = sent.json()["outputs"]
    assert set(outputs) == set(OUTPUTS)
    for name, data in OUTPUTS.items():
        etag = hashlib.sha256(data).hexdigest()
        assert outputs[name]["parts"] == [{"part_number": 1, "etag": etag}]
    with server.client() as api:
        sessions = open_sessions(api, "out")
        assert sorted(s["key"] for s in sessions) == sorted(prefix + name for name in OUTPUTS)
        assert {s["upload_id"] for s in sessions} == {o["upload_id"] for o in outputs.values()}
        assert versions(api, "out", prefix) == []  # invisible until accepted
        files_before = payload_files(server)
        done = httpx.post(
            f"{server.api}/videos/jobs/{job['job_id']}/complete",
            json={"outputs": outputs},
            headers=bearer(token),
        )
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "completed"
        for name, data in OUTPUTS.items():
            got = api.get(f"/buckets/out/objects/{prefix}{name}")
            assert got.status_code == 200 and got.content == data
        found = versions(api, "out", prefix)
        assert sorted(v["key"] for v in found) == sorted(prefix + name for name in OUTPUTS)
        assert open_sessions(api, "out") == []
        # Each object is its part's own file: publishing copied nothing.
        assert payload_files(server) == files_before


def refusals(
    server: ServerProcess, job: dict[str, str], token: str
) -> dict[str, tuple[httpx.Response, int, str]]:
    def refused(
        body: bytes, via: str | None = token, job_id: str = job["job_id"]
    ) -> httpx.Response:
        return send(server, job_id, via, body)

    return {
        "another name": (refused(tar_of([*MASTER, ("notes.txt", b"x")])), 400, "InvalidArgument"),
        "a name twice": (refused(tar_of(MASTER + MASTER)), 400, "InvalidArgument"),
        "a link": (refused(tar_of(MASTER, link="hls/stream_0.m3u8")), 400, "InvalidArgument"),
        "not a tar": (refused(b"x" * 700), 400, "InvalidArgument"),
        "cut short": (refused(tar_of(MASTER, end=False)), 400, "InvalidArgument"),
        "no token": (refused(tar_of(MASTER), None), 401, "Unauthorized"),
        "the claim token": (refused(tar_of(MASTER), job["claim_token"]), 403, "SignatureInvalid"),
        "another job's path": (refused(tar_of(MASTER), job_id="vj_other"), 403, "AccessDenied"),
    }


def test_what_is_not_this_attempts_outputs_is_refused_whole_and_keeps_nothing(
    running: tuple[ServerProcess, dict[str, str], str],
) -> None:
    server, job, token = running
    before = payload_files(server)
    for what, (response, status, code) in refusals(server, job, token).items():
        assert response.status_code == status, (what, response.text)
        assert response.json()["error"]["code"] == code, (what, response.text)
    with server.client() as api:
        assert open_sessions(api, "out") == []
        assert versions(api, "out", job["output_prefix"]) == []
        root = api.post(
            f"/videos/jobs/{job['job_id']}/outputs",
            content=tar_of(MASTER),
            headers={"Content-Type": "application/x-tar"},
        )
        assert root.status_code == 403, root.text  # no user's key, even an admin's
        # A token still within its lease reaches nothing once its attempt is over.
        assert api.delete(f"/videos/jobs/{job['job_id']}").status_code == 204
    cancelled = send(server, job["job_id"], token, tar_of(MASTER))
    assert cancelled.status_code == 403 and cancelled.json()["error"]["code"] == "AccessDenied"
    assert payload_files(server) == before


def test_a_lapsed_attempts_outputs_are_refused(
    fleet_server: Callable[..., ServerProcess], redis: RedisServer, clip: bytes
) -> None:
    server = fleet_server()
    job, token = claimed(server, redis, clip)
    again, attempt, _ = take_task(redis, timeout=30)  # no heartbeat: the lease lapsed
    assert (again, attempt) == (job["job_id"], 2)
    refused = send(server, job["job_id"], token, tar_of(MASTER))
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "SignatureExpired"  # it expired with the lease
    with server.client() as api:
        assert open_sessions(api, "out") == []


def test_a_jobs_outputs_do_not_wait_for_its_owners_upload_slots(
    fleet_server: Callable[..., ServerProcess], redis: RedisServer, clip: bytes
) -> None:
    """A job token's uploads count against the job's own caps, not its creator's: with the
    creator's one upload slot held, the outputs still go up (and the creator's next upload
    still waits then 429, so the cap itself holds)."""
    server = fleet_server(
        SERVICE_MEDIA_LEASE="600", SERVICE_MAX_UPLOADS_PER_USER="1", SERVICE_QUEUE_WAIT="1"
    )
    job, token = claimed(server, redis, clip)
    holder = held_upload(server, server.auth, "/buckets/out/objects/held")
    with holder:
        assert wait_continue(holder, 10)
        with server.client() as api:
            refused = api.put("/buckets/out/objects/late", content=b"late")
        assert refused.status_code == 429, refused.text
        sent = send(server, job["job_id"], token, tar_of(MASTER))
        assert sent.status_code == 200, sent.text
        assert set(sent.json()["outputs"]) == {"hls/master.m3u8"}
        assert finish_upload(holder).status == 200
