"""Users and access keys: their part of the metadata state and of ``apply``.

Kept apart from buckets and objects because nothing here touches payloads or buckets
(a deleted user's buckets keep their ``owner`` id; who may then use them is policy's call).

Last use of an access key is journaled in batches (``AccessKeysUsed``); the uses noted since
the last batch live outside the state, in ``service.engine.key_usage``.

Thread-safety: like ``MetaState``, mutate only on the event-loop thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from service.meta import fields, records
from service.meta.model import ACTIVE, AccessKey, User
from service.meta.outcome import Outcome, accepted, rejected

Handler = Callable[[Mapping[str, Any]], Outcome]


class Accounts:
    """Users by id and by username, access keys by id, and their last-use times."""

    def __init__(self) -> None:
        self._users: dict[str, User] = {}
        self._user_ids_by_name: dict[str, str] = {}
        self._keys: dict[str, AccessKey] = {}
        self._durable_last_used: dict[str, int] = {}

    def load(
        self, users: Mapping[str, User], keys: Mapping[str, AccessKey], last_used: Mapping[str, int]
    ) -> None:
        """Hold copies of the given records (from a snapshot) instead of the current ones."""
        self._users = dict(users)
        self._user_ids_by_name = {user.username: user.user_id for user in users.values()}
        self._keys = dict(keys)
        self._durable_last_used = dict(last_used)

    def images(self) -> tuple[dict[str, User], dict[str, AccessKey], dict[str, int]]:
        """Shallow copies of the durable containers (for a snapshot)."""
        return dict(self._users), dict(self._keys), dict(self._durable_last_used)

    def handlers(self) -> dict[str, Handler]:
        return {
            records.USER_CREATED: self._user_created,
            records.USER_UPDATED: self._user_updated,
            records.USER_DELETED: self._user_deleted,
            records.ACCESS_KEY_CREATED: self._key_created,
            records.ACCESS_KEY_UPDATED: self._key_updated,
            records.ACCESS_KEY_DELETED: self._key_deleted,
            records.ACCESS_KEYS_USED: self._keys_used,
        }

    # -- apply --------------------------------------------------------------------------

    def _user_created(self, event: Mapping[str, Any]) -> Outcome:
        user_id = fields.text(event, "user_id")
        username = fields.text(event, "username")
        password_hash = fields.text(event, "password_hash")
        role = fields.text(event, "role")
        at = fields.integer(event, "at")
        if user_id in self._users:
            return rejected("UserAlreadyExists", f"user id {user_id!r} already exists")
        folded = username.casefold()
        # Unique whatever the case, as the HTTP layer compares them (``limits.caps.fold``);
        # checked here too, since two serving processes may both pass that check at once.
        if any(name.casefold() == folded for name in self._user_ids_by_name):
            return rejected("UserAlreadyExists", f"username {username!r} is taken")
        user = User(user_id, username, password_hash, role, ACTIVE, at, at)
        self._users[user_id] = user
        self._user_ids_by_name[username] = user_id
        return accepted(user)

    def _user_updated(self, event: Mapping[str, Any]) -> Outcome:
        user_id = fields.text(event, "user_id")
        changes = fields.mapping(event, "changes")
        at = fields.integer(event, "at")
        updates: dict[str, Any] = {
            name: fields.text(changes, name)
            for name in sorted(records.USER_CHANGE_FIELDS & set(changes))
        }
        user = self._users.get(user_id)
        if user is None:
            return rejected("NoSuchUser", f"no user {user_id!r}")
        updated = replace(user, updated_at=at, **updates)
        self._users[user_id] = updated
        return accepted(updated)

    def _user_deleted(self, event: Mapping[str, Any]) -> Outcome:
        user_id = fields.text(event, "user_id")
        fields.integer(event, "at")
        user = self._users.pop(user_id, None)
        if user is None:
            return rejected("NoSuchUser", f"no user {user_id!r}")
        del self._user_ids_by_name[user.username]
        for key in [k for k in self._keys.values() if k.user_id == user_id]:
            self._forget_key(key.access_key_id)
        return accepted(user)

    def _key_created(self, event: Mapping[str, Any]) -> Outcome:
        key_id = fields.text(event, "access_key_id")
        user_id = fields.text(event, "user_id")
        name = fields.text(event, "name")
        digest = fields.text(event, "secret_digest")
        at = fields.integer(event, "at")
        if user_id not in self._users:
            return rejected("NoSuchUser", f"no user {user_id!r}")
        if key_id in self._keys:
            return rejected("InvalidState", f"access key {key_id!r} already exists")
        key = AccessKey(key_id, user_id, name, digest, ACTIVE, at, at)
        self._keys[key_id] = key
        return accepted(key)

    def _key_updated(self, event: Mapping[str, Any]) -> Outcome:
        key_id = fields.text(event, "access_key_id")
        status = fields.text(event, "status")
        at = fields.integer(event, "at")
        key = self._keys.get(key_id)
        if key is None:
            return rejected("NoSuchAccessKey", f"no access key {key_id!r}")
        updated = replace(key, status=status, updated_at=at)
        self._keys[key_id] = updated
        return accepted(updated)

    def _key_deleted(self, event: Mapping[str, Any]) -> Outcome:
        key_id = fields.text(event, "access_key_id")
        fields.integer(event, "at")
        key = self._keys.get(key_id)
        if key is None:
            return rejected("NoSuchAccessKey", f"no access key {key_id!r}")
        self._forget_key(key_id)
        return accepted(key)

    def _keys_used(self, event: Mapping[str, Any]) -> Outcome:
        last_used = fields.integer_map(event, "last_used")
        fields.integer(event, "at")
        for key_id, at_ms in last_used.items():
            if key_id not in self._keys:
                continue  # deleted since the batch was taken
            durable = max(self._durable_last_used.get(key_id, at_ms), at_ms)
            self._durable_last_used[key_id] = durable
        return accepted(None)

    def _forget_key(self, key_id: str) -> None:
        del self._keys[key_id]
        self._durable_last_used.pop(key_id, None)

    # -- reads --------------------------------------------------------------------------

    def get_user(self, user_id: str) -> User | None:
        return self._users.get(user_id)

    def user_by_username(self, username: str) -> User | None:
        user_id = self._user_ids_by_name.get(username)
        return None if user_id is None else self._users[user_id]

    def list_users(self) -> list[User]:
        """All users by username."""
        return sorted(self._users.values(), key=lambda user: user.username)

    def get_access_key(self, access_key_id: str) -> AccessKey | None:
        return self._keys.get(access_key_id)

    def list_access_keys(self, user_id: str | None) -> list[AccessKey]:
        """The keys of ``user_id`` (all keys for None), oldest first."""
        keys = [k for k in self._keys.values() if user_id is None or k.user_id == user_id]
        return sorted(keys, key=lambda k: (k.created_at, k.access_key_id))

    def last_used(self, access_key_id: str) -> int | None:
        """The key's journaled last use; None if none was journaled."""
        return self._durable_last_used.get(access_key_id)
