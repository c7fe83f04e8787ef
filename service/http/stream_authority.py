"""Whether an open event stream may go on: its credentials and its bucket, checked again.

A stream is authorised for as long as it is open, not only when it opens (the contract).
``stream_authority`` returns the check ``service.events.stream`` asks before every slice it
sends and every second while idle. It reads the state as it is now -- the same records every
request's authentication reads (``service.http.authn``), so a revocation committed before an
event is seen before that event is sent -- and names the first reason the stream must end:

- the bucket: gone, or its name now another bucket's (``bucket_deleted``: a bucket deleted
  and created again is a new bucket, ``service.meta.identity``);
- the user: deleted or disabled (``user_deleted``, ``user_disabled``);
- an access key: deleted or revoked (``access_key_deleted``, ``access_key_revoked``);
- a bearer token: expired, or issued before the account last changed, as a password change
  logs out everywhere (``token_expired``, ``token_revoked``);
- the right to read the bucket, with the user's role as it is now (``access_denied``).

A check notes no use of the access key (a stream is one request) and never runs Argon2.
Several serving processes: a worker forwards every stream to the writer
(``service.procs.forward``), whose state every commit goes through, so the check is the
same there.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

from tornado.httputil import HTTPServerRequest

from service.auth import (
    Action,
    Principal,
    Resource,
    Role,
    TokenError,
    is_allowed,
    parse_bearer_authorization,
    verify_token,
)
from service.events.scope import BucketScope
from service.events.stream import Authority, StreamEnd
from service.meta import MetaState


def stream_authority(
    state: Callable[[], MetaState],
    server_secret: bytes,
    request: HTTPServerRequest,
    principal: Principal,
    scope: BucketScope,
    clock: Callable[[], float] = time.time,
) -> Authority:
    """The check of one stream opened by ``principal`` with ``request``'s credentials."""
    token = None
    if principal.via == "token":
        token = parse_bearer_authorization(request.headers.get("Authorization", ""))

    def check() -> StreamEnd | None:
        current = state()
        return (
            _bucket_end(current, scope)
            or _credential_end(current, server_secret, principal, token, clock())
            or _access_end(current, principal, scope)
        )

    return check


def _bucket_end(state: MetaState, scope: BucketScope) -> StreamEnd | None:
    bucket = state.get_bucket(scope.name)
    if bucket is None:
        return StreamEnd("bucket_deleted", f"the bucket {scope.name!r} was deleted")
    if bucket.bucket_id != scope.bucket_id:
        return StreamEnd(
            "bucket_deleted",
            f"the bucket {scope.name!r} was deleted; the name now belongs to another bucket",
        )
    return None


def _credential_end(
    state: MetaState, server_secret: bytes, principal: Principal, token: str | None, now: float
) -> StreamEnd | None:
    user = state.get_user(principal.user_id)
    if user is None:
        return StreamEnd("user_deleted", "the user was deleted")
    if user.status != "active":
        return StreamEnd("user_disabled", "the user was disabled")
    if principal.via == "access_key":
        key = state.get_access_key(principal.credential_id)
        if key is None:
            return StreamEnd("access_key_deleted", "the access key was deleted")
        if key.status != "active":
            return StreamEnd("access_key_revoked", "the access key was revoked")
        return None
    claims = verify_token(server_secret, token or "", now)
    if claims is TokenError.EXPIRED:
        return StreamEnd("token_expired", "the token expired")
    if isinstance(claims, TokenError) or user.updated_at > claims.issued_at * 1000:
        return StreamEnd("token_revoked", "the token was issued before the account last changed")
    return None


def _access_end(state: MetaState, principal: Principal, scope: BucketScope) -> StreamEnd | None:
    user, bucket = state.get_user(principal.user_id), state.get_bucket(scope.name)
    if user is None or bucket is None:
        return None  # named by the checks before
    # With the user's role as it is now (the state only holds roles the handlers validated).
    now_as = Principal(
        user.user_id, user.username, cast(Role, user.role), principal.credential_id, principal.via
    )
    if not is_allowed(now_as, Action.BUCKET_READ, Resource.bucket(bucket.owner)):
        return StreamEnd("access_denied", "the user may no longer read this bucket")
    return None
