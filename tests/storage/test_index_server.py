"""The persistent index through a real server process: SIGKILL, stale copies, listings.

A server is killed (SIGKILL: no final snapshot, the index left open with this boot's
marker), optionally given an older copy of its index or another data dir's, and restarted;
every object written must answer with its bytes, the listing must hold exactly the keys
written, and the start must say whether it resumed or rebuilt.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from service.index.opening import INDEX_DIRNAME
from tests.serverproc import ServerProcess

pytestmark = pytest.mark.e2e


def put_objects(server: ServerProcess, bucket: str, keys: list[str]) -> None:
    with server.client() as client:
        for key in keys:
            response = client.put(f"/buckets/{bucket}/objects/{key}", content=key.encode())
            assert response.status_code == 200, response.text


def assert_holds_exactly(server: ServerProcess, bucket: str, keys: list[str]) -> None:
    with server.client() as client:
        listed = client.get(f"/buckets/{bucket}/objects", params={"limit": 1000}).json()
        assert [item["key"] for item in listed["objects"]] == sorted(keys)
        for key in keys:
            assert client.get(f"/buckets/{bucket}/objects/{key}").content == key.encode()


def test_a_killed_server_resumes_and_a_stale_index_catches_up(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data")
    server.start()
    try:
        with server.client() as client:
            assert client.post("/buckets", json={"name": "photos"}).status_code in (200, 201)
        first = [f"a/{i:02d}" for i in range(10)]
        put_objects(server, "photos", first)
        server.kill()
        stale = tmp_path / "stale-index"
        shutil.copytree(server.data_dir / INDEX_DIRNAME, stale)  # copied while nothing runs
        server.start()  # resumes from the index: nothing to rebuild
        second = [f"b/{i:02d}" for i in range(10)]
        put_objects(server, "photos", second)
        server.kill()
        shutil.rmtree(server.data_dir / INDEX_DIRNAME)
        shutil.copytree(stale, server.data_dir / INDEX_DIRNAME)
        server.start()
        assert_holds_exactly(server, "photos", first + second)
    finally:
        server.stop()
    logs = server.logs()
    assert "rebuilding the index" not in logs
    assert logs.count("replaying the journal after it") == 2


def test_an_index_from_another_data_dir_is_rebuilt_never_served(tmp_path: Path) -> None:
    servers = [ServerProcess(tmp_path / name) for name in ("one", "two")]
    keys = {"one": ["x/1", "x/2", "x/3"], "two": ["y/1", "y/2", "y/3"]}
    for server in servers:
        server.start()
        with server.client() as client:
            assert client.post("/buckets", json={"name": "photos"}).status_code in (200, 201)
        put_objects(server, "photos", keys[server.data_dir.name])
        server.kill()  # no final snapshot: both indexes sit past their journal's snapshot
    one, two = servers
    shutil.rmtree(one.data_dir / INDEX_DIRNAME)
    shutil.copytree(two.data_dir / INDEX_DIRNAME, one.data_dir / INDEX_DIRNAME)
    one.start()
    try:
        assert_holds_exactly(one, "photos", keys["one"])
    finally:
        one.stop()
    assert "is not this journal's" in one.logs()
