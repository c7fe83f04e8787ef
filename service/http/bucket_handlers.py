"""Bucket endpoints and listings: ``/api/v1/buckets[/{bucket}[/objects|/versions]]``.

Listing cursors are opaque to clients: URL-safe base64 of a small JSON document naming the
last item returned, so a page costs O(log n + page) on the sorted key index. Query values
are taken as given, never stripped: keys may start or end with spaces, so may a prefix or a
delimiter.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from service.auth import Action
from service.common.api_errors import ApiError
from service.common.numbers import require_int
from service.common.wire import MAX_LIST_LIMIT
from service.http.base import ApiHandler
from service.http.json_body import load_json
from service.http.render import bucket_json, object_json, version_json
from service.ops.buckets import create_bucket, delete_bucket, require_bucket, update_bucket


def encode_cursor(marker: Any) -> str:
    raw = json.dumps(marker, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> Any:
    """The marker inside a cursor, or 400 InvalidArgument when it was not ours."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return load_json(base64.urlsafe_b64decode(padded.encode("ascii")), "cursor")
    except (ValueError, UnicodeError, binascii.Error, ApiError):
        raise ApiError("InvalidArgument", "cursor is not valid") from None


def parse_limit(raw: str | None) -> int:
    if raw is None:
        return MAX_LIST_LIMIT
    return require_int(raw, "limit", 1, MAX_LIST_LIMIT)


class BucketsHandler(ApiHandler):
    route_name = "/api/v1/buckets"
    SUPPORTED_METHODS = ("GET", "POST")

    def get(self) -> None:
        self.authorize(Action.BUCKET_LIST)
        state = self.ctx.engine.state
        owner = None if self.principal.role == "admin" else self.principal.user_id
        buckets = [
            bucket_json(bucket, state.bucket_usage(bucket.name))
            for bucket in state.list_buckets(owner)
        ]
        self.send_json(200, {"buckets": buckets})

    async def post(self) -> None:
        self.authorize(Action.BUCKET_CREATE)
        bucket = await create_bucket(self.ctx.engine, self.principal.user_id, self.json_body())
        self.send_json(201, bucket_json(bucket, self.ctx.engine.state.bucket_usage(bucket.name)))


class BucketHandler(ApiHandler):
    route_name = "/api/v1/buckets/{bucket}"
    SUPPORTED_METHODS = ("GET", "PATCH", "DELETE")

    def get(self, bucket: str) -> None:
        self.authorize(Action.BUCKET_READ, bucket=bucket)
        record = require_bucket(self.ctx.engine, bucket)
        self.send_json(200, bucket_json(record, self.ctx.engine.state.bucket_usage(bucket)))

    async def patch(self, bucket: str) -> None:
        self.authorize(Action.BUCKET_UPDATE, bucket=bucket)
        record = await update_bucket(self.ctx.engine, bucket, self.json_body())
        self.send_json(200, bucket_json(record, self.ctx.engine.state.bucket_usage(bucket)))

    async def delete(self, bucket: str) -> None:
        self.authorize(Action.BUCKET_DELETE, bucket=bucket)
        force = self.get_query_argument("force", "false").lower() in ("true", "1", "yes")
        await delete_bucket(self.ctx.engine, bucket, force=force)
        self.set_status(204)
        self.finish()


class ObjectListHandler(ApiHandler):
    route_name = "/api/v1/buckets/{bucket}/objects"
    SUPPORTED_METHODS = ("GET",)

    def get(self, bucket: str) -> None:
        self.authorize(Action.OBJECT_LIST, bucket=bucket)
        require_bucket(self.ctx.engine, bucket)
        prefix = self.get_query_argument("prefix", "", strip=False)
        delimiter = self.get_query_argument("delimiter", "", strip=False) or None
        limit = parse_limit(self.get_query_argument("limit", None, strip=False))
        cursor = self.get_query_argument("cursor", "", strip=False) or None
        start_after = None
        if cursor is not None:
            marker = decode_cursor(cursor)
            if not isinstance(marker, str):
                raise ApiError("InvalidArgument", "cursor is not valid")
            start_after = marker
        page = self.ctx.engine.state.list_objects(bucket, prefix, delimiter, limit, start_after)
        next_cursor = (
            encode_cursor(page.last_item) if page.truncated and page.last_item is not None else None
        )
        self.send_json(
            200,
            {
                "objects": [object_json(version) for version in page.objects],
                "common_prefixes": list(page.common_prefixes),
                "next_cursor": next_cursor,
            },
        )


class VersionListHandler(ApiHandler):
    route_name = "/api/v1/buckets/{bucket}/versions"
    SUPPORTED_METHODS = ("GET",)

    def get(self, bucket: str) -> None:
        self.authorize(Action.OBJECT_LIST, bucket=bucket)
        require_bucket(self.ctx.engine, bucket)
        prefix = self.get_query_argument("prefix", "", strip=False)
        limit = parse_limit(self.get_query_argument("limit", None, strip=False))
        cursor = self.get_query_argument("cursor", "", strip=False) or None
        start_after = None
        if cursor is not None:
            marker = decode_cursor(cursor)
            if (
                not isinstance(marker, list)
                or len(marker) != 2
                or not isinstance(marker[0], str)
                or not isinstance(marker[1], int)
            ):
                raise ApiError("InvalidArgument", "cursor is not valid")
            start_after = (marker[0], marker[1])
        page = self.ctx.engine.state.list_versions(bucket, prefix, limit, start_after)
        self.send_json(
            200,
            {
                "versions": [
                    version_json(entry.version, is_latest=entry.is_latest)
                    for entry in page.versions
                ],
                "next_cursor": encode_cursor(list(page.last_item))
                if page.truncated and page.last_item is not None
                else None,
            },
        )
