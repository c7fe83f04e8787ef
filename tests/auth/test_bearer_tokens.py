"""Stateless bearer tokens: issue, verify, expiry, tampering."""

from __future__ import annotations

import string
import urllib.parse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.auth.share_tokens import issue_share_token
from service.auth.tokens import TokenClaims, TokenError, issue_token, verify_token

SECRET = bytes(range(32))
OTHER_SECRET = bytes(range(1, 33))
ISSUED = 1_795_336_904.123456
TTL = 3600.0
URL_ALPHABET = string.ascii_letters + string.digits + "-_"


def test_token_carries_user_issue_time_and_expiry_exactly() -> None:
    token, expires_at = issue_token(SECRET, "u_42", ISSUED, TTL)
    assert expires_at == ISSUED + TTL
    assert verify_token(SECRET, token, ISSUED + 1) == TokenClaims("u_42", ISSUED, ISSUED + TTL)


def test_token_is_url_safe() -> None:
    token, _ = issue_token(SECRET, "user with spaces/and?query&chars=é", ISSUED, TTL)
    assert urllib.parse.quote(token, safe="") == token
    assert set(token) <= set(URL_ALPHABET + ".")


def test_token_is_valid_until_just_before_expiry_and_expired_from_it() -> None:
    token, expires_at = issue_token(SECRET, "u", ISSUED, TTL)
    assert isinstance(verify_token(SECRET, token, expires_at - 0.001), TokenClaims)
    assert verify_token(SECRET, token, expires_at) is TokenError.EXPIRED
    assert verify_token(SECRET, token, expires_at + 86400) is TokenError.EXPIRED


def test_every_single_character_change_invalidates_the_token() -> None:
    token, _ = issue_token(SECRET, "u_42", ISSUED, TTL)
    for position, original in enumerate(token):
        for replacement in URL_ALPHABET + ".":
            if replacement == original:
                continue
            altered = token[:position] + replacement + token[position + 1 :]
            outcome = verify_token(SECRET, altered, ISSUED)
            assert outcome is TokenError.INVALID, (position, replacement)


def test_truncated_or_extended_token_is_invalid() -> None:
    token, _ = issue_token(SECRET, "u_42", ISSUED, TTL)
    for cut in range(len(token)):
        assert verify_token(SECRET, token[:cut], ISSUED) is TokenError.INVALID
    for suffix in ("A", ".", "=", "\n", " "):
        assert verify_token(SECRET, token + suffix, ISSUED) is TokenError.INVALID


def test_token_signed_under_another_secret_is_invalid_even_when_expired() -> None:
    token, expires_at = issue_token(OTHER_SECRET, "u_42", ISSUED, TTL)
    assert verify_token(SECRET, token, ISSUED) is TokenError.INVALID
    assert verify_token(SECRET, token, expires_at + 1) is TokenError.INVALID


def test_share_token_is_not_accepted_as_a_bearer_token() -> None:
    share_token = issue_share_token(SECRET, "share_1", ISSUED + TTL)
    assert verify_token(SECRET, share_token, ISSUED) is TokenError.INVALID


@pytest.mark.parametrize("ttl", [0.0, -1.0, float("inf"), float("nan")])
def test_non_positive_or_non_finite_ttl_is_refused(ttl: float) -> None:
    with pytest.raises(ValueError):
        issue_token(SECRET, "u", ISSUED, ttl)


@given(st.text(max_size=400))
def test_verify_never_raises_on_garbage(token: str) -> None:
    assert verify_token(SECRET, token, ISSUED) is TokenError.INVALID


@given(
    user_id=st.text(max_size=80),
    issued_at=st.floats(min_value=0, max_value=4e9),
    ttl=st.floats(min_value=0.001, max_value=1e7),
)
def test_any_user_id_and_time_round_trip(user_id: str, issued_at: float, ttl: float) -> None:
    token, expires_at = issue_token(SECRET, user_id, issued_at, ttl)
    claims = verify_token(SECRET, token, issued_at)
    assert claims == TokenClaims(user_id, issued_at, expires_at)
