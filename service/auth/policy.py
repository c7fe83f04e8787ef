"""Who may do what: the principal, the actions, and the one authorisation decision.

Every handler names its ``Action`` and the ``Resource`` it touches, and calls
``authorize(principal, action, resource)``, which raises ``AccessDeniedError`` or returns.
All rules live in ``is_allowed``; listings are filtered with the same rules (keep an item
when ``is_allowed`` grants its read action), so no handler holds its own idea of access.

The rules:

- ``admin`` may do everything.
- ``user`` may list buckets and create buckets (owned by itself); everything inside a bucket
  (the bucket itself, its objects, versions, multipart uploads, images, video jobs and
  shares, presigning) only in buckets it owns.
- ``user`` may read and change only itself among users, and not its own ``role`` or
  ``status``; it may list, create, change and delete only its own access keys.
- Only ``admin`` may list, create or delete users, read system info, performance and
  metrics, or read the audit log; only an admin's request may bypass a governance retention
  (``service.http.lock_handlers``).
- The credential narrows this further: a presigned request (``via="presign"``) may only read
  or write an object (the signature has already tied it to one object and method), and a
  share token (``via="share"``) may only play a shared video, which nothing else may.
- A media fleet job token (``via="job"``) carries a ``JobGrant``: it may only read its job's
  source object and open multipart uploads (and send their parts) under its job's output
  prefix, in its job's bucket, whoever owns it; ``authorize_key`` checks the key, which
  the actions here do not see.

Thread-safety: pure, immutable data; safe from any thread.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from service.auth.auth_errors import AccessDeniedError

Role = Literal["admin", "user"]
Via = Literal["access_key", "token", "presign", "share", "job"]


@dataclass(frozen=True, slots=True)
class JobGrant:
    """What a fleet job token reaches: one bucket, one source key, one key prefix."""

    bucket: str
    source_key: str
    prefix: str


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller: a user, and the credential it presented."""

    user_id: str
    username: str
    role: Role
    credential_id: str
    """Access key id, token subject, presign ``X-Credential``, share id or job attempt (for
    the logs)."""
    via: Via
    grant: JobGrant | None = None
    """For ``via="job"`` only: the objects the token reaches."""


class Scope(enum.Enum):
    """What kind of resource an action applies to."""

    SERVICE = "service"
    """No particular resource (listing, creating, system-wide reads)."""
    BUCKET = "bucket"
    """A bucket or anything in it; the resource carries the bucket's owner."""
    USER = "user"
    """One user; the resource carries its id and the fields a change would alter."""
    ACCESS_KEY = "access_key"
    """One access key (or one to be created); the resource carries its owning user."""


class _Rule(enum.Enum):
    ADMIN_ONLY = "admin only"
    ANY_USER = "any user"
    OWNER = "the owner"
    SELF = "the user itself"
    SHARE_HOLDER = "a share token"


class Action(enum.Enum):
    """Everything the API lets a caller do, named ``<resource>:<verb>`` for logs and metrics."""

    BUCKET_LIST = "bucket:list"
    BUCKET_CREATE = "bucket:create"
    BUCKET_READ = "bucket:read"
    BUCKET_UPDATE = "bucket:update"
    BUCKET_DELETE = "bucket:delete"
    OBJECT_LIST = "object:list"
    """Listing objects or versions."""
    OBJECT_READ = "object:read"
    """GET or HEAD of an object."""
    OBJECT_WRITE = "object:write"
    OBJECT_DELETE = "object:delete"
    PRESIGN_CREATE = "presign:create"
    MULTIPART_CREATE = "multipart:create"
    MULTIPART_UPLOAD_PART = "multipart:upload_part"
    MULTIPART_READ = "multipart:read"
    MULTIPART_COMPLETE = "multipart:complete"
    MULTIPART_ABORT = "multipart:abort"
    MULTIPART_LIST = "multipart:list"
    IMAGE_TRANSFORM = "image:transform"
    IMAGE_OPTIMIZE = "image:optimize"
    VIDEO_THUMBNAIL = "video:thumbnail"
    VIDEO_JOB_CREATE = "video_job:create"
    VIDEO_JOB_READ = "video_job:read"
    VIDEO_JOB_LIST = "video_job:list"
    VIDEO_JOB_CANCEL = "video_job:cancel"
    VIDEO_SHARE_CREATE = "video_share:create"
    VIDEO_SHARE_DELETE = "video_share:delete"
    VIDEO_SHARE_PLAY = "video_share:play"
    VIDEO_WORKER_LIST = "video_worker:list"
    """The media fleet's workers (admin)."""
    USER_LIST = "user:list"
    USER_CREATE = "user:create"
    USER_READ = "user:read"
    USER_UPDATE = "user:update"
    USER_DELETE = "user:delete"
    ACCESS_KEY_LIST = "access_key:list"
    """Any user may list; the listing holds only keys that pass ``ACCESS_KEY_READ``."""
    ACCESS_KEY_READ = "access_key:read"
    ACCESS_KEY_CREATE = "access_key:create"
    ACCESS_KEY_UPDATE = "access_key:update"
    ACCESS_KEY_DELETE = "access_key:delete"
    SYSTEM_INFO = "system:info"
    SYSTEM_PERFORMANCE = "system:performance"
    METRICS_READ = "metrics:read"
    SYSTEM_MAINTENANCE = "system:maintenance"
    """Running background work now: a lifecycle pass, a scrub."""
    OBJECT_LOCK_READ = "object_lock:read"
    """Reading a version's retention or legal hold."""
    OBJECT_LOCK_WRITE = "object_lock:write"
    """Setting a version's retention or legal hold (a governance bypass: admins only)."""
    AUDIT_READ = "audit:read"
    """Reading and verifying the audit log."""

    @property
    def scope(self) -> Scope:
        """The kind of ``Resource`` this action must be authorised against."""
        return _RULES[self][0]


