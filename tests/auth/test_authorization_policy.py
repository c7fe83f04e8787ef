"""The policy matrix: every action for admin, owner and non-owner, and the narrower credentials."""

from __future__ import annotations

import pytest

from service.auth.auth_errors import AccessDeniedError
from service.auth.policy import Action, Principal, Resource, Scope, Via, authorize, is_allowed

ADMIN = Principal("u_admin", "admin", "admin", "bk_ADMINKEY", "access_key")
ALICE = Principal("u_alice", "alice", "user", "bk_ALICEKEY", "access_key")
BOB = Principal("u_bob", "bob", "user", "token", "token")

# The expected classification, written out independently of the policy's own table.
ANY_USER = {Action.BUCKET_LIST, Action.BUCKET_CREATE, Action.ACCESS_KEY_LIST}
ADMIN_ONLY = {
    Action.USER_LIST,
    Action.USER_CREATE,
    Action.USER_DELETE,
    Action.SYSTEM_INFO,
    Action.SYSTEM_PERFORMANCE,
    Action.METRICS_READ,
    Action.SYSTEM_MAINTENANCE,
    Action.AUDIT_READ,
    Action.VIDEO_WORKER_LIST,
}
BUCKET_OWNER = {
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
}
SELF_ONLY = {Action.USER_READ, Action.USER_UPDATE}
KEY_OWNER = {
    Action.ACCESS_KEY_READ,
    Action.ACCESS_KEY_CREATE,
    Action.ACCESS_KEY_UPDATE,
    Action.ACCESS_KEY_DELETE,
}
SHARE_ONLY = {Action.VIDEO_SHARE_PLAY}
CATEGORIES = [ANY_USER, ADMIN_ONLY, BUCKET_OWNER, SELF_ONLY, KEY_OWNER, SHARE_ONLY]
NORMAL_ACTIONS = [action for action in Action if action not in SHARE_ONLY]


def owned_by(action: Action, owner_id: str | None) -> Resource:
    """The resource an action takes, owned by ``owner_id`` where ownership applies."""
    if action.scope is Scope.SERVICE or owner_id is None:
        return Resource.service()
    if action.scope is Scope.BUCKET:
        return Resource.bucket(owner_id)
    if action.scope is Scope.USER:
        return Resource.user(owner_id)
    return Resource.access_key(owner_id)


def test_every_action_is_classified_exactly_once() -> None:
    for action in Action:
        assert sum(action in category for category in CATEGORIES) == 1, action


def test_action_names_are_unique_resource_verb_pairs() -> None:
    values = [action.value for action in Action]
    assert len(set(values)) == len(values)
    assert all(value.count(":") == 1 for value in values)


@pytest.mark.parametrize("action", NORMAL_ACTIONS, ids=lambda action: action.value)
def test_admin_may_do_everything_to_anyones_resources(action: Action) -> None:
    assert is_allowed(ADMIN, action, owned_by(action, "u_alice"))
    assert is_allowed(ADMIN, action, owned_by(action, "u_admin"))


@pytest.mark.parametrize("action", NORMAL_ACTIONS, ids=lambda action: action.value)
def test_user_on_its_own_resources(action: Action) -> None:
    expected = action not in ADMIN_ONLY
    assert is_allowed(ALICE, action, owned_by(action, "u_alice")) is expected


@pytest.mark.parametrize("action", NORMAL_ACTIONS, ids=lambda action: action.value)
def test_user_on_someone_elses_resources(action: Action) -> None:
    expected = action in ANY_USER
    assert is_allowed(ALICE, action, owned_by(action, "u_bob")) is expected


@pytest.mark.parametrize("action", NORMAL_ACTIONS, ids=lambda action: action.value)
def test_token_and_access_key_principals_get_the_same_answers(action: Action) -> None:
    bob_by_key = Principal("u_bob", "bob", "user", "bk_BOBKEY", "access_key")
    for owner in ("u_bob", "u_alice"):
        resource = owned_by(action, owner)
        assert is_allowed(BOB, action, resource) is is_allowed(bob_by_key, action, resource)


@pytest.mark.parametrize("field", ["role", "status"])
def test_user_may_not_change_its_own_role_or_status(field: str) -> None:
    assert not is_allowed(ALICE, Action.USER_UPDATE, Resource.user("u_alice", [field]))
    assert not is_allowed(ALICE, Action.USER_UPDATE, Resource.user("u_alice", ["password", field]))


def test_user_may_change_its_own_password() -> None:
    assert is_allowed(ALICE, Action.USER_UPDATE, Resource.user("u_alice", ["password"]))


def test_admin_may_change_any_role_and_status() -> None:
    for user_id in ("u_alice", "u_admin"):
        resource = Resource.user(user_id, ["role", "status", "password"])
        assert is_allowed(ADMIN, Action.USER_UPDATE, resource)


@pytest.mark.parametrize("role", ["admin", "user"])
@pytest.mark.parametrize("action", list(Action), ids=lambda action: action.value)
def test_presigned_requests_may_only_read_or_write_objects(role: str, action: Action) -> None:
    principal = Principal("u_alice", "alice", role, "bk_ALICEKEY", "presign")  # type: ignore[arg-type]
    expected = action in {Action.OBJECT_READ, Action.OBJECT_WRITE}
    assert is_allowed(principal, action, owned_by(action, "u_alice")) is expected


def test_presigned_request_of_a_user_still_needs_its_bucket() -> None:
    principal = Principal("u_alice", "alice", "user", "bk_ALICEKEY", "presign")
    assert not is_allowed(principal, Action.OBJECT_READ, Resource.bucket("u_bob"))


@pytest.mark.parametrize("action", list(Action), ids=lambda action: action.value)
def test_share_tokens_may_only_play_and_only_share_tokens_may_play(action: Action) -> None:
    share = Principal("u_alice", "alice", "user", "sh_1", "share")
    assert is_allowed(share, action, owned_by(action, "u_alice")) is (action in SHARE_ONLY)


@pytest.mark.parametrize("via", ["access_key", "token", "presign"])
def test_no_other_credential_may_play_a_share(via: Via) -> None:
    principal = Principal("u_admin", "admin", "admin", "x", via)
    assert not is_allowed(principal, Action.VIDEO_SHARE_PLAY, Resource.service())


@pytest.mark.parametrize("action", list(Action), ids=lambda action: action.value)
def test_resource_of_the_wrong_scope_is_a_caller_bug(action: Action) -> None:
    wrong = Resource.bucket("u_x") if action.scope is not Scope.BUCKET else Resource.service()
    with pytest.raises(ValueError):
        is_allowed(ADMIN, action, wrong)


def test_authorize_raises_access_denied_with_detail_for_the_log_only() -> None:
    with pytest.raises(AccessDeniedError) as caught:
        authorize(ALICE, Action.BUCKET_DELETE, Resource.bucket("u_bob"))
    assert caught.value.code == "AccessDenied"
    assert caught.value.status == 403
    assert "bucket:delete" in (caught.value.log_detail or "")
    assert "alice" not in caught.value.message


def test_authorize_returns_quietly_when_allowed() -> None:
    for principal in (ALICE, ADMIN):
        authorize(principal, Action.BUCKET_DELETE, Resource.bucket("u_alice"))
    assert is_allowed(ALICE, Action.BUCKET_DELETE, Resource.bucket("u_alice"))
