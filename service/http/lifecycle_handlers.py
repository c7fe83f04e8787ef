"""``/api/v1/buckets/{bucket}/lifecycle`` and ``POST /api/v1/system/lifecycle/run``.

The rules are read and replaced by the bucket's owner (``bucket:read`` / ``bucket:update``);
running a pass now is an administrator's (``system:maintenance``).
"""

from __future__ import annotations

from dataclasses import asdict

from service.auth import Action
from service.http.base import ApiHandler, Home
from service.ops.lifecycle_rules import parse_rules, rules_document, set_rules


class BucketLifecycleHandler(ApiHandler):
    route_name = "/api/v1/buckets/{bucket}/lifecycle"
    SUPPORTED_METHODS = ("GET", "PUT", "DELETE")

    def get(self, bucket: str) -> None:
        self.authorize(Action.BUCKET_READ, bucket=bucket)
        self.send_json(200, rules_document(self.ctx.engine, bucket))

    async def put(self, bucket: str) -> None:
        self.authorize(Action.BUCKET_UPDATE, bucket=bucket)
        rules = parse_rules(self.json_body())
        self.send_json(200, await set_rules(self.ctx.engine, bucket, rules))

    async def delete(self, bucket: str) -> None:
        self.authorize(Action.BUCKET_UPDATE, bucket=bucket)
        await set_rules(self.ctx.engine, bucket, [])
        self.set_status(204)
        self.finish()


class LifecycleRunHandler(ApiHandler):
    route_name = "/api/v1/system/lifecycle/run"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("POST",)

    async def post(self) -> None:
        self.authorize(Action.SYSTEM_MAINTENANCE)
        self.ctx.engine.ensure_writable()
        counts = await self.ctx.lifecycle.run_pass()
        self.send_json(200, asdict(counts))
