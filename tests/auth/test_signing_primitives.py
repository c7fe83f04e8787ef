"""The shared HMAC token format: canonical base64url and sealed claims."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from service.auth.signing import (
    MAX_TOKEN_CHARS,
    b64url_decode,
    b64url_encode,
    derive_key,
    seal,
    unseal,
)

KEY = derive_key(b"k" * 32, "test.purpose")


@given(st.binary(max_size=100))
def test_base64url_round_trips_without_padding(data: bytes) -> None:
    text = b64url_encode(data)
    assert "=" not in text
    assert b64url_decode(text) == data


@given(st.text(max_size=60))
def test_base64url_decode_never_raises_and_accepts_only_canonical_text(text: str) -> None:
    data = b64url_decode(text)
    assert data is None or b64url_encode(data) == text


def test_base64url_rejects_padding_stray_bits_and_trailing_newline() -> None:
    assert b64url_decode("YQ==") is None
    assert b64url_decode("YR") is None  # same byte as "YQ" with a low bit set
    assert b64url_decode("YQ\n") is None
    assert b64url_decode("Y") is None
    assert b64url_decode("YQ") == b"a"


def test_purposes_derive_different_keys() -> None:
    secret = b"s" * 32
    assert derive_key(secret, "a") != derive_key(secret, "b")
    assert derive_key(secret, "a") == derive_key(secret, "a")


def test_sealed_claims_come_back_only_under_the_same_key() -> None:
    token = seal(KEY, {"x": 1, "y": "z"})
    assert unseal(KEY, token) == {"x": 1, "y": "z"}
    assert unseal(derive_key(b"k" * 32, "other.purpose"), token) is None


def test_a_payload_with_a_valid_mac_but_not_an_object_is_refused() -> None:
    from service.auth.signing import mac

    body = base64.urlsafe_b64encode(b"[1, 2]").rstrip(b"=").decode()
    token = body + "." + b64url_encode(mac(KEY, body.encode()))
    assert unseal(KEY, token) is None


def test_oversized_token_is_refused_before_decoding() -> None:
    assert unseal(KEY, "a" * (MAX_TOKEN_CHARS + 1)) is None


@given(st.text(max_size=300))
def test_unseal_never_raises(token: str) -> None:
    assert unseal(KEY, token) is None
