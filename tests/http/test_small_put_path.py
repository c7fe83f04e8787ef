"""A small PUT answered below Tornado's ``RequestHandler`` (``service.http.object_writes``)
answers exactly as ``ObjectHandler`` does.

Each case is sent twice on a real server, both with ``Content-Length``: as it is (the
``SmallPut`` path) and with a query argument the route ignores (``takes_small_put`` leaves
any request with a query to the handler). The
two answers must have the same status, the same header names, the same values (but for the
request id, the date and the times inside a stored object's JSON), the same error shape, and
the same audit record; and what each stored reads back the same.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.http.edgekit import RawConnection, basic
from tests.http.test_audit import audit_records
from tests.serverproc import ServerProcess

ALLOWED_ORIGIN = "https://app.example"
VARYING_HEADERS = {"date", "x-request-id"}
TIMES = re.compile(r'"(created_at|updated_at)":"[^"]+"')
RECORD_VARYING = {"request_id", "time", "sequence", "prev", "hash", "path", "key"}


def compared(answer: httpx.Response, name: str) -> tuple[int, dict[str, str], str]:
    headers = {
        name.lower(): value
        for name, value in answer.headers.items()
        if name.lower() not in VARYING_HEADERS
    }
    text = TIMES.sub(r'"\1":"-"', answer.text)
    text = text.replace(answer.headers.get("X-Request-Id", "-"), "<request id>")
    text = text.replace(name, "<name>")
    return answer.status_code, headers, text


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        tmp_path_factory.mktemp("small-put") / "data",
        env_overrides={"SERVICE_CORS_ORIGINS": ALLOWED_ORIGIN},
    )
    proc.start()
    with proc.client() as client:
        assert client.post("/buckets", json={"name": "paths"}).status_code == 201
        quota = {"name": "paths-quota", "quota_bytes": 100}
        assert client.post("/buckets", json=quota).status_code == 201
        assert client.put("/buckets/paths/objects/exists", content=b"there").status_code == 200
    yield proc
    proc.stop()


BODY = b"a small body"
SHA = hashlib.sha256(BODY).hexdigest()
Case = tuple[str, dict[str, str], bytes, str]
"""(path after ``/buckets/``, headers, body, what it shows)."""
CASES: list[Case] = [
    ("paths/objects/{n}.txt", {}, BODY, "stored, type guessed from the key"),
    ("paths/objects/{n}", {"Content-Type": "image/png", "X-Meta-Color": "blue"}, BODY, "fields"),
    ("paths/objects/{n}", {"X-Checksum-Sha256": SHA}, BODY, "the checksum matches"),
    ("paths/objects/{n}", {"X-Checksum-Sha256": "0" * 64}, BODY, "BadDigest after the body"),
    ("paths/objects/{n}", {"X-Checksum-Sha256": "xyz"}, BODY, "a malformed checksum"),
    ("paths/objects/{n}", {"Content-Type": "not a type"}, BODY, "a bad content type"),
    ("paths/objects/{n}", {"X-Meta-Big": "v" * 5000}, BODY, "metadata too large"),
    ("paths/objects/exists", {"If-None-Match": "*"}, BODY, "the key exists"),
    ("paths/objects/{n}", {"If-None-Match": "abc"}, BODY, "If-None-Match other than *"),
    ("paths/objects/exists", {"If-Match": '"00"'}, BODY, "If-Match does not match"),
    ("paths/objects/{n}", {"If-Match": "unquoted"}, BODY, "a malformed If-Match"),
    ("paths-quota/objects/{n}", {}, b"x" * 200, "over the bucket's quota"),
    ("missing-bucket/objects/{n}", {}, BODY, "no such bucket"),
    ("paths/objects/bad%FFkey{n}", {}, BODY, "a key that is not UTF-8"),
    ("paths/objects/{n}", {"Origin": "https://evil.example"}, BODY, "a cross-site write"),
    ("paths/objects/{n}", {"Origin": ALLOWED_ORIGIN}, BODY, "an allowed origin: CORS headers"),
    ("paths/objects/{n}", {"Sec-Fetch-Site": "cross-site"}, BODY, "Sec-Fetch-Site"),
    ("paths/objects/{n}", {"Authorization": "Basic bm9ib2R5Om5vcGU="}, BODY, "bad credentials"),
    ("paths/objects/{n}", {"Authorization": "Bearer not-a-token"}, BODY, "a bad token"),
    ("paths/objects/{n}", {}, b"", "an empty body"),
]


UNRECORDED = {"a key that is not UTF-8", "a cross-site write", "Sec-Fetch-Site"}
"""Refused before authentication: no audit record (the contract's Audit log)."""


@pytest.mark.parametrize(("path", "headers", "body", "shows"), CASES, ids=[c[3] for c in CASES])
def test_the_small_put_path_answers_as_the_handler_does(
    server: ServerProcess, path: str, headers: dict[str, str], body: bytes, shows: str
) -> None:
    answers, names = [], []
    with server.client() as client:
        for number, query in enumerate(("", "?via=handler")):
            names.append(re.sub(r"\W+", "-", shows) + f"-{number}")
            url = "/buckets/" + path.format(n=names[-1]) + query
            answer = client.put(url, content=body, headers=headers)
            assert answer.status_code != 500, answer.text
            answers.append(answer)
        small, handled = answers
        assert handled.request.url.query == b"via=handler"
        ours, theirs = compared(small, names[0]), compared(handled, names[1])
        if "InvalidKey" in small.text:
            # The handler refuses a path that is not UTF-8 before reading the body, so it
            # closes the connection; SmallPut reads the small body first and keeps it.
            assert theirs[1].pop("connection") == "close"
        assert ours == theirs
        if small.status_code == 200:
            for answer in answers:
                stored = client.get(answer.request.url)
                assert stored.status_code == 200, stored.text
                assert stored.content == body
        records = audit_records(client)
    # the same record, or none for both (refused before authentication)
    first, second = (
        [
            strip(record)
            for record in records
            if record["request_id"] == answer.headers["X-Request-Id"]
        ]
        for answer in answers
    )
    assert first == second
    assert len(first) == (0 if shows in UNRECORDED else 1), small.text


def strip(record: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in record.items() if name not in RECORD_VARYING}


def test_a_small_put_on_a_connection_kept_alive_leaves_it_usable(
    server: ServerProcess,
) -> None:
    """Refusals and successes one after another on one connection: each answered in turn."""
    with server.client() as client:
        for number in range(20):
            ok = client.put(f"/buckets/paths/objects/alive-{number}", content=BODY)
            assert ok.status_code == 200, ok.text
            refused = client.put("/buckets/missing-bucket/objects/k", content=BODY)
            assert refused.status_code == 404, refused.text
        listed = client.get("/buckets/paths/objects", params={"prefix": "alive-"})
        assert len(listed.json()["objects"]) == 20


def test_the_upload_cap_holds_for_small_puts(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """A small PUT holds an upload slot from its head to its body's end, as the handler's
    does: with a cap of one, a second upload waits and is refused (429) while the first
    is held open; then it goes through."""
    proc = server_factory(SERVICE_MAX_UPLOADS_PER_USER="1", SERVICE_QUEUE_WAIT="0.5")
    with proc.client() as client:
        assert client.post("/buckets", json={"name": "capped"}).status_code == 201
    head = (
        "PUT /api/v1/buckets/capped/objects/held HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: {basic(proc.auth)}\r\nContent-Length: 10\r\n\r\n"
    ).encode()
    with RawConnection(proc.port) as held:
        held.send(head + b"12345")  # half the body: the slot stays held
        with proc.client() as client:
            for _ in range(50):  # until the held request's head was read
                waited = client.put("/buckets/capped/objects/second", content=BODY)
                if waited.status_code == 429:
                    break
            assert waited.status_code == 429, waited.text
            assert waited.json()["error"]["code"] == "TooManyRequests"
            assert "Retry-After" in waited.headers
        held.send(b"67890")
        answer = held.read_answer()
        assert answer.status == 200
    with proc.client() as client:
        assert client.put("/buckets/capped/objects/second", content=BODY).status_code == 200
        assert client.get("/buckets/capped/objects/held").content == b"1234567890"
