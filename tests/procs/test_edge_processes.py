"""The HTTP edge with two serving processes: the suites of ``tests/http/test_edge_*.py``.

``tests/procs/conftest.py`` gives the imported tests a two-process ``server`` and
``server_factory``: served-content headers, cross-site refusals (login, access keys, multipart
sessions and the rest are forwarded by a worker to the writer, which refuses them), the
missing-``Host`` refusal and one ``Server`` header, the 64-PUT burst, and the stream cap,
which holds for the whole service because every event stream is served by the writer.

Upload caps are per process (docs/security.md "Per-user caps that wait"): with N processes a
user may have N times the cap in flight, which is why the single-process waits and 429s of
``tests/http/test_edge_caps.py`` are not repeated here; the burst shows that nothing is
refused.
"""

from __future__ import annotations

import httpx

from tests.http.edgekit import basic, raw_request, request_bytes
from tests.http.test_edge_caps import (  # noqa: F401
    streams,
    test_64_concurrent_puts_by_one_key_all_succeed,
    test_a_waiting_stream_opens_when_another_ends,
    test_the_17th_stream_of_a_user_waits_then_is_429,
)
from tests.http.test_edge_cross_site import *  # noqa: F403
from tests.http.test_edge_protocol import *  # noqa: F403
from tests.http.test_edge_protocol import assert_one_server_header
from tests.http.test_edge_served_content import *  # noqa: F403
from tests.serverproc import ServerProcess


def test_forwarded_answers_have_one_server_header_from_either_process(
    server: ServerProcess, api: httpx.Client
) -> None:
    """Each request on many fresh connections, so that both processes take some."""
    authorization = {"Authorization": basic(server.auth), "Connection": "close"}
    close = {"Connection": "close"}
    forwarded = [
        request_bytes("GET", "/health", close),
        request_bytes("HEAD", "/health", close),
        request_bytes("GET", "/api/v1/system/info", authorization),
        request_bytes("GET", "/api/v1/metrics", authorization),
        request_bytes("GET", "/api/v1/access-keys", authorization),
        request_bytes(
            "POST", "/api/v1/auth/login", close, b'{"username": "nobody", "password": "x"}'
        ),
        request_bytes("POST", "/api/v1/multipart/init", authorization, b"{}"),
    ]
    for data in forwarded:
        # The kernel spreads new connections over both processes: 20 of them reach the
        # worker (which forwards) and the writer (which answers itself) alike.
        for _ in range(20):
            assert_one_server_header(raw_request(server.port, data, head_only=True))
