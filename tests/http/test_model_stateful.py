"""The live server behaves like a model dict: a Hypothesis state machine over HTTP.

Random sequences of put / overwrite / get / ranged get / delete / list (with prefixes and
page sizes) against one bucket must agree with a plain ``dict`` of key -> bytes.
"""

from __future__ import annotations

import itertools
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tests.serverproc import ServerProcess

KEYS = st.sampled_from(["a", "a/b", "a/c", "b", "b/x/y", "c d", "é", "z/z/z"])
BODIES = st.binary(min_size=0, max_size=2048)
_bucket_numbers = itertools.count()


class ServerMatchesModel(RuleBasedStateMachine):
    server: ServerProcess

    def __init__(self) -> None:
        super().__init__()
        self.client = self.server.client()
        self.bucket = f"model-{next(_bucket_numbers)}"
        self.model: dict[str, bytes] = {}

    @initialize()
    def create_bucket(self) -> None:
        assert self.client.post("/buckets", json={"name": self.bucket}).status_code == 201

    def url(self, key: str) -> str:
        return f"/buckets/{self.bucket}/objects/{quote(key, safe='/')}"

    @rule(key=KEYS, body=BODIES)
    def put(self, key: str, body: bytes) -> None:
        response = self.client.put(self.url(key), content=body)
        assert response.status_code == 200, response.text
        self.model[key] = body

    @rule(key=KEYS)
    def get(self, key: str) -> None:
        response = self.client.get(self.url(key))
        if key in self.model:
            assert response.status_code == 200
            assert response.content == self.model[key]
        else:
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "NoSuchKey"

    @rule(key=KEYS, start=st.integers(0, 3000), length=st.integers(1, 3000))
    def ranged_get(self, key: str, start: int, length: int) -> None:
        response = self.client.get(
            self.url(key), headers={"Range": f"bytes={start}-{start + length - 1}"}
        )
        if key not in self.model:
            assert response.status_code == 404
            return
        data = self.model[key]
        if start >= len(data):
            assert response.status_code == 416
            assert response.headers["Content-Range"] == f"bytes */{len(data)}"
        else:
            assert response.status_code == 206
            assert response.content == data[start : start + length]

    @rule(key=KEYS)
    def delete(self, key: str) -> None:
        response = self.client.delete(self.url(key))
        if key in self.model:
            assert response.status_code == 204
            del self.model[key]
        else:
            assert response.status_code == 404

    @rule(prefix=st.sampled_from(["", "a", "a/", "b", "z/"]), limit=st.integers(1, 4))
    def list_pages(self, prefix: str, limit: int) -> None:
        keys: list[str] = []
        cursor = None
        while True:
            params: dict[str, str | int] = {"prefix": prefix, "limit": limit}
            if cursor:
                params["cursor"] = cursor
            body = self.client.get(f"/buckets/{self.bucket}/objects", params=params).json()
            assert len(body["objects"]) <= limit
            keys += [item["key"] for item in body["objects"]]
            cursor = body["next_cursor"]
            if cursor is None:
                break
        assert keys == sorted(key for key in self.model if key.startswith(prefix))

    @invariant()
    def usage_matches(self) -> None:
        usage = self.client.get(f"/buckets/{self.bucket}").json()["usage"]
        assert usage == {
            "object_count": len(self.model),
            "size_bytes": sum(len(body) for body in self.model.values()),
        }

    def teardown(self) -> None:
        self.client.close()


@pytest.mark.e2e
def test_server_behaves_like_a_dict(server: ServerProcess) -> None:
    ServerMatchesModel.server = server
    runner = ServerMatchesModel.TestCase
    runner.settings = settings(
        max_examples=25,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    runner().runTest()
