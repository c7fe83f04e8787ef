"""The server's refusals and the contract's code-to-status table.

``ServiceError(code, message)`` is a refusal in the contract's terms: a code, a message for
the client, a retry hint and a detail for operators; no transport detail. The engine raises
these (``service.engine.errors``). ``ApiError`` is a ``ServiceError`` that also carries its
HTTP answer: the status and headers of its own (handlers and operations raise it).
``service.http.request_contract`` is the one place that turns either (and anything
unexpected) into the contract's answer, taking the status from ``STATUS_BY_CODE``. The
message is shown to clients, so it never carries secrets, paths or tracebacks; anything
meant only for operators goes to ``log_detail``.
"""

from __future__ import annotations

from collections.abc import Mapping

STATUS_BY_CODE: Mapping[str, int] = {
    "InvalidArgument": 400,
    "InvalidBucketName": 400,
    "InvalidKey": 400,
    "InvalidPartNumber": 400,
    "InvalidPart": 400,
    "InvalidPartOrder": 400,
    "BadDigest": 400,
    "MalformedJSON": 400,
    "Unauthorized": 401,
    "AccessDenied": 403,
    "SignatureExpired": 403,
    "SignatureInvalid": 403,
    "AccountDisabled": 403,
    "NoSuchBucket": 404,
    "NoSuchKey": 404,
    "NoSuchVersion": 404,
    "NoSuchUpload": 404,
    "NoSuchUser": 404,
    "NoSuchAccessKey": 404,
    "NoSuchJob": 404,
    "NoSuchShare": 404,
    "NotFound": 404,
    "MethodNotAllowed": 405,
    "BucketAlreadyExists": 409,
    "BucketNotEmpty": 409,
    "UserAlreadyExists": 409,
    "InvalidState": 409,
    "EventsExpired": 410,
    "RecordsGone": 410,
    "LengthRequired": 411,
    "PreconditionFailed": 412,
    "EntityTooLarge": 413,
    "QuotaExceeded": 413,
    "UnsupportedMediaType": 415,
    "InvalidRange": 416,
    "ObjectLocked": 423,
    "TooManyRequests": 429,
    "InternalError": 500,
    "ServiceUnavailable": 503,
    "ReadOnlyStandby": 503,
    "ReplicationTimeout": 503,
    "InsufficientStorage": 507,
}


class ServiceError(Exception):
    """A refusal in the contract's terms (a code of ``STATUS_BY_CODE``), whoever answers it."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        log_detail: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        if code not in STATUS_BY_CODE:
            raise ValueError(f"not a code of the contract: {code}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.log_detail = log_detail
        self.retry_after = retry_after
        """Seconds after which a retry may succeed (a hint; the HTTP layer sends it)."""


class ApiError(ServiceError):
    """A refusal answered over HTTP in the contract's shape, with its status and headers."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        headers: Mapping[str, str] | None = None,
        log_detail: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(code, message, log_detail=log_detail, retry_after=retry_after)
        self.status = STATUS_BY_CODE[code]
        self.headers = dict(headers or {})


def status_of(error: ServiceError) -> int:
    """The HTTP status of an answer to ``error``."""
    return STATUS_BY_CODE[error.code]


def response_headers(error: ServiceError) -> dict[str, str]:
    """The headers an answer to ``error`` carries: its own, and ``Retry-After`` for a hint."""
    headers = dict(error.headers) if isinstance(error, ApiError) else {}
    if error.retry_after is not None:
        headers.setdefault("Retry-After", str(error.retry_after))
    return headers


def error_body(code: str, message: str, request_id: str) -> dict[str, dict[str, str]]:
    """The contract's error body."""
    return {"error": {"code": code, "message": message, "request_id": request_id}}
