"""Signed video share tokens: issue, verify, expiry, tampering."""

from __future__ import annotations

import string
import urllib.parse

from hypothesis import given
from hypothesis import strategies as st

from service.auth.share_tokens import ShareClaims, issue_share_token, verify_share_token
from service.auth.tokens import TokenError, issue_token

SECRET = b"\x07" * 32
NOW = 1_800_000_000.0
URL_ALPHABET = string.ascii_letters + string.digits + "-_."


def test_share_token_names_its_share_until_expiry() -> None:
    token = issue_share_token(SECRET, "sh_abc", NOW + 60)
    assert verify_share_token(SECRET, token, NOW) == ShareClaims("sh_abc", NOW + 60)
    assert verify_share_token(SECRET, token, NOW + 59.999) == ShareClaims("sh_abc", NOW + 60)
    assert verify_share_token(SECRET, token, NOW + 60) is TokenError.EXPIRED


def test_share_token_fits_in_a_url_path_segment() -> None:
    token = issue_share_token(SECRET, "sh/with?odd#chars", NOW + 60)
    assert urllib.parse.quote(token, safe="") == token
    assert "/" not in token


def test_every_single_character_change_invalidates_the_share_token() -> None:
    token = issue_share_token(SECRET, "sh_abc", NOW + 60)
    for position, original in enumerate(token):
        for replacement in URL_ALPHABET:
            if replacement != original:
                altered = token[:position] + replacement + token[position + 1 :]
                assert verify_share_token(SECRET, altered, NOW) is TokenError.INVALID


def test_tampered_expired_share_token_is_invalid_not_expired() -> None:
    token = issue_share_token(SECRET, "sh_abc", NOW - 60)
    assert verify_share_token(SECRET, token, NOW) is TokenError.EXPIRED
    replacement = "B" if token[-1] == "A" else "A"
    assert verify_share_token(SECRET, token[:-1] + replacement, NOW) is TokenError.INVALID


def test_share_token_under_another_secret_is_invalid() -> None:
    token = issue_share_token(b"\x08" * 32, "sh_abc", NOW + 60)
    assert verify_share_token(SECRET, token, NOW) is TokenError.INVALID


def test_bearer_token_is_not_accepted_as_a_share_token() -> None:
    token, _ = issue_token(SECRET, "sh_abc", NOW - 1, 3600)
    assert verify_share_token(SECRET, token, NOW) is TokenError.INVALID


@given(st.text(max_size=300))
def test_share_verify_never_raises_on_garbage(token: str) -> None:
    assert verify_share_token(SECRET, token, NOW) is TokenError.INVALID
