"""A standby its primary can no longer continue: it keeps serving what it has, and says it
must be bootstrapped again (``/health`` degraded, ``last_error``), never appending records of
another history. Then the documented way back: an empty data dir, a new bootstrap.
"""

from __future__ import annotations

import shutil
import time

import httpx

from tests.replication.kit import (
    Factory,
    everything,
    standby_env,
    start_standby,
    status,
    wait_caught_up,
)
from tests.serverproc import ServerProcess


def wait_for_bootstrap_demand(standby: ServerProcess) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while True:
        health = httpx.get(standby.url + "/health").json()
        if any("bootstrap again" in reason for reason in health.get("reasons", [])):
            return dict(health)
        assert time.monotonic() < deadline, health
        time.sleep(0.2)


def test_a_standby_whose_records_are_gone_says_so_and_bootstraps_again(
    server_factory: Factory,
) -> None:
    primary = server_factory(SERVICE_JOURNAL_SEGMENT_BYTES="4096", SERVICE_SNAPSHOT_EVERY="10")
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "gone"}).status_code == 201
        standby = start_standby(server_factory, primary)
        with standby.client() as copy:
            wait_caught_up(api, copy)
        standby.stop()
    primary.restart()  # its slot for the standby is gone with the restart
    with primary.client() as api:
        for n in range(200):  # snapshots drop the segments the standby would need
            assert api.put(f"/buckets/gone/objects/k{n}", content=b"%d" % n * 30).is_success
        standby.start()
        wait_for_bootstrap_demand(standby)
        with standby.client() as copy:
            got = status(copy)
            assert "bootstrap again" in str(got["last_error"]) or "no longer" in str(
                got["last_error"]
            )
            assert copy.get("/buckets/gone").status_code == 200  # still serves what it has
        standby.stop()
        shutil.rmtree(standby.data_dir)
        standby.start()
        with standby.client() as copy:
            wait_caught_up(api, copy)
            assert everything(copy) == everything(api)


def test_a_standby_never_follows_another_server(server_factory: Factory) -> None:
    first = server_factory()
    other = server_factory()
    with other.client() as elsewhere:  # a longer history than the standby's: answers 200
        for n in range(10):
            assert elsewhere.post("/buckets", json={"name": f"other-{n}"}).status_code == 201
    with first.client() as api:
        assert api.post("/buckets", json={"name": "mine"}).status_code == 201
        standby = start_standby(server_factory, first)
        with standby.client() as copy:
            wait_caught_up(api, copy)
            before = everything(copy)
    standby.stop()
    standby.env_overrides = standby_env(other)
    standby.start()
    health = wait_for_bootstrap_demand(standby)
    assert "another server" in str(health["reasons"])
    with standby.client() as copy:
        assert everything(copy) == before
