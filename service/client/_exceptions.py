"""Every error the client raises, and the pure mapping from an HTTP answer to one of them.

The tree (catch a branch to handle everything under it)::

    ServiceError                      status, code, message, request_id
    ├── TransportError                no usable HTTP answer (wraps an httpx error)
    │   ├── ConnectionFailedError     could not connect: the request was never sent
    │   └── RequestTimeoutError       connected, but a read or write timed out
    ├── IntegrityError                a SHA-256 computed here disagrees with the server's
    ├── UnexpectedResponseError       a 2xx answer whose body is not the contract's shape
    ├── NotModifiedError              304 to a conditional GET (If-None-Match, If-Modified-Since)
    ├── BadRequestError               400 InvalidArgument, InvalidKey, BadDigest, ...
    ├── AuthenticationError           401 Unauthorized
    ├── PermissionDeniedError         403 AccessDenied, SignatureExpired, AccountDisabled, ...
    ├── NotFoundError                 404 NoSuchBucket, NoSuchKey, NoSuchUpload, ...
    ├── MethodNotAllowedError         405
    ├── ConflictError                 409 BucketAlreadyExists, BucketNotEmpty, InvalidState, ...
    ├── LengthRequiredError           411
    ├── PreconditionFailedError       412
    ├── PayloadTooLargeError          413 EntityTooLarge
    │   └── QuotaExceededError        413 QuotaExceeded
    ├── UnsupportedMediaTypeError     415
    ├── InvalidRangeError             416 (``object_size`` from ``Content-Range: bytes */N``)
    ├── ObjectLockedError             423 ObjectLocked (a retention or legal hold keeps it)
    ├── TooManyRequestsError          429 (``retry_after``): a per-user cap stayed full
    └── ServerError                   any 5xx
        ├── InternalServerError       500
        ├── ServiceUnavailableError   503 (``retry_after`` seconds, when the server said)
        └── InsufficientStorageError  507

The class is chosen by the contract's error ``code`` first (413 QuotaExceeded and 413
EntityTooLarge differ), then by status; an answer that is not the contract's JSON (a proxy's
HTML page, a HEAD without a body) still maps by status. Every class keeps ``code`` so callers
can tell ``NoSuchKey`` from ``NoSuchBucket`` without more classes.

Pure: no I/O. Exceptions are plain objects, safe to pass between threads.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Mapping

import httpx

from service.client._wire import HEADER_REQUEST_ID, HEADER_RETRY_AFTER

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "ConnectionFailedError",
    "InsufficientStorageError",
    "IntegrityError",
    "InternalServerError",
    "InvalidRangeError",
    "LengthRequiredError",
    "MethodNotAllowedError",
    "NotFoundError",
    "NotModifiedError",
    "ObjectLockedError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PreconditionFailedError",
    "QuotaExceededError",
    "RequestTimeoutError",
    "ServerError",
    "ServiceError",
    "ServiceUnavailableError",
    "TooManyRequestsError",
    "TransportError",
    "UnexpectedResponseError",
    "UnsupportedMediaTypeError",
    "error_class",
    "error_from_response",
    "parse_retry_after",
    "transport_error",
]


class ServiceError(Exception):
    """Base of everything the client raises about the service.

    ``status`` is the HTTP status (None when no answer arrived), ``code`` the contract's error
    code (``NoSuchKey``) or a client-side one (``TransportError``), ``message`` the server's
    human-readable text and ``request_id`` the ``X-Request-Id`` to quote in a bug report.
    """

    default_code = "ServiceError"
    #: Set on errors raised by ``upload_multipart`` when the session was kept for a resume.
    upload_id: str | None = None

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
    ) -> None:
        self.message = message
        self.status = status
        self.code = code or self.default_code
        self.request_id = request_id
        super().__init__(message)

    def __str__(self) -> str:
        parts = [f"{self.code}: {self.message}"]
        if self.status is not None:
            parts.append(f"(HTTP {self.status})")
        if self.request_id:
            parts.append(f"[request {self.request_id}]")
        return " ".join(parts)


class TransportError(ServiceError):
    """No usable HTTP answer: connection reset, protocol error, timeout. Wraps the httpx error
    as ``__cause__``."""

    default_code = "TransportError"


class ConnectionFailedError(TransportError):
    """The connection could not be made, so the request was never sent (safe to retry)."""

    default_code = "ConnectionFailed"


class RequestTimeoutError(TransportError):
    """The server did not answer or accept data within the configured timeout."""

    default_code = "Timeout"


class IntegrityError(ServiceError):
    """A checksum computed by the client differs from the one the server reported: the bytes
    were damaged on the way, or the source changed while it was being read."""

    default_code = "IntegrityError"


class UnexpectedResponseError(ServiceError):
    """A success status whose body is not what the contract promises (wrong server, proxy)."""

    default_code = "UnexpectedResponse"


class NotModifiedError(ServiceError):
    """304: the conditional GET's precondition says the cached copy is still current."""

    default_code = "NotModified"


