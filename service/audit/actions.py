"""The ``action`` of an audit record: what a request asked to do, by route and method.

Named as the authorisation names it (``service.auth.Action`` values), so a refused request
and an allowed one of the same kind carry the same action, whether it failed at
authentication (401), at authorisation (403) or later. ``auth:login`` is the one action of
no ``Action`` (a login authenticates, nothing authorises it). A test checks that every
route and method the server answers with credentials is in ``ACTIONS``.

Pure: constants. Thread-safety: immutable, safe from any thread.
"""

from __future__ import annotations

from service.auth import Action

LOGIN = "auth:login"
_ATTEMPT = "video_attempt"
"""A media worker's calls with its job token (``service.http.fleet_handlers``): no ``Action``
authorises them, the token does, so they are named here."""
_J = "/api/v1/videos/jobs/{job_id}"
_B = "/api/v1/buckets/{bucket}"
_O = f"{_B}/objects/{{key}}"
_ACTIONS: dict[tuple[str, str], Action | str] = {
    ("/api/v1/buckets", "GET"): Action.BUCKET_LIST,
    ("/api/v1/buckets", "POST"): Action.BUCKET_CREATE,
    (_B, "GET"): Action.BUCKET_READ,
    (_B, "PATCH"): Action.BUCKET_UPDATE,
    (_B, "DELETE"): Action.BUCKET_DELETE,
    (f"{_B}/objects", "GET"): Action.OBJECT_LIST,
    (f"{_B}/versions", "GET"): Action.OBJECT_LIST,
    (_O, "GET"): Action.OBJECT_READ,
    (_O, "HEAD"): Action.OBJECT_READ,
    (_O, "PUT"): Action.OBJECT_WRITE,
    (_O, "DELETE"): Action.OBJECT_DELETE,
    (f"{_O}/retention", "GET"): Action.OBJECT_LOCK_READ,
    (f"{_O}/retention", "PUT"): Action.OBJECT_LOCK_WRITE,
    (f"{_O}/legal-hold", "GET"): Action.OBJECT_LOCK_READ,
    (f"{_O}/legal-hold", "PUT"): Action.OBJECT_LOCK_WRITE,
    (f"{_B}/batch", "POST"): Action.OBJECT_WRITE,
    (f"{_B}/images/{{key}}", "GET"): Action.IMAGE_TRANSFORM,
    ("/api/v1/images/optimize", "POST"): Action.IMAGE_OPTIMIZE,
    ("/api/v1/auth/login", "POST"): LOGIN,
    ("/api/v1/users", "GET"): Action.USER_LIST,
    ("/api/v1/users", "POST"): Action.USER_CREATE,
    ("/api/v1/users/{user_id}", "GET"): Action.USER_READ,
    ("/api/v1/users/{user_id}", "PATCH"): Action.USER_UPDATE,
    ("/api/v1/users/{user_id}", "DELETE"): Action.USER_DELETE,
    ("/api/v1/access-keys", "GET"): Action.ACCESS_KEY_LIST,
    ("/api/v1/access-keys", "POST"): Action.ACCESS_KEY_CREATE,
    ("/api/v1/access-keys/{access_key_id}", "GET"): Action.ACCESS_KEY_READ,
    ("/api/v1/access-keys/{access_key_id}", "PATCH"): Action.ACCESS_KEY_UPDATE,
    ("/api/v1/access-keys/{access_key_id}", "DELETE"): Action.ACCESS_KEY_DELETE,
    ("/api/v1/presign", "POST"): Action.PRESIGN_CREATE,
    ("/api/v1/system/info", "GET"): Action.SYSTEM_INFO,
    ("/api/v1/system/performance", "GET"): Action.SYSTEM_PERFORMANCE,
    ("/api/v1/metrics", "GET"): Action.METRICS_READ,
    ("/api/v1/multipart", "GET"): Action.MULTIPART_LIST,
    ("/api/v1/multipart/init", "POST"): Action.MULTIPART_CREATE,
    ("/api/v1/multipart/{upload_id}", "GET"): Action.MULTIPART_READ,
    ("/api/v1/multipart/{upload_id}", "DELETE"): Action.MULTIPART_ABORT,
    ("/api/v1/multipart/{upload_id}/part", "PUT"): Action.MULTIPART_UPLOAD_PART,
    ("/api/v1/multipart/{upload_id}/complete", "POST"): Action.MULTIPART_COMPLETE,
    ("/api/v1/videos/thumbnails", "POST"): Action.VIDEO_THUMBNAIL,
    ("/api/v1/videos/jobs", "GET"): Action.VIDEO_JOB_LIST,
    ("/api/v1/videos/jobs", "POST"): Action.VIDEO_JOB_CREATE,
    ("/api/v1/videos/jobs/{job_id}", "GET"): Action.VIDEO_JOB_READ,
    ("/api/v1/videos/jobs/{job_id}", "DELETE"): Action.VIDEO_JOB_CANCEL,
    ("/api/v1/videos/shares", "POST"): Action.VIDEO_SHARE_CREATE,
    ("/api/v1/videos/shares/{share_id}", "DELETE"): Action.VIDEO_SHARE_DELETE,
    ("/api/v1/videos/play/{token}/{path}", "GET"): Action.VIDEO_SHARE_PLAY,
    ("/api/v1/videos/play/{token}/{path}", "HEAD"): Action.VIDEO_SHARE_PLAY,
    (f"{_B}/lifecycle", "GET"): Action.BUCKET_READ,
    (f"{_B}/lifecycle", "PUT"): Action.BUCKET_UPDATE,
    (f"{_B}/lifecycle", "DELETE"): Action.BUCKET_UPDATE,
    ("/api/v1/system/lifecycle/run", "POST"): Action.SYSTEM_MAINTENANCE,
    (f"{_B}/events", "GET"): Action.BUCKET_READ,
    (f"{_B}/notifications", "GET"): Action.BUCKET_READ,
    (f"{_B}/notifications", "PUT"): Action.BUCKET_UPDATE,
    (f"{_B}/notifications", "DELETE"): Action.BUCKET_UPDATE,
    ("/api/v1/system/scrub", "GET"): Action.SYSTEM_INFO,
    ("/api/v1/system/scrub", "POST"): Action.SYSTEM_MAINTENANCE,
    ("/api/v1/system/audit", "GET"): Action.AUDIT_READ,
    ("/api/v1/system/audit/verify", "GET"): Action.AUDIT_READ,
    ("/api/v1/replication", "GET"): Action.SYSTEM_INFO,
    ("/api/v1/replication/snapshot", "GET"): Action.SYSTEM_INFO,
    ("/api/v1/replication/secret", "GET"): Action.SYSTEM_INFO,
    ("/api/v1/replication/records", "GET"): Action.SYSTEM_INFO,
    ("/api/v1/replication/payloads/{payload_id}", "GET"): Action.SYSTEM_INFO,
    ("/api/v1/replication/payloads", "GET"): Action.SYSTEM_INFO,
    ("/api/v1/replication/confirm", "GET"): Action.SYSTEM_INFO,
    ("/api/v1/replication/promote", "POST"): Action.SYSTEM_MAINTENANCE,
    ("/api/v1/videos/workers", "GET"): Action.VIDEO_WORKER_LIST,
    (f"{_J}/claim", "POST"): f"{_ATTEMPT}:claim",
    (f"{_J}/heartbeat", "POST"): f"{_ATTEMPT}:heartbeat",
    (f"{_J}/complete", "POST"): f"{_ATTEMPT}:complete",
    (f"{_J}/fail", "POST"): f"{_ATTEMPT}:fail",
    (f"{_J}/outputs", "POST"): f"{_ATTEMPT}:outputs",
}
ACTIONS: dict[tuple[str, str], str] = {
    route: action if isinstance(action, str) else action.value for route, action in _ACTIONS.items()
}
"""``(route template, method) -> action``."""
ADMIN_READS = frozenset(
    action.value
    for action in (
        Action.USER_LIST,
        Action.SYSTEM_INFO,
        Action.SYSTEM_PERFORMANCE,
        Action.METRICS_READ,
        Action.AUDIT_READ,
    )
)
"""Reads only an admin may make: recorded even when reads are not (``SERVICE_AUDIT_READS``)."""


def action_of(route: str, method: str) -> str:
    """The action of a request to ``route`` with ``method`` (for an unknown pair, the pair
    itself, so nothing is lost)."""
    return ACTIONS.get((route, method)) or f"{method} {route}"
