"""``system/performance`` counts every object a request stores as a PUT: each member of a
batch upload (what `svc cp -r` sends) and each completed multipart upload, with one serving
process and with several (a worker notes them to the writer)."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.serverproc import ServerProcess


def tar_of(files: dict[str, bytes]) -> bytes:
    sink = io.BytesIO()
    with tarfile.open(fileobj=sink, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return sink.getvalue()


@pytest.fixture(scope="module", params=["1", "3"], ids=["one-process", "three-processes"])
def counted(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path_factory.mktemp("counted") / "data",
        env_overrides={"SERVICE_WORKERS": request.param},
    )
    server.start()
    yield server
    server.stop()


def put_figures(api: httpx.Client) -> tuple[int, int, int]:
    put = api.get("/system/performance").json()["put"]
    return put["count"], put["bytes"], put["latency_samples"]


def wait_for(api: httpx.Client, expected: tuple[int, int, int]) -> None:
    """Workers note their figures to the writer asynchronously: a short wait for them."""
    deadline = time.monotonic() + 10
    while (figures := put_figures(api)) != expected:
        assert time.monotonic() < deadline, f"{figures} != {expected}"
        time.sleep(0.05)


def test_each_member_of_a_batch_counts_as_a_put(counted: ServerProcess) -> None:
    with counted.client() as api:
        assert api.post("/buckets", json={"name": "batched"}).status_code == 201
        count, size, samples = put_figures(api)
        files = {"a.txt": b"a" * 10, "b/c.txt": b"c" * 20, "d.bin": b"d" * 30}
        answer = api.post("/buckets/batched/batch", content=tar_of(files))
        assert answer.status_code == 200 and answer.json()["stored"] == 3, answer.text
        wait_for(api, (count + 3, size + 60, samples))


def test_a_completed_multipart_upload_counts_as_a_put(counted: ServerProcess) -> None:
    with counted.client() as api:
        assert api.post("/buckets", json={"name": "parted"}).status_code == 201
        count, size, samples = put_figures(api)
        session = api.post("/multipart/init", json={"bucket": "parted", "key": "big"}).json()
        upload = session["upload_id"]
        part = api.put(f"/multipart/{upload}/part", params={"partNumber": 1}, content=b"p" * 500)
        assert part.status_code == 200, part.text
        parts = [{"part_number": 1, "etag": part.json()["etag"]}]
        done = api.post(f"/multipart/{upload}/complete", json={"parts": parts})
        assert done.status_code == 200, done.text
        wait_for(api, (count + 1, size + 500, samples))
