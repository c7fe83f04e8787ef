"""Flows for buckets, objects, listings, presigned URLs and image transforms.

Each function builds one endpoint's request and parses its answer; the sync and async
clients run the same flow (see ``_flow``). Flows that stream a download return the open
``Reply`` for the client to wrap in an object stream. Pure.
"""

from __future__ import annotations

import datetime
import email.utils
from collections.abc import Mapping
from functools import partial
from typing import Any

from service.client._documents import UNSET, Unset, document, patch_document
from service.client._exceptions import IntegrityError, NotFoundError
from service.client._flow import Call, Flow, Reply, blocking, request
from service.client._headers import ObjectHeaders, put_headers, quote_etag
from service.client._models import (
    Bucket,
    DefaultRetention,
    ListPage,
    Object,
    OptimizedImage,
    PresignedUrl,
    VersionPage,
    parse,
)
from service.client._paths import api, bucket_path, image_path, object_path
from service.client._payload import Body, MemoryBody, sha256_bytes
from service.client._ranges import RangeLike, coerce_range
from service.client._wire import MAX_LIST_LIMIT, MAX_PRESIGN_EXPIRES_SECONDS, QUERY_VERSION_ID

__all__ = [
    "create_bucket",
    "delete_bucket",
    "delete_object",
    "get_bucket",
    "get_object",
    "head_object",
    "image",
    "list_buckets",
    "list_objects",
    "list_versions",
    "object_exists",
    "optimize",
    "presign",
    "put_object",
    "sha256_of",
    "update_bucket",
]

#: Below this many bytes a SHA-256 is computed inline: cheaper than a hop to an executor.
INLINE_HASH_BYTES = 256 * 1024
PRESIGN_METHODS = ("GET", "PUT", "HEAD")


def list_buckets() -> Flow[list[Bucket]]:
    reply = yield from request(Call("GET", api("/buckets")))
    return parse(lambda doc: [Bucket.from_json(item) for item in doc["buckets"]], reply.json())


def create_bucket(
    name: str,
    *,
    quota_bytes: int | None,
    versioning_enabled: bool | None,
    tags: Mapping[str, str] | None,
    object_lock_enabled: bool | None = None,
    default_retention: DefaultRetention | None = None,
) -> Flow[Bucket]:
    body = document(
        name=name,
        quota_bytes=quota_bytes,
        versioning_enabled=versioning_enabled,
        tags=dict(tags) if tags is not None else None,
        object_lock_enabled=object_lock_enabled,
        default_retention=retention_document(default_retention),
    )
    reply = yield from request(Call("POST", api("/buckets"), json=body))
    return parse(Bucket.from_json, reply.json())


def retention_document(retention: DefaultRetention | None) -> dict[str, Any] | None:
    """A bucket's ``default_retention`` as the contract writes it."""
    if retention is None:
        return None
    return {"mode": retention.mode, "days": retention.days}


def get_bucket(name: str) -> Flow[Bucket]:
    reply = yield from request(Call("GET", bucket_path(name)))
    return parse(Bucket.from_json, reply.json())


def update_bucket(
    name: str,
    *,
    quota_bytes: int | Unset | None = UNSET,
    versioning_enabled: bool | Unset = UNSET,
    tags: Mapping[str, str] | Unset = UNSET,
    default_retention: DefaultRetention | Unset | None = UNSET,
) -> Flow[Bucket]:
    body = patch_document(
        quota_bytes=quota_bytes,
        versioning_enabled=versioning_enabled,
        tags=dict(tags) if not isinstance(tags, Unset) else UNSET,
        default_retention=retention_document(default_retention)
        if not isinstance(default_retention, Unset)
        else UNSET,
    )
    reply = yield from request(Call("PATCH", bucket_path(name), json=body))
    return parse(Bucket.from_json, reply.json())


def delete_bucket(name: str, *, force: bool) -> Flow[None]:
    params = {"force": "true"} if force else {}
    yield from request(Call("DELETE", bucket_path(name), params=params))


def sha256_of(data: bytes) -> Flow[str]:
    """Hex SHA-256 of ``data``: inline when small, else where blocking is allowed."""
    if len(data) <= INLINE_HASH_BYTES:
        return sha256_bytes(data)
    return (yield from blocking(partial(sha256_bytes, data)))


def put_object(
    bucket: str,
    key: str,
    body: Body,
    *,
    content_type: str | None,
    metadata: Mapping[str, str] | None,
    checksum: str | None,
    if_match: str | None = None,
    if_none_match: str | None = None,
) -> Flow[Object]:
    """PUT one object. Bytes in memory get a SHA-256 computed here and sent, so the server
    refuses (400 BadDigest, nothing kept) a body damaged on the way; for streams the caller
    may pass ``checksum``. The server's reported SHA-256 is checked against it either way."""
    headers = put_headers(
        content_type=content_type,
        metadata=metadata,
        checksum=checksum,
        if_match=if_match,
        if_none_match=if_none_match,
    )
    if checksum is None and isinstance(body, MemoryBody):
        checksum = yield from sha256_of(body.data)
        headers = {**headers, **put_headers(content_type=None, metadata=None, checksum=checksum)}
    call = Call("PUT", object_path(bucket, key), headers=headers, body=body)
    reply = yield from request(call)
    stored = parse(Object.from_json, reply.json())
    if checksum is not None and stored.sha256_checksum.lower() != checksum.lower():
        raise IntegrityError(
            f"server stored SHA-256 {stored.sha256_checksum}, the data has {checksum.lower()}",
            request_id=reply.headers.get("X-Request-Id"),
        )
    return stored