class BadRequestError(ServiceError):
    """400: the request was malformed or named something invalid."""

    default_code = "InvalidArgument"


class AuthenticationError(ServiceError):
    """401: no credentials, or an unknown or revoked access key or token."""

    default_code = "Unauthorized"


class PermissionDeniedError(ServiceError):
    """403: the credentials are valid but may not do this (or a signature is bad or expired)."""

    default_code = "AccessDenied"


class NotFoundError(ServiceError):
    """404: the bucket, object, version, upload, user, key, job or share does not exist."""

    default_code = "NotFound"


class MethodNotAllowedError(ServiceError):
    """405: the path exists but not with this method."""

    default_code = "MethodNotAllowed"


class ConflictError(ServiceError):
    """409: the request conflicts with the current state (exists already, not empty, ...)."""

    default_code = "InvalidState"


class LengthRequiredError(ServiceError):
    """411: this endpoint needs a Content-Length."""

    default_code = "LengthRequired"


class PreconditionFailedError(ServiceError):
    """412: If-Match / If-None-Match did not hold."""

    default_code = "PreconditionFailed"


class PayloadTooLargeError(ServiceError):
    """413: the body (or an image's pixel count) is over a configured limit."""

    default_code = "EntityTooLarge"


class QuotaExceededError(PayloadTooLargeError):
    """413 QuotaExceeded: storing this would take the bucket past ``quota_bytes``."""

    default_code = "QuotaExceeded"


class UnsupportedMediaTypeError(ServiceError):
    """415: an image or video that cannot be decoded."""

    default_code = "UnsupportedMediaType"


class InvalidRangeError(ServiceError):
    """416: the range cannot be satisfied; ``object_size`` is the object's size when known."""

    default_code = "InvalidRange"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        object_size: int | None = None,
    ) -> None:
        super().__init__(message, status=status, code=code, request_id=request_id)
        self.object_size = object_size


class ObjectLockedError(ServiceError):
    """423: the version is under retention or legal hold (object lock)."""

    default_code = "ObjectLocked"


class _SaysWhenToRetry(ServiceError):
    """An answer that may say when to try again: ``retry_after`` seconds, or None."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status, code=code, request_id=request_id)
        self.retry_after = retry_after


class TooManyRequestsError(_SaysWhenToRetry):
    """429: one of the user's caps (uploads in progress, open event streams) stayed full for
    the server's whole queue wait; nothing was done, so any request may be sent again after
    ``retry_after`` seconds (when the server said)."""

    default_code = "TooManyRequests"


class ServerError(ServiceError):
    """5xx: the server failed; the request may be retried."""

    default_code = "InternalError"


class InternalServerError(ServerError):
    """500: an unexpected failure on the server (nothing partial was kept)."""


class ServiceUnavailableError(ServerError, _SaysWhenToRetry):
    """503: the server refuses writes for now (e.g. read-only after a journal fault)."""

    default_code = "ServiceUnavailable"


class InsufficientStorageError(ServerError):
    """507: the server's disk is full; nothing partial was kept."""

    default_code = "InsufficientStorage"


