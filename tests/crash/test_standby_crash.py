"""The standby's apply under crashes: a real standby SIGKILLed at each crash point between a
payload's fsync, the journal append and the index apply, during its bootstrap and while it
follows a primary under writes; started again, it resumes and reads exactly like its primary.

The standby's order is its promise: a record is appended (and applied) only after every
payload it references is durable and verified on the standby (a batch's payloads are
written unsynced, ``standby.payloads_written``, then synced together,
``standby.payloads_stored``), so a kill anywhere leaves either a record with its bytes or no
record (payloads without a record are orphans its GC removes). ``standby.*`` points are only
passed on a standby (``tests.crash.points``); the others are the journal's, the payload
store's and the engine's, passed here by a standby.
"""

from __future__ import annotations

import subprocess
import time

import httpx
import pytest

from tests.crash.points import standby_only_crash_points
from tests.replication.kit import Factory, everything, standby_env, wait_caught_up

BOOTSTRAP = [
    ("standby.snapshot_fetched", 1),
    ("put.after_data_fsync", 2),
    ("put.after_rename", 3),
    ("standby.payloads_written", 1),
    ("standby.payloads_stored", 1),
]
FOLLOWING = [
    ("put.after_dir_fsync", 2),
    ("standby.payloads_written", 2),
    ("standby.payloads_stored", 2),
    ("journal.append.after_write", 2),
    ("journal.append.after_fsync", 3),
    ("engine.after_apply", 4),
]


def test_every_standby_point_is_armed_here() -> None:
    armed = {point for point, _ in BOOTSTRAP + FOLLOWING}
    assert standby_only_crash_points() <= armed


def populate(api: httpx.Client, count: int) -> None:
    assert api.post("/buckets", json={"name": "crash"}).status_code == 201
    for n in range(count):
        assert api.put(f"/buckets/crash/objects/o{n}", content=b"%d." % n * 300).is_success


@pytest.mark.parametrize(("point", "nth"), BOOTSTRAP, ids=[f"{p}:{n}" for p, n in BOOTSTRAP])
def test_a_standby_killed_in_its_bootstrap_resumes(
    server_factory: Factory, point: str, nth: int
) -> None:
    primary = server_factory()
    with primary.client() as api:
        populate(api, 12)
        standby = server_factory(start=False, **standby_env(primary))
        with pytest.raises(RuntimeError):
            standby.start(extra_env={"SERVICE_CRASH_POINT": f"{point}:{nth}"})
        assert standby.start_exit == -9, standby.logs()[-2000:]
        standby.start()
        with standby.client() as copy:
            wait_caught_up(api, copy)
            assert everything(copy) == everything(api)


@pytest.mark.parametrize(("point", "nth"), FOLLOWING, ids=[f"{p}:{n}" for p, n in FOLLOWING])
def test_a_standby_killed_while_following_resumes(
    server_factory: Factory, point: str, nth: int
) -> None:
    primary = server_factory()
    with primary.client() as api:
        populate(api, 3)
        standby = server_factory(**standby_env(primary))
        with standby.client() as copy:
            wait_caught_up(api, copy)
        standby.restart(extra_env={"SERVICE_CRASH_POINT": f"{point}:{nth}"})
        process = standby.process
        assert process is not None
        deadline = time.monotonic() + 120
        n = 0
        while process.poll() is None:
            assert time.monotonic() < deadline, "the crash point was never reached"
            assert api.put(f"/buckets/crash/objects/w{n}", content=b"w" * (100 + n)).is_success
            n += 1
            time.sleep(0.02)
        try:
            assert process.wait(5) == -9
        except subprocess.TimeoutExpired:
            pytest.fail("the standby did not die")
        standby.process = None
        for more in range(n, n + 5):  # written while it is down
            assert api.put(f"/buckets/crash/objects/w{more}", content=b"v").is_success
        standby.start()
        with standby.client() as copy:
            wait_caught_up(api, copy)
            assert everything(copy) == everything(api)