def _read_headers(
    *,
    byte_range: RangeLike | None,
    if_match: str | None,
    if_none_match: str | None,
    if_modified_since: datetime.datetime | None,
) -> dict[str, str]:
    # identity: a compressed answer would not match the object's SHA-256 or byte offsets.
    headers = {"Accept-Encoding": "identity"}
    if byte_range is not None:
        headers["Range"] = coerce_range(byte_range).header
    if if_match is not None:
        headers["If-Match"] = quote_etag(if_match)
    if if_none_match is not None:
        headers["If-None-Match"] = (
            if_none_match if if_none_match == "*" else quote_etag(if_none_match)
        )
    if if_modified_since is not None:
        headers["If-Modified-Since"] = email.utils.format_datetime(
            if_modified_since.astimezone(datetime.UTC), usegmt=True
        )
    return headers


def get_object(
    bucket: str,
    key: str,
    *,
    byte_range: RangeLike | None = None,
    version_id: str | None = None,
    if_match: str | None = None,
    if_none_match: str | None = None,
    if_modified_since: datetime.datetime | None = None,
) -> Flow[Reply]:
    """GET an object, its body left unread in ``Reply.raw``."""
    headers = _read_headers(
        byte_range=byte_range,
        if_match=if_match,
        if_none_match=if_none_match,
        if_modified_since=if_modified_since,
    )
    params = {QUERY_VERSION_ID: version_id} if version_id is not None else {}
    call = Call("GET", object_path(bucket, key), params=params, headers=headers, stream=True)
    return (yield from request(call))


def head_object(bucket: str, key: str, *, version_id: str | None = None) -> Flow[ObjectHeaders]:
    params = {QUERY_VERSION_ID: version_id} if version_id is not None else {}
    reply = yield from request(Call("HEAD", object_path(bucket, key), params=params))
    return ObjectHeaders.from_headers(reply.headers)


def object_exists(bucket: str, key: str) -> Flow[bool]:
    """A HEAD: True when the key exists. A HEAD answer has no body, hence no error code,
    so a missing bucket also reads as False."""
    try:
        yield from request(Call("HEAD", object_path(bucket, key)))
    except NotFoundError:
        return False
    return True


def delete_object(bucket: str, key: str, *, version_id: str | None = None) -> Flow[bool]:
    """True when something was deleted, False when the key (or version) did not exist; a
    missing bucket is still an error, because that is a mistake rather than a no-op."""
    params = {QUERY_VERSION_ID: version_id} if version_id is not None else {}
    try:
        yield from request(Call("DELETE", object_path(bucket, key), params=params))
    except NotFoundError as exc:
        if exc.code in ("NoSuchKey", "NoSuchVersion"):
            return False
        raise
    return True


def _limit(limit: int | None) -> dict[str, str]:
    if limit is None:
        return {}
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIST_LIMIT}")
    return {"limit": str(limit)}


def list_objects(
    bucket: str,
    *,
    prefix: str | None = None,
    delimiter: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Flow[ListPage]:
    params = {
        **document(prefix=prefix, delimiter=delimiter, cursor=cursor),
        **_limit(limit),
    }
    reply = yield from request(Call("GET", f"{bucket_path(bucket)}/objects", params=params))
    return parse(ListPage.from_json, reply.json())


def list_versions(
    bucket: str,
    *,
    prefix: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Flow[VersionPage]:
    params = {**document(prefix=prefix, cursor=cursor), **_limit(limit)}
    reply = yield from request(Call("GET", f"{bucket_path(bucket)}/versions", params=params))
    return parse(VersionPage.from_json, reply.json())


def presign(
    bucket: str,
    key: str,
    *,
    method: str = "GET",
    expires_in: int = 3600,
    content_type: str | None = None,
) -> Flow[PresignedUrl]:
    method = method.upper()
    if method not in PRESIGN_METHODS:
        raise ValueError(f"method must be one of {', '.join(PRESIGN_METHODS)}")
    if not 1 <= expires_in <= MAX_PRESIGN_EXPIRES_SECONDS:
        raise ValueError(f"expires_in must be 1 to {MAX_PRESIGN_EXPIRES_SECONDS} seconds")
    body = document(
        bucket=bucket, key=key, method=method, expires_in=expires_in, content_type=content_type
    )
    reply = yield from request(Call("POST", api("/presign"), json=body))
    return parse(PresignedUrl.from_json, reply.json())


def optimize(
    bucket: str,
    key: str,
    *,
    width: int | None = None,
    height: int | None = None,
    fit: str | None = None,
    format: str | None = None,
    quality: int | None = None,
    target_key: str | None = None,
) -> Flow[OptimizedImage]:
    body = document(
        bucket=bucket,
        key=key,
        width=width,
        height=height,
        fit=fit,
        format=format,
        quality=quality,
        target_key=target_key,
    )
    reply = yield from request(Call("POST", api("/images/optimize"), json=body))
    return parse(OptimizedImage.from_json, reply.json())


def image(
    bucket: str,
    key: str,
    *,
    width: int | None = None,
    height: int | None = None,
    fit: str | None = None,
    format: str | None = None,
    quality: int | None = None,
    enlarge: bool | None = None,
) -> Flow[Reply]:
    """GET a transformed image, its body left unread in ``Reply.raw``."""
    params = {
        name: str(value).lower() if isinstance(value, bool) else str(value)
        for name, value in document(
            width=width,
            height=height,
            fit=fit,
            format=format,
            quality=quality,
            enlarge=enlarge,
        ).items()
    }
    call = Call("GET", image_path(bucket, key), params=params, stream=True)
    return (yield from request(call))
