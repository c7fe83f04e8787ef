"""The replication metrics docs/operations.md documents ("Replication metrics") are exposed
and move: on the standby as it follows, on the primary as a standby confirms."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.replication.kit import Factory, start_standby, wait_caught_up

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def documented() -> list[str]:
    table = DOC.read_text().split("### Replication metrics", 1)[1].split("###", 1)[0]
    return [
        re.findall(r"`(service_[a-z_]+)`", row)[0]
        for row in table.splitlines()
        if row.startswith("| `service_")
    ]


def scrape(client: httpx.Client) -> dict[str, float]:
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        name = family.name + ("_total" if family.type == "counter" else "")
        samples = [
            s for s in family.samples if family.type != "counter" or s.name.endswith("_total")
        ]
        found[name] = sum(sample.value for sample in samples)
    return found


def test_the_replication_metrics_move(server_factory: Factory) -> None:
    names = documented()
    assert len(names) == 9
    primary = server_factory()
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "metered"}).status_code == 201
        standby = start_standby(server_factory, primary)
        with standby.client() as copy:
            wait_caught_up(api, copy)
            before_standby, before_primary = scrape(copy), scrape(api)
            for n in range(5):
                assert api.put(f"/buckets/metered/objects/k{n}", content=b"m" * 1000).is_success
            wait_caught_up(api, copy)
            after_standby, after_primary = scrape(copy), scrape(api)
    assert after_standby["service_replication_standby"] == 1
    assert after_primary["service_replication_standby"] == 0
    assert after_primary["service_replication_standbys"] == 1
    assert "service_replication_standby_lag_records" in after_primary
    for name in (
        "service_replication_applied_sequence",
        "service_replication_applied_records_total",
        "service_replication_fetched_bytes_total",
    ):
        assert after_standby[name] > before_standby[name], name
    for name in ("lag_records", "lag_seconds", "lag_bytes"):
        assert f"service_replication_{name}" in after_standby
    exposed = set(after_standby) | set(after_primary)
    assert set(names) <= exposed
    assert before_primary["service_replication_standbys"] == 1
