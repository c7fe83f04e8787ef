"""Unit tests of the HTTP edge's pure rules: which types run, download names, own origins,
and the ``Host`` check (their doctests run here too).

The HTTP view of the same rules: ``test_edge_served_content.py``, ``test_edge_cross_site.py``
and ``test_edge_protocol.py``.
"""

from __future__ import annotations

import doctest
from types import ModuleType
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.http import cross_site, host, served_content
from service.http.cross_site import is_own_origin
from service.http.host import host_problem
from service.http.served_content import attachment_disposition, is_active_type


@pytest.mark.parametrize("module", [served_content, cross_site, host])
def test_doctests(module: ModuleType) -> None:
    failures, tried = doctest.testmod(module)
    assert failures == 0 and tried > 0


@pytest.mark.parametrize(
    "content_type",
    [
        "text/html",
        " TEXT/HTML ;charset=utf-8",
        "application/xhtml+xml",
        "image/svg+xml",
        "application/vnd.example+XML",
        "text/xml",
        "application/xml",
        "text/xsl",
        "text/javascript",
        "application/x-javascript",
        "text/livescript",
        "multipart/x-mixed-replace;boundary=x",
        "text/plain, text/html",
        '"text/html"',
    ],
)
def test_types_a_browser_would_run(content_type: str) -> None:
    assert is_active_type(content_type)


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/json",
        "application/octet-stream",
        "image/png",
        "text/css",
        "application/xml-dtd",
        "text/xmlx",
        "application/pdf",
        "",
    ],
)
def test_types_that_stay_inline(content_type: str) -> None:
    assert not is_active_type(content_type)


def name_from(value: str) -> str:
    if "filename*=UTF-8''" in value:
        return unquote(value.split("filename*=UTF-8''", 1)[1])
    return value.split('filename="', 1)[1].rsplit('"', 1)[0]


@given(st.text(min_size=1, max_size=40).filter(lambda text: "/" not in text))
def test_any_last_segment_round_trips_through_the_disposition(name: str) -> None:
    value = attachment_disposition("some/prefix/" + name)
    assert value.isascii() and "\r" not in value and "\n" not in value
    assert value.startswith('attachment; filename="')
    assert name_from(value) == name


@pytest.mark.parametrize(
    ("origin", "host", "public_url", "own"),
    [
        ("http://127.0.0.1:9000", "127.0.0.1:9000", None, True),
        ("HTTP://LOCALHOST:9000", "localhost:9000", None, True),
        ("https://store.example", "store.example", None, True),
        ("http://store.example:80", "store.example", None, True),
        ("https://store.example:443", "store.example:443", None, True),
        ("http://[::1]:9000", "[::1]:9000", None, True),
        ("http://127.0.0.1:9001", "127.0.0.1:9000", None, False),
        ("http://127.0.0.1", "127.0.0.1:9000", None, False),
        ("null", "127.0.0.1:9000", None, False),
        ("http://127.0.0.1:9000/", "127.0.0.1:9000", None, False),
        ("ftp://127.0.0.1:9000", "127.0.0.1:9000", None, False),
        ("http://evil.example", None, None, False),
        ("https://cdn.example", "10.0.0.1:9000", "https://cdn.example", True),
        ("https://cdn.example", "10.0.0.1:9000", "https://cdn.example:443/base/", True),
        ("http://cdn.example", "10.0.0.1:9000", "https://cdn.example", False),
        ("https://cdn.example:8443", "10.0.0.1:9000", "https://cdn.example", False),
        ("https://user@cdn.example", "cdn.example", None, False),
    ],
)
def test_the_servers_own_origin(
    origin: str, host: str | None, public_url: str | None, own: bool
) -> None:
    assert is_own_origin(origin, host, public_url) is own


@pytest.mark.parametrize(
    ("version", "hosts", "fine"),
    [
        ("HTTP/1.1", ["example.com"], True),
        ("HTTP/1.1", ["example.com:8080"], True),
        ("HTTP/1.1", ["[2001:db8::1]:80"], True),
        ("HTTP/1.1", [""], True),
        ("HTTP/1.0", [], True),
        ("HTTP/1.1", [], False),
        ("HTTP/1.1", ["a", "a"], False),
        ("HTTP/1.1", ["a,b"], False),
        ("HTTP/1.1", ["a b"], False),
        ("HTTP/1.1", ["a/b"], False),
        ("HTTP/1.1", ["a:b"], False),
    ],
)
def test_the_host_header_rules(version: str, hosts: list[str], fine: bool) -> None:
    assert (host_problem(version, hosts) is None) is fine
