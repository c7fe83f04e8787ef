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
from hypothesis import given
from hypothesis import strategies as st

from service.config import ConfigError, load_config
from service.events.targets import TargetPolicy, TargetRefused, parse_host
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


# -- every spelling of an address, as the socket layer reads it -------------------------------

LOOPBACK_SPELLINGS = [
    "127.1",
    "127.0.1",
    "2130706433",
    "0x7f000001",
    "0x7f.1",
    "0X7F.0.0.1",
    "0177.0.0.1",
    "0177.1",
    "017700000001",
    "0x7f.0.0x0.01",
    "127.0.0.1.",
    "\uff11\uff12\uff17.\uff10.\uff10.\uff11",  # fullwidth digits: IDNA maps them to ASCII
    "127\u30020\u30020\u30021",  # ideographic full stops
    "\u00b9\u00b2\u2077.0.0.1",  # superscript digits
    "127.0.0.\uff11",  # one fullwidth digit among ASCII ones
    "\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54",  # fullwidth "localhost"
    "LocalHost",
    "0",
    "0x0",
    "[::1]",
    "[0:0:0:0:0:0:0:1]",
    "[::127.0.0.1]",  # IPv4-compatible
    "[::7f00:1]",
    "[::ffff:7f00:1]",  # IPv4-mapped
    "[0:0:0:0:0:ffff:127.0.0.1]",
    "[64:ff9b::127.0.0.1]",  # NAT64
    "[64:ff9b::7f00:1]",
    "[2002:7f00:1::]",  # 6to4
    "[2002:7f00:1:ffff::1]",
    "[2001:0:4136:e378:8000:63bf:80ff:fffe]",  # Teredo: client ~0x80fffffe = 127.0.0.1
]
INTERNAL_SPELLINGS = [
    "10.1",
    "0xa.0.0.1",
    "012.0.0.1",
    "167772161",
    "0xa9.0xfe.0xa9.0xfe",
    "2852039166",  # 169.254.169.254
    "0251.0376.0251.0376",
    "192.168.0x1.1",
    "[::ffff:a9fe:a9fe]",
    "[::a9fe:a9fe]",
    "[64:ff9b::a00:1]",
    "[64:ff9b:1::a00:1]",  # local-use NAT64 (RFC 8215)
    "[2002:a00:1::]",
    "[2002:a9fe:a9fe::1]",
    "[2002:c0a8:1::1]",
    "[fe80::1%25eth0]",
]
PUBLIC_SPELLINGS = [
    "8.8.8.8",
    "0x8.0x8.0x8.0x8",
    "134744072",
    "010.010.010.010",
    "[::ffff:8.8.8.8]",
    "[64:ff9b::808:808]",
    "[2002:808:808::1]",
]


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS + INTERNAL_SPELLINGS)
def test_every_spelling_of_an_internal_address_is_refused_when_configured(host: str) -> None:
    problem = TargetPolicy().literal_problem(f"http://{host}:8080/x")
    assert problem is not None and "not a public address" in problem, problem


@pytest.mark.parametrize("host", PUBLIC_SPELLINGS)
def test_spellings_of_public_addresses_are_accepted(host: str) -> None:
    assert TargetPolicy().literal_problem(f"https://{host}/x") is None


def test_the_ipv4_spellings_are_read_as_the_c_library_reads_them() -> None:
    for host in ["127.1", "0x7f.1", "0177.0.0.1", "2130706433", "0x7f.0.0x0.01", "010.010.010.010"]:
        expected = ipaddress.ip_address(socket.inet_aton(host))
        assert parse_host(host) == expected, host
    for name in ["08.1.1.1", "4294967296", "0x100000000", "1.2.3.4.5", "256.1.1.1", "0x"]:
        assert parse_host(name) is None, name  # names to resolve, as for the C library
    for nothing in ["1..1", "", "a b", "\udcff"]:
        with pytest.raises(ValueError):
            parse_host(nothing)  # no host at all: the socket layer refuses it too


@given(st.text(alphabet="0123456789xXabcdefABCDEF.", max_size=24))
def test_an_ipv4_spelling_is_an_address_exactly_when_inet_aton_says_so(text: str) -> None:
    try:
        expected: object = ipaddress.ip_address(socket.inet_aton(text))
    except OSError:
        expected = None
    try:
        got: object = parse_host(text)
    except ValueError:
        got = None  # not a host at all (an empty label): never an address either
    assert got == expected


def test_an_embedded_address_must_be_allowed_itself() -> None:
    teredo = ipaddress.ip_address("2001:0:4136:e378:8000:63bf:80ff:fffe")
    assert not TargetPolicy.parse("2001::/32").allows(teredo)  # its client is 127.0.0.1
    assert TargetPolicy.parse("2001::/32,127.0.0.0/8").allows(teredo)
    six_to_four = ipaddress.ip_address("2002:a00:1::1")
    assert not TargetPolicy().allows(six_to_four)
    assert TargetPolicy.parse("10.0.0.0/8").allows(six_to_four)
    nat64 = ipaddress.ip_address("64:ff9b::a00:1")
    assert TargetPolicy.parse("10.0.0.0/8").allows(nat64)  # it reaches 10.0.0.1, allowed


