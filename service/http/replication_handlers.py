"""``/api/v1/replication``: this server's replication role and position, and its archive;
``/api/v1/replication/promote``: a standby becomes the primary of the next epoch.

An administrator's (``system:info``; the promotion ``system:maintenance``). The epoch is the
newest of the data dir's history (``service.meta.epoch_state``: 1 for a fresh primary and
for a data dir older than epochs). A primary (in the configured mode) lists the
standbys that read its feed (``service.replication.feed``); a standby reports its own
position and lag behind its primary (``service.replication.follower``). The archive is as
the shipper reports it (``service.archive.shipper.Archiver.status``), or null.
"""

from __future__ import annotations

from typing import Any

from service.auth import Action
from service.common.api_errors import ApiError
from service.http.base import ApiHandler, Home

NO_LAG = {"records": 0, "seconds": 0.0, "bytes": 0}


class ReplicationHandler(ApiHandler):
    route_name = "/api/v1/replication"
    home = Home.JOURNAL  # the archive ships from the process that owns the journal
    SUPPORTED_METHODS = ("GET",)

    def get(self) -> None:
        self.authorize(Action.SYSTEM_INFO)
        self.send_json(200, self.document())

    def document(self) -> dict[str, Any]:
        ctx = self.ctx
        last = ctx.engine.committer.last_sequence()
        archiver, follower, feed = ctx.archiver, ctx.follower, ctx.replication_feed
        document: dict[str, Any] = {
            "role": "primary",
            "epoch": ctx.engine.state.epoch_history()[-1].epoch,
            "mode": ctx.config.replication,
            "last_sequence": last,
            "applied_sequence": last,
            "lag": dict(NO_LAG),
            "standbys": feed.status() if feed is not None else [],
            "archive": archiver.status() if archiver is not None else None,
        }
        if follower is not None:
            document.update(
                role="standby",
                mode="async",
                primary_url=follower.primary.url,
                last_sequence=max(follower.primary_sequence, last),
                applied_sequence=follower.applied_sequence,
                lag=follower.lag(),
                last_error=follower.last_error,
            )
        return document


class PromoteHandler(ReplicationHandler):
    """``POST /api/v1/replication/promote`` (``service.replication.promotion``): 200 with
    the status once this server is the primary of the new epoch; 409 on a primary."""

    route_name = "/api/v1/replication/promote"
    SUPPORTED_METHODS = ("POST",)

    def refused_on_standby(self) -> bool:
        return False  # the one write a standby takes: it stops being one

    async def post(self) -> None:
        self.authorize(Action.SYSTEM_MAINTENANCE)
        promote = self.ctx.promote
        if promote is None:
            raise ApiError("InvalidState", "this server is a primary: only a standby is promoted")
        await promote()
        self.send_json(200, self.document())
