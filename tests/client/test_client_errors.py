"""From an HTTP answer (or an httpx failure) to one exception of the client's tree."""

from __future__ import annotations

import json

import httpx
import pytest

from service.client import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    ConnectionFailedError,
    InsufficientStorageError,
    InternalServerError,
    InvalidRangeError,
    LengthRequiredError,
    MethodNotAllowedError,
    NotFoundError,
    NotModifiedError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PreconditionFailedError,
    QuotaExceededError,
    RequestTimeoutError,
    ServerError,
    ServiceError,
    ServiceUnavailableError,
    TooManyRequestsError,
    TransportError,
    UnsupportedMediaTypeError,
)
from service.client._exceptions import error_from_response, transport_error

# The contract's status table, code by code.
CONTRACT_CODES = {
    400: [
        "InvalidArgument",
        "InvalidBucketName",
        "InvalidKey",
        "InvalidPartNumber",
        "InvalidPart",
        "InvalidPartOrder",
        "BadDigest",
        "MalformedJSON",
    ],
    401: ["Unauthorized"],
    403: ["AccessDenied", "SignatureExpired", "SignatureInvalid", "AccountDisabled"],
    404: [
        "NoSuchBucket",
        "NoSuchKey",
        "NoSuchVersion",
        "NoSuchUpload",
        "NoSuchUser",
        "NoSuchAccessKey",
        "NoSuchJob",
        "NoSuchShare",
        "NotFound",
    ],
    405: ["MethodNotAllowed"],
    409: ["BucketAlreadyExists", "BucketNotEmpty", "UserAlreadyExists", "InvalidState"],
    411: ["LengthRequired"],
    412: ["PreconditionFailed"],
    413: ["EntityTooLarge", "QuotaExceeded"],
    415: ["UnsupportedMediaType"],
    416: ["InvalidRange"],
    429: ["TooManyRequests"],
    500: ["InternalError"],
    503: ["ServiceUnavailable"],
    507: ["InsufficientStorage"],
}
EXPECTED_CLASS = {
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
    429: TooManyRequestsError,
    500: InternalServerError,
    503: ServiceUnavailableError,
    507: InsufficientStorageError,
}


def _body(code: str, message: str = "it went wrong", request_id: str = "req-1") -> bytes:
    return json.dumps(
        {"error": {"code": code, "message": message, "request_id": request_id}}
    ).encode()


@pytest.mark.parametrize(
    ("status", "code"),
    [(status, code) for status, codes in CONTRACT_CODES.items() for code in codes],
)
def test_every_contract_code_maps_to_its_status_class(status: int, code: str) -> None:
    error = error_from_response(status, httpx.Headers(), _body(code))
    assert isinstance(error, EXPECTED_CLASS[status])
    assert (error.status, error.code, error.message, error.request_id) == (
        status,
        code,
        "it went wrong",
        "req-1",
    )


def test_quota_exceeded_is_its_own_kind_of_too_large() -> None:
    quota = error_from_response(413, httpx.Headers(), _body("QuotaExceeded"))
    too_large = error_from_response(413, httpx.Headers(), _body("EntityTooLarge"))
    assert type(quota) is QuotaExceededError
    assert type(too_large) is PayloadTooLargeError
    assert isinstance(quota, PayloadTooLargeError)


def test_server_errors_share_a_base_class() -> None:
    for status in (500, 502, 503, 504, 507):
        assert isinstance(error_from_response(status, httpx.Headers(), b""), ServerError)


def test_an_answer_without_the_contract_body_still_maps_by_status() -> None:
    error = error_from_response(
        404, httpx.Headers({"X-Request-Id": "from-header"}), b"<html>nope</html>"
    )
    assert isinstance(error, NotFoundError)
    assert error.code == "NotFound"
    assert error.request_id == "from-header"
    assert "nope" in error.message


def test_a_head_404_has_no_body_but_is_not_found() -> None:
    error = error_from_response(404, httpx.Headers(), b"")
    assert isinstance(error, NotFoundError)
    assert error.message == "HTTP 404"


def test_304_to_a_conditional_get_is_not_modified() -> None:
    assert isinstance(error_from_response(304, httpx.Headers(), b""), NotModifiedError)


def test_unknown_client_status_is_a_plain_service_error() -> None:
    error = error_from_response(418, httpx.Headers(), b"teapot")
    assert type(error) is ServiceError
    assert error.status == 418


def test_invalid_range_reports_the_object_size() -> None:
    headers = httpx.Headers({"Content-Range": "bytes */1234"})
    error = error_from_response(416, headers, _body("InvalidRange"))
    assert isinstance(error, InvalidRangeError)
    assert error.object_size == 1234


def test_service_unavailable_reports_retry_after() -> None:
    headers = httpx.Headers({"Retry-After": "7"})
    error = error_from_response(503, headers, _body("ServiceUnavailable"))
    assert isinstance(error, ServiceUnavailableError)
    assert error.retry_after == 7.0


def test_too_many_requests_reports_retry_after() -> None:
    headers = httpx.Headers({"Retry-After": "2"})
    error = error_from_response(429, headers, _body("TooManyRequests"))
    assert isinstance(error, TooManyRequestsError) and error.code == "TooManyRequests"
    assert error.retry_after == 2.0


def test_error_text_carries_code_status_and_request_id() -> None:
    text = str(error_from_response(404, httpx.Headers(), _body("NoSuchKey", "no such key")))
    assert text == "NoSuchKey: no such key (HTTP 404) [request req-1]"


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (httpx.ConnectError("refused"), ConnectionFailedError),
        (httpx.ConnectTimeout("slow connect"), ConnectionFailedError),
        (httpx.PoolTimeout("pool"), ConnectionFailedError),
        (httpx.ReadTimeout("slow read"), RequestTimeoutError),
        (httpx.WriteTimeout("slow write"), RequestTimeoutError),
        (httpx.ReadError("reset"), TransportError),
        (httpx.RemoteProtocolError("bad"), TransportError),
    ],
)
def test_httpx_failures_become_transport_errors(
    failure: httpx.HTTPError, expected: type[TransportError]
) -> None:
    error = transport_error(failure)
    assert type(error) is expected
    assert error.status is None
    assert str(failure) in error.message
