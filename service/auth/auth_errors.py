"""The authentication and authorisation errors, each bound to its contract code.

::

    ApiError (service.common.api_errors)
     └── AuthError
          ├── UnauthorizedError       401 Unauthorized     no, unknown or revoked credentials
          ├── AccessDeniedError       403 AccessDenied     authenticated, but not allowed
          ├── AccountDisabledError    403 AccountDisabled  the credential's user is disabled
          ├── SignatureExpiredError   403 SignatureExpired presigned URL or share token too old
          └── SignatureInvalidError   403 SignatureInvalid presigned URL or share token altered

They derive from ``ApiError`` so the HTTP layer's one error renderer answers them in the
contract's JSON shape with no translation table. Messages are shown to clients: they never
name the credential that failed or say whether a username exists.

Two startup errors stand apart, as they never reach a client: ``BootstrapError`` (a root
credential or admin password given in the environment is unusable) and
``ServerSecretError`` (the server secret file exists but is damaged).

Thread-safety: plain exception classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from service.common.api_errors import ApiError

WWW_AUTHENTICATE = 'Basic realm="service", Bearer realm="service"'
"""The challenge sent with every 401: both schemes the server accepts."""


class AuthError(ApiError):
    """Base of the authentication and authorisation errors."""

    error_code: ClassVar[str]
    """The contract code; instances also carry it as ``code`` (from ``ApiError``)."""
    default_message: ClassVar[str]

    def __init__(
        self,
        message: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        log_detail: str | None = None,
    ) -> None:
        super().__init__(
            type(self).error_code,
            message or type(self).default_message,
            headers=headers,
            log_detail=log_detail,
        )


class UnauthorizedError(AuthError):
    """No credentials, or credentials the server does not know (unknown or revoked key)."""

    error_code = "Unauthorized"
    default_message = "valid credentials are required"

    def __init__(
        self,
        message: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        log_detail: str | None = None,
    ) -> None:
        # RFC 9110 section 11.6.1: a 401 must carry a challenge.
        super().__init__(
            message,
            headers={"WWW-Authenticate": WWW_AUTHENTICATE, **(headers or {})},
            log_detail=log_detail,
        )


class AccessDeniedError(AuthError):
    """The principal is known but the policy does not allow the action."""

    error_code = "AccessDenied"
    default_message = "access denied"


class AccountDisabledError(AuthError):
    """The credential is valid but its user is disabled."""

    error_code = "AccountDisabled"
    default_message = "the account is disabled"


class SignatureExpiredError(AuthError):
    """A presigned URL or share token whose signature is intact but whose time is up."""

    error_code = "SignatureExpired"
    default_message = "the signature has expired"


class SignatureInvalidError(AuthError):
    """A presigned URL or share token that was altered, truncated or never issued here."""

    error_code = "SignatureInvalid"
    default_message = "the signature does not match"


class BootstrapError(ValueError):
    """A bootstrap setting (root access key, root secret, admin password) is unusable.

    The message names the setting, never its value.
    """


class ServerSecretError(Exception):
    """The server secret file exists but does not hold a secret.

    The server refuses to start rather than silently make a new secret, which would
    invalidate every token, presigned URL and share link in circulation.
    """
