"""The promotion soak (``make soak``): sync replication, the primary SIGKILLed under
concurrent writes and its data dir deleted, the standby promoted, and every write the dead
primary acknowledged is on the new primary (0 lost); then a fresh standby bootstraps from the
new primary and the next cycle kills that one.

Each cycle: writers PUT new keys for a random moment; the primary is SIGKILLed and its data
dir removed (the disk is lost); the standby is promoted (``POST /api/v1/replication/promote``,
its ``SERVICE_FOLLOW`` still naming the dead primary) and must hold every acknowledged key with
its etag, at the epoch after the dead primary's; a new standby with an empty data dir follows
it. ``PROMOTE_SOAK_CYCLES`` (default 50) sets the number of cycles; the fast suite promotes in
``tests/replication/test_promote.py``.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from tests.crash.test_standby_soak import write_until
from tests.replication.kit import standby_env, status, wait_caught_up
from tests.replication.promotekit import promote
from tests.serverproc import ServerProcess

CYCLES = int(os.environ.get("PROMOTE_SOAK_CYCLES", "50"))
SYNC = {"SERVICE_REPLICATION": "sync", "SERVICE_REPLICATION_TIMEOUT": "30"}


def new_standby(tmp_path: Path, number: int, primary: ServerProcess) -> ServerProcess:
    env = {**SYNC, **standby_env(primary)}
    standby = ServerProcess(tmp_path / f"node{number}", env_overrides=env)
    standby.start()
    return standby


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_promote_soak_loses_no_acknowledged_write(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("CRASH_SEED", "0")) or None)
    primary = ServerProcess(tmp_path / "node0", env_overrides=SYNC)
    primary.start()
    standby = new_standby(tmp_path, 1, primary)
    nodes = [primary, standby]
    try:
        with primary.client() as api, standby.client() as copy:
            assert api.post("/buckets", json={"name": "soak"}).status_code == 201
            wait_caught_up(api, copy)
        checked = lost = 0
        for cycle in range(CYCLES):
            acknowledged = write_until(primary, f"c{cycle}", rng.uniform(0.2, 1.5))
            shutil.rmtree(primary.data_dir)  # its disk is lost with it
            promoted = promote(standby)
            assert promoted["role"] == "primary" and promoted["epoch"] == cycle + 2, promoted
            with standby.client() as copy:
                for key, etag in acknowledged.items():
                    head = copy.head(f"/buckets/soak/objects/{key}")
                    checked += 1
                    if head.status_code != 200 or head.headers["ETag"] != f'"{etag}"':
                        lost += 1
            primary, standby = standby, new_standby(tmp_path, cycle + 2, standby)
            nodes.append(standby)
            with primary.client() as api, standby.client() as copy:
                wait_caught_up(api, copy)
                assert status(copy)["epoch"] == cycle + 2
            print(f"promote soak: cycle {cycle + 1}: {len(acknowledged)} acknowledged", flush=True)
        print(f"promote soak: {CYCLES} cycles")
        print(f"acknowledged operations checked: {checked}, lost: {lost}")
        assert checked > 0
        assert lost == 0
    finally:
        for node in nodes:
            node.kill()
