"""Presigned URLs: the canonical string, its signature, and the check of a presigned request.

A presigned URL is the object's path plus three query parameters: ``X-Expires`` (unix
seconds), ``X-Credential`` (the access key id or user id that signed) and ``X-Signature``
(lowercase hex HMAC-SHA256). The MAC covers, in this order::

    method, bucket, key, expires, credential, content type (PUT only; "" otherwise)

each field as ``<byte length>:<UTF-8 bytes>\\n`` so no choice of key or bucket can make two
different requests share a canonical string (``a/b`` + ``c`` never equals ``a`` + ``b/c``).
The key is derived from the server secret for this purpose only (``signing.derive_key``).

For PUT the content type is always signed, an absent one as "": the upload must then carry
exactly the signed ``Content-Type`` (or none), as with S3's query-string signatures. The
signature is checked before the expiry, so an altered URL is INVALID whatever its time, and
a malformed expiry or signature is INVALID, never an exception.

Thread-safety: pure functions, safe from any thread.
"""

from __future__ import annotations

import enum
import hmac
import math
import re

from service.auth.signing import derive_key, mac

EXPIRES_PARAM = "X-Expires"
CREDENTIAL_PARAM = "X-Credential"
SIGNATURE_PARAM = "X-Signature"

PRESIGN_METHODS = frozenset({"GET", "PUT", "HEAD"})
MIN_EXPIRES_IN = 1
MAX_EXPIRES_IN = 604_800
"""Seven days, as S3."""
DEFAULT_EXPIRES_IN = 3600

_PURPOSE = "service.auth.presign.v1"
_EXPIRES_SHAPE = re.compile(r"0|[1-9][0-9]{0,15}")
_SIGNATURE_SHAPE = re.compile(r"[0-9a-f]{64}")


class PresignResult(enum.Enum):
    """The outcome of checking a presigned request."""

    OK = "ok"
    EXPIRED = "expired"
    """Intact, but ``now`` is at or past ``X-Expires``: 403 SignatureExpired."""
    INVALID = "invalid"
    """Anything altered (method included) or malformed: 403 SignatureInvalid."""


def validate_expires_in(value: object) -> str | None:
    """Why ``value`` (a decoded JSON value) is not an acceptable ``expires_in``, or None.

    >>> validate_expires_in(3600) is None, validate_expires_in(0)
    (True, 'expires_in must be an integer from 1 to 604800')
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not MIN_EXPIRES_IN <= value <= MAX_EXPIRES_IN
    ):
        return f"expires_in must be an integer from {MIN_EXPIRES_IN} to {MAX_EXPIRES_IN}"
    return None


def presign_expires_at(now: float, expires_in: int) -> int:
    """The ``X-Expires`` value: at least ``expires_in`` whole seconds after ``now``."""
    return math.ceil(now) + expires_in


def canonical_string(
    method: str,
    bucket: str,
    key: str,
    expires: int,
    credential: str,
    content_type: str | None,
) -> bytes:
    """The bytes the signature covers (see the module docstring)."""
    fields = (
        method,
        bucket,
        key,
        str(expires),
        credential,
        (content_type or "") if method == "PUT" else "",
    )
    out = bytearray()
    for field in fields:
        # surrogatepass: total and still injective for keys decoded with surrogateescape.
        data = field.encode("utf-8", "surrogatepass")
        out += b"%d:%b\n" % (len(data), data)
    return bytes(out)


def sign_presigned(
    secret: bytes,
    method: str,
    bucket: str,
    key: str,
    expires: int,
    credential: str,
    content_type: str | None = None,
) -> str:
    """The ``X-Signature`` value (lowercase hex) for a presigned request."""
    if method not in PRESIGN_METHODS:
        raise ValueError(f"cannot presign method {method!r}")
    message = canonical_string(method, bucket, key, expires, credential, content_type)
    return mac(derive_key(secret, _PURPOSE), message).hex()


def presign_query(
    secret: bytes,
    method: str,
    bucket: str,
    key: str,
    expires: int,
    credential: str,
    content_type: str | None = None,
) -> dict[str, str]:
    """The three query parameters to append to the object's URL."""
    signature = sign_presigned(secret, method, bucket, key, expires, credential, content_type)
    return {
        EXPIRES_PARAM: str(expires),
        CREDENTIAL_PARAM: credential,
        SIGNATURE_PARAM: signature,
    }


def verify_presigned(
    secret: bytes,
    method: str,
    bucket: str,
    key: str,
    expires: str,
    credential: str,
    signature: str,
    content_type: str | None,
    now: float,
) -> PresignResult:
    """Check a presigned request; ``expires``, ``credential``, ``signature`` as in the query.

    ``method`` is the request's method and ``content_type`` its ``Content-Type`` (None if
    absent). The signature is compared in constant time.
    """
    if (
        method not in PRESIGN_METHODS
        or _EXPIRES_SHAPE.fullmatch(expires) is None
        or _SIGNATURE_SHAPE.fullmatch(signature) is None
    ):
        return PresignResult.INVALID
    expected = sign_presigned(secret, method, bucket, key, int(expires), credential, content_type)
    if not hmac.compare_digest(expected, signature):
        return PresignResult.INVALID
    if now >= int(expires):
        return PresignResult.EXPIRED
    return PresignResult.OK
