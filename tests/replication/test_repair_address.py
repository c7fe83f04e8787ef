"""Where a primary calls its standby back for a repair: the URL the standby names in
``X-Standby-Url``, a wildcard host read as the address its requests come from."""

from __future__ import annotations

import doctest

import pytest

import service.replication.repair
from service.replication.repair import standby_url


def test_the_examples_hold() -> None:
    failures, tried = doctest.testmod(service.replication.repair)
    assert (failures, tried > 0) == (0, True)


@pytest.mark.parametrize(
    ("named", "remote", "expected"),
    [
        ("http://127.0.0.1:9001", "10.1.1.1", "http://127.0.0.1:9001"),
        ("http://0.0.0.0:9001", "10.1.1.1", "http://10.1.1.1:9001"),
        ("http://[::]:9001", "::1", "http://[::1]:9001"),
        ("http://[fd00::5]:80/base/", "::1", "http://[fd00::5]:80/base"),
        ("https://standby.example", "10.1.1.1", "https://standby.example"),
        ("http://0.0.0.0:9001", "-", None),
        ("http://host:99999", "10.1.1.1", None),
        ("javascript:alert(1)", "10.1.1.1", None),
        ("", "10.1.1.1", None),
    ],
)
def test_standby_url(named: str, remote: str, expected: str | None) -> None:
    assert standby_url(named, remote) == expected
