"""Video share tokens: a share id and an expiry, signed, carried in the playback URL's path.

A share token is ``<payload>.<mac>`` (see ``service.auth.signing``) under a key derived from
the server secret for this purpose only, so it can never pass as a bearer token or the other
way round. It grants nothing by itself: the caller still looks the share up by the id it
carries, so deleting the share revokes every copy of the token (404 NoSuchShare) before its
expiry. Base64url and ``.`` need no escaping in a path segment, and players keep the token
because playlists refer to segments by relative URLs.

Thread-safety: pure functions, safe from any thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from service.auth.signing import claim_time, derive_key, seal, unseal
from service.auth.tokens import TokenError

_PURPOSE = "service.auth.share-token.v1"


@dataclass(frozen=True, slots=True)
class ShareClaims:
    """What a valid share token says."""

    share_id: str
    expires_at: float
    access_key_id: str | None = None
    """The access key that made the share (None when a bearer token made it): playback
    stops once that key is revoked, as a presigned URL does."""


def issue_share_token(
    secret: bytes, share_id: str, expires_at: float, access_key_id: str | None = None
) -> str:
    """A URL-safe token naming ``share_id`` (and the access key that made it, if any),
    valid until ``expires_at`` (unix seconds)."""
    if not math.isfinite(expires_at):
        raise ValueError("expires_at must be finite")
    claims: dict[str, object] = {"s": share_id, "exp": expires_at}
    if access_key_id is not None:
        claims["k"] = access_key_id
    return seal(derive_key(secret, _PURPOSE), claims)


def verify_share_token(secret: bytes, token: str, now: float) -> ShareClaims | TokenError:
    """The claims of ``token`` if intact and unexpired; else EXPIRED or INVALID.

    EXPIRED answers 403 SignatureExpired and INVALID 403 SignatureInvalid; a valid token
    whose share was deleted is the caller's 404 NoSuchShare.
    """
    claims = unseal(derive_key(secret, _PURPOSE), token)
    if claims is None:
        return TokenError.INVALID
    share_id, expires_at = claims.get("s"), claim_time(claims, "exp")
    key_id = claims.get("k")
    if not isinstance(share_id, str) or expires_at is None:
        return TokenError.INVALID
    if key_id is not None and not isinstance(key_id, str):
        return TokenError.INVALID
    if now >= expires_at:
        return TokenError.EXPIRED
    return ShareClaims(share_id=share_id, expires_at=expires_at, access_key_id=key_id)