_CLASS_BY_CODE: Mapping[str, type[ServiceError]] = {
    "QuotaExceeded": QuotaExceededError,
    "EntityTooLarge": PayloadTooLargeError,
}

_CLASS_BY_STATUS: Mapping[int, type[ServiceError]] = {
    304: NotModifiedError,
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    411: LengthRequiredError,
    412: PreconditionFailedError,
    413: PayloadTooLargeError,
    415: UnsupportedMediaTypeError,
    416: InvalidRangeError,
    423: ObjectLockedError,
    429: TooManyRequestsError,
    500: InternalServerError,
    503: ServiceUnavailableError,
    507: InsufficientStorageError,
}

_UNSATISFIED_RANGE = re.compile(r"^\s*bytes\s+\*/(\d+)\s*$")


def error_class(status: int, code: str | None) -> type[ServiceError]:
    """The exception class for an answer, by contract code first, then by status.

    >>> error_class(413, "QuotaExceeded").__name__, error_class(404, "NoSuchKey").__name__
    ('QuotaExceededError', 'NotFoundError')
    >>> error_class(502, None).__name__, error_class(418, None).__name__
    ('ServerError', 'ServiceError')
    """
    if code is not None and code in _CLASS_BY_CODE:
        return _CLASS_BY_CODE[code]
    if status in _CLASS_BY_STATUS:
        return _CLASS_BY_STATUS[status]
    return ServerError if status >= 500 else ServiceError


def error_from_response(status: int, headers: Mapping[str, str], body: bytes) -> ServiceError:
    """The exception for a non-2xx answer: its status, headers and (possibly empty) body.

    ``headers`` must be case-insensitive (``httpx.Headers``) or use the exact names.
    """
    code, message, request_id = _parse_error_body(body)
    request_id = request_id or headers.get(HEADER_REQUEST_ID)
    if message is None:
        message = _fallback_message(status, body)
    cls = error_class(status, code)
    if cls is InvalidRangeError:
        return InvalidRangeError(
            message,
            status=status,
            code=code,
            request_id=request_id,
            object_size=_unsatisfied_size(headers.get("Content-Range")),
        )
    if issubclass(cls, _SaysWhenToRetry):
        return cls(
            message,
            status=status,
            code=code,
            request_id=request_id,
            retry_after=parse_retry_after(headers.get(HEADER_RETRY_AFTER)),
        )
    return cls(message, status=status, code=code, request_id=request_id)


def transport_error(exc: httpx.HTTPError) -> TransportError:
    """Our error for an httpx failure that left no usable answer (raise it ``from exc``)."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
        return ConnectionFailedError(message)
    if isinstance(exc, httpx.TimeoutException):
        return RequestTimeoutError(message)
    return TransportError(message)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date).

    >>> parse_retry_after("3"), parse_retry_after(None), parse_retry_after("soon")
    (3.0, None, None)
    >>> parse_retry_after("Thu, 01 Jan 1970 00:00:10 GMT", now=4.0)
    6.0
    """
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    current = time.time() if now is None else now
    return max(0.0, moment.timestamp() - current)


def _parse_error_body(body: bytes) -> tuple[str | None, str | None, str | None]:
    """(code, message, request_id) from the contract's error JSON; Nones if it is not that."""
    if not body:
        return None, None, None
    try:
        document = json.loads(body)
    except ValueError:
        return None, None, None
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict):
        return None, None, None
    code, message, request_id = (error.get(name) for name in ("code", "message", "request_id"))
    return (
        code if isinstance(code, str) else None,
        message if isinstance(message, str) else None,
        request_id if isinstance(request_id, str) else None,
    )


def _fallback_message(status: int, body: bytes) -> str:
    """A message for answers without the contract's body: the status and a bit of the text."""
    snippet = body[:200].decode("utf-8", errors="replace").strip()
    return f"HTTP {status}" + (f": {snippet}" if snippet else "")


def _unsatisfied_size(content_range: str | None) -> int | None:
    if content_range is None:
        return None
    match = _UNSATISFIED_RANGE.match(content_range)
    return int(match.group(1)) if match else None
