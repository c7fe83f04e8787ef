"""A stopping two-process primary does not wait for its standbys' long polls.

A standby's ``GET /replication/records?wait=`` may wait up to 30 s for a record. When a
worker took the connection, it forwards the poll to the writer; a stop used to wait for it
as for any request in flight, and the supervisor stops the writer (which answers its polls at
once) only after the workers. The worker now ends forwarded long polls with its streams
(503 with ``Retry-After``: the standby asks again).

Several connections are opened so that the kernel gives some to the worker (each new
connection goes to either process); a stop must end within the polls' wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from tests.serverproc import ServerProcess

Factory = Callable[..., ServerProcess]
POLLS = 8
WAIT = 28
"""Each poll's wait, seconds: longer than the stop is given below."""
STANDBY_ID = "sb_" + "a" * 16


def test_a_stop_ends_the_long_polls_a_worker_forwards(server_factory: Factory) -> None:
    server = server_factory(SERVICE_WORKERS="2")
    with server.client() as api:
        assert api.post("/buckets", json={"name": "polled"}).status_code == 201
        end = api.get("/replication").json()["last_sequence"]
    answers: list[httpx.Response] = []
    errors: list[BaseException] = []
    started = threading.Barrier(POLLS + 1)

    def poll() -> None:
        with httpx.Client(base_url=server.api, auth=server.auth, timeout=60) as fresh:
            started.wait()
            try:
                answers.append(
                    fresh.get(
                        "/replication/records",
                        params={"from": end + 1, "wait": WAIT},
                        headers={"X-Standby-Id": STANDBY_ID},
                    )
                )
            except httpx.TransportError as exc:
                errors.append(exc)

    threads = [threading.Thread(target=poll) for _ in range(POLLS)]
    for thread in threads:
        thread.start()
    started.wait()
    time.sleep(1.0)  # every poll is waiting at the writer by now
    assert server.stop(timeout=15.0) == 0  # SIGKILLed (-9) when it did not end in time
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert len(answers) == POLLS
    for answer in answers:
        assert answer.status_code in (200, 503), answer.text
        if answer.status_code == 503:
            assert answer.headers["Retry-After"]
            assert answer.json()["error"]["code"] == "ServiceUnavailable"
