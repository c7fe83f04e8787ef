"""Access keys: generation, the stored digest of a secret, and Authorization header parsing.

An access key is an id (``bk_`` + 20 base32 characters, not secret, shown in listings) and a
secret (``sk_`` + 43 base64url characters: 256 random bits), shown once at creation. Only
``digest_secret(secret)`` is stored.

Why a plain SHA-256 and not Argon2 as for passwords: a secret is checked on every request,
so the check must cost microseconds, not the ~0.1 s Argon2 is tuned to cost. Slow hashing
exists to make guessing a *low-entropy* password from a stolen hash expensive; a 256-bit
random secret cannot be guessed from its SHA-256 at any speed, so the slowness would buy
nothing. Digests are compared with ``hmac.compare_digest``.

The header parsers are total: any string (garbage, non-ASCII, huge) yields None instead of
raising, so handlers can answer 401 without a try block.

Thread-safety: pure functions, safe from any thread (``secrets`` is thread-safe).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets

ACCESS_KEY_ID_PREFIX = "bk_"
SECRET_KEY_PREFIX = "sk_"
_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_ID_RANDOM_CHARS = 20
_SECRET_RANDOM_BYTES = 32
MAX_AUTHORIZATION_CHARS = 8192
"""Longer Authorization headers are refused without decoding."""

# Accepted shapes, wide enough for operator-chosen root keys (SERVICE_ROOT_ACCESS_KEY /
# SERVICE_ROOT_SECRET_KEY) yet safe in a connection string's userinfo without escaping
# (RFC 3986 unreserved characters only) and free of the ':' that would split Basic auth.
_ACCESS_KEY_ID_SHAPE = re.compile(r"bk_[A-Za-z0-9._~-]{3,128}")
_SECRET_KEY_SHAPE = re.compile(r"sk_[A-Za-z0-9._~-]{8,256}")
# RFC 6750 section 2.1 b64token.
_BEARER_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9._~+/-]+=*")


def generate_access_key() -> tuple[str, str]:
    """A new ``(access_key_id, secret_key)`` pair from the OS's CSPRNG."""
    key_id = "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_RANDOM_CHARS))
    secret = secrets.token_urlsafe(_SECRET_RANDOM_BYTES)
    return ACCESS_KEY_ID_PREFIX + key_id, SECRET_KEY_PREFIX + secret


def is_access_key_id(text: str) -> bool:
    """Whether ``text`` has the shape of an access key id (generated or operator-chosen).

    >>> is_access_key_id("bk_ABCDEFGHIJKLMNOPQRST"), is_access_key_id("AKIA123")
    (True, False)
    """
    return _ACCESS_KEY_ID_SHAPE.fullmatch(text) is not None


def is_secret_key(text: str) -> bool:
    """Whether ``text`` has the shape of a secret key: ``sk_`` + 8 to 256 unreserved chars."""
    return _SECRET_KEY_SHAPE.fullmatch(text) is not None


def digest_secret(secret: str) -> str:
    """The stored form of a secret: lowercase hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def secret_matches(digest: str, secret: str) -> bool:
    """Whether ``secret`` is the one ``digest`` was made from, in constant time."""
    return hmac.compare_digest(
        digest.encode("utf-8", "surrogatepass"), digest_secret(secret).encode("ascii")
    )


def parse_basic_authorization(header: str) -> tuple[str, str] | None:
    """``(user, password)`` of an RFC 7617 Basic header, or None if it is not a usable one.

    >>> parse_basic_authorization("Basic YmtfSUQ6c2tfU0VDUkVU")
    ('bk_ID', 'sk_SECRET')
    >>> parse_basic_authorization("Basic !!!") is None
    True
    """
    encoded = _credentials_for_scheme(header, "basic")
    if encoded is None:
        return None
    try:
        raw = base64.b64decode(encoded, validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(raw).decode("ascii") != encoded:
        return None  # non-canonical (excess padding, stray low bits): no client sends that
    user, colon, password = decoded.partition(":")
    if not colon or not user or not password:
        return None
    return user, password


def parse_bearer_authorization(header: str) -> str | None:
    """The token of an RFC 6750 Bearer header, or None.

    >>> parse_bearer_authorization("Bearer abc.DEF-_")
    'abc.DEF-_'
    """
    token = _credentials_for_scheme(header, "bearer")
    if token is None or _BEARER_TOKEN_SHAPE.fullmatch(token) is None:
        return None
    return token


def _credentials_for_scheme(header: str, scheme: str) -> str | None:
    """What follows ``scheme`` (matched case-insensitively, RFC 9110 11.1) in ``header``."""
    if len(header) > MAX_AUTHORIZATION_CHARS or not header.isascii():
        return None
    parts = header.split()
    if len(parts) != 2 or parts[0].lower() != scheme:
        return None
    return parts[1]
