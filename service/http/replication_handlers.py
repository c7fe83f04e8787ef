"""``/api/v1/replication``: this server's replication role and position, and its archive.

An administrator's (``system:info``). On a server without standbys it is the primary of
epoch 1 in the configured mode, with no standbys, and its archive (or null) as the shipper
reports it (``service.archive.shipper.Archiver.status``).
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
        last = self.ctx.engine.committer.last_sequence()
        archiver = self.ctx.archiver
        return {
            "role": "primary",
            "epoch": 1,
            "mode": "async",
            "last_sequence": last,
            "applied_sequence": last,
            "lag": dict(NO_LAG),
            "standbys": [],
            "archive": archiver.status() if archiver is not None else None,
        }
