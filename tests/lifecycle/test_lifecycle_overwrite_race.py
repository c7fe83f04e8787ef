"""Over HTTP: overwriting keys while lifecycle passes run back to back never loses a write.

Keys are written, left until their expiry rule makes them due, then overwritten one after
the other while another thread asks for pass after pass. The pass judges old versions due
while the overwrites' records are being queued and applied; a delete that judged the old
version must never remove the new one. Afterwards every acknowledged overwrite must still be
the key's current version, unless some pass could legitimately have judged the new version
itself due (a pass that answered more than the rule's age after the overwrite was sent: those
keys are not checked, and the test asserts some keys were).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator

import pytest

from tests.serverproc import ServerProcess

DAYS = 0.00002
"""The expiry age: 1.728 s."""
AGE_SECONDS = DAYS * 86_400
KEYS = 100
PHASE_SECONDS = 0.7
"""How long overwrites race the passes (well under the expiry age)."""


@pytest.fixture(scope="module")
def race_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("lifecycle-race") / "data")
    proc.start(extra_env={"SERVICE_LIFECYCLE_PASS_PAUSE": "0"})
    yield proc
    proc.stop()


def _passes(server: ServerProcess, stop: threading.Event, answered: list[float]) -> None:
    with server.client() as api:
        while not stop.is_set():
            response = api.post("/system/lifecycle/run")
            assert response.status_code == 200, response.text
            answered.append(time.time())


@pytest.mark.parametrize("versioned", [False, True], ids=["unversioned", "versioned"])
def test_no_overwrite_after_the_cutoff_is_lost_to_a_racing_pass(
    race_server: ServerProcess, bucket_name: str, versioned: bool
) -> None:
    bucket = f"{bucket_name}-{'v' if versioned else 'u'}"
    rng = random.Random(bucket)
    with race_server.client() as api:
        assert api.post("/buckets", json={"name": bucket}).status_code == 201
        if versioned:
            api.patch(f"/buckets/{bucket}", json={"versioning_enabled": True})
        rule = {"id": "all", "expire_after_days": DAYS}
        assert api.put(f"/buckets/{bucket}/lifecycle", json={"rules": [rule]}).status_code == 200
        checked: list[int] = []
        for i in range(KEYS):
            assert api.put(f"/buckets/{bucket}/objects/k{i}", content=b"old").status_code < 300
        time.sleep(AGE_SECONDS + 0.2)  # every key is due now
        order = list(range(KEYS))
        rng.shuffle(order)
        stop, answered = threading.Event(), []
        passes = threading.Thread(target=_passes, args=(race_server, stop, answered))
        passes.start()
        sent: dict[int, float] = {}
        began = time.monotonic()
        try:
            for i in order:
                if time.monotonic() - began > PHASE_SECONDS:
                    break
                sent_at = time.time()
                body = f"new-{i}".encode()
                response = api.put(f"/buckets/{bucket}/objects/k{i}", content=body)
                assert response.status_code < 300, response.text
                sent[i] = sent_at
        finally:
            stop.set()
            passes.join()
        assert answered, "no pass ran during the overwrites"
        last_pass = max(answered)
        for i, sent_at in sent.items():
            if last_pass > sent_at + AGE_SECONDS:
                continue  # a pass may have judged the new version itself due
            checked.append(i)
            got = api.get(f"/buckets/{bucket}/objects/k{i}")
            assert got.status_code == 200, f"k{i} overwritten after the cutoff was lost"
            assert got.content == f"new-{i}".encode()
        unwritten = [i for i in range(KEYS) if i not in sent]
        # Keys nobody overwrote were really expired by the racing passes.
        for i in unwritten[:5]:
            assert api.get(f"/buckets/{bucket}/objects/k{i}").status_code == 404
        # A loaded machine manages a dozen overwrites in the phase, an idle one most keys.
        assert len(checked) >= 5, f"only {len(checked)} overwrites could be checked"
        api.delete(f"/buckets/{bucket}", params={"force": "true"})
