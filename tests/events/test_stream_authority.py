"""An event stream is authorised for as long as it is open, with one serving process and with
two (a worker forwards streams to the writer).

Each test opens a stream, takes away what authorised it (the key, the user, the token, the
role, the bucket), and checks that the stream ends with one ``event: end`` naming the reason
and then closes -- while idle (the stream re-checks at least once a second) and before any
event committed after the change (it re-checks before it sends).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from service.client import ServiceClient, ServiceError
from tests.events.streamkit import Watch, start_servers
from tests.http.identitykit import Account, create_account, token_of
from tests.serverproc import ServerProcess

TOKEN_TTL_SECONDS = 6


@pytest.fixture(scope="module", params=["1", "2"], ids=["one-process", "two-processes"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        tmp_path_factory.mktemp("stream-authority") / "data",
        env_overrides={
            "SERVICE_WORKERS": request.param,
            "SERVICE_TOKEN_TTL": str(TOKEN_TTL_SECONDS),
        },
    )
    start_servers(proc)
    yield proc
    proc.stop()


@pytest.fixture
def admin(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def obj(bucket: str, key: str) -> str:
    return f"/buckets/{bucket}/objects/{quote(key)}"


def owned_bucket(server: ServerProcess, account: Account, name: str) -> None:
    with account.client(server) as client:
        assert client.post("/buckets", json={"name": name}).status_code == 201


def owner_of_new_bucket(server: ServerProcess, admin: httpx.Client, name: str) -> Account:
    """A new user, and the bucket ``name`` it created."""
    account = create_account(admin)
    owned_bucket(server, account, name)
    return account


def put(client: httpx.Client, bucket: str, key: str) -> None:
    response = client.put(obj(bucket, key), content=b"x")
    assert response.status_code == 200, response.text


def assert_end(watch: Watch, reason: str) -> None:
    end = watch.wait_end()
    assert end.data["reason"] == reason, end
    assert isinstance(end.data["message"], str) and end.data["message"]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("revoke_key", "access_key_revoked"),
        ("delete_key", "access_key_deleted"),
        ("disable_user", "user_disabled"),
        ("delete_user", "user_deleted"),
    ],
)
def test_a_stream_ends_before_the_next_event_once_its_credentials_go(
    server: ServerProcess, admin: httpx.Client, bucket_name: str, change: str, reason: str
) -> None:
    account = owner_of_new_bucket(server, admin, bucket_name)
    with Watch(server.api, bucket_name, auth=account.auth) as watch:
        assert watch.status == 200
        with account.client(server) as client:
            put(client, bucket_name, "before")
        watch.wait_events(1)
        key_path = f"/access-keys/{account.access_key}"
        user_path = f"/users/{account.user_id}"
        taken = {
            "revoke_key": lambda: admin.patch(key_path, json={"status": "revoked"}),
            "delete_key": lambda: admin.delete(key_path),
            "disable_user": lambda: admin.patch(user_path, json={"status": "disabled"}),
            "delete_user": lambda: admin.delete(user_path),
        }[change]()
        assert taken.status_code in (200, 204), taken.text
        put(admin, bucket_name, "after")  # committed after the change: never sent
        assert_end(watch, reason)
    assert [event["key"] for event in watch.events()] == ["before"]


def test_an_idle_stream_ends_within_its_recheck_once_the_key_is_revoked(
    server: ServerProcess, admin: httpx.Client, bucket_name: str
) -> None:
    account = owner_of_new_bucket(server, admin, bucket_name)
    with Watch(server.api, bucket_name, auth=account.auth) as watch:
        assert watch.status == 200
        revoked = admin.patch(f"/access-keys/{account.access_key}", json={"status": "revoked"})
        assert revoked.status_code == 200
        assert_end(watch, "access_key_revoked")
    assert watch.events() == []


def test_a_token_stream_ends_when_the_token_expires(
    server: ServerProcess, admin: httpx.Client, bucket_name: str
) -> None:
    account = owner_of_new_bucket(server, admin, bucket_name)
    token = token_of(server, account)
    with Watch(server.api, bucket_name, headers={"Authorization": f"Bearer {token}"}) as watch:
        assert watch.status == 200, watch.error_body
        assert_end(watch, "token_expired")


def test_a_token_stream_ends_when_the_password_changes(
    server: ServerProcess, admin: httpx.Client, bucket_name: str
) -> None:
    account = owner_of_new_bucket(server, admin, bucket_name)
    token = token_of(server, account)
    with Watch(server.api, bucket_name, headers={"Authorization": f"Bearer {token}"}) as watch:
        assert watch.status == 200, watch.error_body
        changed = admin.patch(f"/users/{account.user_id}", json={"password": "pw-another-one-1"})
        assert changed.status_code == 200, changed.text
        assert_end(watch, "token_revoked")


def test_a_stream_ends_when_its_reader_loses_the_right_to_read(
    server: ServerProcess, admin: httpx.Client, bucket_name: str
) -> None:
    owner = create_account(admin)
    reader = create_account(admin, role="admin", prefix="second-admin")
    owned_bucket(server, owner, bucket_name)
    with Watch(server.api, bucket_name, auth=reader.auth) as watch:
        assert watch.status == 200
        demoted = admin.patch(f"/users/{reader.user_id}", json={"role": "user"})
        assert demoted.status_code == 200, demoted.text
        put(admin, bucket_name, "after")
        assert_end(watch, "access_denied")
    assert watch.events() == []


def test_a_stream_ends_when_its_bucket_is_deleted(
    server: ServerProcess, admin: httpx.Client, bucket_name: str
) -> None:
    assert admin.post("/buckets", json={"name": bucket_name}).status_code == 201
    with Watch(server.api, bucket_name, auth=server.auth) as watch:
        put(admin, bucket_name, "k")
        watch.wait_events(1)
        assert admin.delete(f"/buckets/{bucket_name}", params={"force": "true"}).status_code == 204
        assert_end(watch, "bucket_deleted")


def test_a_recreated_bucket_is_a_new_bucket_for_streams_and_replay(
    server: ServerProcess, admin: httpx.Client, bucket_name: str
) -> None:
    first, second = create_account(admin), create_account(admin)
    owned_bucket(server, first, bucket_name)
    with first.client(server) as client:
        for number in range(3):
            put(client, bucket_name, f"first-{number}")
    with Watch(server.api, bucket_name, auth=first.auth, params={"since": "0"}) as old:
        old.wait_events(3)
        with first.client(server) as client:
            gone = client.delete(f"/buckets/{bucket_name}", params={"force": "true"})
            assert gone.status_code == 204
        owned_bucket(server, second, bucket_name)
        with second.client(server) as client:
            put(client, bucket_name, "second-0")
        assert_end(old, "bucket_deleted")
    assert [event["key"] for event in old.events()] == [f"first-{n}" for n in range(3)]
    with Watch(server.api, bucket_name, auth=second.auth, params={"since": "0"}) as new:
        assert new.status == 200
        with second.client(server) as client:
            put(client, bucket_name, "second-1")
        events = new.wait_events(2)
    assert [event["key"] for event in events] == ["second-0", "second-1"]
    bucket = admin.get(f"/buckets/{bucket_name}").json()
    assert {event["bucket_id"] for event in events} == {bucket["bucket_id"]}
    assert bucket["bucket_id"] not in {event["bucket_id"] for event in old.events()}


def test_a_bucket_recreated_by_its_own_owner_ends_the_old_stream(
    server: ServerProcess, admin: httpx.Client, bucket_name: str
) -> None:
    account = owner_of_new_bucket(server, admin, bucket_name)
    with Watch(server.api, bucket_name, auth=account.auth) as old:
        assert old.status == 200
        with account.client(server) as client:
            assert client.delete(f"/buckets/{bucket_name}").status_code == 204
            assert client.post("/buckets", json={"name": bucket_name}).status_code == 201
            put(client, bucket_name, "new")
        assert_end(old, "bucket_deleted")
    assert old.events() == []


def test_the_client_raises_what_ended_its_stream(
    server: ServerProcess, admin: httpx.Client, bucket_name: str
) -> None:
    account = owner_of_new_bucket(server, admin, bucket_name)
    url = f"http://{account.access_key}:{account.secret_key}@127.0.0.1:{server.port}"
    raised: list[BaseException] = []
    received: list[str] = []

    def read() -> None:
        with ServiceClient(url, timeout=None) as client:
            try:
                for event in client.bucket(bucket_name).events():
                    received.append(event.key)
            except ServiceError as error:
                raised.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 20
    with account.client(server) as client:
        while not received:  # the stream is open once an event comes through
            assert time.monotonic() < deadline
            put(client, bucket_name, "seen")
            time.sleep(0.2)
    assert admin.patch(f"/access-keys/{account.access_key}", json={"status": "revoked"}).is_success
    reader.join(20)
    assert not reader.is_alive(), "the client kept reading after the stream ended"
    (error,) = raised
    assert isinstance(error, ServiceError) and error.code == "Unauthorized"
    assert "revoked" in str(error)
