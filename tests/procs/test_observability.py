"""Metrics and ``system/performance`` cover every serving process, answered by any of them.

Requests are spread over both processes (new connections); the totals reported on any
connection must count all of them.
"""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.procs.prockit import answering_process, fresh_get
from tests.serverproc import ServerProcess

GETS = 40
OBJECT_ROUTE = "/api/v1/buckets/{bucket}/objects/{key}"


def object_gets(server: ServerProcess) -> float:
    text = fresh_get(server, "/metrics").text
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name != "service_http_requests":
            continue
        for sample in family.samples:
            labels = sample.labels
            if (
                sample.name.endswith("_total")
                and labels["route"] == OBJECT_ROUTE
                and labels["method"] == "GET"
            ):
                total += sample.value
    return total


def test_metrics_and_performance_add_up_every_process(server: ServerProcess) -> None:
    with server.client() as api:
        assert api.post("/buckets", json={"name": "observed"}).status_code == 201
        assert api.put("/buckets/observed/objects/o", content=b"x" * 4096).status_code == 200
    before_metrics = object_gets(server)
    before_perf = fresh_get(server, "/system/performance").json()["get"]["count"]
    answered = set()
    for _ in range(GETS):
        got = fresh_get(server, "/buckets/observed/objects/o")
        assert got.status_code == 200
        answered.add(answering_process(got))
    assert len(answered) == 2
    assert object_gets(server) - before_metrics == GETS
    for _ in range(4):  # on whichever process answers
        performance = fresh_get(server, "/system/performance").json()
        assert performance["get"]["count"] - before_perf == GETS


def test_system_info_is_the_writers_wherever_asked(server: ServerProcess) -> None:
    """The journal's position is the writer's: every process reports the same, and it moves
    with a write made on any process."""

    def sequence() -> int:
        return int(fresh_get(server, "/system/info").json()["journal"]["last_sequence"])

    with server.client() as api:
        assert api.post("/buckets", json={"name": "infobucket"}).status_code == 201
    now = sequence()
    assert now > 0
    assert {sequence() for _ in range(8)} == {now}
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        assert client.get("/health").status_code == 200
    with server.client() as api:
        assert api.delete("/buckets/infobucket").status_code == 204
    assert {sequence() for _ in range(8)} == {now + 1}
