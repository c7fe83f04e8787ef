"""``GET /health``: liveness for load balancers and humans, without credentials."""

from __future__ import annotations

from service import __version__
from service.http.base import ApiHandler, Home


class HealthHandler(ApiHandler):
    route_name = "/health"
    home = Home.JOURNAL
    public = True
    SUPPORTED_METHODS = ("GET", "HEAD")

    async def get(self) -> None:
        engine = self.ctx.engine
        reasons = []
        if engine.read_only_reason is not None:
            reasons.append("journal read-only: " + engine.read_only_reason)
        follower = self.ctx.follower
        if follower is not None:
            behind = follower.degraded_reason(self.ctx.config.replication_max_lag)
            if behind is not None:
                reasons.append(behind)
        audit = self.ctx.audit_log
        if audit is not None and await audit.stopped():
            reasons.append("the audit log cannot record requests (a write failed): restart")
        corrupt = len(self.ctx.scrub.current_corrupt())
        if corrupt:
            reasons.append(
                f"{corrupt} corrupt objects found by the scrub (GET /api/v1/system/scrub)"
            )
        total, free = await engine.run_blocking(engine.store.disk_usage)
        if total and free / total < self.ctx.config.health_min_free_fraction:
            reasons.append("disk nearly full")
        body: dict[str, object] = {
            "name": "service",
            "status": "degraded" if reasons else "ok",
            "version": __version__,
        }
        if follower is not None:
            body["role"] = "standby"
            body["replication_lag"] = follower.lag()
        if reasons:
            body["reasons"] = reasons
        self.send_json(200, body)

    async def head(self) -> None:
        self.set_status(200)
        self.finish()
