"""The request contract's one module (``service.http.request_contract``) and the wire
constants the server shares with the client (``service.common.wire``)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import service.http
from service.client import _wire
from service.common.api_errors import ApiError
from service.http.request_contract import (
    new_request_id,
    render_error,
    request_id_for,
    tornado_error,
)
from service.multipart.operations import parse_part_number

HTTP_DIR = Path(service.http.__file__).parent


def test_an_error_renders_in_the_contract_envelope_with_its_headers() -> None:
    error = ApiError("ServiceUnavailable", "busy", retry_after=3, log_detail="secret path /x")
    answer = render_error(error, "req-1")
    assert answer.status == 503
    headers = dict(answer.headers)
    assert headers["Retry-After"] == "3"
    assert headers["Cache-Control"] == "no-store"
    assert headers["Content-Type"].startswith("application/json")
    assert "Content-Length" not in headers
    assert json.loads(answer.body) == {
        "error": {"code": "ServiceUnavailable", "message": "busy", "request_id": "req-1"}
    }
    assert b"secret" not in answer.body


def test_a_head_or_304_answer_has_no_body_and_no_content_type() -> None:
    for answer in (
        render_error(ApiError("NoSuchKey", "gone"), "r", with_body=False),
        render_error(ApiError("PreconditionFailed", "x"), "r", with_body=False),
    ):
        assert answer.body == b""
        assert "Content-Type" not in dict(answer.headers)


def test_a_client_request_id_is_echoed_only_when_it_is_safe() -> None:
    assert request_id_for("client-id.1:2") == "client-id.1:2"
    for bad in ("has space", "x" * 129, "", "new\nline"):
        made = request_id_for(bad)
        assert made != bad and len(made) == 16
    assert request_id_for(None) != request_id_for(None)
    assert new_request_id()[:8] == new_request_id()[:8]


def test_tornado_statuses_map_to_contract_codes_and_a_405_lists_the_methods() -> None:
    assert tornado_error(404, "x").code == "NotFound"
    assert tornado_error(418, "x").code == "InvalidArgument"
    assert tornado_error(502, "x").code == "InternalError"
    refused = tornado_error(405, "no", ("GET", "PUT"))
    assert refused.code == "MethodNotAllowed" and refused.headers == {"Allow": "GET, PUT"}


def test_no_http_module_but_the_contract_builds_an_error_envelope() -> None:
    """One renderer: ``error_body`` is called only by ``request_contract``."""
    callers = []
    for path in HTTP_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == "error_body":
                callers.append(path.name)
    assert set(callers) == {"request_contract.py"}


def test_the_server_takes_part_bounds_and_header_names_from_the_shared_wire_module() -> None:
    assert parse_part_number(str(_wire.MAX_PART_NUMBER)) == _wire.MAX_PART_NUMBER
    assert parse_part_number(str(_wire.MIN_PART_NUMBER)) == _wire.MIN_PART_NUMBER
    for bad in (_wire.MIN_PART_NUMBER - 1, _wire.MAX_PART_NUMBER + 1):
        with pytest.raises(ApiError) as raised:
            parse_part_number(str(bad))
        assert raised.value.code == "InvalidPartNumber"
    for module in ("base.py", "object_reads.py", "object_handlers.py", "multipart_handlers.py"):
        source = (HTTP_DIR / module).read_text()
        assert "from service.common.wire import" in source, module
        assert '"X-Request-Id"' not in source and '"X-Checksum-Sha256"' not in source, module
