"""Object events over Server-Sent Events: their shape and types, resume with Last-Event-ID
and ?since=, resume across a SIGKILL (events read back from the event log's files), and 410
EventsExpired once retention dropped what a client asks for."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.serverproc import ServerProcess


@pytest.fixture(scope="module")
def ev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        tmp_path_factory.mktemp("events") / "data",
        env_overrides={"SERVICE_EVENTS_SEGMENT_EVENTS": "3"},
    )
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def api(ev_server: ServerProcess) -> Iterator[httpx.Client]:
    with ev_server.client() as client:
        yield client


def obj(bucket: str, key: str) -> str:
    return f"/buckets/{bucket}/objects/{quote(key)}"


def read_events(
    api: httpx.Client,
    bucket: str,
    count: int,
    *,
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The first ``count`` events of a new stream (fails if they do not come within 10 s)."""
    found: list[dict[str, Any]] = []
    timeout = httpx.Timeout(10.0)
    url = f"/buckets/{bucket}/events"
    with api.stream("GET", url, headers=headers, params=params, timeout=timeout) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["Content-Type"].startswith("text/event-stream")
        current: dict[str, Any] = {}
        for line in response.iter_lines():
            if line.startswith("id: "):
                current["id"] = int(line[4:])
            elif line.startswith("data: "):
                current["data"] = json.loads(line[6:])
            elif not line and "data" in current:
                assert current["id"] == current["data"]["sequence"]
                found.append(current["data"])
                current = {}
                if len(found) >= count:
                    break
    return found


def open_stream(api: httpx.Client, bucket: str, since: str) -> tuple[int, bytes]:
    """The status of a new stream, and its body when it is an error (a stream never ends)."""
    with api.stream("GET", f"/buckets/{bucket}/events", params={"since": since}) as response:
        return response.status_code, b"" if response.status_code == 200 else response.read()


def summary(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(item["type"], item["key"]) for item in items]


def test_every_change_is_an_event_with_the_contract_fields(
    api: httpx.Client, bucket_name: str
) -> None:
    created = api.post("/buckets", json={"name": bucket_name})
    assert created.status_code == 201
    start = read_events_after_now(api, bucket_name)
    api.put(obj(bucket_name, "a"), content=b"hello")
    api.put(obj(bucket_name, "a"), content=b"hello again")
    api.delete(obj(bucket_name, "a"))
    api.patch(f"/buckets/{bucket_name}", json={"versioning_enabled": True})
    version = api.put(obj(bucket_name, "v"), content=b"1").json()["version_id"]
    api.delete(obj(bucket_name, "v"))
    api.delete(obj(bucket_name, "v"), params={"version_id": version})
    items = read_events(api, bucket_name, 6, params={"since": str(start)})
    assert summary(items) == [
        ("object.created", "a"),
        ("object.created", "a"),
        ("object.deleted", "a"),
        ("object.created", "v"),
        ("object.delete_marker_created", "v"),
        ("object.version_deleted", "v"),
    ]
    first = items[0]
    assert set(first) == {
        "event_id",
        "sequence",
        "type",
        "bucket",
        "bucket_id",
        "key",
        "version_id",
        "size_bytes",
        "etag",
        "time",
    }
    assert first["bucket"] == bucket_name and first["version_id"] is None
    assert {item["bucket_id"] for item in items} == {created.json()["bucket_id"]}
    assert first["size_bytes"] == 5 and first["etag"] == hashlib.sha256(b"hello").hexdigest()
    assert items[3]["version_id"] == version == items[5]["version_id"]
    assert items[4]["etag"] is None and items[4]["size_bytes"] == 0
    sequences = [item["sequence"] for item in items]
    assert sequences == sorted(sequences) and len(set(sequences)) == 6
    assert len({item["event_id"] for item in items}) == 6


def read_events_after_now(api: httpx.Client, bucket: str) -> int:
    """The newest sequence of the server's events so far (a resume point for 'from now')."""
    info = api.get("/system/info").json()
    return int(info["journal"]["last_sequence"])


def test_last_event_id_resumes_after_that_event_and_other_buckets_are_filtered(
    api: httpx.Client, bucket_name: str
) -> None:
    other = bucket_name + "-other"
    for name in (bucket_name, other):
        assert api.post("/buckets", json={"name": name}).status_code == 201
    start = read_events_after_now(api, bucket_name)
    for number in range(5):
        api.put(obj(bucket_name, f"k{number}"), content=b"x")
        api.put(obj(other, f"o{number}"), content=b"y")
    first_two = read_events(api, bucket_name, 2, params={"since": str(start)})
    assert [item["key"] for item in first_two] == ["k0", "k1"]
    rest = read_events(
        api, bucket_name, 3, headers={"Last-Event-ID": str(first_two[-1]["sequence"])}
    )
    assert [item["key"] for item in rest] == ["k2", "k3", "k4"]
    assert {item["bucket"] for item in rest} == {bucket_name}


