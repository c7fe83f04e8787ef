"""The auth error tree: contract codes, statuses, and the 401 challenge."""

from __future__ import annotations

import pytest

from service.auth.auth_errors import (
    WWW_AUTHENTICATE,
    AccessDeniedError,
    AccountDisabledError,
    AuthError,
    SignatureExpiredError,
    SignatureInvalidError,
    UnauthorizedError,
)
from service.common.api_errors import STATUS_BY_CODE, ApiError


@pytest.mark.parametrize(
    ("error_type", "code", "status"),
    [
        (UnauthorizedError, "Unauthorized", 401),
        (AccessDeniedError, "AccessDenied", 403),
        (AccountDisabledError, "AccountDisabled", 403),
        (SignatureExpiredError, "SignatureExpired", 403),
        (SignatureInvalidError, "SignatureInvalid", 403),
    ],
)
def test_each_error_carries_its_contract_code_and_status(
    error_type: type[AuthError], code: str, status: int
) -> None:
    error = error_type()
    assert isinstance(error, ApiError)
    assert (error_type.error_code, error.code, error.status) == (code, code, status)
    assert STATUS_BY_CODE[code] == status
    assert error.message


def test_custom_message_and_log_detail_are_kept_apart() -> None:
    error = AccessDeniedError("not your bucket", log_detail="alice on bob's bucket")
    assert error.message == "not your bucket"
    assert error.log_detail == "alice on bob's bucket"


def test_unauthorized_always_carries_a_challenge() -> None:
    assert UnauthorizedError().headers == {"WWW-Authenticate": WWW_AUTHENTICATE}
    extra = UnauthorizedError(headers={"X-Extra": "1"}).headers
    assert extra == {"WWW-Authenticate": WWW_AUTHENTICATE, "X-Extra": "1"}
    assert WWW_AUTHENTICATE.startswith("Basic ")
    assert "Bearer" in WWW_AUTHENTICATE