_SERVICE, _BUCKET, _USER, _KEY = Scope.SERVICE, Scope.BUCKET, Scope.USER, Scope.ACCESS_KEY
_RULES: dict[Action, tuple[Scope, _Rule]] = {
    Action.BUCKET_LIST: (_SERVICE, _Rule.ANY_USER),
    Action.BUCKET_CREATE: (_SERVICE, _Rule.ANY_USER),
    **{
        action: (_BUCKET, _Rule.OWNER)
        for action in (
            Action.BUCKET_READ,
            Action.BUCKET_UPDATE,
            Action.BUCKET_DELETE,
            Action.OBJECT_LIST,
            Action.OBJECT_READ,
            Action.OBJECT_WRITE,
            Action.OBJECT_DELETE,
            Action.PRESIGN_CREATE,
            Action.MULTIPART_CREATE,
            Action.MULTIPART_UPLOAD_PART,
            Action.MULTIPART_READ,
            Action.MULTIPART_COMPLETE,
            Action.MULTIPART_ABORT,
            Action.MULTIPART_LIST,
            Action.IMAGE_TRANSFORM,
            Action.IMAGE_OPTIMIZE,
            Action.VIDEO_THUMBNAIL,
            Action.VIDEO_JOB_CREATE,
            Action.VIDEO_JOB_READ,
            Action.VIDEO_JOB_LIST,
            Action.VIDEO_JOB_CANCEL,
            Action.VIDEO_SHARE_CREATE,
            Action.VIDEO_SHARE_DELETE,
            Action.OBJECT_LOCK_READ,
            Action.OBJECT_LOCK_WRITE,
        )
    },
    Action.VIDEO_SHARE_PLAY: (_SERVICE, _Rule.SHARE_HOLDER),
    Action.VIDEO_WORKER_LIST: (_SERVICE, _Rule.ADMIN_ONLY),
    Action.USER_LIST: (_SERVICE, _Rule.ADMIN_ONLY),
    Action.USER_CREATE: (_SERVICE, _Rule.ADMIN_ONLY),
    Action.USER_READ: (_USER, _Rule.SELF),
    Action.USER_UPDATE: (_USER, _Rule.SELF),
    Action.USER_DELETE: (_USER, _Rule.ADMIN_ONLY),
    Action.ACCESS_KEY_LIST: (_SERVICE, _Rule.ANY_USER),
    Action.ACCESS_KEY_READ: (_KEY, _Rule.OWNER),
    Action.ACCESS_KEY_CREATE: (_KEY, _Rule.OWNER),
    Action.ACCESS_KEY_UPDATE: (_KEY, _Rule.OWNER),
    Action.ACCESS_KEY_DELETE: (_KEY, _Rule.OWNER),
    Action.SYSTEM_INFO: (_SERVICE, _Rule.ADMIN_ONLY),
    Action.SYSTEM_PERFORMANCE: (_SERVICE, _Rule.ADMIN_ONLY),
    Action.METRICS_READ: (_SERVICE, _Rule.ADMIN_ONLY),
    Action.SYSTEM_MAINTENANCE: (_SERVICE, _Rule.ADMIN_ONLY),
    Action.AUDIT_READ: (_SERVICE, _Rule.ADMIN_ONLY),
}

