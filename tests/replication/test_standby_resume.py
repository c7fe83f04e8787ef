"""A standby resumes where it stopped: after its own SIGKILL (during the bootstrap, without
copying again the payloads it has; while following), after its primary's restart, and
through a network that cuts every connection again and again.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest

from tests.replication.kit import (
    Factory,
    everything,
    standby_env,
    start_standby,
    status,
    wait_caught_up,
)
from tests.replication.proxy import CuttingProxy


def fetched_bytes(client: httpx.Client) -> float:
    text = client.get("/metrics").text
    found = re.search(r"^service_replication_fetched_bytes_total (\S+)$", text, re.M)
    assert found, text[:2000]
    return float(found.group(1))


def test_a_standby_killed_during_its_bootstrap_resumes_without_copying_again(
    server_factory: Factory,
) -> None:
    primary = server_factory()
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "many"}).status_code == 201
        for n in range(300):
            assert api.put(f"/buckets/many/objects/o{n:03d}", content=b"%d" % n * 50).is_success
        standby = server_factory(start=False, **standby_env(primary))
        # Killed once the first batch of 256 payloads is written (a bootstrap syncs them
        # with the later ones before its commit point; a SIGKILL leaves the page cache).
        with pytest.raises(RuntimeError):
            standby.start(extra_env={"SERVICE_CRASH_POINT": "standby.payloads_written:1"})
        assert standby.start_exit == -9
        standby.start()
        copied = re.findall(r"bootstrapped at record \d+: (\d+) payloads copied", standby.logs())
        assert copied == ["44"], standby.logs()[-3000:]
        with standby.client() as copy:
            wait_caught_up(api, copy)
            assert everything(copy) == everything(api)


def test_a_standby_killed_while_caught_up_copies_nothing_again(server_factory: Factory) -> None:
    primary = server_factory()
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "bkt"}).status_code == 201
        for n in range(20):
            assert api.put(f"/buckets/bkt/objects/k{n}", content=b"y" * 3000).is_success
        standby = start_standby(server_factory, primary)
        with standby.client() as copy:
            wait_caught_up(api, copy)
        for n in range(20, 40):
            assert api.put(f"/buckets/bkt/objects/k{n}", content=b"z" * 3000).is_success
        with standby.client() as copy:
            wait_caught_up(api, copy)
            assert fetched_bytes(copy) == 20 * 3000  # followed, not bootstrapped again
        standby.restart(crash=True)
        with standby.client() as copy:
            wait_caught_up(api, copy)
            assert everything(copy) == everything(api)
            assert fetched_bytes(copy) == 0
        assert "bootstrapping" not in standby.logs().split("standby of")[-1]


def test_a_standby_follows_across_its_primary_restart(server_factory: Factory) -> None:
    primary = server_factory()
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "bkt"}).status_code == 201
        assert api.put("/buckets/bkt/objects/before", content=b"before").is_success
    standby = start_standby(server_factory, primary, SERVICE_REPLICATION_MAX_LAG="1")
    with standby.client() as copy, primary.client() as api:
        wait_caught_up(api, copy)
        primary.stop()  # the standby's long poll is answered at once, not held to its end
        # Out of touch, its lag counts from its last catch-up: degraded within a second or
        # two, not after a healthy long poll's whole window (10 s, then 5 s of slack).
        deadline = time.monotonic() + 12
        while httpx.get(standby.url + "/health").json()["status"] != "degraded":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert copy.get("/buckets/bkt/objects/before").content == b"before"  # reads go on
        primary.start()
        assert api.put("/buckets/bkt/objects/after", content=b"after").is_success
        wait_caught_up(api, copy)
        assert copy.get("/buckets/bkt/objects/after").content == b"after"
        assert everything(copy) == everything(api)
        deadline = time.monotonic() + 30
        while httpx.get(standby.url + "/health").json()["status"] != "ok":
            assert time.monotonic() < deadline
            time.sleep(0.2)


def test_a_standby_follows_through_a_network_that_keeps_cutting(server_factory: Factory) -> None:
    primary = server_factory()
    proxy = CuttingProxy(primary.port)
    try:
        with primary.client() as api:
            assert api.post("/buckets", json={"name": "bkt"}).status_code == 201
            standby = server_factory(
                SERVICE_FOLLOW=proxy.url,
                SERVICE_FOLLOW_CREDENTIALS=f"{primary.access_key}:{primary.secret_key}",
            )
            for n in range(60):
                body = bytes([n]) * (1000 + 4000 * n)
                assert api.put(f"/buckets/bkt/objects/k{n}", content=body).is_success
                if n % 5 == 4:  # cut while the standby is mid-request, again and again
                    time.sleep(0.05)
                    proxy.cut()
            assert proxy.cuts == 12
            with standby.client() as copy:
                wait_caught_up(api, copy)
                assert everything(copy) == everything(api)
                # The last cut may fall on the long poll that follows the last batch; the
                # error clears when the next poll is answered (a retry, then one poll wait).
                deadline = time.monotonic() + 30
                while status(copy)["last_error"] is not None:
                    assert time.monotonic() < deadline, status(copy)
                    time.sleep(0.2)
            assert "failed (will retry)" in standby.logs()  # the cuts reached the standby
    finally:
        proxy.close()
