"""An object version's retention and legal hold: ``.../objects/{key}/retention`` and
``.../objects/{key}/legal-hold`` (GET and PUT, ``?version_id=``; without it, the current
version).

The routes end the object path with a fixed segment, so they are matched on the raw path
before the object's own routes (``service.app``): an object whose key itself ends in
``/retention`` or ``/legal-hold`` is named with that last ``/`` percent-encoded (``%2F``),
as our client, ``svc`` and the console do.

Who may: the bucket's owner and admins (``Action.OBJECT_LOCK_*``). A governance bypass
(``X-Bypass-Governance-Retention: true``) is an admin's alone: anyone else sending it gets
403 AccessDenied. The rules of what may change are ``service.meta.lock_policy``'s.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from typing import Any

from service.auth import AccessDeniedError, Action
from service.common.api_errors import ApiError
from service.common.timefmt import now_ms
from service.common.wire import HEADER_BYPASS_GOVERNANCE, NULL_VERSION_ID, QUERY_VERSION_ID
from service.http.base import ApiHandler
from service.http.render import retention_json
from service.meta import ObjectVersion
from service.ops.object_lock import (
    lock_target,
    parse_legal_hold,
    parse_retention,
    set_legal_hold,
    set_retention,
)


def retention_document(version: ObjectVersion) -> dict[str, Any]:
    """``{"version_id", "mode", "retain_until"}`` (both null without a retention)."""
    retention = retention_json(version) or {"mode": None, "retain_until": None}
    return {"version_id": version.version_id or NULL_VERSION_ID, **retention}


def legal_hold_document(version: ObjectVersion) -> dict[str, Any]:
    """``{"version_id", "status": "on" | "off"}``."""
    status = "on" if version.legal_hold else "off"
    return {"version_id": version.version_id or NULL_VERSION_ID, "status": status}


class _LockHandler(ApiHandler):
    SUPPORTED_METHODS = ("GET", "PUT")

    def target(self, bucket: str, key: str) -> ObjectVersion:
        version_id = self.get_query_argument(QUERY_VERSION_ID, None, strip=False)
        return lock_target(self.ctx.engine, bucket, key, version_id)


class RetentionHandler(_LockHandler):
    route_name = "/api/v1/buckets/{bucket}/objects/{key}/retention"

    def get(self, bucket: str, key: str) -> None:
        self.authorize(Action.OBJECT_LOCK_READ, bucket=bucket)
        self.send_json(200, retention_document(self.target(bucket, key)))

    async def put(self, bucket: str, key: str) -> None:
        self.authorize(Action.OBJECT_LOCK_WRITE, bucket=bucket)
        bypass = self.bypass_requested()
        body = self.json_body()
        version = self.target(bucket, key)
        mode, until = parse_retention(body, now_ms())
        updated = await set_retention(self.ctx.engine, version, mode, until, bypass=bypass)
        self.send_json(200, retention_document(updated))

    def bypass_requested(self) -> bool:
        """``X-Bypass-Governance-Retention``: ``true`` from an admin, else 403; ``false`` or
        absent: no bypass."""
        value = self.request.headers.get(HEADER_BYPASS_GOVERNANCE)
        if value is None or value.strip().lower() == "false":
            return False
        if value.strip().lower() != "true":
            raise ApiError("InvalidArgument", f"{HEADER_BYPASS_GOVERNANCE} must be true or false")
        if self.principal.role != "admin":
            raise AccessDeniedError("only an admin may bypass a governance retention")
        return True


class LegalHoldHandler(_LockHandler):
    route_name = "/api/v1/buckets/{bucket}/objects/{key}/legal-hold"

    def get(self, bucket: str, key: str) -> None:
        self.authorize(Action.OBJECT_LOCK_READ, bucket=bucket)
        self.send_json(200, legal_hold_document(self.target(bucket, key)))

    async def put(self, bucket: str, key: str) -> None:
        self.authorize(Action.OBJECT_LOCK_WRITE, bucket=bucket)
        on = parse_legal_hold(self.json_body())
        version = self.target(bucket, key)
        updated = await set_legal_hold(self.ctx.engine, version, on)
        self.send_json(200, legal_hold_document(updated))
