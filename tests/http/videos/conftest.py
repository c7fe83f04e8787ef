"""Fixtures of the video tests: the clips (made once per module) and the bucket holding one.

``mallory`` is a second user, owner of nothing here, for the ownership tests.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.http.identitykit import Account, create_account
from tests.http.videokit import make_clip
from tests.serverproc import ServerProcess


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return make_clip(tmp_path_factory.mktemp("clips") / "clip.mp4")


@pytest.fixture(scope="module")
def silent_clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return make_clip(tmp_path_factory.mktemp("clips") / "silent.mp4", audio=False)


@pytest.fixture
def bucket(api: httpx.Client, bucket_name: str, clip: bytes) -> str:
    """A bucket holding ``clip.mp4``."""
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    put = api.put(f"/buckets/{bucket_name}/objects/clip.mp4", content=clip)
    assert put.status_code == 200, put.text
    return bucket_name


@pytest.fixture(scope="module")
def mallory(server: ServerProcess) -> Account:
    with server.client() as admin:
        return create_account(admin, prefix="mallory")


@pytest.fixture
def as_mallory(server: ServerProcess, mallory: Account) -> Iterator[httpx.Client]:
    with mallory.client(server) as client:
        yield client
