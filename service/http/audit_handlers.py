"""``/api/v1/system/audit``: the audit log's records, a page at a time, filtered; and
``/api/v1/system/audit/verify``: the whole chain checked. Both an administrator's
(``audit:read``); both are themselves recorded.

A page is the records after ``since`` (a sequence; 0 or absent: from the oldest kept), at
most ``limit`` (1 to 1000, default 100), of one ``bucket`` and/or one ``user_id`` when given;
``next_cursor`` is the ``since`` of the next page (a sequence as a string), null once the end
of the log was reached. A filter that matches rarely may answer a short (even empty) page
with a cursor: the scan stops after 100,000 records.

Thread-safety: event-loop thread only; the files are read on the engine's executor.
"""

from __future__ import annotations

import logging

from service.audit.log import DEFAULT_PAGE, MAX_PAGE, MAX_SEQUENCE, AuditLog
from service.auth import Action
from service.common.api_errors import ApiError
from service.common.numbers import require_int
from service.http.base import ApiHandler, Home

log = logging.getLogger("service.audit")


class _AuditHandler(ApiHandler):
    SUPPORTED_METHODS = ("GET",)
    home = Home.JOURNAL  # the log and its files are the writer's

    def audit_log(self) -> AuditLog:
        log = self.ctx.audit_log
        if log is None:
            raise ApiError("InvalidState", "the audit log is off (SERVICE_AUDIT=0)")
        return log


class AuditHandler(_AuditHandler):
    route_name = "/api/v1/system/audit"

    async def get(self) -> None:
        self.authorize(Action.AUDIT_READ)
        since_text = self.get_query_argument("since", None, strip=False)
        limit_text = self.get_query_argument("limit", None, strip=False)
        since = 0 if since_text is None else require_int(since_text, "since", 0, MAX_SEQUENCE)
        limit = (
            DEFAULT_PAGE if limit_text is None else require_int(limit_text, "limit", 1, MAX_PAGE)
        )
        bucket = self.get_query_argument("bucket", None, strip=False) or None
        user_id = self.get_query_argument("user_id", None, strip=False) or None
        records, after = await self.audit_log().page(since, limit, bucket, user_id)
        cursor = None if after is None else str(after)
        self.send_json(200, {"records": records, "next_cursor": cursor})


class AuditVerifyHandler(_AuditHandler):
    route_name = "/api/v1/system/audit/verify"

    async def get(self) -> None:
        self.authorize(Action.AUDIT_READ)
        result = await self.audit_log().verify()
        if not result.ok:
            log.warning(
                "audit log verification failed at record %s: %s",
                result.first_bad_sequence,
                result.problem,
            )
        self.send_json(200, result.document())
