"""Image endpoints: transformed renditions of stored images, and optimized copies stored.

- ``GET /api/v1/buckets/{bucket}/images/{key}?width=&height=&fit=&format=&quality=&enlarge=``
  answers the variant's bytes with its ``Content-Type``, ``ETag`` (the variant's SHA-256)
  and ``Content-Length``; ``If-None-Match`` with that ETag answers 304. ``version_id``
  selects a version, as for objects.
- ``POST /api/v1/images/optimize`` stores a variant as an object (``target_key``, by default
  ``<stem>.optimized.<ext>`` next to the source) and answers 201 OptimizedImage.

The work (cache, transform, limits) is ``service.media``'s; this module parses the request,
authorises it, and turns the media errors into the contract's codes: a bad parameter 400
InvalidArgument, an undecodable source 415 UnsupportedMediaType, a source or output over the
pixel cap 413 EntityTooLarge.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from typing import Any

from service.auth import Action
from service.common.api_errors import ApiError
from service.common.header_fields import validate_custom_metadata
from service.http.base import ApiHandler
from service.http.identity import require_string
from service.http.served_content import served_headers
from service.media.image_params import (
    ImageError,
    ImageParameterError,
    ImageParams,
    default_target_key,
    parse_json,
    parse_query,
)
from service.media.image_variants import Variant
from service.media.images import ImageTooLargeError, UndecodableImageError
from service.meta import ObjectVersion
from service.ops.objects import PutIntent, require_key, resolve_version, store_server_made

_CODES: tuple[tuple[type[ImageError], str], ...] = (
    (ImageParameterError, "InvalidArgument"),
    (UndecodableImageError, "UnsupportedMediaType"),
    (ImageTooLargeError, "EntityTooLarge"),
)


def api_error(error: ImageError) -> ApiError:
    """The contract's answer to a media error."""
    for kind, code in _CODES:
        if isinstance(error, kind):
            return ApiError(code, str(error))
    return ApiError("InternalError", "the image could not be processed", log_detail=repr(error))


def etag_matches(header: str | None, sha256: str) -> bool:
    """Whether an ``If-None-Match`` header names this ETag (or ``*``).

    >>> etag_matches('W/"ab", "cd"', "cd")
    True
    >>> etag_matches('"ab"', "cd")
    False
    """
    if header is None:
        return False
    for tag in header.split(","):
        tag = tag.strip().removeprefix("W/")
        if tag == "*" or tag == f'"{sha256}"':
            return True
    return False


class ImageHandlerBase(ApiHandler):
    """What both image handlers share: rendering a variant with the errors translated."""

    async def variant(self, source: ObjectVersion, params: ImageParams) -> Variant:
        try:
            return await self.ctx.images.variant(source, params)
        except ImageError as error:
            raise api_error(error) from None


class ImageHandler(ImageHandlerBase):
    """``/api/v1/buckets/{bucket}/images/{key}``: a transformed rendition, nothing stored."""

    route_name = "/api/v1/buckets/{bucket}/images/{key}"
    SUPPORTED_METHODS = ("GET",)

    def query(self) -> dict[str, str]:
        """The query's parameters, the last value of each."""
        arguments: dict[str, str] = {}
        for name, values in self.request.query_arguments.items():
            try:
                arguments[name] = values[-1].decode("utf-8")
            except UnicodeDecodeError:
                raise ApiError("InvalidArgument", f"{name} must be UTF-8") from None
        return arguments

    async def get(self, bucket: str, key: str) -> None:
        self.authorize(Action.IMAGE_TRANSFORM, bucket=bucket)
        arguments = self.query()
        try:
            params = parse_query(arguments)
        except ImageError as error:
            raise api_error(error) from None
        source = resolve_version(self.ctx.engine, bucket, key, arguments.get("version_id"))
        variant = await self.variant(source, params)
        self.set_header("ETag", f'"{variant.sha256}"')
        self.set_header("X-Image-Width", str(variant.width))
        self.set_header("X-Image-Height", str(variant.height))
        self.set_header("X-Image-Cache", "hit" if variant.from_cache else "miss")
        for name, value in served_headers(variant.content_type, key):
            self.set_header(name, value)
        if etag_matches(self.request.headers.get("If-None-Match"), variant.sha256):
            self.set_status(304)
            self.finish()
            return
        self.set_header("Content-Type", variant.content_type)
        self.set_header("Content-Length", str(len(variant.data)))
        self.finish(variant.data)


class ImageOptimizeHandler(ImageHandlerBase):
    """``POST /api/v1/images/optimize``: a variant stored as an object."""

    route_name = "/api/v1/images/optimize"
    SUPPORTED_METHODS = ("POST",)

    async def post(self) -> None:
        body = self.json_body()
        bucket, key = require_string(body, "bucket"), require_string(body, "key")
        target_key = body.get("target_key")
        if target_key is not None and not isinstance(target_key, str):
            raise ApiError("InvalidArgument", "target_key must be a string")
        metadata = validate_custom_metadata(body.get("custom_metadata") or {})
        self.authorize(Action.IMAGE_OPTIMIZE, bucket=bucket)
        try:
            params = parse_json(body)
        except ImageError as error:
            raise api_error(error) from None
        engine = self.ctx.engine
        source = resolve_version(engine, bucket, key, None)
        if target_key is not None:
            require_key(target_key)
        engine.ensure_writable()  # before the work, not after it
        variant = await self.variant(source, params)
        target = target_key if target_key is not None else default_target_key(key, variant.format)
        intent = PutIntent(
            bucket=bucket, key=target, content_type=variant.content_type, custom_metadata=metadata
        )
        stored = await store_server_made(engine, intent, variant.data)
        self.send_json(201, optimized_json(source, stored, variant))


def optimized_json(
    source: ObjectVersion, stored: ObjectVersion, variant: Variant
) -> dict[str, Any]:
    """The contract's OptimizedImage (plus ``etag`` and ``version_id`` of the stored object)."""
    return {
        "bucket": stored.bucket,
        "source_key": source.key,
        "key": stored.key,
        "format": variant.format,
        "width": variant.width,
        "height": variant.height,
        "size_bytes": stored.size,
        "source_size_bytes": source.size,
        "sha256_checksum": stored.sha256,
        "etag": stored.sha256,
        "content_type": stored.content_type,
        "version_id": stored.version_id,
    }