def test_a_live_stream_delivers_new_events(api: httpx.Client, bucket_name: str) -> None:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    url = f"/buckets/{bucket_name}/events"
    with api.stream("GET", url, timeout=httpx.Timeout(10.0)) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        assert next(lines).startswith(":")
        with httpx.Client(base_url=api.base_url, auth=api.auth) as writer:
            writer.put(obj(bucket_name, "live"), content=b"now")
        data = next(line for line in lines if line.startswith("data: "))
    assert json.loads(data[6:])["key"] == "live"


BAD_RESUME_POINTS = ["abc", "-1", "1" * 30, "1" * 19, "١٢", " 1", "1 ", "+1", "1_0", "0x1", ""]
"""Not 1 to 18 ASCII digits (``service.common.numbers``): a sign, a space on either side, a
19th digit, other scripts' digits, an underscore, hex, nothing."""


@pytest.mark.parametrize("value", BAD_RESUME_POINTS)
def test_a_bad_resume_point_is_invalid_argument(
    api: httpx.Client, bucket_name: str, value: str
) -> None:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    status, body = open_stream(api, bucket_name, value)
    assert status == 400
    assert json.loads(body)["error"]["code"] == "InvalidArgument"


@pytest.mark.parametrize("value", ["abc", "-1", "1" * 19, "+1", "1_0", "1 1"])
def test_a_bad_last_event_id_is_invalid_argument(
    api: httpx.Client, bucket_name: str, value: str
) -> None:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    url = f"/buckets/{bucket_name}/events"
    with api.stream("GET", url, headers={"Last-Event-ID": value}) as response:
        assert response.status_code == 400
        assert json.loads(response.read())["error"]["code"] == "InvalidArgument"


def test_the_largest_resume_point_is_accepted(api: httpx.Client, bucket_name: str) -> None:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    assert open_stream(api, bucket_name, "9" * 18) == (200, b"")


def test_events_of_a_missing_bucket_are_404(api: httpx.Client) -> None:
    response = api.get("/buckets/no-such-events-bucket/events")
    assert response.status_code == 404 and response.json()["error"]["code"] == "NoSuchBucket"


def test_events_survive_a_sigkill_and_resume_from_the_files(
    server_factory: Callable[..., ServerProcess],
) -> None:
    proc = server_factory(SERVICE_EVENTS_SEGMENT_EVENTS="4", SERVICE_SNAPSHOT_EVERY="7")
    with proc.client() as api:
        assert api.post("/buckets", json={"name": "crashy"}).status_code == 201
        for number in range(20):
            api.put(obj("crashy", f"k{number:02d}"), content=b"z")
        time.sleep(0.5)  # some events in the files, the newest perhaps not
        for number in range(20, 25):
            api.put(obj("crashy", f"k{number:02d}"), content=b"z")
    proc.kill()
    proc.start()
    with proc.client() as api:
        items = read_events(api, "crashy", 25, params={"since": "0"})
        assert [item["key"] for item in items] == [f"k{n:02d}" for n in range(25)]
        middle = items[11]["sequence"]
        again = read_events(api, "crashy", 13, headers={"Last-Event-ID": str(middle)})
        assert again == items[12:]


def test_a_resume_point_past_retention_is_410_events_expired(
    server_factory: Callable[..., ServerProcess],
) -> None:
    proc = server_factory(
        SERVICE_EVENTS_SEGMENT_EVENTS="2",
        SERVICE_EVENTS_RETENTION_SECONDS="0",
        SERVICE_EVENTS_RETENTION_COUNT="2",
    )
    with proc.client() as api:
        assert api.post("/buckets", json={"name": "short-memory"}).status_code == 201
        for number in range(10):
            api.put(obj("short-memory", f"k{number}"), content=b"z")
        deadline = time.monotonic() + 10
        status, body = open_stream(api, "short-memory", "0")
        while status == 200 and time.monotonic() < deadline:
            time.sleep(0.2)
            api.put(obj("short-memory", "tick"), content=b"t")
            status, body = open_stream(api, "short-memory", "0")
        assert status == 410, body
        assert json.loads(body)["error"]["code"] == "EventsExpired"
        last = read_events_after_now(api, "short-memory")
        api.put(obj("short-memory", "after"), content=b"a")
        assert read_events(api, "short-memory", 1, params={"since": str(last)})[0]["key"] == "after"
