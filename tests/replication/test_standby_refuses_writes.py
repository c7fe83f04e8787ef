"""Every write sent to a standby answers 503 ReadOnlyStandby naming the primary, and changes
nothing there; a scrub pass (maintenance of its own disk) still starts. With one serving
process and with the default writer + worker, whose worker refuses on its own.
"""

from __future__ import annotations

import httpx
import pytest

from tests.replication.kit import (
    Factory,
    everything,
    populate,
    start_standby,
    status,
    wait_caught_up,
)

WRITES: list[tuple[str, str, dict[str, object]]] = [
    ("PUT", "/buckets/photos/objects/new.bin", {"content": b"new"}),
    ("PUT", "/buckets/photos/objects/p01.bin", {"content": b"overwrite"}),
    ("DELETE", "/buckets/photos/objects/p01.bin", {}),
    ("POST", "/buckets", {"json": {"name": "another"}}),
    ("DELETE", "/buckets/photos", {}),
    ("PATCH", "/buckets/photos", {"json": {"versioning_enabled": True}}),
    ("POST", "/users", {"json": {"username": "dave", "password": "dave-password-1"}}),
    ("POST", "/access-keys", {"json": {"name": "more"}}),
    ("PUT", "/buckets/photos/lifecycle", {"json": {"rules": []}}),
    ("DELETE", "/buckets/photos/lifecycle", {}),
    ("PUT", "/buckets/docs/notifications", {"json": {"webhooks": []}}),
    ("POST", "/multipart/init", {"json": {"bucket": "photos", "key": "mp"}}),
    ("POST", "/buckets/photos/batch", {"content": b"\0" * 1024}),
    ("POST", "/presign", {"json": {"bucket": "photos", "key": "p01.bin", "method": "PUT"}}),
    ("POST", "/images/optimize", {"json": {"bucket": "photos", "key": "p01.bin"}}),
    ("POST", "/videos/jobs", {"json": {"bucket": "photos", "key": "p01.bin", "formats": ["hls"]}}),
    ("POST", "/system/lifecycle/run", {}),
]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_every_write_is_refused_and_changes_nothing(server_factory: Factory, workers: str) -> None:
    primary = server_factory()
    with primary.client() as api:
        populate(api)
        standby = start_standby(server_factory, primary, SERVICE_WORKERS=workers)
        with standby.client() as copy:
            wait_caught_up(api, copy)
            before = everything(copy)
            applied = status(copy)["applied_sequence"]
            for method, path, extra in WRITES:
                answer = copy.request(method, path, **extra)  # type: ignore[arg-type]
                assert answer.status_code == 503, (method, path, answer.text)
                assert answer.json()["error"]["code"] == "ReadOnlyStandby", (method, path)
                assert answer.headers["X-Primary-Url"] == primary.url, (method, path)
            # Without credentials too: a standby refuses before it looks at who asks.
            anonymous = httpx.put(standby.api + "/buckets/photos/objects/x", content=b"x")
            assert anonymous.status_code == 503
            login = httpx.post(
                standby.api + "/auth/login", json={"username": "admin", "password": "x"}
            )
            assert login.status_code == 503
            assert everything(copy) == before
            assert status(copy)["applied_sequence"] == applied
            scrub = copy.post("/system/scrub")
            assert scrub.status_code == 202, scrub.text
            assert everything(copy) == everything(api)
