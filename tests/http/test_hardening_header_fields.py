"""Header-bound fields over HTTP: custom metadata and content types at every entry point.

One validator (``service.common.header_fields``) refuses control characters, bad names and bad
media types at PUT, multipart init, image optimize, video thumbnails and presign; values
outside visible ASCII travel as RFC 2047 encoded words and come back decoded in JSON and in
the client; objects an older version stored with CR/LF/NUL/non-Latin-1 fields are readable.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.client import ServiceClient
from service.config import Config
from service.engine.journaled import journaled_engine
from service.ops.buckets import create_bucket
from service.ops.objects import PutIntent, store_object
from service.storage import StagingUpload
from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

BAD_VALUES = ["a\r\nX-Injected: 1", "nul\x00byte", "tab\there", "del\x7f", "c1\x85"]


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path_factory.mktemp("fields") / "data")
    server.start()
    with server.client() as api:
        assert api.post("/buckets", json={"name": "fields"}).status_code == 201
    yield server
    server.stop()


@pytest.fixture
def api(proc: ServerProcess) -> Iterator[httpx.Client]:
    with proc.client() as client:
        yield client


def b_word(text: str) -> str:
    return "=?UTF-8?B?" + base64.b64encode(text.encode()).decode() + "?="


def test_encoded_words_round_trip_through_put_json_and_get(api: httpx.Client) -> None:
    title = "Caf\u00e9 \u65e5\u672c \U0001f600"
    put = api.put(
        "/buckets/fields/objects/encoded",
        content=b"x",
        headers={"X-Meta-Title": b_word(title), "X-Meta-Raw": "caf\u00e9".encode()},
    )
    assert put.status_code == 200, put.text
    assert put.json()["custom_metadata"] == {"title": title, "raw": "caf\u00e9"}
    got = api.get("/buckets/fields/objects/encoded")
    assert got.status_code == 200
    assert got.headers["X-Meta-Title"].startswith("=?UTF-8?B?")
    assert got.headers["X-Meta-Title"].isascii()
    listed = api.get("/buckets/fields/objects", params={"prefix": "encoded"}).json()
    assert listed["objects"][0]["custom_metadata"]["title"] == title


def test_the_client_encodes_and_decodes_metadata(proc: ServerProcess) -> None:
    metadata = {"title": "na\u00efve \u65e5\u672c", "plain": "blue", "word": "=?x?="}
    with ServiceClient(proc.connection_string) as client:
        handle = client.bucket("fields")
        handle.put("client-meta", b"data", metadata=metadata)
        assert handle.head("client-meta").custom_metadata == metadata


@pytest.mark.parametrize("value", ["=?UTF-8?B?####?=", "=?latin-9?B?w6k=?=", b_word("a\nb")])
def test_bad_encoded_words_are_refused_on_put(api: httpx.Client, value: str) -> None:
    response = api.put(
        "/buckets/fields/objects/bad-word", content=b"x", headers={"X-Meta-A": value}
    )
    assert_error(response, 400, "InvalidArgument")
    assert api.head("/buckets/fields/objects/bad-word").status_code == 404


def test_put_refuses_a_value_that_is_not_utf8_and_a_bad_content_type(api: httpx.Client) -> None:
    latin1 = api.put("/buckets/fields/objects/l1", content=b"x", headers={"X-Meta-A": b"\xe9"})
    assert_error(latin1, 400, "InvalidArgument")
    for content_type in ["not a media type", "text/", "text/plain; charset", "t\u00e9xt/plain"]:
        response = api.put(
            "/buckets/fields/objects/ct",
            content=b"x",
            headers={"Content-Type": content_type.encode()},
        )
        assert_error(response, 400, "InvalidArgument")
    assert api.head("/buckets/fields/objects/ct").status_code == 404


@pytest.mark.parametrize("value", BAD_VALUES)
def test_multipart_init_refuses_control_characters(api: httpx.Client, value: str) -> None:
    before = api.get("/multipart", params={"bucket": "fields"}).json()["uploads"]
    response = api.post(
        "/multipart/init",
        json={"bucket": "fields", "key": "mp", "custom_metadata": {"a": value}},
    )
    assert_error(response, 400, "InvalidArgument")
    for body in (
        {"bucket": "fields", "key": "mp", "content_type": "text/plain" + value},
        {"bucket": "fields", "key": "mp", "custom_metadata": {"bad name": "v"}},
        {"bucket": "fields", "key": "mp", "custom_metadata": {"a": "v", "A": "w"}},
        {"bucket": "fields", "key": "mp", "custom_metadata": {"a": "x" * 9000}},
    ):
        assert_error(api.post("/multipart/init", json=body), 400, "InvalidArgument")
    assert api.get("/multipart", params={"bucket": "fields"}).json()["uploads"] == before


def test_multipart_object_with_non_latin1_metadata_is_readable(api: httpx.Client) -> None:
    metadata = {"title": "\u65e5\u672c\u8a9e", "line": "\u2028"}
    upload = api.post(
        "/multipart/init",
        json={"bucket": "fields", "key": "mp-jp", "custom_metadata": metadata},
    ).json()
    part = api.put(f"/multipart/{upload['upload_id']}/part?partNumber=1", content=b"abc").json()
    done = api.post(
        f"/multipart/{upload['upload_id']}/complete",
        json={"parts": [{"part_number": 1, "etag": part["etag"]}]},
    )
    assert done.status_code == 200, done.text
    got = api.get("/buckets/fields/objects/mp-jp")
    assert got.status_code == 200 and got.content == b"abc"
    assert api.head("/buckets/fields/objects/mp-jp").status_code == 200
    assert done.json()["custom_metadata"] == metadata


@pytest.mark.parametrize("value", BAD_VALUES[:2])
def test_optimize_thumbnails_and_presign_refuse_bad_fields(api: httpx.Client, value: str) -> None:
    base = {"bucket": "fields", "key": "no-such-source"}
    for path in ("/images/optimize", "/videos/thumbnails"):
        response = api.post(path, json={**base, "custom_metadata": {"a": value}})
        assert_error(response, 400, "InvalidArgument")
    presign = api.post(
        "/presign", json={**base, "method": "PUT", "content_type": "text/plain" + value}
    )
    assert_error(presign, 400, "InvalidArgument")


async def _store_unchecked(data_dir: Path) -> None:
    """Store what older versions accepted unchecked, past today's validation."""
    engine, _ = journaled_engine(Config(data_dir=str(data_dir), durability="balanced"))
    await engine.start()
    try:
        await create_bucket(engine, "u_legacy", {"name": "legacy"})
        upload = await StagingUpload.start(engine.store, engine.executor)
        await upload.write(b"still here")
        staged = await upload.finish()
        intent = PutIntent(
            bucket="legacy",
            key="old",
            content_type="text/plain\r\nX-Injected: 1",
            custom_metadata={
                "crlf": "a\r\nX-Injected: 2",
                "nul": "x\x00y",
                "jp": "\u65e5\u672c",
                "bad name": "dropped from headers",
            },
        )
        await store_object(engine, intent, staged)
    finally:
        await engine.stop()


def test_objects_stored_unchecked_by_older_versions_are_readable(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    asyncio.run(_store_unchecked(data_dir))
    server = ServerProcess(data_dir)
    server.start()
    try:
        with server.client() as api:
            got = api.get("/buckets/legacy/objects/old")
            assert got.status_code == 200 and got.content == b"still here"
            assert "X-Injected" not in got.headers
            assert got.headers["Content-Type"] == "application/octet-stream"
            head = api.head("/buckets/legacy/objects/old")
            assert head.status_code == 200
            with ServiceClient(server.connection_string) as client:
                stat = client.bucket("legacy").head("old")
            assert stat.custom_metadata == {
                "crlf": "a\r\nX-Injected: 2",
                "nul": "x\x00y",
                "jp": "\u65e5\u672c",
            }
            listed = api.get("/buckets/legacy/objects").json()["objects"][0]
            assert listed["custom_metadata"]["bad name"] == "dropped from headers"
    finally:
        server.stop()
