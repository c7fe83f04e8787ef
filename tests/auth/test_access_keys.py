"""Access key generation, secret digests, and Authorization header parsing."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.auth.keys import (
    MAX_AUTHORIZATION_CHARS,
    digest_secret,
    generate_access_key,
    is_access_key_id,
    is_secret_key,
    parse_basic_authorization,
    parse_bearer_authorization,
    secret_matches,
)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def test_generated_key_has_the_contract_shape_and_enough_entropy() -> None:
    key_id, secret = generate_access_key()
    assert re.fullmatch(r"bk_[A-Z2-7]{20}", key_id)
    assert re.fullmatch(r"sk_[A-Za-z0-9_-]{43}", secret)
    raw = base64.urlsafe_b64decode(secret[3:] + "=")
    assert len(raw) * 8 >= 160
    assert is_access_key_id(key_id) and is_secret_key(secret)


def test_generated_keys_do_not_repeat() -> None:
    pairs = [generate_access_key() for _ in range(500)]
    assert len({key_id for key_id, _ in pairs}) == 500
    assert len({secret for _, secret in pairs}) == 500


def test_digest_is_sha256_hex_and_never_the_secret() -> None:
    _, secret = generate_access_key()
    digest = digest_secret(secret)
    assert digest == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in digest


def test_secret_matches_only_its_own_digest() -> None:
    _, secret = generate_access_key()
    _, other = generate_access_key()
    digest = digest_secret(secret)
    assert secret_matches(digest, secret)
    assert not secret_matches(digest, other)
    assert not secret_matches(digest, secret[:-1])
    assert not secret_matches(digest.upper(), secret)


@given(digest=st.text(), secret=st.text())
def test_secret_matches_never_raises(digest: str, secret: str) -> None:
    assert secret_matches(digest, secret) is (digest == digest_secret(secret))


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ("bk_ABCDEFGHIJKLMNOPQRST", True),
        ("bk_admin", True),
        ("bk_ab", False),
        ("bk_", False),
        ("BK_ABCDEF", False),
        ("ak_ABCDEF", False),
        ("bk_abc:def", False),
        ("bk_abc def", False),
        ("bk_abc\n", False),
        ("bk_" + "a" * 129, False),
    ],
)
def test_access_key_id_shape(text: str, accepted: bool) -> None:
    assert is_access_key_id(text) is accepted


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ("sk_12345678", True),
        ("sk_1234567", False),
        ("sk_with-dash_and.dot~", True),
        ("sk_has space", False),
        ("sk_has/slash", False),
        ("sk_has@at_sign", False),
        ("SK_12345678", False),
        ("sk_12345678\n", False),
    ],
)
def test_secret_key_shape(text: str, accepted: bool) -> None:
    assert is_secret_key(text) is accepted


def test_basic_header_yields_the_id_and_secret() -> None:
    key_id, secret = generate_access_key()
    assert parse_basic_authorization(basic(key_id, secret)) == (key_id, secret)


@pytest.mark.parametrize("scheme", ["basic", "BASIC", "bAsIc"])
def test_basic_scheme_is_case_insensitive(scheme: str) -> None:
    encoded = basic("bk_ID", "sk_SECRET").split(" ", 1)[1]
    assert parse_basic_authorization(f"{scheme} {encoded}") == ("bk_ID", "sk_SECRET")


def test_basic_password_may_contain_colons() -> None:
    assert parse_basic_authorization(basic("bk_ID", "a:b:c")) == ("bk_ID", "a:b:c")


def test_basic_tolerates_surrounding_whitespace() -> None:
    assert parse_basic_authorization("  " + basic("bk_ID", "sk_S") + " \t") == ("bk_ID", "sk_S")


@pytest.mark.parametrize(
    "header",
    [
        "",
        "Basic",
        "Basic ",
        "Basic !!!!",
        "Basic YWJj",  # "abc": no colon
        "Basic OnNrX1NFQ1JFVA==",  # ":sk_SECRET": empty user
        "Basic YmtfSUQ6",  # "bk_ID:": empty password
        "Basic YmtfSUQ6c2tfU0VDUkVU extra",
        "Basic YmtfSUQ6c2tfU0VDUkVU=",  # bad padding
        "Basic " + base64.b64encode(b"bk_ID:\xff\xfe").decode(),  # not UTF-8
        "Bearer YmtfSUQ6c2tfU0VDUkVU",
        "Basicc YmtfSUQ6c2tfU0VDUkVU",
        "Basic\u00a0YmtfSUQ6c2tfU0VDUkVU",
        "Basic YmtfSUQ6c2tfU0VDUkVU\u00e9",
        "Basic " + "A" * MAX_AUTHORIZATION_CHARS,
    ],
)
def test_unusable_basic_headers_yield_none(header: str) -> None:
    assert parse_basic_authorization(header) is None


@given(st.text())
def test_basic_parsing_never_raises_on_any_text(header: str) -> None:
    result = parse_basic_authorization(header)
    assert result is None or (result[0] and result[1] and ":" not in result[0])


@given(st.binary(max_size=200))
def test_basic_parsing_never_raises_on_any_encoded_bytes(payload: bytes) -> None:
    header = "Basic " + base64.b64encode(payload).decode("ascii")
    result = parse_basic_authorization(header)
    if result is not None:
        assert f"{result[0]}:{result[1]}".encode() == payload


@given(
    user=st.text(min_size=1).filter(lambda text: ":" not in text),
    password=st.text(min_size=1),
)
def test_basic_round_trips_any_user_and_password(user: str, password: str) -> None:
    assert parse_basic_authorization(basic(user, password)) == (user, password)


def test_bearer_header_yields_the_token() -> None:
    assert parse_bearer_authorization("Bearer abc.DEF_-") == "abc.DEF_-"
    assert parse_bearer_authorization("bearer  abc~+/==") == "abc~+/=="


@pytest.mark.parametrize(
    "header",
    [
        "",
        "Bearer",
        "Bearer ",
        "Bearer a b",
        "Bearer a=b",
        "Bearer tok\u00e9n",
        'Bearer "quoted"',
        "Basic abc",
        "Bearer " + "a" * MAX_AUTHORIZATION_CHARS,
    ],
)
def test_unusable_bearer_headers_yield_none(header: str) -> None:
    assert parse_bearer_authorization(header) is None


@given(st.text())
def test_bearer_parsing_never_raises_on_any_text(header: str) -> None:
    token = parse_bearer_authorization(header)
    assert token is None or (token and token in header)
