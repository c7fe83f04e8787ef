"""Keys in URLs: percent-encoded so that the server decodes exactly the key that was meant."""

from __future__ import annotations

import urllib.parse

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.client._paths import encode_key, encode_segment, object_path

KEY_CHARS = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"))
keys = st.text(KEY_CHARS, min_size=1, max_size=60).filter(lambda k: len(k.encode()) <= 1024)


def _sent_path(path: str) -> str:
    """The path httpx actually puts on the wire for ``path`` below a base URL (the way the
    client's pool joins them)."""
    url = httpx.URL("http://127.0.0.1:9000").copy_with(raw_path=path.encode("ascii"))
    return httpx.Request("GET", url).url.raw_path.decode("ascii")


@pytest.mark.parametrize(
    ("key", "encoded"),
    [
        ("plain.txt", "plain.txt"),
        ("with space.txt", "with%20space.txt"),
        ("dir/sub dir/file", "dir/sub%20dir/file"),
        ("été/日本語.png", "%C3%A9t%C3%A9/%E6%97%A5%E6%9C%AC%E8%AA%9E.png"),
        ("q?x=1#frag", "q%3Fx%3D1%23frag"),
        ("100%", "100%25"),
        ("a+b", "a%2Bb"),
        ("/leading", "/leading"),
        ("a//b/", "a//b/"),
        ("../x", "%2E%2E/x"),
        ("a/./b", "a/%2E/b"),
        ("..", "%2E%2E"),
        ("...", "..."),
    ],
)
def test_keys_are_percent_encoded_with_slashes_kept(key: str, encoded: str) -> None:
    assert encode_key(key) == encoded


@given(keys)
def test_the_server_decodes_exactly_the_key_the_client_meant(key: str) -> None:
    path = _sent_path(object_path("bucket", key))
    prefix = "/api/v1/buckets/bucket/objects/"
    assert path.startswith(prefix)
    assert urllib.parse.unquote(path[len(prefix) :], errors="strict") == key


def test_dot_segments_are_not_collapsed_on_the_wire() -> None:
    assert _sent_path(object_path("b", "a/../b")).endswith("/objects/a/%2E%2E/b")


def test_bucket_names_and_ids_are_one_segment() -> None:
    assert encode_segment("a/b") == "a%2Fb"
    assert encode_segment("..") == "%2E%2E"


@pytest.mark.parametrize("key", ["", "nul\x00byte", "tab\tkey", "del\x7f", "x" * 1025, "é" * 513])
def test_invalid_keys_are_refused_before_sending(key: str) -> None:
    with pytest.raises(ValueError):
        encode_key(key)
