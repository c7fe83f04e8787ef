"""What the HTTP layer records: which answered requests, and the fields of their records.

Every request that reached authorisation is recorded once it is answered: writes, admin
actions and refusals (401, 403, 423) always; reads (GET and HEAD: objects, lists) only with
``SERVICE_AUDIT_READS=1``. ``AuditTrail.record`` builds the fields (``service.audit.record``)
and hands them to the sink: this process's ``AuditLog`` (every serving process appends to
the one chain itself, ``service.audit.shared``). In strict durability it returns what to
await before the answer may go out (the record is then on disk); in balanced, nothing.

Who: ``principal`` names the user and the credential the request presented, never the
credential's secret: an access key by its id, a bearer token by ``tk_`` and the first 16 hex
digits of its SHA-256 (it cannot be turned back into the token), a presigned URL by its
``X-Credential`` (a key or user id), a share by its id. A request whose credential did not
check out (401, 403) is recorded with what it claimed, when that has the shape of an id.
The path is the request's own, percent-encoded, without its query string (where presigned
signatures travel), and a share token in a playback path is replaced by ``{token}``.

Pure apart from the sink. Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from tornado.httputil import HTTPServerRequest

from service.audit.actions import ADMIN_READS, action_of
from service.auth import (
    Principal,
    is_access_key_id,
    parse_basic_authorization,
    parse_bearer_authorization,
    verify_share_token,
    verify_token,
)
from service.auth.share_tokens import ShareClaims
from service.auth.tokens import TokenClaims
from service.common.timefmt import now_ms, rfc3339_ms
from service.common.wire import PRESIGN_CREDENTIAL_PARAM, QUERY_VERSION_ID
from service.meta import MetaState

REFUSALS = frozenset({401, 403, 423})
"""Refusals: recorded whatever the method."""
READ_METHODS = frozenset({"GET", "HEAD"})
BODY_METHODS = frozenset({"PUT", "POST", "PATCH"})
PLAY_PATH = re.compile(r"^(/api/v1/videos/play/)[^/]*(/.*)?$")
_ID_SHAPE = re.compile(r"^[A-Za-z0-9._~-]{1,128}$")


class AuditSink(Protocol):
    """Where records go: ``append`` returns what to await for durability, or None."""

    def append(self, fields: dict[str, Any]) -> Awaitable[Any] | None: ...


def token_fingerprint(token: str) -> str:
    """How a record names a bearer token: not the token, not reversible to it.

    >>> token_fingerprint("abc")
    'tk_ba7816bf8f01cfea'
    """
    return "tk_" + hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()[:16]


def principal_of(principal: Principal, request: HTTPServerRequest) -> dict[str, Any]:
    """The ``principal`` field of an authenticated request."""
    if principal.via in ("token", "job"):  # a console token, or a media worker's job token
        token = parse_bearer_authorization(request.headers.get("Authorization", "")) or ""
        return {"user_id": principal.user_id, "token": token_fingerprint(token)}
    name = {"access_key": "access_key_id", "presign": "presigned", "share": "share"}[principal.via]
    return {"user_id": principal.user_id, name: principal.credential_id}


def claimed_principal(
    state: MetaState, secret: bytes, request: HTTPServerRequest, share_token: str | None = None
) -> dict[str, Any]:
    """The ``principal`` field of a request that did not authenticate: what it claimed,
    as far as that is an id (never a secret)."""
    credential = request.query_arguments.get(PRESIGN_CREDENTIAL_PARAM)
    if credential:
        claimed = credential[-1].decode("utf-8", "replace")
        if not _ID_SHAPE.match(claimed) or claimed.startswith("sk_"):
            return {"user_id": None, "presigned": None}
        key = state.get_access_key(claimed) if is_access_key_id(claimed) else None
        user = key.user_id if key is not None else claimed if state.get_user(claimed) else None
        return {"user_id": user, "presigned": claimed}
    if share_token is not None:
        share_claims = verify_share_token(secret, share_token, time.time())
        if not isinstance(share_claims, ShareClaims):
            return {"user_id": None, "share": None}
        share = state.media.share(share_claims.share_id)
        return {"user_id": share.created_by if share else None, "share": share_claims.share_id}
    header = request.headers.get("Authorization", "")
    basic = parse_basic_authorization(header) if header else None
    if basic is not None:
        key_id = basic[0] if is_access_key_id(basic[0]) else None
        key = state.get_access_key(key_id) if key_id is not None else None
        return {"user_id": key.user_id if key else None, "access_key_id": key_id}
    token = parse_bearer_authorization(header) if header else None
    if token is not None:
        claims = verify_token(secret, token, time.time())
        user = claims.user_id if isinstance(claims, TokenClaims) else None
        return {"user_id": user, "token": token_fingerprint(token)}
    return {"user_id": None}


def audit_path(path: str) -> str:
    """The request's path as recorded: a playback path's share token replaced.

    >>> audit_path("/api/v1/videos/play/SECRET.TOKEN/hls/master.m3u8")
    '/api/v1/videos/play/{token}/hls/master.m3u8'
    """
    match = PLAY_PATH.match(path)
    if match is None:
        return path
    return f"{match.group(1)}{{token}}{match.group(2) or ''}"


class AuditTrail:
    """The server's audit decisions and where records go (``AppContext.audit``)."""

    def __init__(
        self,
        sink: AuditSink | None,
        *,
        reads: bool,
        state: Callable[[], MetaState],
        secret: bytes,
    ) -> None:
        self.sink = sink
        self.reads = reads
        """Record reads too (``SERVICE_AUDIT_READS``)."""
        self._state = state
        self._secret = secret

    @classmethod
    def disabled(cls) -> AuditTrail:
        return cls(None, reads=False, state=MetaState, secret=b"")

    def wanted(self, route: str, method: str, status: int) -> bool:
        """Whether a request that reached authorisation is recorded."""
        if self.sink is None:
            return False
        if status in REFUSALS or method not in READ_METHODS:
            return True
        return self.reads or action_of(route, method) in ADMIN_READS

    def record(
        self,
        request: HTTPServerRequest,
        *,
        route: str,
        request_id: str,
        status: int,
        principal: Principal | None,
        claimed: dict[str, Any] | None = None,
        path_arguments: Mapping[str, Any],
        bytes_in: int,
        bytes_out: int,
        response_version_id: str | None = None,
        share_token: str | None = None,
    ) -> Awaitable[Any] | None:
        """Record one answered request (``wanted`` said so); what to await before the
        answer goes out, or None."""
        assert self.sink is not None
        method = request.method or "-"
        if claimed is not None:
            who = claimed
        elif principal is not None:
            who = principal_of(principal, request)
        else:
            who = claimed_principal(self._state(), self._secret, request, share_token)
        version_values = request.query_arguments.get(QUERY_VERSION_ID)
        version_id = (
            version_values[-1].decode("utf-8", "replace") if version_values else None
        ) or response_version_id
        bucket, key = path_arguments.get("bucket"), path_arguments.get("key")
        if bucket is None and route == BUCKETS_ROUTE and method == "POST" and status == 201:
            bucket = created_bucket(request.body)
        fields = {
            "time": rfc3339_ms(now_ms()),
            "request_id": request_id,
            "principal": who,
            "source": request.remote_ip or "",
            "method": method,
            "path": audit_path(request.path),
            "bucket": bucket if isinstance(bucket, str) else None,
            "key": key if isinstance(key, str) else None,
            "version_id": version_id,
            "action": action_of(route, method),
            "status": status,
            "bytes": bytes_in if method in BODY_METHODS else bytes_out,
        }
        return self.sink.append(fields)


BUCKETS_ROUTE = "/api/v1/buckets"


def created_bucket(body: bytes | None) -> str | None:
    """The name a bucket was created under (the 201 of ``POST /buckets`` vouches for it)."""
    try:
        name = json.loads(body or b"").get("name")
    except (ValueError, AttributeError):
        return None
    return name if isinstance(name, str) else None


__all__ = [
    "AuditSink",
    "AuditTrail",
    "audit_path",
    "claimed_principal",
    "principal_of",
    "token_fingerprint",
]
