"""Paths of images and videos (``service/http/image_handlers.py``, ``videos.py``), share
playback included (answered by ``object_reads`` like an object read).

Pure: JSON-ready dicts keyed by the handlers' ``route_name`` templates.
"""

from __future__ import annotations

from typing import Any

from service.media.image_params import FITS, FORMATS, MAX_DIMENSION, QUALITY_RANGE
from service.meta import records
from service.openapi.operations import (
    PUBLIC,
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
from service.openapi.paths_storage import (
    ANY_BYTES,
    ETAG,
    OBJECT_LINKS,
    READ_PARAMETERS,
    SERVED_CONTENT_HEADERS,
    VERSION_HEADER,
    VERSION_ID,
    read_headers,
)

API = "/api/v1"
IMAGE_TYPES = {
    f"image/{name}": {"schema": {"type": "string", "format": "binary"}} for name in FORMATS
}
JOB_ID = path_param("job_id", "The job's `job_id`.")
SIDE = {"type": "integer", "minimum": 1, "maximum": MAX_DIMENSION}
IMAGE_HEADERS = {
    "ETag": header("The variant's SHA-256 in quotes.", {"type": "string"}),
    "X-Image-Width": header("Width of the variant.", {"type": "string", "pattern": "^[0-9]+$"}),
    "X-Image-Height": header("Height of the variant.", {"type": "string", "pattern": "^[0-9]+$"}),
    "X-Image-Cache": header(
        "Whether the variant came from the cache.", {"type": "string", "enum": ["hit", "miss"]}
    ),
    "X-Content-Type-Options": SERVED_CONTENT_HEADERS["X-Content-Type-Options"],
    "Content-Security-Policy": SERVED_CONTENT_HEADERS["Content-Security-Policy"],
}
JOB_LINKS = {
    "GetJob": link("getJob", job_id="$response.body#/job_id"),
    "DeleteJob": link("deleteJob", job_id="$response.body#/job_id"),
    "CreateShare": body_link("createShare", {"job_id": "$response.body#/job_id"}),
}


def image_paths() -> dict[str, Any]:
    low, high = QUALITY_RANGE
    return {
        f"{API}/buckets/{{bucket}}/images/{{key}}": {
            "get": operation(
                "getImage",
                "A transformed rendition of a stored image (nothing stored)",
                tag="media",
                description="Unknown query parameters are ignored (cache busting); enum "
                "values are matched in any case. With both `width` and `height`, `fit` "
                "decides; never upscaled unless `enlarge`. A source that does not decode is "
                "415, one over the pixel cap 413; a format the server's Pillow cannot "
                "encode is 400.",
                parameters=[
                    ref_param("bucket"),
                    ref_param("key"),
                    query_param("width", f"1 to {MAX_DIMENSION}.", SIDE),
                    query_param("height", f"1 to {MAX_DIMENSION}.", SIDE),
                    query_param("fit", "Default `inside`.", {"type": "string", "enum": list(FITS)}),
                    query_param(
                        "format",
                        "Default the source's (PNG for other sources).",
                        {"type": "string", "enum": [*FORMATS, "jpg"]},
                    ),
                    query_param(
                        "quality",
                        f"{low} to {high} (default 80; PNG ignores it).",
                        {"type": "integer", "minimum": low, "maximum": high},
                    ),
                    query_param(
                        "enlarge",
                        "`true`/`1` or `false`/`0`.",
                        {"type": "string", "enum": ["true", "false", "1", "0"]},
                    ),
                    VERSION_ID,
                    header_param("If-None-Match", "The variant's ETag: 304.", {"type": "string"}),
                ],
                responses={
                    200: ok(
                        "The image.",
                        content=IMAGE_TYPES,
                        headers={
                            **IMAGE_HEADERS,
                            "Content-Length": header(
                                "Bytes of the image.", {"type": "string", "pattern": "^[0-9]+$"}
                            ),
                        },
                    ),
                    304: ok("Not modified.", headers=IMAGE_HEADERS),
                },
                errors=(400, 401, 403, 404, 405, 413, 415),
            )
        },
        f"{API}/images/optimize": {
            "post": operation(
                "optimizeImage",
                "Store a transformed copy of an image as an object",
                tag="media",
                description="The result is stored at `target_key`, by default "
                "`<stem>.optimized.<ext>` next to the source.",
                request_body=json_body("ImageOptimize"),
                responses={201: ok("Stored.", "OptimizedImage")},
                errors=(400, 401, 403, 404, 409, 413, 415, 503, 507),
            )
        },
    }


def video_paths() -> dict[str, Any]:
    return {
        f"{API}/videos/thumbnails": {
            "post": operation(
                "createThumbnail",
                "Store a still of a video as an image object",
                tag="media",
                request_body=json_body("ThumbnailRequest"),
                responses={
                    201: ok(
                        "The stored thumbnail.",
                        "Object",
                        links=OBJECT_LINKS,
                        headers={"ETag": ETAG, "X-Version-Id": VERSION_HEADER},
                    )
                },
                errors=(400, 401, 403, 404, 409, 413, 415, 503, 507),
            )
        },
        f"{API}/videos/jobs": {
            "get": operation(
                "listJobs",
                "Packaging jobs the caller may read",
                tag="media",
                parameters=[
                    query_param(
                        "bucket",
                        "Only this bucket's jobs (empty: every bucket).",
                        {"type": "string"},
                    ),
                    query_param(
                        "status",
                        "Only jobs in this status (empty: any).",
                        {"type": "string", "enum": [*records.JOB_STATUSES, ""]},
                    ),
                ],
                responses={200: ok("Jobs.", "JobList")},
                errors=(400, 401, 403, 404),
            ),
            "post": operation(
                "createJob",
                "Queue an HLS/DASH packaging job",
                tag="media",
                request_body=json_body("JobCreate"),
                responses={202: ok("Queued.", "Job", links=JOB_LINKS)},
                errors=(400, 401, 403, 404, 409, 413, 503),
            ),
        },
        f"{API}/videos/jobs/{{job_id}}": {
            "get": operation(
                "getJob",
                "A job and its progress",
                tag="media",
                parameters=[JOB_ID],
                responses={200: ok("The job.", "Job")},
                errors=(400, 401, 403, 404),
            ),
            "delete": operation(
                "deleteJob",
                "Cancel a job and remove its outputs",
                tag="media",
                parameters=[JOB_ID],
                responses={204: ok("Deleted.")},
                errors=(400, 401, 403, 404, 409, 503),
            ),
        },
        f"{API}/videos/shares": {
            "post": operation(
                "createShare",
                "A token link to a completed job's outputs",
                tag="media",
                request_body=json_body("ShareCreate"),
                responses={
                    201: ok(
                        "The share.",
                        "Share",
                        links={
                            "DeleteShare": link("deleteShare", share_id="$response.body#/share_id")
                        },
                    )
                },
                errors=(400, 401, 403, 404, 409, 413, 503),
            )
        },
        f"{API}/videos/shares/{{share_id}}": {
            "delete": operation(
                "deleteShare",
                "Revoke a share",
                tag="media",
                parameters=[path_param("share_id", "The share's id.")],
                responses={204: ok("Revoked.")},
                errors=(400, 401, 403, 404, 409, 503),
            ),
        },
        "/api/v1/videos/play/{token}/{path}": {
            "get": play("GET"),
            "head": play("HEAD"),
        },
    }


def play(method: str) -> dict[str, Any]:
    head = method == "HEAD"
    cors = {
        "Access-Control-Allow-Origin": header(
            "`*`: any player may fetch it.", {"type": "string", "const": "*"}
        )
    }
    content = None if head else ANY_BYTES
    parameters = [
        path_param("token", "The share token: the only credential playback needs."),
        path_param("path", "An output's path below the job's output prefix."),
        *READ_PARAMETERS[3:],
    ]
    return operation(
        f"{method.lower()}Shared",
        "Play a shared job's output (playlists, manifests, segments)",
        tag="media",
        description="Public: the token in the path is the credential. Answered as an object "
        "read (ranges, conditions, headers). An expired token is 403 SignatureExpired, an "
        "altered one 403 SignatureInvalid, a revoked share 404 NoSuchShare.",
        security=PUBLIC,
        parameters=parameters,
        head=head,
        responses={
            200: ok("The output.", headers={**read_headers(), **cors}, content=content),
            206: ok(
                "A range of it.", headers={**read_headers(ranged=True), **cors}, content=content
            ),
            304: ok(
                "Not modified.",
                headers={
                    **{k: v for k, v in read_headers().items() if k != "Content-Length"},
                    **cors,
                },
            ),
        },
        errors=(400, 403, 404, 412, 416),
    )
