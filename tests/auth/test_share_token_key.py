"""Share tokens carry the access key that made the share, signed (``share_tokens``)."""

from __future__ import annotations

from service.auth.share_tokens import ShareClaims, issue_share_token, verify_share_token
from service.auth.signing import derive_key, seal
from service.auth.tokens import TokenError

SECRET = b"s" * 32


def test_the_key_rides_in_the_token_and_a_token_made_by_a_bearer_has_none() -> None:
    with_key = issue_share_token(SECRET, "vs_1", 2000.0, "bk_abc")
    without = issue_share_token(SECRET, "vs_1", 2000.0)
    assert verify_share_token(SECRET, with_key, 1000.0) == ShareClaims("vs_1", 2000.0, "bk_abc")
    assert verify_share_token(SECRET, without, 1000.0) == ShareClaims("vs_1", 2000.0, None)


def test_a_swapped_key_breaks_the_signature() -> None:
    token = issue_share_token(SECRET, "vs_1", 2000.0, "bk_abc")
    other = issue_share_token(SECRET, "vs_1", 2000.0, "bk_other")
    body, mac = token.split(".")
    other_body, _ = other.split(".")
    assert verify_share_token(SECRET, f"{other_body}.{mac}", 1000.0) is TokenError.INVALID
    assert body != other_body


def test_a_key_claim_that_is_not_text_is_invalid() -> None:
    key = derive_key(SECRET, "service.auth.share-token.v1")
    token = seal(key, {"s": "vs_1", "exp": 2000.0, "k": 5})
    assert verify_share_token(SECRET, token, 1000.0) is TokenError.INVALID
