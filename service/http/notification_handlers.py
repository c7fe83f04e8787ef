"""``/api/v1/buckets/{bucket}/notifications``: a bucket's webhooks and their delivery status.

Read and replaced by the bucket's owner (``bucket:read`` / ``bucket:update``). Secrets are
never returned; each webhook shows its ``status`` (``service.upkeep.webhooks``).
"""

from __future__ import annotations

from typing import Any

from service.auth import Action
from service.http.base import ApiHandler, Home
from service.ops.buckets import require_bucket
from service.ops.notifications import parse_webhooks, set_webhooks


class BucketNotificationsHandler(ApiHandler):
    route_name = "/api/v1/buckets/{bucket}/notifications"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("GET", "PUT", "DELETE")

    def _document(self, bucket: str) -> dict[str, Any]:
        engine = self.ctx.engine
        require_bucket(engine, bucket)
        webhooks = []
        for hook in engine.state.notifications.webhooks(bucket):
            webhooks.append(
                {
                    "id": hook.id,
                    "url": hook.url,
                    "events": list(hook.events),
                    "prefix": hook.prefix,
                    "status": self.ctx.webhooks.status(hook),
                }
            )
        return {"webhooks": webhooks}

    def get(self, bucket: str) -> None:
        self.authorize(Action.BUCKET_READ, bucket=bucket)
        self.send_json(200, self._document(bucket))

    async def put(self, bucket: str) -> None:
        self.authorize(Action.BUCKET_UPDATE, bucket=bucket)
        hooks = parse_webhooks(self.json_body())
        await set_webhooks(self.ctx.engine, bucket, hooks)
        self.send_json(200, self._document(bucket))

    async def delete(self, bucket: str) -> None:
        self.authorize(Action.BUCKET_UPDATE, bucket=bucket)
        await set_webhooks(self.ctx.engine, bucket, [])
        self.set_status(204)
        self.finish()
