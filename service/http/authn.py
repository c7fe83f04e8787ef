"""Who is calling: credentials on a request resolved to a ``Principal``.

Access keys (HTTP Basic) cost one dict lookup and one SHA-256 compare, never an Argon2 run,
and their last use is noted in memory only (journaled in batches, see ``meta.accounts``);
bearer tokens are HMAC-checked (a media fleet job token is the one in
``service.http.job_credentials``); presigned URLs are checked by the object handler, which
knows the method and object they must match (``presigned_principal``). The user behind
every credential is looked up on every request, so revoking a key or disabling a user
takes effect at once: nothing about a credential's validity is cached.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import time
from typing import cast

from tornado.httputil import HTTPServerRequest

from service.auth import (
    AccessDeniedError,
    AccountDisabledError,
    PresignResult,
    Principal,
    Role,
    SignatureExpiredError,
    SignatureInvalidError,
    TokenError,
    UnauthorizedError,
    Via,
    parse_basic_authorization,
    parse_bearer_authorization,
    secret_matches,
    verify_presigned,
    verify_token,
)
from service.auth.job_tokens import is_job_token
from service.common.timefmt import now_ms
from service.engine.key_usage import KeyUsage
from service.http.job_credentials import job_principal
from service.meta import MetaState, User

PRESIGN_PARAMS = ("X-Expires", "X-Credential", "X-Signature")
BEARER_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="service"'}
"""The challenge of a failed login and of a 401 to a Bearer token: never Basic, so a
browser page never gets the browser's own credentials dialog (the contract)."""

BEARER_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="service"'}
"""The challenge of a failed login and of a 401 to a request that carried a Bearer token.

It never offers Basic: a browser that sees Basic holds the request for its own credentials
dialog, and a web page (the console) could not show its own message. Requests with Basic
or no credentials get both schemes (``service.auth.auth_errors.WWW_AUTHENTICATE``).
"""


def _active_user(state: MetaState, user_id: str, challenge: dict[str, str] | None = None) -> User:
    user = state.get_user(user_id)
    if user is None:
        raise UnauthorizedError(headers=challenge)
    if user.status != "active":
        raise AccountDisabledError()
    return user


def _principal(user: User, credential_id: str, via: Via) -> Principal:
    # The state only ever holds the roles the identity handlers validated.
    return Principal(user.user_id, user.username, cast(Role, user.role), credential_id, via)


def authenticate(
    state: MetaState, key_usage: KeyUsage, server_secret: bytes, request: HTTPServerRequest
) -> Principal:
    """The principal behind a request's ``Authorization`` header, or 401/403; a use of an
    access key is noted in ``key_usage``."""
    header = request.headers.get("Authorization")
    if not header:
        raise UnauthorizedError()
    if header[:7].lower() == "bearer " or header.strip().lower() == "bearer":
        try:
            return _authenticate(state, key_usage, server_secret, header)
        except UnauthorizedError as exc:
            raise UnauthorizedError(
                exc.message, headers=BEARER_CHALLENGE, log_detail=exc.log_detail
            ) from None
    return _authenticate(state, key_usage, server_secret, header)


def _authenticate(
    state: MetaState, key_usage: KeyUsage, server_secret: bytes, header: str
) -> Principal:
    basic = parse_basic_authorization(header)
    if basic is not None:
        key_id, secret = basic
        key = state.get_access_key(key_id)
        if key is None or key.status != "active" or not secret_matches(key.secret_digest, secret):
            raise UnauthorizedError()
        user = _active_user(state, key.user_id)
        key_usage.touch(key_id, now_ms())
        return _principal(user, key_id, "access_key")
    token = parse_bearer_authorization(header)
    if token is not None and is_job_token(token):
        return job_principal(state, server_secret, token, time.time())
    if token is not None:
        claims = verify_token(server_secret, token, time.time())
        if isinstance(claims, TokenError):
            raise UnauthorizedError(
                "the token has expired" if claims is TokenError.EXPIRED else None,
                headers=BEARER_CHALLENGE,
            )
        user = _active_user(state, claims.user_id, BEARER_CHALLENGE)
        # Logging out everywhere is a password change: it bumps ``updated_at`` (as a role or
        # status change does), and a token issued before that is no longer good.
        if user.updated_at > claims.issued_at * 1000:
            raise UnauthorizedError(
                "the token was issued before the account last changed", headers=BEARER_CHALLENGE
            )
        return _principal(user, user.user_id, "token")
    bearer = header.split(" ", 1)[0].lower() == "bearer"
    raise UnauthorizedError(headers=BEARER_CHALLENGE if bearer else None)


def is_presigned(request: HTTPServerRequest) -> bool:
    return any(name in request.query_arguments for name in PRESIGN_PARAMS)


def presigned_principal(
    state: MetaState,
    server_secret: bytes,
    request: HTTPServerRequest,
    bucket: str,
    key: str,
) -> Principal:
    """Check a presigned request for ``bucket``/``key``; the signer's principal, or 403."""

    def param(name: str) -> str:
        values = request.query_arguments.get(name)
        if not values or len(values) != 1:
            raise SignatureInvalidError()
        try:
            return values[0].decode("utf-8")
        except UnicodeDecodeError:
            raise SignatureInvalidError() from None

    expires, credential, signature = (param(name) for name in PRESIGN_PARAMS)
    method = request.method or ""
    content_type = request.headers.get("Content-Type") if method == "PUT" else None
    result = verify_presigned(
        server_secret,
        method,
        bucket,
        key,
        expires,
        credential,
        signature,
        content_type,
        time.time(),
    )
    if result is PresignResult.INVALID:
        raise SignatureInvalidError()
    if result is PresignResult.EXPIRED:
        raise SignatureExpiredError()
    if credential.startswith("bk_"):
        access_key = state.get_access_key(credential)
        if access_key is None or access_key.status != "active":
            raise AccessDeniedError("the signing key was revoked")
        user = state.get_user(access_key.user_id)
    else:
        user = state.get_user(credential)
    if user is None or user.status != "active":
        raise AccessDeniedError("the signing user is disabled")
    return _principal(user, credential, "presign")
