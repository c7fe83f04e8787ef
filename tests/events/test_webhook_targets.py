"""Webhook targets (SSRF guard): which addresses a webhook may reach, checked when the
webhooks are configured and again, after resolving the name, at every delivery.

Pure policy tests, the resolver pinning on this machine's real resolver (``localhost`` and
the host's own name resolve to loopback here), and a server that runs with the default
policy (nothing but public addresses): configuring an internal address is refused, and a
name that resolves inside is never delivered to. The other direction, an operator's
allowance, is what every other webhook test runs with (``tests.serverproc`` allows
loopback, where their receivers listen).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from service.config import ConfigError, load_config
from service.events.targets import TargetPolicy, TargetRefused
from tests.events.receiver import Receiver
from tests.serverproc import ServerProcess

REFUSED_BY_DEFAULT = [
    "127.0.0.1",
    "127.9.9.9",
    "::1",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "fe80::1",
    "fc00::1",
    "100.64.0.1",
    "0.0.0.0",
    "::",
    "224.0.0.1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "240.0.0.1",
]
PUBLIC = ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111"]


@pytest.mark.parametrize("address", REFUSED_BY_DEFAULT)
def test_internal_addresses_are_refused_by_default(address: str) -> None:
    assert not TargetPolicy().allows(ipaddress.ip_address(address))
    assert TargetPolicy.parse("*").allows(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address: str) -> None:
    assert TargetPolicy.parse("").allows(ipaddress.ip_address(address))


def test_named_networks_are_allowed_and_only_they() -> None:
    policy = TargetPolicy.parse(" 10.1.0.0/16 , ::1,127.0.0.1 ")
    allowed = ["10.1.200.3", "::1", "127.0.0.1", "::ffff:10.1.0.9"]
    refused = ["10.2.0.1", "127.0.0.2", "169.254.169.254", "192.168.0.1"]
    assert all(policy.allows(ipaddress.ip_address(a)) for a in allowed)
    assert not any(policy.allows(ipaddress.ip_address(a)) for a in refused)


@pytest.mark.parametrize("text", ["10.0.0.0/33", "intranet", "10.0.0.0/8,*x", "300.1.1.1"])
def test_a_bad_setting_is_refused_at_start(text: str) -> None:
    with pytest.raises(ValueError):
        TargetPolicy.parse(text)
    with pytest.raises(ConfigError, match="SERVICE_WEBHOOK_ALLOWED_NETWORKS"):
        load_config([], {"SERVICE_WEBHOOK_ALLOWED_NETWORKS": text})


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/x",
        "http://[::1]/x",
        "http://169.254.169.254/latest/meta-data/",
        "https://10.0.0.8/x",
        "http://localhost:9/x",
        "http://LOCALHOST./x",
        "http://api.localhost/x",
        "http://[::ffff:127.0.0.1]/x",
    ],
)
def test_literal_internal_targets_are_named_when_configured(url: str) -> None:
    problem = TargetPolicy().literal_problem(url)
    assert problem is not None and "not a public address" in problem
    assert (
        TargetPolicy.parse("127.0.0.0/8,::/0,10.0.0.0/8,169.254.0.0/16").literal_problem(url)
        is None
    )


def test_names_are_left_to_the_delivery_check() -> None:
    assert TargetPolicy().literal_problem("https://hooks.example.com/x") is None


def test_delivery_resolves_the_name_and_refuses_an_internal_answer() -> None:
    with pytest.raises(TargetRefused, match=r"'localhost' resolves to .*not a public address"):
        asyncio.run(TargetPolicy().pin("http://localhost:8080/hook"))


def test_delivery_is_pinned_to_the_checked_address_keeping_host_and_tls_name() -> None:
    policy = TargetPolicy.parse("127.0.0.0/8")
    plain = asyncio.run(policy.pin("http://localhost:8080/hook?a=1"))
    assert str(plain.url) == "http://127.0.0.1:8080/hook?a=1"
    assert plain.host_header == "localhost:8080"
    assert plain.extensions == {}
    tls = asyncio.run(policy.pin("https://localhost/hook"))
    assert (tls.url.host, tls.url.port, tls.host_header) == ("127.0.0.1", None, "localhost")
    assert tls.extensions == {"sni_hostname": "localhost"}


def test_a_name_that_does_not_resolve_is_a_refused_attempt() -> None:
    with pytest.raises(TargetRefused, match="cannot resolve"):
        asyncio.run(TargetPolicy.parse("*").pin("http://no-such-host.invalid/x"))


# -- over HTTP, with the default policy ------------------------------------------------------


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        tmp_path_factory.mktemp("ssrf") / "data",
        env_overrides={
            "SERVICE_WEBHOOK_ALLOWED_NETWORKS": "",
            "SERVICE_WEBHOOK_MAX_BACKOFF": "0.1",
        },
    )
    proc.start()
    yield proc
    proc.stop()


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9/x", "http://[::1]:9/x", "http://169.254.169.254/", "http://localhost/"],
)
def test_configuring_an_internal_target_is_refused_and_changes_nothing(
    strict_server: ServerProcess, bucket_name: str, url: str
) -> None:
    with strict_server.client() as api:
        assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
        path = f"/buckets/{bucket_name}/notifications"
        hook = {"id": "h", "url": url, "secret": "s"}
        response = api.put(path, json={"webhooks": [hook]})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == "InvalidArgument"
        assert "not a public address" in error["message"]
        assert "SERVICE_WEBHOOK_ALLOWED_NETWORKS" in error["message"]
        assert api.get(path).json() == {"webhooks": []}
        api.delete(f"/buckets/{bucket_name}", params={"force": "true"})


def test_a_name_resolving_inside_is_never_delivered_to(
    strict_server: ServerProcess, bucket_name: str
) -> None:
    name = socket.gethostname()
    resolved = {info[4][0] for info in socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)}
    if any(ipaddress.ip_address(a).is_global for a in resolved):
        pytest.skip(f"{name} resolves to a public address here")
    with strict_server.client() as api, Receiver() as receiver:
        assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
        port = receiver.url.split(":")[2].split("/")[0]
        url = f"http://{name}:{port}/hook"
        path = f"/buckets/{bucket_name}/notifications"
        response = api.put(path, json={"webhooks": [{"id": "h", "url": url, "secret": "s"}]})
        assert response.status_code == 200, response.text  # a name: judged when delivering
        assert api.put(f"/buckets/{bucket_name}/objects/a", content=b"x").status_code < 300
        deadline = time.monotonic() + 20
        while True:
            (status,) = [w["status"] for w in api.get(path).json()["webhooks"]]
            if status["failed_attempts"] >= 2:
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.05)
        assert "not a public address" in status["last_error"]
        assert status["delivered"] == 0 and status["pending"] == 1
        assert receiver.attempts == 0 and receiver.received() == []
        api.delete(f"/buckets/{bucket_name}", params={"force": "true"})


def test_the_receiver_really_listens_there() -> None:
    """The refusal above is the guard's, not a dead receiver: the same name and port,
    posted to directly, reach it."""
    with Receiver() as receiver:
        port = receiver.url.split(":")[2].split("/")[0]
        url = f"http://{socket.gethostname()}:{port}/hook"
        response = httpx.post(url, content=b"{}", trust_env=False)
        assert response.status_code == 204
        assert receiver.attempts == 1
