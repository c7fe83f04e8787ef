"""The scrub over HTTP: a payload corrupted on disk is found, quarantined and reported; its
reads answer 500; /health is degraded until the object is overwritten or deleted; a pass
interrupted by a SIGKILL continues where it was."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.storage.layout import PAYLOADS_DIR
from tests.events.receiver import Receiver
from tests.serverproc import ServerProcess

QUIET = {"SERVICE_SCRUB_INTERVAL_DAYS": "3650"}


@pytest.fixture(scope="module")
def scrub_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("scrub") / "data", env_overrides=QUIET)
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def api(scrub_server: ServerProcess) -> Iterator[httpx.Client]:
    with scrub_server.client() as client:
        yield client


def obj(bucket: str, key: str) -> str:
    return f"/buckets/{bucket}/objects/{quote(key)}"


def payload_file(data_dir: Path, content: bytes) -> Path:
    """The payload file holding exactly ``content`` (bodies in these tests are unique)."""
    for path in (data_dir / PAYLOADS_DIR).rglob("*"):
        if path.is_file() and path.read_bytes() == content:
            return path
    raise AssertionError("no payload file holds that content")


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def scrub_now(api: httpx.Client) -> dict[str, object]:
    """Start a pass and wait for it to end; its document."""
    started = api.post("/system/scrub")
    assert started.status_code == 202, started.text
    assert started.json()["state"] == "running"
    deadline = time.monotonic() + 30
    while (doc := api.get("/system/scrub").json())["state"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return doc  # type: ignore[no-any-return]


def health(server: ServerProcess) -> dict[str, object]:
    return httpx.get(server.url + "/health").json()  # type: ignore[no-any-return]


def test_a_flipped_byte_is_found_quarantined_reported_and_cleared_by_an_overwrite(
    api: httpx.Client, scrub_server: ServerProcess, bucket_name: str
) -> None:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    bad, good = b"the bytes that will rot " * 40, b"the bytes that stay " * 40
    api.put(obj(bucket_name, "rotten"), content=bad)
    api.put(obj(bucket_name, "fine"), content=good)
    assert api.get("/system/scrub").json()["state"] == "idle"
    flip_a_byte(payload_file(scrub_server.data_dir, bad))

    doc = scrub_now(api)
    assert doc["finished_at"] and doc["objects_checked"] >= 2  # type: ignore[operator]
    assert doc["bytes_checked"] >= len(bad) + len(good)  # type: ignore[operator]
    (entry,) = doc["corrupt"]  # type: ignore[misc]
    assert (entry["bucket"], entry["key"], entry["version_id"]) == (bucket_name, "rotten", None)
    assert entry["detected_at"] and "SHA-256" in entry["problem"]

    read = api.get(obj(bucket_name, "rotten"))
    assert read.status_code == 500
    assert read.json()["error"]["code"] == "InternalError"
    assert "corrupt" in read.json()["error"]["message"]
    assert api.get(obj(bucket_name, "fine")).content == good
    status = health(scrub_server)
    assert status["status"] == "degraded"
    assert any("corrupt" in reason for reason in status["reasons"])  # type: ignore[attr-defined]
    metrics = api.get("/metrics").text
    assert "service_scrub_corrupt_objects 1.0" in metrics
    assert "service_scrub_bytes_total" in metrics and "service_scrub_bytes_total 0.0" not in metrics

    assert api.put(obj(bucket_name, "rotten"), content=b"written again").is_success
    assert api.get("/system/scrub").json()["corrupt"] == []
    assert health(scrub_server)["status"] == "ok"
    assert api.get(obj(bucket_name, "rotten")).content == b"written again"
    assert scrub_now(api)["corrupt"] == []


def test_a_truncated_version_is_found_and_deleting_it_clears_the_entry(
    api: httpx.Client, scrub_server: ServerProcess, bucket_name: str
) -> None:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    api.patch(f"/buckets/{bucket_name}", json={"versioning_enabled": True})
    old = b"an old version that gets cut short " * 30
    old_id = api.put(obj(bucket_name, "k"), content=old).json()["version_id"]
    api.put(obj(bucket_name, "k"), content=b"the current version, intact")
    path = payload_file(scrub_server.data_dir, old)
    path.write_bytes(old[:100])

    (entry,) = scrub_now(api)["corrupt"]  # type: ignore[misc]
    assert (entry["key"], entry["version_id"]) == ("k", old_id)
    assert "size" in entry["problem"]
    read = api.get(obj(bucket_name, "k"), params={"version_id": old_id})
    assert read.status_code == 500
    assert api.get(obj(bucket_name, "k")).content == b"the current version, intact"
    assert api.delete(obj(bucket_name, "k"), params={"version_id": old_id}).status_code == 204
    assert api.get("/system/scrub").json()["corrupt"] == []
    assert health(scrub_server)["status"] == "ok"


def test_only_an_admin_starts_a_scrub(api: httpx.Client, scrub_server: ServerProcess) -> None:
    body = {"username": "scrubber-user", "password": "pw-0123456789", "role": "user"}
    user = api.post("/users", json=body)
    assert user.status_code == 201, user.text
    key = api.post("/access-keys", json={"user_id": user.json()["user_id"], "name": "t"})
    assert key.status_code == 201, key.text
    creds = (key.json()["access_key_id"], key.json()["secret_key"])
    response = httpx.post(scrub_server.api + "/system/scrub", auth=creds)
    assert response.status_code == 403
    response = httpx.post(scrub_server.api + "/system/lifecycle/run", auth=creds)
    assert response.status_code == 403


def test_a_pass_interrupted_by_a_sigkill_continues_where_it_was(
    server_factory: Callable[..., ServerProcess],
) -> None:
    # At 200 bytes a second the first two objects take 0.5 s and 1 s, the six others 10 s
    # each: the pass is surely still running for the test's next requests, and a restarted
    # pass checks nothing new for 10 s, however slow a loaded machine makes the test.
    proc = server_factory(SERVICE_SCRUB_RATE_MBPS="0.0002", **QUIET)
    checkpoint = proc.data_dir / "scrub.json"
    with proc.client() as api:
        assert api.post("/buckets", json={"name": "slow-scrub"}).status_code == 201
        for number, size in enumerate([100, 200] + [2000] * 6):
            stored = api.put(obj("slow-scrub", f"k{number}"), content=bytes([number]) * size)
            assert stored.status_code == 200, stored.text
        assert api.post("/system/scrub").status_code == 202
        busy = api.post("/system/scrub")
        assert busy.status_code == 409 and busy.json()["error"]["code"] == "InvalidState"
        deadline = time.monotonic() + 30
        while (saved := json.loads(checkpoint.read_text()))["objects_checked"] < 1:
            assert time.monotonic() < deadline, "the pass never checkpointed its progress"
            time.sleep(0.05)
        before = api.get("/system/scrub").json()  # the live count: at or past the checkpoint
        assert before["state"] == "running" and saved["running"]
        assert saved["objects_checked"] <= before["objects_checked"] < 8
        proc.kill()
    proc.start()
    with proc.client() as api:
        resumed = api.get("/system/scrub").json()
        assert resumed["state"] == "running"
        assert resumed["started_at"] == before["started_at"]
        # The counts of the last checkpoint, not a new pass's.
        assert saved["objects_checked"] <= resumed["objects_checked"] <= before["objects_checked"]
    proc.restart(extra_env={"SERVICE_SCRUB_RATE_MBPS": "50"})  # stopped mid-pass: it goes on
    with proc.client() as api:
        deadline = time.monotonic() + 30
        while (doc := api.get("/system/scrub").json())["state"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert doc["started_at"] == before["started_at"]
    assert doc["finished_at"] and doc["corrupt"] == []
    # Continued from each checkpoint's cursor with its counts: 8 in all (one may be read twice).
    assert 8 <= doc["objects_checked"] <= 9


def test_every_upkeep_metric_is_documented(api: httpx.Client) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    upkeep = ("service_lifecycle_", "service_events_", "service_webhook_", "service_scrub_")
    found = 0
    for family in text_string_to_metric_families(api.get("/metrics").text):
        if family.name.startswith(upkeep) and not family.name.endswith("_created"):
            exposed = family.name + "_total" if family.type == "counter" else family.name
            assert f"`{exposed}`" in doc, f"{exposed} missing from docs/operations.md"
            found += 1
    assert found >= 14


def test_checkpoints_left_half_written_by_a_crash_do_not_stop_the_next_ones(
    server_factory: Callable[..., ServerProcess],
) -> None:
    proc = server_factory(start=False, **QUIET)
    (proc.data_dir / "events").mkdir(parents=True)
    for stale in ("scrub.json.0.tmp", "scrub.json.1.tmp", "events/webhooks.json.0.tmp"):
        (proc.data_dir / stale).write_bytes(b'{"torn')
    proc.start()
    with Receiver() as receiver, proc.client() as api:
        assert api.post("/buckets", json={"name": "stale"}).status_code == 201
        hook = {"id": "h", "url": receiver.url, "secret": "s"}
        assert api.put("/buckets/stale/notifications", json={"webhooks": [hook]}).is_success
        api.put(obj("stale", "k"), content=b"v")
        doc = scrub_now(api)
        assert doc["objects_checked"] == 1
        deadline = time.monotonic() + 10
        checkpoint = proc.data_dir / "events" / "webhooks.json"
        while not (checkpoint.exists() and '"delivered":1' in checkpoint.read_text()):
            assert time.monotonic() < deadline, "the webhook checkpoint was never written"
            time.sleep(0.05)
    assert json.loads((proc.data_dir / "scrub.json").read_text())["objects_checked"] == 1
