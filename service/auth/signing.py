"""HMAC primitives shared by bearer tokens, presigned URLs and share tokens.

One server secret signs three kinds of things. Each kind signs under its own key derived
from the secret and a purpose label (``derive_key``), so a signature made for one purpose can
never be replayed as another: a share token is not a bearer token even if their bytes were to
coincide. ``seal``/``unseal`` hold the one token format (``<payload>.<mac>``, both unpadded
base64url, the payload compact JSON), used by bearer and share tokens alike.

Decoding is canonical: a string that decodes to the right bytes but is not exactly what the
encoder would produce (padding, a different value in the unused low bits of the last
character, stray characters) is rejected, so every byte of a token is covered by its MAC.

Thread-safety: pure functions, safe from any thread.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re

MAX_TOKEN_CHARS = 4096
"""Longer input is rejected before any decoding work (tokens we issue are ~150 chars)."""

_B64URL = re.compile(r"[A-Za-z0-9_-]*")


def derive_key(secret: bytes, purpose: str) -> bytes:
    """The key for one purpose: HMAC-SHA256(secret, purpose)."""
    return hmac.new(secret, purpose.encode("ascii"), hashlib.sha256).digest()


def mac(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 of ``message``."""
    return hmac.new(key, message, hashlib.sha256).digest()


def b64url_encode(data: bytes) -> str:
    """Unpadded base64url: safe in a URL path segment and a query value without escaping."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes | None:
    """The bytes of canonical unpadded base64url ``text``, or None for anything else."""
    if not _B64URL.fullmatch(text):
        return None
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error:
        return None
    return data if b64url_encode(data) == text else None


def seal(key: bytes, claims: dict[str, object]) -> str:
    """Serialize ``claims`` and append their MAC under ``key``."""
    payload = json.dumps(claims, sort_keys=True, separators=(",", ":"), allow_nan=False)
    body = b64url_encode(payload.encode("utf-8"))
    return body + "." + b64url_encode(mac(key, body.encode("ascii")))


def unseal(key: bytes, token: str) -> dict[str, object] | None:
    """The claims of a token ``seal`` made under ``key``, or None if it is not one.

    The MAC is checked (in constant time) before the payload is parsed, so nothing an
    attacker wrote reaches the JSON parser.
    """
    if len(token) > MAX_TOKEN_CHARS:
        return None
    body, dot, signature_text = token.partition(".")
    if not dot:
        return None
    payload = b64url_decode(body)
    signature = b64url_decode(signature_text)
    if payload is None or signature is None:
        return None
    if not hmac.compare_digest(signature, mac(key, body.encode("ascii"))):
        return None
    try:
        claims = json.loads(payload)
    except ValueError:
        return None
    return claims if isinstance(claims, dict) else None


def claim_time(claims: dict[str, object], name: str) -> float | None:
    """The timestamp claim ``name`` as a float, or None if absent or not a number."""
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
