"""``svc admin replication status`` on a primary and on its standby (real processes)."""

from __future__ import annotations

from pathlib import Path

from tests.cli.svckit import Svc
from tests.replication.kit import Factory, start_standby, wait_caught_up
from tests.serverproc import ServerProcess


def both_sides(server_factory: Factory, tmp_path: Path) -> tuple[ServerProcess, ServerProcess, Svc]:
    """A primary and its caught-up standby, known to ``svc`` as aliases ``one`` and ``two``."""
    primary = server_factory()
    standby = start_standby(server_factory, primary)
    with primary.client() as api, standby.client() as copy:
        assert api.post("/buckets", json={"name": "seen"}).status_code == 201
        wait_caught_up(api, copy)
    (tmp_path / "home").mkdir()
    svc = Svc(tmp_path / "home")
    for name, server in (("one", primary), ("two", standby)):
        svc("alias", "set", name, server.url, server.access_key, server.secret_key)
    return primary, standby, svc


def test_svc_shows_both_sides(server_factory: Factory, tmp_path: Path) -> None:
    primary, _standby, svc = both_sides(server_factory, tmp_path)
    shown = svc("admin", "replication", "status", "one").stdout
    assert "role: primary (mode async, epoch 1)" in shown
    assert "standby sb_" in shown and "0 records behind" in shown
    (document,) = svc("admin", "replication", "status", "two", "--json").json()
    assert document["role"] == "standby"
    assert document["primary_url"] == primary.url
    text = svc("admin", "replication", "status", "two").stdout
    assert f"primary: {primary.url}" in text
    assert "lag: 0 records" in text


def test_svc_promotes_a_standby_and_a_primary_refuses(
    server_factory: Factory, tmp_path: Path
) -> None:
    _primary, standby, svc = both_sides(server_factory, tmp_path)
    refused = svc("admin", "replication", "promote", "one", ok=False)
    assert refused.returncode == 5  # a conflict (409)
    assert refused.stderr.startswith("svc: one: InvalidState: ")
    assert len(refused.stderr.strip().splitlines()) == 1
    shown = svc("admin", "replication", "promote", "two").stdout
    assert shown.startswith("two is the primary of epoch 2 (last sequence ")
    assert (
        "role: primary (mode async, epoch 2)" in svc("admin", "replication", "status", "two").stdout
    )
    with standby.client() as copy:
        assert copy.put("/buckets/seen/objects/k", content=b"v").status_code == 200
