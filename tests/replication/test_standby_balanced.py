"""Balanced durability on both sides: the primary ships only records its journal has synced,
and the standby syncs each applied batch before it confirms it; a SIGKILLed standby resumes."""

from __future__ import annotations

from tests.replication.kit import Factory, everything, start_standby, wait_caught_up


def test_a_balanced_standby_of_a_balanced_primary(server_factory: Factory) -> None:
    primary = server_factory(SERVICE_DURABILITY="balanced")
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "loose"}).status_code == 201
        standby = start_standby(server_factory, primary, SERVICE_DURABILITY="balanced")
        for n in range(25):
            assert api.put(f"/buckets/loose/objects/k{n}", content=b"b" * (n * 500)).is_success
        with standby.client() as copy:
            wait_caught_up(api, copy)
        standby.restart(crash=True)
        assert api.delete("/buckets/loose/objects/k4").status_code == 204
        with standby.client() as copy:
            wait_caught_up(api, copy)
            assert everything(copy) == everything(api)