def test_listed_networks_allow_their_other_spellings() -> None:
    policy = TargetPolicy.parse("127.0.0.0/8")
    assert policy.literal_problem("http://0x7f.1:9/x") is None
    assert policy.literal_problem("http://[::ffff:127.0.0.1]:9/x") is None
    assert policy.literal_problem("http://[64:ff9b::7f00:1]:9/x") is None
    assert policy.literal_problem("http://10.1/x") is not None


@pytest.mark.parametrize(
    "url",
    [
        "http://exa mple.com/x",
        "http://a..b/x",
        "http://" + "a" * 64 + ".example/x",
        "http://[::ffff:0177.0.0.1]/x",
        "http://[1:2:3:4:5:6:7:8:9]/x",
        "http://\udcff.example/x",
    ],
)
def test_a_host_that_is_no_host_is_named_not_crashed_on(url: str) -> None:
    problem = TargetPolicy.parse("*").literal_problem(url)
    assert problem is not None and "host" in problem


@pytest.mark.parametrize("host", ["0x7f.1", "0177.0.0.1", "[64:ff9b::7f00:1]", "[2002:7f00:1::]"])
def test_delivery_refuses_every_spelling_without_asking_the_resolver(host: str) -> None:
    with pytest.raises(TargetRefused, match="not a public address"):
        asyncio.run(TargetPolicy().pin(f"http://{host}:8080/hook"))


def test_delivery_to_an_allowed_spelling_goes_to_the_address_it_names() -> None:
    pinned = asyncio.run(TargetPolicy.parse("127.0.0.0/8").pin("http://0177.0.0.1:8080/h?a=1"))
    assert str(pinned.url) == "http://127.0.0.1:8080/h?a=1"
    assert pinned.host_header == "0177.0.0.1:8080"


def test_delivery_judges_resolver_answers_by_what_they_embed() -> None:
    policy = TargetPolicy()
    for answer in ["64:ff9b::7f00:1", "::ffff:10.0.0.1", "2002:a9fe:a9fe::", "::127.0.0.1"]:
        with pytest.raises(TargetRefused, match="not a public address"):
            policy.check_answers("hooks.example", [ipaddress.ip_address(answer)])
    policy.check_answers("hooks.example", [ipaddress.ip_address("64:ff9b::808:808")])


@pytest.mark.parametrize(
    "host",
    ["0177.0.0.1", "127.1", "2130706433", "\uff11\uff12\uff17.0.0.1", "[::ffff:7f00:1]"],
)
def test_configuring_any_spelling_of_loopback_is_400_never_500(
    strict_server: ServerProcess, bucket_name: str, host: str
) -> None:
    with strict_server.client() as api:
        assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
        path = f"/buckets/{bucket_name}/notifications"
        hook = {"id": "h", "url": f"http://{host}:9/x", "secret": "s"}
        response = api.put(path, json={"webhooks": [hook]})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == "InvalidArgument"
        assert "not a public address" in error["message"]
        assert api.get(path).json() == {"webhooks": []}
        api.delete(f"/buckets/{bucket_name}", params={"force": "true"})


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("http://exa mple.com/x", 400),
        ("http://a..b/x", 400),
        ("http://[::ffff:0177.0.0.1]/x", 400),
        ("http://\u0661\u0662\u0667.0.0.1/x", 200),  # Arabic-Indic digits: a name, not an address
    ],
)
def test_configuring_an_unusable_host_is_400_and_a_name_in_other_digits_is_a_name(
    strict_server: ServerProcess, bucket_name: str, url: str, status: int
) -> None:
    with strict_server.client() as api:
        assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
        path = f"/buckets/{bucket_name}/notifications"
        response = api.put(path, json={"webhooks": [{"id": "h", "url": url, "secret": "s"}]})
        assert response.status_code == status, response.text
        if status == 400:
            error = response.json()["error"]
            assert error["code"] == "InvalidArgument" and "host" in error["message"], error
        api.delete(f"/buckets/{bucket_name}", params={"force": "true"})


def test_an_allowed_spelling_is_delivered_to_the_address_it_names(
    server: ServerProcess, bucket_name: str
) -> None:
    """The suite's servers allow 127.0.0.0/8: ``0177.0.0.1`` and ``2130706433`` are that
    loopback address to the C library, so deliveries reach a receiver listening there."""
    with server.client() as api, Receiver() as receiver:
        assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
        port = receiver.url.split(":")[2].split("/")[0]
        hooks = [
            {"id": "octal", "url": f"http://0177.0.0.1:{port}/hook", "secret": "s"},
            {"id": "decimal", "url": f"http://2130706433:{port}/hook", "secret": "s"},
        ]
        path = f"/buckets/{bucket_name}/notifications"
        response = api.put(path, json={"webhooks": hooks})
        assert response.status_code == 200, response.text
        assert api.put(f"/buckets/{bucket_name}/objects/a", content=b"x").status_code == 200
        deadline = time.monotonic() + 20
        while len(receiver.received()) < 2:
            assert time.monotonic() < deadline, api.get(path).json()
            time.sleep(0.05)
        assert {d.event["key"] for d in receiver.received()} == {"a"}
        api.delete(f"/buckets/{bucket_name}", params={"force": "true"})
