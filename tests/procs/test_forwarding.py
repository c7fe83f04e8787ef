"""A worker forwards the routes whose answer lives in the writer's memory through the same
request contract as any handler: one request id on both processes' access lines, its own
refusals in the contract's shape (``service.procs.forward``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx

from tests.procs.prockit import wait_for
from tests.serverproc import ServerProcess

INFO = "/api/v1/system/info"
JSON_TYPE = "application/json; charset=utf-8"


def access_lines(server: ServerProcess, request_id: str) -> list[str]:
    return [
        line
        for line in server.logs().splitlines()
        if "msg=request" in line and f"request_id={request_id} " in line
    ]


def route_of(line: str) -> str:
    found = re.search(r'route=("(?:[^"\\]|\\.)*"|\S+)', line)
    assert found is not None, line
    return found.group(1).strip('"')


def test_a_forwarded_request_carries_one_id_on_both_access_lines(server: ServerProcess) -> None:
    forwarded: list[str] = []
    for number in range(60):
        request_id = f"forwarded-{number}"
        with httpx.Client(base_url=server.url, auth=server.auth, timeout=30.0) as client:
            got = client.get(INFO, headers={"X-Request-Id": request_id})
        assert got.status_code == 200
        assert got.headers["X-Request-Id"] == request_id
        assert got.headers.get_list("Server") == ["service"]
        wait_for(lambda request_id=request_id: bool(access_lines(server, request_id)))
        if len(access_lines(server, request_id)) == 2 or any(
            "(forwarded)" in line for line in access_lines(server, request_id)
        ):
            forwarded.append(request_id)
        if len(forwarded) == 3:
            break
    assert forwarded, "no new connection reached the worker"
    for request_id in forwarded:
        wait_for(lambda request_id=request_id: len(access_lines(server, request_id)) == 2)
        routes = sorted(route_of(line) for line in access_lines(server, request_id))
        assert routes == [INFO, f"{INFO} (forwarded)"]
        assert all("status=200 " in line for line in access_lines(server, request_id))


def test_an_unreachable_writer_is_a_503_in_the_contracts_shape(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory()
    internal = server.data_dir / "run" / "writer-http.sock"
    assert internal.exists()
    internal.unlink()  # the writer lives on; its internal listener can no longer be reached
    refused: httpx.Response | None = None
    for number in range(60):
        with httpx.Client(base_url=server.url, auth=server.auth, timeout=30.0) as client:
            got = client.get(INFO, headers={"X-Request-Id": f"away-{number}"})
        assert got.status_code in (200, 503)
        if got.status_code == 503:
            refused = got
            break
    assert refused is not None, "no new connection reached the worker"
    request_id = refused.headers["X-Request-Id"]
    assert request_id.startswith("away-")
    assert refused.headers["Content-Type"] == JSON_TYPE
    assert refused.headers["Retry-After"] == "1"
    assert refused.json() == {
        "error": {
            "code": "ServiceUnavailable",
            "message": "the metadata writer is restarting; retry",
            "request_id": request_id,
        }
    }
    wait_for(lambda: bool(access_lines(server, request_id)))
    [line] = access_lines(server, request_id)
    assert route_of(line) == f"{INFO} (forwarded)"
    assert "status=503 " in line
