"""Usernames unique without regard to case, per-user caps, and the paged uploads list.

Over HTTP against a real server (``durability=balanced`` so a thousand commits stay quick).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from service.limits.caps import MAX_ACCESS_KEYS_PER_USER, MAX_OPEN_UPLOADS_PER_USER
from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

PASSWORD = "a-long-enough-password-1"


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path_factory.mktemp("accounts") / "data",
        env_overrides={"SERVICE_DURABILITY": "balanced"},
    )
    server.start()
    with server.client() as api:
        assert api.post("/buckets", json={"name": "uploads"}).status_code == 201
    yield server
    server.stop()


@pytest.fixture
def api(proc: ServerProcess) -> Iterator[httpx.Client]:
    with proc.client() as client:
        yield client


def test_usernames_differing_only_in_case_are_one_name(
    api: httpx.Client, proc: ServerProcess
) -> None:
    created = api.post("/users", json={"username": "Alice", "password": PASSWORD})
    assert created.status_code == 201, created.text
    for other in ("alice", "ALICE", "aLiCe"):
        response = api.post("/users", json={"username": other, "password": PASSWORD})
        assert_error(response, 409, "UserAlreadyExists")
    login = httpx.post(proc.api + "/auth/login", json={"username": "ALICE", "password": PASSWORD})
    assert login.status_code == 200, login.text
    assert login.json()["user"]["username"] == "Alice"
    names = [user["username"].lower() for user in api.get("/users").json()["users"]]
    assert names.count("alice") == 1


def test_concurrent_creations_of_one_name_leave_one_user(
    api: httpx.Client, proc: ServerProcess
) -> None:
    def create(name: str) -> int:
        with proc.client() as client:
            return client.post("/users", json={"username": name, "password": PASSWORD}).status_code

    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(create, ["Carol", "carol", "CAROL", "cArOl"]))
    assert sorted(statuses) == [201, 409, 409, 409]


def test_access_keys_per_user_are_capped(api: httpx.Client) -> None:
    user = api.post("/users", json={"username": "keyholder", "password": PASSWORD}).json()
    body = {"user_id": user["user_id"]}

    def create(_: int) -> int:
        return api.post("/access-keys", json=body).status_code

    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(create, range(MAX_ACCESS_KEYS_PER_USER + 5)))
    assert statuses.count(201) == MAX_ACCESS_KEYS_PER_USER
    refused = api.post("/access-keys", json=body)
    assert_error(refused, 409, "InvalidState")
    keys = api.get("/access-keys", params={"user_id": user["user_id"]}).json()["access_keys"]
    assert len(keys) == MAX_ACCESS_KEYS_PER_USER
    assert api.delete(f"/access-keys/{keys[0]['access_key_id']}").status_code == 204
    assert api.post("/access-keys", json=body).status_code == 201


def test_open_uploads_per_user_are_capped(proc: ServerProcess) -> None:
    with proc.client() as admin:
        user = admin.post("/users", json={"username": "uploader", "password": PASSWORD}).json()
        key = admin.post("/access-keys", json={"user_id": user["user_id"]}).json()
    auth = (key["access_key_id"], key["secret_key"])
    with httpx.Client(base_url=proc.api, auth=auth) as mine:
        assert mine.post("/buckets", json={"name": "capped-uploads"}).status_code == 201
        body = {"bucket": "capped-uploads", "key": "k"}

        def init(_: int) -> int:
            return mine.post("/multipart/init", json=body).status_code

        with ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(init, range(MAX_OPEN_UPLOADS_PER_USER + 5)))
        assert statuses.count(201) == MAX_OPEN_UPLOADS_PER_USER
        assert_error(mine.post("/multipart/init", json=body), 409, "InvalidState")
        first = mine.get("/multipart", params={"bucket": "capped-uploads", "limit": 1}).json()
        assert mine.delete(f"/multipart/{first['uploads'][0]['upload_id']}").status_code == 204
        assert mine.post("/multipart/init", json=body).status_code == 201


def test_the_uploads_list_is_paged(api: httpx.Client) -> None:
    created = {
        api.post("/multipart/init", json={"bucket": "uploads", "key": f"k{n % 3}"}).json()[
            "upload_id"
        ]
        for n in range(7)
    }
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"bucket": "uploads", "limit": 3, **({"cursor": cursor} if cursor else {})}
        page = api.get("/multipart", params=params).json()
        assert len(page["uploads"]) <= 3
        seen.extend(upload["upload_id"] for upload in page["uploads"])
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3 and len(seen) == len(set(seen)) and set(seen) == created
    whole = api.get("/multipart", params={"bucket": "uploads"}).json()
    assert [u["upload_id"] for u in whole["uploads"]] == seen and whole["next_cursor"] is None
    for bad in ({"limit": "0"}, {"limit": "1001"}, {"cursor": "bm90LW91cnM"}):
        response = api.get("/multipart", params={"bucket": "uploads", **bad})
        assert_error(response, 400, "InvalidArgument")
