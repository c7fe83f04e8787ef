"""Paths of buckets, listings, objects and multipart uploads (``service/http/bucket_handlers.py``,
``object_handlers.py``, ``object_reads.py``, ``multipart_handlers.py``).

Pure: JSON-ready dicts keyed by the handlers' ``route_name`` templates.
"""

from __future__ import annotations

from typing import Any

from service.common.wire import MAX_LIST_LIMIT, MAX_PART_NUMBER
from service.openapi.operations import (
    AUTHENTICATED,
    PRESIGNED,
    body_link,
    header,
    header_param,
    json_body,
    link,
    ok,
    operation,
    path_param,
    query_param,
    ref_param,
)
from service.openapi.requests import OBJECT_KEY
from service.openapi.schemas import SHA256_HEX, TIMESTAMP

API = "/api/v1"
BUCKET = ref_param("bucket")
KEY = ref_param("key")
UPLOAD = path_param("upload_id", "The session's `upload_id`.")
VERSION_ID = query_param(
    "version_id",
    "A version of the object (`null` names the version stored without versioning).",
    {"type": "string"},
)
ETAG = header(
    'The payload\'s SHA-256 in quotes: `"<hex>"`.',
    {"type": "string", "pattern": '^"[0-9a-f]{64}"$'},
)
VERSION_HEADER = header("The version's id, `null` without versioning.", {"type": "string"})
CHECKSUM = header("The payload's SHA-256 (hex).", SHA256_HEX)
LOCK_HEADERS = {
    "X-Retention-Mode": header(
        "The version's retention mode, when one is set.",
        {"type": "string", "enum": ["governance", "compliance"]},
        required=False,
    ),
    "X-Retain-Until": header(
        "The end of the version's retention (RFC 3339), when one is set.",
        TIMESTAMP,
        required=False,
    ),
    "X-Legal-Hold": header(
        "`on` or `off`: sent for a version with a retention or a legal hold.",
        {"type": "string", "enum": ["on", "off"]},
        required=False,
    ),
}
OBJECT_WRITE_ERRORS = (400, 401, 403, 404, 409, 412, 413, 503, 507)
BINARY = {"type": "string", "format": "binary"}
ANY_BYTES = {"*/*": {"schema": BINARY}}
OBJECT_SECURITY = [*AUTHENTICATED, PRESIGNED]
LIMIT = query_param(
    "limit",
    f"Items per page, 1 to {MAX_LIST_LIMIT} (default {MAX_LIST_LIMIT}).",
    {"type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT},
)
CURSOR = query_param("cursor", "`next_cursor` of the previous page (opaque).", {"type": "string"})


def parameter_components() -> dict[str, Any]:
    """``components.parameters`` shared by several paths."""
    return {
        "bucket": path_param("bucket", "The bucket's name."),
        "key": {
            **path_param("key", "The object key: the percent-encoded rest of the path."),
            "schema": OBJECT_KEY,
        },
    }


SERVED_CONTENT_HEADERS = {
    "X-Content-Type-Options": header(
        "`nosniff`: the stored type is taken as it is.", {"type": "string", "const": "nosniff"}
    ),
    "Content-Security-Policy": header(
        "`sandbox`: rendered as a page, the body runs in an origin of its own.",
        {"type": "string", "const": "sandbox"},
    ),
    "Content-Disposition": header(
        "For a type a browser would run (HTML, XHTML, SVG, XML, JavaScript): "
        "`attachment` with the key's last segment as the file name (RFC 6266, RFC 5987).",
        {"type": "string", "pattern": "^attachment; filename="},
        required=False,
    ),
}
"""What every object body is sent with (user content never runs in the service's origin)."""


def read_headers(*, ranged: bool = False) -> dict[str, Any]:
    headers = {
        **SERVED_CONTENT_HEADERS,
        "Content-Length": header(
            "Bytes in this answer's body.", {"type": "string", "pattern": "^[0-9]+$"}
        ),
        "ETag": ETAG,
        "X-Checksum-Sha256": CHECKSUM,
        "Last-Modified": header("HTTP date of the version.", {"type": "string"}),
        "Accept-Ranges": header("`bytes`", {"type": "string", "const": "bytes"}),
        "X-Version-Id": VERSION_HEADER,
        **LOCK_HEADERS,
    }
    if ranged:
        headers["Content-Range"] = header(
            "`bytes <first>-<last>/<size>`",
            {"type": "string", "pattern": "^bytes [0-9]+-[0-9]+/[0-9]+$"},
        )
    return headers


READ_PARAMETERS = [
    BUCKET,
    KEY,
    VERSION_ID,
    header_param(
        "Range",
        "One range `bytes=a-b`, `bytes=a-` or `bytes=-n` (an end past the size is "
        "clipped); anything else, several ranges included, is answered 200 whole.",
        {"type": "string"},
    ),
    header_param("If-Match", "Entity tags (strong comparison), else 412.", {"type": "string"}),
    header_param("If-None-Match", "Entity tags (weak comparison): 304.", {"type": "string"}),
    header_param("If-Modified-Since", "HTTP date: 304 when not newer.", {"type": "string"}),
    header_param("If-Unmodified-Since", "HTTP date: 412 when newer.", {"type": "string"}),
    header_param(
        "If-Range", "An entity tag or HTTP date the Range depends on.", {"type": "string"}
    ),
]
READ_DESCRIPTION = (
    "Preconditions first (RFC 9110: 412, then 304), then one `Range` (206, or 416 with "
    "`Content-Range: bytes */<size>`). Custom metadata comes back as `X-Meta-<name>` headers. "
    "A presigned URL (its three `X-` query parameters) stands in for credentials. A "
    "`version_id` naming a delete marker is 405."
)


def object_read(method: str) -> dict[str, Any]:
    head = method == "HEAD"
    content = None if head else ANY_BYTES
    return operation(
        f"{method.lower()}Object",
        f"{'Headers of' if head else 'Read'} an object (whole or a range)",
        tag="objects",
        description=READ_DESCRIPTION,
        parameters=READ_PARAMETERS,
        security=OBJECT_SECURITY,
        head=head,
        responses={
            200: ok("The whole object.", headers=read_headers(), content=content),
            206: ok("The range asked for.", headers=read_headers(ranged=True), content=content),
            304: ok(
                "Not modified.",
                headers={k: v for k, v in read_headers().items() if k != "Content-Length"},
            ),
        },
        errors=(400, 401, 403, 404, 405, 412, 416),
    )


OBJECT_LINKS = {
    "GetObject": link("getObject", bucket="$response.body#/bucket", key="$response.body#/key"),
    "HeadObject": link("headObject", bucket="$response.body#/bucket", key="$response.body#/key"),
    "DeleteObject": link(
        "deleteObject", bucket="$response.body#/bucket", key="$response.body#/key"
    ),
    "GetImage": link("getImage", bucket="$response.body#/bucket", key="$response.body#/key"),
    "Presign": body_link(
        "presign", {"bucket": "$response.body#/bucket", "key": "$response.body#/key"}
    ),
}

BUCKET_LINKS = {
    "GetBucket": link("getBucket", bucket="$response.body#/name"),
    "UpdateBucket": link("updateBucket", bucket="$response.body#/name"),
    "DeleteBucket": link("deleteBucket", bucket="$response.body#/name"),
    "ListObjects": link("listObjects", bucket="$response.body#/name"),
    "ListVersions": link("listVersions", bucket="$response.body#/name"),
    "PutObject": link("putObject", bucket="$response.body#/name"),
    "ListUploads": link("listUploads", bucket="$response.body#/name"),
    "InitUpload": body_link("initUpload", {"bucket": "$response.body#/name", "key": "k"}),
}

SESSION_LINKS = {
    "GetUpload": link("getUpload", upload_id="$response.body#/upload_id"),
    "AbortUpload": link("abortUpload", upload_id="$response.body#/upload_id"),
    "UploadPart": link("uploadPart", upload_id="$response.body#/upload_id"),
}


def bucket_paths() -> dict[str, Any]:
    listing = [
        BUCKET,
        query_param("prefix", "Only keys starting with this.", {"type": "string"}),
        LIMIT,
        CURSOR,
    ]
    delimiter = query_param(
        "delimiter",
        "Group keys by the part up to this string: `common_prefixes`.",
        {"type": "string"},
    )
    return {
        f"{API}/buckets": {
            "get": operation(
                "listBuckets",
                "The caller's buckets (every bucket for an admin)",
                tag="buckets",
                responses={200: ok("Buckets.", "BucketList")},
                errors=(400, 401, 403),
            ),
            "post": operation(
                "createBucket",
                "Create a bucket owned by the caller",
                tag="buckets",
                request_body=json_body("BucketCreate"),
                responses={201: ok("The new bucket.", "Bucket", links=BUCKET_LINKS)},
                errors=(400, 401, 403, 409, 413, 503),
            ),
        },
        f"{API}/buckets/{{bucket}}": {
            "get": operation(
                "getBucket",
                "A bucket with its usage",
                tag="buckets",
                parameters=[BUCKET],
                responses={200: ok("The bucket.", "Bucket")},
                errors=(400, 401, 403, 404),
            ),
            "patch": operation(
                "updateBucket",
                "Change quota, versioning, tags or the default retention",
                tag="buckets",
                parameters=[BUCKET],
                request_body=json_body("BucketUpdate", required=False),
                responses={200: ok("The bucket.", "Bucket")},
                errors=(400, 401, 403, 404, 409, 413, 503),
            ),
            "delete": operation(
                "deleteBucket",
                "Delete a bucket (with its objects when `force`)",
                tag="buckets",
                parameters=[
                    BUCKET,
                    query_param(
                        "force",
                        "`true`, `1` or `yes` (any case) deletes a bucket that still "
                        "holds objects; anything else does not.",
                        {"type": "string"},
                    ),
                ],
                responses={204: ok("Deleted.")},
                errors=(400, 401, 403, 404, 409, 503),
            ),
        },
        f"{API}/buckets/{{bucket}}/objects": {
            "get": operation(
                "listObjects",
                "Objects in key order, a page at a time",
                tag="objects",
                description="Objects and common prefixes together count toward `limit`; "
                "across pages each appears exactly once.",
                parameters=[*listing, delimiter],
                responses={200: ok("A page.", "ObjectList")},
                errors=(400, 401, 403, 404),
            )
        },
        f"{API}/buckets/{{bucket}}/versions": {
            "get": operation(
                "listVersions",
                "Every version (delete markers included), a page at a time",
                tag="objects",
                parameters=listing,
                responses={200: ok("A page.", "VersionList")},
                errors=(400, 401, 403, 404),
            )
        },
    }


def object_paths() -> dict[str, Any]:
    put_parameters = [
        BUCKET,
        KEY,
        header_param(
            "X-Checksum-Sha256",
            "The body's SHA-256 (hex, any case): verified, "
            "400 BadDigest on mismatch, nothing kept.",
            {"type": "string", "pattern": "^\\s*[0-9A-Fa-f]{64}\\s*$"},
        ),
        header_param(
            "If-None-Match",
            "Only `*`: store only if the key does not exist (412).",
            {"type": "string", "enum": ["*"]},
        ),
        header_param(
            "If-Match",
            'Store only over this ETag (`"<hex>"`, else 412).',
            {"type": "string", "pattern": '^"[!#-~]*"$'},
        ),
    ]
    return {
        f"{API}/buckets/{{bucket}}/objects/{{key}}": {
            "get": object_read("GET"),
            "head": object_read("HEAD"),
            "put": operation(
                "putObject",
                "Store an object from the raw body",
                tag="objects",
                description="The body streams to disk (Content-Length or chunked). "
                "`Content-Type` is stored as the object's type (default "
                "`application/octet-stream`); each `X-Meta-<name>: <value>` header is custom "
                "metadata (names lowercased, at most 8 KiB in all). A presigned PUT URL "
                "stands in for credentials.",
                parameters=put_parameters,
                security=OBJECT_SECURITY,
                request_body={"required": True, "content": ANY_BYTES},
                responses={
                    200: ok(
                        "Stored.",
                        "Object",
                        links=OBJECT_LINKS,
                        headers={
                            "ETag": ETAG,
                            "X-Checksum-Sha256": CHECKSUM,
                            "X-Version-Id": VERSION_HEADER,
                        },
                    )
                },
                errors=(400, 401, 403, 404, 411, 412, 413, 423, 429, 503, 507),
            ),
            "delete": operation(
                "deleteObject",
                "Delete an object (a delete marker when versioning is on), or one version for good",
                tag="objects",
                description="A version under retention or legal hold is 423 ObjectLocked "
                "(a delete without `version_id` adds a delete marker as usual).",
                parameters=[BUCKET, KEY, VERSION_ID],
                responses={204: ok("Deleted.")},
                errors=(400, 401, 403, 404, 409, 423, 503),
            ),
        }
    }


def multipart_paths() -> dict[str, Any]:
    return {
        f"{API}/multipart": {
            "get": operation(
                "listUploads",
                "Open multipart sessions of a bucket, a page at a time",
                tag="multipart",
                description="Sessions in key order, then oldest first; `next_cursor` is null "
                "on the last page.",
                parameters=[
                    query_param(
                        "bucket", "The bucket.", {"type": "string", "minLength": 1}, required=True
                    ),
                    LIMIT,
                    CURSOR,
                ],
                responses={200: ok("Open sessions.", "SessionList")},
                errors=(400, 401, 403, 404),
            )
        },
        f"{API}/multipart/init": {
            "post": operation(
                "initUpload",
                "Open a multipart session",
                tag="multipart",
                request_body=json_body("MultipartInit"),
                responses={201: ok("The session.", "Session", links=SESSION_LINKS)},
                errors=(400, 401, 403, 404, 409, 413, 503),
            )
        },
        f"{API}/multipart/{{upload_id}}": {
            "get": operation(
                "getUpload",
                "A session and its stored parts",
                tag="multipart",
                parameters=[UPLOAD],
                responses={200: ok("The session.", "SessionWithParts")},
                errors=(400, 401, 403, 404),
            ),
            "delete": operation(
                "abortUpload",
                "Abort a session: parts and session purged",
                tag="multipart",
                parameters=[UPLOAD],
                responses={204: ok("Aborted.")},
                errors=(400, 401, 403, 404, 409, 503),
            ),
        },
        f"{API}/multipart/{{upload_id}}/part": {
            "put": operation(
                "uploadPart",
                "Store one part from the raw body (re-sending a number replaces it)",
                tag="multipart",
                parameters=[
                    UPLOAD,
                    query_param(
                        "partNumber",
                        f"1 to {MAX_PART_NUMBER}, else 400 InvalidPartNumber.",
                        {"type": "integer", "minimum": 1, "maximum": MAX_PART_NUMBER},
                        required=True,
                    ),
                    header_param(
                        "X-Checksum-Sha256",
                        "The part's SHA-256 (hex): verified.",
                        {"type": "string", "pattern": "^\\s*[0-9A-Fa-f]{64}\\s*$"},
                    ),
                ],
                request_body={"required": True, "content": ANY_BYTES},
                responses={
                    200: ok(
                        "Stored.",
                        "Part",
                        headers={"ETag": ETAG},
                        links={
                            "CompleteUpload": body_link(
                                "completeUpload",
                                {
                                    "parts": [
                                        {
                                            "part_number": "$response.body#/part_number",
                                            "etag": "$response.body#/etag",
                                        }
                                    ]
                                },
                                upload_id="$request.path.upload_id",
                            )
                        },
                    )
                },
                errors=(400, 401, 403, 404, 409, 411, 413, 429, 503, 507),
            )
        },
        f"{API}/multipart/{{upload_id}}/complete": {
            "post": operation(
                "completeUpload",
                "Join the named parts into the key's new version",
                tag="multipart",
                parameters=[UPLOAD],
                request_body=json_body("MultipartComplete"),
                responses={
                    200: ok(
                        "The object.",
                        "Object",
                        links=OBJECT_LINKS,
                        headers={"ETag": ETAG, "X-Version-Id": VERSION_HEADER},
                    )
                },
                errors=(400, 401, 403, 404, 409, 413, 423, 503, 507),
            )
        },
    }
