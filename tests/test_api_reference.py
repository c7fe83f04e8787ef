"""docs/api.md, the project's own API reference, stays true: every route the server answers is
in it, every route it says is served is, the routes it calls planned are not, and its status
table is the server's code table whole."""

from __future__ import annotations

import re

from service.app import handler_table
from service.common.api_errors import STATUS_BY_CODE
from tests.serverproc import REPO_ROOT

REFERENCE = (REPO_ROOT / "docs" / "api.md").read_text()
PLANNED_HEADING = "## Not served by this version yet"
METHODS = "GET|HEAD|POST|PUT|PATCH|DELETE"
NAMED = re.compile(rf"\b((?:{METHODS})(?:\|(?:{METHODS}))*) (/[\w.{{}}/-]*)")


def named_routes(text: str) -> set[tuple[str, str]]:
    """``(method, path)`` for each ``METHOD /path`` (or ``PUT|GET /path``) in ``text``."""
    found = set()
    for methods, path in NAMED.findall(text):
        for method in methods.split("|"):
            found.add((method, path.rstrip("/.") if path != "/" else path))
    return found


def served_routes() -> set[tuple[str, str]]:
    """The API's routes and methods (the console's files are not the API)."""
    return {
        (method, handler.route_name)
        for _, handler in handler_table()
        if not handler.route_name.startswith("/console") and handler.route_name != "/"
        for method in handler.allowed_methods()
    }


def sections() -> tuple[str, str]:
    served, planned = REFERENCE.split(PLANNED_HEADING)
    return served, planned


def test_every_served_route_is_in_the_reference() -> None:
    named = named_routes(sections()[0])
    missing = {
        (method, path)
        for method, path in served_routes()
        if (method, path) not in named and not (method == "HEAD" and ("GET", path) in named)
    }
    assert missing == set(), f"docs/api.md does not name {sorted(missing)}"


def test_every_route_the_reference_names_is_served() -> None:
    named = {(m, p) for m, p in named_routes(sections()[0]) if p.startswith(("/api/", "/health"))}
    assert named - served_routes() == set(), "docs/api.md names routes the server does not answer"


def test_the_planned_routes_are_not_served_yet() -> None:
    planned = named_routes(sections()[1])
    served_now = planned & served_routes()
    assert served_now == set(), (
        f"{sorted(served_now)} are served now: move them out of docs/api.md's "
        f"{PLANNED_HEADING!r} into the sections above"
    )


def test_the_status_table_is_the_servers_code_table() -> None:
    table = REFERENCE.split("<!-- compared whole with service.common.api_errors")[1]
    rows = re.findall(r"^\| (\d{3}) \| ([\w, ]+) \|$", table.split("\n\n")[0], re.MULTILINE)
    documented = {code.strip(): int(status) for status, codes in rows for code in codes.split(",")}
    assert documented == dict(STATUS_BY_CODE), (
        "docs/api.md's status table differs from service/common/api_errors.py's STATUS_BY_CODE"
    )