_PRESIGN_ACTIONS = frozenset({Action.OBJECT_READ, Action.OBJECT_WRITE})
_SHARE_ACTIONS = frozenset({Action.VIDEO_SHARE_PLAY})
_JOB_ACTIONS = frozenset(
    {Action.OBJECT_READ, Action.MULTIPART_CREATE, Action.MULTIPART_UPLOAD_PART}
)
_JOB_WRITES = frozenset({Action.MULTIPART_CREATE, Action.MULTIPART_UPLOAD_PART})
_SELF_PROTECTED_FIELDS = frozenset({"role", "status"})
"""User fields a non-admin may not change on itself."""


@dataclass(frozen=True, slots=True)
class Resource:
    """What an action touches, reduced to what the rules need. Build with the class methods."""

    scope: Scope
    owner_id: str | None = None
    """Bucket owner, the user itself, or the access key's owner; None for SERVICE."""
    changed_fields: frozenset[str] = field(default_factory=frozenset)
    """For USER_UPDATE: the user fields the request would change."""

    @classmethod
    def service(cls) -> Resource:
        return cls(Scope.SERVICE)

    @classmethod
    def bucket(cls, owner_id: str) -> Resource:
        """A bucket, or an object, upload, image, job or share in it, owned by ``owner_id``."""
        return cls(Scope.BUCKET, owner_id)

    @classmethod
    def user(cls, user_id: str, changed_fields: Iterable[str] = ()) -> Resource:
        """User ``user_id``; for an update, the fields whose values would change.

        A field sent with its current value may be left out of ``changed_fields``.
        """
        return cls(Scope.USER, user_id, frozenset(changed_fields))

    @classmethod
    def access_key(cls, owner_id: str) -> Resource:
        """An access key of user ``owner_id`` (for creation: the user it will belong to)."""
        return cls(Scope.ACCESS_KEY, owner_id)


def is_allowed(principal: Principal, action: Action, resource: Resource) -> bool:
    """Whether ``principal`` may perform ``action`` on ``resource`` (rules: module docstring).

    Raises ``ValueError`` if ``resource`` is not of the action's scope: that is a bug in the
    caller, not a reason to answer 403.
    """
    scope, rule = _RULES[action]
    if resource.scope is not scope:
        raise ValueError(f"{action.value} applies to a {scope.value}, not a {resource.scope.value}")
    if principal.via == "presign" and action not in _PRESIGN_ACTIONS:
        return False
    if (principal.via == "share") != (action in _SHARE_ACTIONS):
        return False
    if principal.via == "job":
        return action in _JOB_ACTIONS and principal.grant is not None
    if rule is _Rule.SHARE_HOLDER or principal.role == "admin":
        return True
    if rule is _Rule.ANY_USER:
        return True
    if rule is _Rule.OWNER:
        return resource.owner_id == principal.user_id
    if rule is _Rule.SELF:
        return resource.owner_id == principal.user_id and not (
            resource.changed_fields & _SELF_PROTECTED_FIELDS
        )
    return False  # ADMIN_ONLY, and the principal is not an admin


def authorize(principal: Principal, action: Action, resource: Resource) -> None:
    """Return if ``is_allowed``, else raise ``AccessDeniedError`` (403 AccessDenied)."""
    if not is_allowed(principal, action, resource):
        raise AccessDeniedError(
            log_detail=(
                f"{principal.username} ({principal.role}, via {principal.via}"
                f" {principal.credential_id}) may not {action.value}"
            )
        )


def authorize_key(principal: Principal, action: Action, bucket: str, key: str) -> None:
    """For a job token: ``key`` of ``bucket`` must be its source (reads) or under its prefix
    (writes), else ``AccessDeniedError``. Other credentials were decided by ``authorize``."""
    grant = principal.grant
    if principal.via != "job":
        return
    allowed = grant is not None and bucket == grant.bucket
    if allowed and grant is not None:
        if action in _JOB_WRITES:
            allowed = key.startswith(grant.prefix) and len(key) > len(grant.prefix)
        else:
            allowed = action is Action.OBJECT_READ and key == grant.source_key
    if not allowed:
        raise AccessDeniedError(
            "a job token reaches only its job's source and output prefix",
            log_detail=f"job token {principal.credential_id} may not {action.value} {key!r}",
        )
