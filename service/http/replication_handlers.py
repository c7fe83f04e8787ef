"""``/api/v1/replication``: this server's replication role and position, and its archive.

An administrator's (``system:info``). A primary (epoch 1, in the configured mode) lists the
standbys that read its feed (``service.replication.feed``); a standby reports its own
position and lag behind its primary (``service.replication.follower``). The archive is as
the shipper reports it (``service.archive.shipper.Archiver.status``), or null.
"""

from __future__ import annotations

from typing import Any

from service.auth import Action
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
            "epoch": 1,
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
