"""Stateless bearer tokens for logged-in users, signed with HMAC-SHA256.

A token is ``<payload>.<mac>`` (see ``service.auth.signing``): the payload holds the user id,
the issue time and the expiry; the MAC is keyed by a key derived from the server secret for
this purpose only. Nothing is stored per token, so logging out everywhere means changing
what the caller checks after ``verify_token``: the caller rejects a token whose user is
disabled or deleted, or whose ``issued_at`` precedes the user's last password change.
``issued_at`` is carried exactly (a float of seconds, not rounded), so a token issued just
after a password change is never mistaken for one issued before it.

Changing the server secret invalidates every token at once.

Thread-safety: pure functions, safe from any thread.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from service.auth.signing import claim_time, derive_key, seal, unseal

_PURPOSE = "service.auth.bearer-token.v1"


@dataclass(frozen=True, slots=True)
class TokenClaims:
    """What a valid token says; times in seconds since the epoch."""

    user_id: str
    issued_at: float
    expires_at: float


class TokenError(enum.Enum):
    """Why a token was refused."""

    EXPIRED = "expired"
    """Signed by this server and intact, but past its expiry."""
    INVALID = "invalid"
    """Altered, truncated, malformed or signed under another secret."""


def issue_token(secret: bytes, user_id: str, issued_at: float, ttl: float) -> tuple[str, float]:
    """A URL-safe token for ``user_id`` valid for ``ttl`` seconds, and its expiry time."""
    if not (math.isfinite(issued_at) and math.isfinite(ttl) and ttl > 0):
        raise ValueError("issued_at must be finite and ttl positive")
    expires_at = issued_at + ttl
    claims: dict[str, object] = {"u": user_id, "iat": issued_at, "exp": expires_at}
    return seal(derive_key(secret, _PURPOSE), claims), expires_at


def verify_token(secret: bytes, token: str, now: float) -> TokenClaims | TokenError:
    """The claims of ``token`` if it is intact and ``now`` is before its expiry."""
    claims = unseal(derive_key(secret, _PURPOSE), token)
    if claims is None:
        return TokenError.INVALID
    user_id = claims.get("u")
    issued_at, expires_at = claim_time(claims, "iat"), claim_time(claims, "exp")
    if not isinstance(user_id, str) or issued_at is None or expires_at is None:
        return TokenError.INVALID
    if now >= expires_at:
        return TokenError.EXPIRED
    return TokenClaims(user_id=user_id, issued_at=issued_at, expires_at=expires_at)
