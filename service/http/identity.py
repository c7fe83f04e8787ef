"""Users, access keys, login and presigning: ``/api/v1/{users,access-keys,auth,presign}``.

Argon2 hashing and verification run on the executor. Secrets are returned exactly once
(a new access key's ``secret_key``) and never logged; password hashes never leave the
state. Every decision of who may do what is ``service.auth.policy``'s; the handlers only
name the action and the resource. Two rules of their own, where the contract is silent:
a failed login's lockout answers 401 with ``Retry-After`` (the contract has no 429), and
the last active admin can be neither disabled, demoted nor deleted (409 InvalidState), so
the server can never lock its operators out. Usernames are unique and logged in with
without regard to case, and a user holds a bounded number of access keys
(``service.limits.caps``).

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any
from urllib.parse import quote, urlencode

from service.auth import (
    AccountDisabledError,
    Action,
    Resource,
    UnauthorizedError,
    authorize,
    digest_secret,
    generate_access_key,
    hash_password,
    is_allowed,
    issue_token,
    presign_expires_at,
    presign_query,
    validate_expires_in,
    validate_password,
    verify_password,
)
from service.auth.passwords import MAX_PASSWORD_CHARS
from service.common.api_errors import ApiError
from service.common.header_fields import require_content_type
from service.common.names import key_problem
from service.common.timefmt import now_ms, rfc3339_ms, rfc3339_seconds
from service.common.wire import API_PREFIX, MAX_ACCESS_KEY_NAME
from service.http.authn import BEARER_CHALLENGE
from service.http.base import ApiHandler, Home
from service.limits.caps import MAX_ACCESS_KEYS_PER_USER, fold, user_by_any_case
from service.meta import AccessKey, MetaState, User, records
from service.ops.buckets import outcome_error, require_bucket

USERNAME_PATTERN = re.compile(r"^[A-Za-z0-9._@-]{3,64}$")
ROLES = ("admin", "user")
USER_STATUSES = ("active", "disabled")
USER_PATCH_FIELDS = ("password", "status", "role")
KEY_STATUSES = ("active", "revoked")


def user_json(user: User) -> dict[str, Any]:
    return {
        "user_id": user.user_id,
        "username": user.username,
        "role": user.role,
        "status": user.status,
        "created_at": rfc3339_ms(user.created_at),
        "updated_at": rfc3339_ms(user.updated_at),
    }


def access_key_json(key: AccessKey, last_used_ms: int | None) -> dict[str, Any]:
    return {
        "access_key_id": key.access_key_id,
        "user_id": key.user_id,
        "name": key.name,
        "status": key.status,
        "created_at": rfc3339_ms(key.created_at),
        "last_used_at": rfc3339_ms(last_used_ms) if last_used_ms else None,
    }


def require_string(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str):
        raise ApiError("InvalidArgument", f"{name} is required and must be a string")
    return value


def is_active_admin(user: User) -> bool:
    return user.role == "admin" and user.status == "active"


def refuse_losing_the_last_admin(state: MetaState, user: User) -> None:
    """409 InvalidState if ``user`` is the only active admin (about to stop being one)."""
    if is_active_admin(user) and not any(
        is_active_admin(other) and other.user_id != user.user_id for other in state.list_users()
    ):
        raise ApiError("InvalidState", "the last active admin must stay an active admin")


class LoginHandler(ApiHandler):
    route_name = "/api/v1/auth/login"
    home = Home.JOURNAL
    public = True
    SUPPORTED_METHODS = ("POST",)

    async def post(self) -> None:
        self.audit_reached = True  # a login is an authentication: recorded, pass or fail
        body = self.json_body()
        username, password = require_string(body, "username"), require_string(body, "password")
        ctx = self.ctx
        address = self.request.remote_ip or "-"
        now = time.time()
        throttled = fold(username)
        wait = ctx.login_throttle.check(throttled, address, now)
        if wait > 0:
            raise UnauthorizedError(
                "too many failed logins; retry later",
                headers={"Retry-After": str(int(wait) + 1), **BEARER_CHALLENGE},
            )
        user = user_by_any_case(ctx.engine.state, username)
        self.audit_principal = {"user_id": user.user_id if user is not None else None}
        # No stored password is longer, so an overlong one is wrong without an Argon2 run.
        valid = len(password) <= MAX_PASSWORD_CHARS and await verify_password(
            user.password_hash if user else None, password, ctx.engine.executor
        )
        if user is None or not valid:
            # Counted from now, not from the request's start: the Argon2 run must not eat
            # into the lockout it triggers.
            ctx.login_throttle.record_failure(throttled, address, time.time())
            raise UnauthorizedError("wrong username or password", headers=BEARER_CHALLENGE)
        if user.status != "active":
            raise AccountDisabledError()
        ctx.login_throttle.record_success(throttled)
        token, expires_at = issue_token(ctx.server_secret, user.user_id, now, ctx.config.token_ttl)
        self.credential_id = user.user_id
        self.send_json(
            200,
            {"token": token, "expires_at": rfc3339_seconds(expires_at), "user": user_json(user)},
        )


class UsersHandler(ApiHandler):
    route_name = "/api/v1/users"
    SUPPORTED_METHODS = ("GET", "POST")

    def get(self) -> None:
        self.authorize(Action.USER_LIST)
        users = self.ctx.engine.state.list_users()
        self.send_json(200, {"users": [user_json(user) for user in users]})

    async def post(self) -> None:
        self.authorize(Action.USER_CREATE)
        body = self.json_body()
        username, password = require_string(body, "username"), require_string(body, "password")
        role = body.get("role", "user")
        if not USERNAME_PATTERN.match(username):
            raise ApiError("InvalidArgument", "username must be 3-64 of A-Z a-z 0-9 . _ @ -")
        if role not in ROLES:
            raise ApiError("InvalidArgument", "role must be admin or user")
        problem = validate_password(password)
        if problem:
            raise ApiError("InvalidArgument", problem)
        engine = self.ctx.engine
        with self.ctx.reservations.new_username(engine.state, username):
            password_hash = await hash_password(password, engine.executor)
            user_id = "u_" + secrets.token_hex(8)
            outcome = await engine.commit(
                records.user_created(
                    user_id=user_id,
                    username=username,
                    password_hash=password_hash,
                    role=role,
                    at=now_ms(),
                )
            )
        if not outcome.ok:
            raise outcome_error(outcome)
        user = engine.state.get_user(user_id)
        assert user is not None
        self.send_json(201, user_json(user))


class UserHandler(ApiHandler):
    route_name = "/api/v1/users/{user_id}"
    SUPPORTED_METHODS = ("GET", "PATCH", "DELETE")

    def require_user(self, user_id: str) -> User:
        user = self.ctx.engine.state.get_user(user_id)
        if user is None:
            raise ApiError("NoSuchUser", "no such user")
        return user

    def get(self, user_id: str) -> None:
        authorize(self.principal, Action.USER_READ, Resource.user(user_id))
        self.send_json(200, user_json(self.require_user(user_id)))

    async def patch(self, user_id: str) -> None:
        body = self.json_body()
        unknown = set(body) - set(USER_PATCH_FIELDS)
        if unknown:
            raise ApiError("InvalidArgument", f"unknown fields: {', '.join(sorted(unknown))}")
        current = self.ctx.engine.state.get_user(user_id)
        # A field sent with its current value is no change: a user may send its own role.
        changed = [
            name
            for name in USER_PATCH_FIELDS
            if name in body
            and (name == "password" or current is None or body[name] != getattr(current, name))
        ]
        authorize(self.principal, Action.USER_UPDATE, Resource.user(user_id, changed))
        self.require_user(user_id)
        changes: dict[str, Any] = {}
        if "status" in changed:
            if body["status"] not in USER_STATUSES:
                raise ApiError("InvalidArgument", "status must be active or disabled")
            changes["status"] = body["status"]
        if "role" in changed:
            if body["role"] not in ROLES:
                raise ApiError("InvalidArgument", "role must be admin or user")
            changes["role"] = body["role"]
        if "password" in changed:
            password = body["password"]
            problem = validate_password(password) if isinstance(password, str) else "not a string"
            if problem:
                raise ApiError("InvalidArgument", f"password: {problem}")
            changes["password_hash"] = await hash_password(password, self.ctx.engine.executor)
        engine = self.ctx.engine
        user = self.require_user(user_id)  # again: it may have changed during the hashing
        stays_admin = changes.get("role", user.role) == "admin"
        if not (stays_admin and changes.get("status", user.status) == "active"):
            refuse_losing_the_last_admin(engine.state, user)
        if changes:
            outcome = await engine.commit(
                records.user_updated(user_id=user_id, changes=changes, at=now_ms())
            )
            if not outcome.ok:
                raise outcome_error(outcome)
        self.send_json(200, user_json(self.require_user(user_id)))

    async def delete(self, user_id: str) -> None:
        authorize(self.principal, Action.USER_DELETE, Resource.user(user_id))
        refuse_losing_the_last_admin(self.ctx.engine.state, self.require_user(user_id))
        outcome = await self.ctx.engine.commit(records.user_deleted(user_id=user_id, at=now_ms()))
        if not outcome.ok:
            raise outcome_error(outcome)
        self.set_status(204)
        self.finish()


class AccessKeysHandler(ApiHandler):
    route_name = "/api/v1/access-keys"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("GET", "POST")

    def get(self) -> None:
        """The keys the caller may read, of one user with ``?user_id=`` (403 if not its own)."""
        self.authorize(Action.ACCESS_KEY_LIST)
        state = self.ctx.engine.state
        principal = self.principal
        wanted = self.get_query_argument("user_id", None) or None
        if wanted is not None:
            authorize(principal, Action.ACCESS_KEY_READ, Resource.access_key(wanted))
        keys = [
            key
            for key in state.list_access_keys(wanted)
            if is_allowed(principal, Action.ACCESS_KEY_READ, Resource.access_key(key.user_id))
        ]
        last_used = self.ctx.engine.key_last_used
        self.send_json(
            200,
            {"access_keys": [access_key_json(key, last_used(key.access_key_id)) for key in keys]},
        )

    async def post(self) -> None:
        body = self.json_body()
        user_id = body.get("user_id", self.principal.user_id)
        name = body.get("name", "")
        if (
            not isinstance(user_id, str)
            or not isinstance(name, str)
            or len(name) > MAX_ACCESS_KEY_NAME
        ):
            raise ApiError("InvalidArgument", "user_id and name must be strings (name <= 128)")
        authorize(self.principal, Action.ACCESS_KEY_CREATE, Resource.access_key(user_id))
        engine = self.ctx.engine
        if engine.state.get_user(user_id) is None:
            raise ApiError("NoSuchUser", "no such user")
        key_id, secret = generate_access_key()
        held = len(engine.state.list_access_keys(user_id))
        with self.ctx.reservations.within_cap(
            "access keys", user_id, held, MAX_ACCESS_KEYS_PER_USER
        ):
            outcome = await engine.commit(
                records.access_key_created(
                    access_key_id=key_id,
                    user_id=user_id,
                    name=name,
                    secret_digest=digest_secret(secret),
                    at=now_ms(),
                )
            )
        if not outcome.ok:
            raise outcome_error(outcome)
        key = engine.state.get_access_key(key_id)
        assert key is not None
        payload = access_key_json(key, None)
        payload["secret_key"] = secret
        self.send_json(201, payload)


class AccessKeyHandler(ApiHandler):
    route_name = "/api/v1/access-keys/{access_key_id}"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("GET", "PATCH", "DELETE")

    def require_key(self, access_key_id: str, action: Action) -> AccessKey:
        key = self.ctx.engine.state.get_access_key(access_key_id)
        if key is None:
            raise ApiError("NoSuchAccessKey", "no such access key")
        authorize(self.principal, action, Resource.access_key(key.user_id))
        return key

    def get(self, access_key_id: str) -> None:
        key = self.require_key(access_key_id, Action.ACCESS_KEY_READ)
        last_used = self.ctx.engine.key_last_used(key.access_key_id)
        self.send_json(200, access_key_json(key, last_used))

    async def patch(self, access_key_id: str) -> None:
        key = self.require_key(access_key_id, Action.ACCESS_KEY_UPDATE)
        body = self.json_body()
        status = body.get("status")
        if set(body) - {"status"} or status not in KEY_STATUSES:
            raise ApiError("InvalidArgument", 'the body must be {"status": "active"|"revoked"}')
        engine = self.ctx.engine
        outcome = await engine.commit(
            records.access_key_updated(access_key_id=key.access_key_id, status=status, at=now_ms())
        )
        if not outcome.ok:
            raise outcome_error(outcome)
        updated = engine.state.get_access_key(access_key_id)
        assert updated is not None
        self.send_json(200, access_key_json(updated, engine.key_last_used(access_key_id)))

    async def delete(self, access_key_id: str) -> None:
        key = self.require_key(access_key_id, Action.ACCESS_KEY_DELETE)
        outcome = await self.ctx.engine.commit(
            records.access_key_deleted(access_key_id=key.access_key_id, at=now_ms())
        )
        if not outcome.ok:
            raise outcome_error(outcome)
        self.set_status(204)
        self.finish()


class PresignHandler(ApiHandler):
    route_name = "/api/v1/presign"
    SUPPORTED_METHODS = ("POST",)

    def post(self) -> None:
        body = self.json_body()
        bucket, key = require_string(body, "bucket"), require_string(body, "key")
        method = body.get("method", "GET")
        if method not in ("GET", "PUT", "HEAD"):
            raise ApiError("InvalidArgument", "method must be GET, PUT or HEAD")
        expires_in = body.get("expires_in", 3600)
        problem = validate_expires_in(expires_in)
        if problem:
            raise ApiError("InvalidArgument", problem)
        content_type = body.get("content_type")
        if content_type is not None:
            require_content_type(content_type)
        action = Action.OBJECT_WRITE if method == "PUT" else Action.OBJECT_READ
        self.authorize(Action.PRESIGN_CREATE, bucket=bucket)
        self.authorize(action, bucket=bucket)
        require_bucket(self.ctx.engine, bucket)
        if key_problem(key):
            raise ApiError("InvalidKey", key_problem(key) or "invalid key")
        now = time.time()
        expires = presign_expires_at(now, int(expires_in))
        query = presign_query(
            self.ctx.server_secret,
            method,
            bucket,
            key,
            expires,
            self.principal.credential_id,
            content_type if method == "PUT" else None,
        )
        base = self.ctx.config.public_url or f"{self.request.protocol}://{self.request.host}"
        path = f"{API_PREFIX}/buckets/{quote(bucket, safe='')}/objects/{quote(key, safe='/')}"
        self.send_json(
            200,
            {
                "url": f"{base.rstrip('/')}{path}?{urlencode(query)}",
                "method": method,
                "expires_at": rfc3339_seconds(expires),
                "expires_in": int(expires_in),
            },
        )
