"""Python client for the object storage service (contract: docs/client.md, docs/api.md v1).

    from service.client import ServiceClient

    with ServiceClient("http://bk_ID:sk_SECRET@127.0.0.1:9000") as client:
        bucket = client.bucket("photos")
        bucket.put("cat.jpg", open("cat.jpg", "rb"), content_type="image/jpeg")

``ServiceClient`` (sync, httpx.Client) and ``AsyncServiceClient`` (asyncio,
httpx.AsyncClient) run the same request-building and response-parsing code: each operation
is a generator of steps (``_flow``) that a sync or an async driver performs. Everything
public is re-exported here from small private modules; ``tests/client`` checks ``__all__``.

The asyncio flavour is imported on first use of one of its names (PEP 562 ``__getattr__``):
it brings in ``asyncio``, a third of the package's import time, which a synchronous program
such as ``svc`` never needs.

May import (docs/architecture.md, "Layers"): ``service.common``.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

from service.client._bucket import BucketClient
from service.client._client import (
    AccessKeys,
    Buckets,
    ServiceClient,
    Users,
    Videos,
)
from service.client._documents import UNSET
from service.client._exceptions import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    ConnectionFailedError,
    InsufficientStorageError,
    IntegrityError,
    InternalServerError,
    InvalidRangeError,
    LengthRequiredError,
    MethodNotAllowedError,
    NotFoundError,
    NotModifiedError,
    ObjectLockedError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PreconditionFailedError,
    QuotaExceededError,
    RequestTimeoutError,
    ServerError,
    ServiceError,
    ServiceUnavailableError,
    TooManyRequestsError,
    TransportError,
    UnexpectedResponseError,
    UnsupportedMediaTypeError,
)
from service.client._headers import ObjectHeaders
from service.client._models import (
    AccessKey,
    Bucket,
    BucketUsage,
    DefaultRetention,
    Health,
    Job,
    ListPage,
    Object,
    ObjectVersion,
    OptimizedImage,
    Part,
    PresignedUrl,
    Rendition,
    Retention,
    Session,
    Share,
    Token,
    User,
    VersionPage,
)
from service.client._models_lock import (
    AuditPage,
    AuditRecord,
    AuditVerification,
    LegalHold,
    ObjectRetention,
)
from service.client._models_upkeep import (
    CorruptObject,
    Event,
    LifecycleRule,
    LifecycleRun,
    ScrubStatus,
    UploadPage,
    Webhook,
    WebhookStatus,
)
from service.client._multipart import MultipartUpload
from service.client._ops_batch import BatchEntry, PutManyResult
from service.client._ranges import ByteRange, ContentRange
from service.client._stream import ObjectStream

if _typing.TYPE_CHECKING:
    from service.client._async_bucket import AsyncBucketClient
    from service.client._async_client import (
        AsyncAccessKeys,
        AsyncBuckets,
        AsyncServiceClient,
        AsyncUsers,
        AsyncVideos,
    )
    from service.client._async_multipart import AsyncMultipartUpload
    from service.client._async_stream import AsyncObjectStream

#: The asyncio names and the private module each comes from, imported on first use.
_ASYNC = {
    "AsyncAccessKeys": "_async_client",
    "AsyncBucketClient": "_async_bucket",
    "AsyncBuckets": "_async_client",
    "AsyncMultipartUpload": "_async_multipart",
    "AsyncObjectStream": "_async_stream",
    "AsyncServiceClient": "_async_client",
    "AsyncUsers": "_async_client",
    "AsyncVideos": "_async_client",
}


def __getattr__(name: str) -> _typing.Any:
    if name not in _ASYNC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{_ASYNC[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ASYNC))


__all__ = [
    "UNSET",
    "AccessKey",
    "AccessKeys",
    "AsyncAccessKeys",
    "AsyncBucketClient",
    "AsyncBuckets",
    "AsyncMultipartUpload",
    "AsyncObjectStream",
    "AsyncServiceClient",
    "AsyncUsers",
    "AsyncVideos",
    "AuditPage",
    "AuditRecord",
    "AuditVerification",
    "AuthenticationError",
    "BadRequestError",
    "BatchEntry",
    "Bucket",
    "BucketClient",
    "BucketUsage",
    "Buckets",
    "ByteRange",
    "ConflictError",
    "ConnectionFailedError",
    "ContentRange",
    "CorruptObject",
    "DefaultRetention",
    "Event",
    "Health",
    "InsufficientStorageError",
    "IntegrityError",
    "InternalServerError",
    "InvalidRangeError",
    "Job",
    "LegalHold",
    "LengthRequiredError",
    "LifecycleRule",
    "LifecycleRun",
    "ListPage",
    "MethodNotAllowedError",
    "MultipartUpload",
    "NotFoundError",
    "NotModifiedError",
    "Object",
    "ObjectHeaders",
    "ObjectLockedError",
    "ObjectRetention",
    "ObjectStream",
    "ObjectVersion",
    "OptimizedImage",
    "Part",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PreconditionFailedError",
    "PresignedUrl",
    "PutManyResult",
    "QuotaExceededError",
    "Rendition",
    "RequestTimeoutError",
    "Retention",
    "ScrubStatus",
    "ServerError",
    "ServiceClient",
    "ServiceError",
    "ServiceUnavailableError",
    "Session",
    "Share",
    "Token",
    "TooManyRequestsError",
    "TransportError",
    "UnexpectedResponseError",
    "UnsupportedMediaTypeError",
    "UploadPage",
    "User",
    "Users",
    "VersionPage",
    "Videos",
    "Webhook",
    "WebhookStatus",
]
