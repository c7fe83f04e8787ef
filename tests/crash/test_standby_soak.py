"""The sync-replication soak (``make soak``): the primary SIGKILLed under concurrent writes,
cycle after cycle, and every write it acknowledged is on the standby (0 lost).

Each cycle: writers PUT new keys for a random moment, the primary is SIGKILLed, and every key
acknowledged in that cycle must read back from the standby with its etag; then the primary
starts again on its data dir and the standby follows it on. ``SYNC_SOAK_CYCLES`` (default 50)
sets the number of cycles; the fast suite runs the same cycle in
``tests/replication/test_sync_mode.py``.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.replication.kit import standby_env, wait_caught_up
from tests.replication.test_standby_async import settled_position
from tests.serverproc import ServerProcess

CYCLES = int(os.environ.get("SYNC_SOAK_CYCLES", "50"))
WRITERS = 4


def write_until(
    primary: ServerProcess, prefix: str, seconds: float, at_least: int = 0
) -> dict[str, str]:
    """Concurrent PUTs for ``seconds`` (and on, up to a minute, until ``at_least`` were
    acknowledged), then a SIGKILL of the primary; the keys acknowledged, with their etags."""
    acknowledged: dict[str, str] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def writer(number: int) -> None:
        with primary.client() as client:
            n = 0
            while not stop.is_set():
                key = f"{prefix}-{number}-{n}"
                try:
                    answer = client.put(f"/buckets/soak/objects/{key}", content=key.encode() * 9)
                except httpx.HTTPError:
                    return
                if answer.status_code == 200:
                    with lock:
                        acknowledged[key] = answer.json()["etag"]
                n += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    deadline = time.monotonic() + 60.0
    while len(acknowledged) < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    primary.kill()
    stop.set()
    for thread in threads:
        thread.join()
    return acknowledged


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_sync_soak_loses_no_acknowledged_write(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("CRASH_SEED", "0")) or None)
    env = {"SERVICE_REPLICATION": "sync", "SERVICE_REPLICATION_TIMEOUT": "30"}
    primary = ServerProcess(tmp_path / "primary", env_overrides=env)
    primary.start()
    standby = ServerProcess(tmp_path / "standby", env_overrides=standby_env(primary))
    try:
        standby.start()
        with primary.client() as api, standby.client() as copy:
            assert api.post("/buckets", json={"name": "soak"}).status_code == 201
            wait_caught_up(api, copy)
        checked = lost = 0
        for cycle in range(CYCLES):
            acknowledged = write_until(primary, f"c{cycle}", rng.uniform(0.2, 1.5))
            with standby.client() as copy:
                settled_position(copy)
                for key, etag in acknowledged.items():
                    head = copy.head(f"/buckets/soak/objects/{key}")
                    checked += 1
                    if head.status_code != 200 or head.headers["ETag"] != f'"{etag}"':
                        lost += 1
            primary.start()
        print(f"sync soak: {CYCLES} cycles, {checked} acknowledged writes checked, {lost} lost")
        assert checked > 0
        assert lost == 0
    finally:
        standby.kill()
        primary.kill()
