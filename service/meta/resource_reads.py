"""``ResourceReads``: the reads ``MetaState`` hands on to each resource's own module.

Multipart sessions, video jobs and shares, lifecycle rules, webhooks, users and access keys
each keep their state in their own module (``service.meta.upload_state``, ``video_state``,
``lifecycle_state``, ``notification_state``, ``accounts``), changed only by ``apply``. Their
reads are here, apart from the buckets' and objects' own in ``service.meta.state``, so that
each module stays one concern. ``MetaState`` sets the attributes declared below.

Thread-safety: as ``MetaState``: the event-loop thread only.
"""

from __future__ import annotations

from service.meta.accounts import Accounts
from service.meta.lifecycle_state import Lifecycle
from service.meta.model import AccessKey, PartInfo, UploadSession, User
from service.meta.notification_state import Notifications
from service.meta.upload_state import Uploads
from service.meta.video_state import Media


class ResourceReads:
    """Reads of the resources kept in their own modules; see the module docstring."""

    _uploads: Uploads
    _accounts: Accounts
    _media: Media
    _lifecycle: Lifecycle
    _notifications: Notifications

    # -- reads: multipart ---------------------------------------------------------------

    def get_upload(self, upload_id: str) -> UploadSession | None:
        """The session, open or expired-but-not-yet-aborted (compare ``expires_at``)."""
        return self._uploads.get(upload_id)

    def upload_parts(self, upload_id: str) -> list[PartInfo]:
        """The session's parts by part number (empty for an unknown session)."""
        return self._uploads.parts(upload_id)

    def uploads(self, bucket: str | None = None) -> list[UploadSession]:
        """Sessions of ``bucket`` (all for None) by key, then age."""
        return self._uploads.sessions(bucket)

    def expired_uploads(self, now_ms: int) -> list[UploadSession]:
        """Sessions past their ``expires_at``, for the task that journals their expiry."""
        return self._uploads.expired(now_ms)

    # -- reads: video jobs and shares ----------------------------------------------------

    @property
    def media(self) -> Media:
        """Video jobs and shares; read through it, never change it (only ``apply`` does)."""
        return self._media

    @property
    def lifecycle(self) -> Lifecycle:
        """Lifecycle rules per bucket; read through it, never change it."""
        return self._lifecycle

    @property
    def notifications(self) -> Notifications:
        """Webhooks per bucket; read through it, never change it."""
        return self._notifications

    # -- reads: users and access keys ----------------------------------------------------

    def get_user(self, user_id: str) -> User | None:
        return self._accounts.get_user(user_id)

    def user_by_username(self, username: str) -> User | None:
        return self._accounts.user_by_username(username)

    def list_users(self) -> list[User]:
        return self._accounts.list_users()

    def get_access_key(self, access_key_id: str) -> AccessKey | None:
        return self._accounts.get_access_key(access_key_id)

    def list_access_keys(self, user_id: str | None = None) -> list[AccessKey]:
        return self._accounts.list_access_keys(user_id)

    def key_last_used(self, access_key_id: str) -> int | None:
        """The key's journaled last use (ms); None if none was journaled. Uses noted since
        the last ``AccessKeysUsed`` event live in ``service.engine.key_usage``."""
        return self._accounts.last_used(access_key_id)
