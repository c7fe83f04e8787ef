"""Flows for diagnostics, login, users and access keys.

Each function builds the request of one endpoint and parses its answer; the sync and async
clients run the same flow (see ``_flow``). Pure.
"""

from __future__ import annotations

from typing import Any

from service.client._documents import UNSET, Unset, document, patch_document
from service.client._exceptions import UnexpectedResponseError
from service.client._flow import Call, Flow, request
from service.client._models import AccessKey, Health, Token, User, parse
from service.client._paths import api, encode_segment
from service.client._wire import HEALTH_PATH

__all__ = [
    "create_access_key",
    "create_user",
    "delete_access_key",
    "delete_user",
    "get_user",
    "health",
    "list_access_keys",
    "list_users",
    "login",
    "metrics",
    "replication_promote",
    "replication_status",
    "system_info",
    "system_performance",
    "update_access_key",
    "update_user",
]


def health() -> Flow[Health]:
    reply = yield from request(Call("GET", HEALTH_PATH))
    return parse(Health.from_json, reply.json())


def system_info() -> Flow[dict[str, Any]]:
    return (yield from _json_object(Call("GET", api("/system/info"))))


def replication_status() -> Flow[dict[str, Any]]:
    return (yield from _json_object(Call("GET", api("/replication"))))


def replication_promote() -> Flow[dict[str, Any]]:
    return (yield from _json_object(Call("POST", api("/replication/promote"))))


def system_performance() -> Flow[dict[str, Any]]:
    return (yield from _json_object(Call("GET", api("/system/performance"))))


def metrics() -> Flow[str]:
    reply = yield from request(Call("GET", api("/metrics")))
    return reply.content.decode("utf-8")


def _json_object(call: Call) -> Flow[dict[str, Any]]:
    reply = yield from request(call)
    body = reply.json()
    if not isinstance(body, dict):
        raise UnexpectedResponseError("expected a JSON object", status=reply.status)
    return body


def login(username: str, password: str) -> Flow[Token]:
    body = {"username": username, "password": password}
    reply = yield from request(Call("POST", api("/auth/login"), json=body))
    return parse(Token.from_json, reply.json())


def list_users() -> Flow[list[User]]:
    reply = yield from request(Call("GET", api("/users")))
    return parse(lambda doc: [User.from_json(item) for item in doc["users"]], reply.json())


def create_user(username: str, password: str, role: str | None) -> Flow[User]:
    body = document(username=username, password=password, role=role)
    reply = yield from request(Call("POST", api("/users"), json=body))
    return parse(User.from_json, reply.json())


def get_user(user_id: str) -> Flow[User]:
    reply = yield from request(Call("GET", api(f"/users/{encode_segment(user_id)}")))
    return parse(User.from_json, reply.json())


def update_user(
    user_id: str,
    *,
    password: str | Unset = UNSET,
    status: str | Unset = UNSET,
    role: str | Unset = UNSET,
) -> Flow[User]:
    body = patch_document(password=password, status=status, role=role)
    path = api(f"/users/{encode_segment(user_id)}")
    reply = yield from request(Call("PATCH", path, json=body))
    return parse(User.from_json, reply.json())


def delete_user(user_id: str) -> Flow[None]:
    yield from request(Call("DELETE", api(f"/users/{encode_segment(user_id)}")))


def list_access_keys() -> Flow[list[AccessKey]]:
    reply = yield from request(Call("GET", api("/access-keys")))
    return parse(
        lambda doc: [AccessKey.from_json(item) for item in doc["access_keys"]], reply.json()
    )


def create_access_key(user_id: str | None, name: str | None) -> Flow[AccessKey]:
    body = document(user_id=user_id, name=name)
    reply = yield from request(Call("POST", api("/access-keys"), json=body))
    return parse(AccessKey.from_json, reply.json())


def update_access_key(access_key_id: str, status: str) -> Flow[AccessKey]:
    path = api(f"/access-keys/{encode_segment(access_key_id)}")
    reply = yield from request(Call("PATCH", path, json={"status": status}))
    return parse(AccessKey.from_json, reply.json())


def delete_access_key(access_key_id: str) -> Flow[None]:
    yield from request(Call("DELETE", api(f"/access-keys/{encode_segment(access_key_id)}")))
