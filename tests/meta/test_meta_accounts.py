"""Users and access keys: uniqueness, updates, cascades and batched last-use times."""

from __future__ import annotations

from service.engine.key_usage import KeyUsage
from service.meta import AccessKey, MetaState, User, records
from tests.meta.factory import applied


def user(user_id: str, username: str, at: int = 1) -> records.Event:
    return records.user_created(
        user_id=user_id, username=username, password_hash="$argon2id$x", role="user", at=at
    )


def key(key_id: str, user_id: str, at: int = 2) -> records.Event:
    return records.access_key_created(
        access_key_id=key_id, user_id=user_id, name="laptop", secret_digest="d" * 64, at=at
    )


def test_created_user_is_active_and_found_by_id_and_name() -> None:
    state = MetaState()
    created = applied(state, user("u1", "ada")).value
    assert created == User("u1", "ada", "$argon2id$x", "user", "active", 1, 1)
    assert state.get_user("u1") == created == state.user_by_username("ada")
    assert state.user_by_username("bob") is None


def test_usernames_and_user_ids_are_unique() -> None:
    state = MetaState()
    applied(state, user("u1", "ada"))
    assert state.apply(user("u2", "ada")).error_code == "UserAlreadyExists"
    assert state.apply(user("u1", "bob")).error_code == "UserAlreadyExists"
    assert [u.username for u in state.list_users()] == ["ada"]


def test_usernames_are_unique_whatever_the_case() -> None:
    """Two serving processes may both pass the HTTP layer's case-folded check at once."""
    state = MetaState()
    applied(state, user("u1", "Carol"))
    for name in ("carol", "CAROL", "cArOl"):
        assert state.apply(user(f"u-{name}", name)).error_code == "UserAlreadyExists"
    assert state.user_by_username("carol") is None


def test_user_update_changes_the_named_fields() -> None:
    state = MetaState()
    applied(state, user("u1", "ada"))
    changes = {"status": "disabled", "role": "admin", "password_hash": "$argon2id$y"}
    updated = applied(state, records.user_updated(user_id="u1", changes=changes, at=9)).value
    assert updated == User("u1", "ada", "$argon2id$y", "admin", "disabled", 1, 9)
    missing = records.user_updated(user_id="u9", changes={"role": "user"}, at=9)
    assert state.apply(missing).error_code == "NoSuchUser"


def test_deleting_a_user_deletes_its_access_keys_only() -> None:
    state = MetaState()
    applied(state, user("u1", "ada"))
    applied(state, user("u2", "bob"))
    applied(state, key("bk_1", "u1"))
    applied(state, key("bk_2", "u2"))
    applied(state, records.user_deleted(user_id="u1", at=5))
    assert state.get_user("u1") is None and state.user_by_username("ada") is None
    assert state.get_access_key("bk_1") is None
    assert [k.access_key_id for k in state.list_access_keys()] == ["bk_2"]
    assert state.apply(records.user_deleted(user_id="u1", at=6)).error_code == "NoSuchUser"
    applied(state, user("u3", "ada"))


def test_access_keys_need_an_existing_user_and_a_fresh_id() -> None:
    state = MetaState()
    assert state.apply(key("bk_1", "u1")).error_code == "NoSuchUser"
    applied(state, user("u1", "ada"))
    created = applied(state, key("bk_1", "u1")).value
    assert created == AccessKey("bk_1", "u1", "laptop", "d" * 64, "active", 2, 2)
    assert state.apply(key("bk_1", "u1")).error_code == "InvalidState"


def test_access_key_status_changes_and_deletion() -> None:
    state = MetaState()
    applied(state, user("u1", "ada"))
    applied(state, key("bk_1", "u1"))
    revoke = records.access_key_updated(access_key_id="bk_1", status="revoked", at=7)
    revoked = applied(state, revoke).value
    assert isinstance(revoked, AccessKey) and (revoked.status, revoked.updated_at) == ("revoked", 7)
    applied(state, records.access_key_deleted(access_key_id="bk_1", at=8))
    assert state.get_access_key("bk_1") is None
    assert state.apply(revoke).error_code == "NoSuchAccessKey"
    gone = records.access_key_deleted(access_key_id="bk_1", at=9)
    assert state.apply(gone).error_code == "NoSuchAccessKey"


def test_list_access_keys_filters_by_user_oldest_first() -> None:
    state = MetaState()
    applied(state, user("u1", "ada"))
    applied(state, user("u2", "bob"))
    applied(state, key("bk_b", "u1", at=3))
    applied(state, key("bk_a", "u1", at=4))
    applied(state, key("bk_c", "u2", at=2))
    assert [k.access_key_id for k in state.list_access_keys("u1")] == ["bk_b", "bk_a"]
    assert [k.access_key_id for k in state.list_access_keys()] == ["bk_c", "bk_b", "bk_a"]


def test_uses_are_pending_until_an_access_keys_used_event_makes_them_durable() -> None:
    state = MetaState()
    usage = KeyUsage()
    applied(state, user("u1", "ada"))
    applied(state, key("bk_1", "u1"))
    assert usage.last_used(state, "bk_1") is None
    usage.touch("bk_1", 100)
    usage.touch("bk_1", 90)
    usage.touch("bk_unknown", 100)
    assert state.key_last_used("bk_1") is None  # noting a use leaves the state alone
    assert usage.last_used(state, "bk_1") == 100
    batch = usage.pending(state)
    assert batch == {"bk_1": 100}
    assert usage.pending(state) == batch
    usage.touch("bk_1", 120)
    applied(state, records.access_keys_used(last_used=batch, at=110))
    assert state.key_last_used("bk_1") == 100
    assert usage.pending(state) == {"bk_1": 120}
    applied(state, records.access_keys_used(last_used={"bk_1": 120, "bk_gone": 5}, at=130))
    assert usage.pending(state) == {}
    assert state.key_last_used("bk_1") == usage.last_used(state, "bk_1") == 120


def test_a_deleted_keys_uses_are_dropped_from_the_batch() -> None:
    state = MetaState()
    usage = KeyUsage()
    applied(state, user("u1", "ada"))
    applied(state, key("bk_1", "u1"))
    usage.touch("bk_1", 100)
    applied(state, records.access_key_deleted(access_key_id="bk_1", at=101))
    assert usage.pending(state) == {}


def test_only_journaled_last_use_survives_a_rebuild() -> None:
    state = MetaState()
    applied(state, user("u1", "ada"))
    applied(state, key("bk_1", "u1"))
    applied(state, records.access_keys_used(last_used={"bk_1": 50}, at=60))
    rebuilt = MetaState.restore(state.freeze())
    assert rebuilt.key_last_used("bk_1") == 50
    assert rebuilt == state
