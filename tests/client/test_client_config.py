"""Connection strings, keyword options, and never showing the secret."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.client import AsyncServiceClient, ServiceClient
from service.client._config import ClientConfig, parse_connection_string

SECRET = "sk_AbC-9_x.y~z"


def test_connection_string_splits_into_base_url_and_key_pair() -> None:
    parts = parse_connection_string(f"http://bk_ID:{SECRET}@127.0.0.1:9000")
    assert parts.base_url == "http://127.0.0.1:9000"
    assert (parts.access_key, parts.secret_key) == ("bk_ID", SECRET)


def test_connection_string_without_credentials_is_a_base_url() -> None:
    parts = parse_connection_string("https://storage.example.com/")
    assert parts.base_url == "https://storage.example.com"
    assert parts.access_key is None and parts.secret_key is None


def test_percent_encoded_credentials_are_decoded() -> None:
    parts = parse_connection_string("http://bk_a%40b:sk_p%3Aq%2Fr@host:1")
    assert (parts.access_key, parts.secret_key) == ("bk_a@b", "sk_p:q/r")


def test_ipv6_host_and_path_prefix_survive() -> None:
    assert parse_connection_string("http://k:s@[::1]:9000/store/").base_url == (
        "http://[::1]:9000/store"
    )


@pytest.mark.parametrize(
    "text",
    [
        "ftp://bk:sk@host:1",
        "127.0.0.1:9000",
        "http://bk_only@host:1",
        "http://bk:sk@host:1/?x=1",
        "http://bk:sk@host:1#frag",
        "http://bk:sk@host:notaport",
        "http://:sk@",
    ],
)
def test_malformed_connection_strings_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_connection_string(text)


def test_uri_keeps_the_secret_and_safe_uri_masks_it() -> None:
    with ServiceClient(f"http://bk_ID:{SECRET}@127.0.0.1:9000") as client:
        assert client.uri == f"http://bk_ID:{SECRET}@127.0.0.1:9000"
        assert client.safe_uri == "http://bk_ID:****@127.0.0.1:9000"
        assert SECRET not in repr(client)
        assert "****" in repr(client)


def test_secret_with_reserved_characters_round_trips_through_uri() -> None:
    with ServiceClient(base_url="http://h:1", access_key="bk_x", secret_key="sk_a:b@c") as client:
        assert parse_connection_string(client.uri).secret_key == "sk_a:b@c"
        assert "sk_a" not in client.safe_uri


@given(
    key=st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1),
    secret=st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1),
)
def test_any_key_pair_round_trips_and_is_masked(key: str, secret: str) -> None:
    config = ClientConfig("http://127.0.0.1:9", access_key=key, secret_key=secret)
    parsed = parse_connection_string(config.uri)
    assert (parsed.access_key, parsed.secret_key) == (key, secret)
    assert config.safe_uri.endswith(":****@127.0.0.1:9")
    assert parse_connection_string(config.safe_uri).access_key == key
    assert f"sk_{secret}" not in repr(ClientConfig("http://h:1", "bk_1", f"sk_{secret}"))


def test_keyword_credentials_override_the_connection_string() -> None:
    with ServiceClient("http://bk_a:sk_a@h:1", access_key="bk_b", secret_key="sk_b") as client:
        assert client.uri == "http://bk_b:sk_b@h:1"


def test_token_client_has_no_secret_in_its_uri() -> None:
    with ServiceClient(base_url="http://h:1", token="tok.en") as client:
        assert client.uri == client.safe_uri == "http://h:1"
        assert "tok.en" not in repr(client)


@pytest.mark.parametrize(
    ("args", "options"),
    [
        ((), {}),
        (("http://h:1",), {"base_url": "http://h:2"}),
        (("http://bk:sk@h:1",), {"token": "t"}),
        ((), {"base_url": "http://h:1", "access_key": "bk"}),
        ((), {"base_url": "http://h:1", "max_connections": 0}),
        ((), {"base_url": "http://h:1", "retries": -1}),
    ],
)
def test_contradictory_or_incomplete_options_are_refused(
    args: tuple[str, ...], options: dict[str, object]
) -> None:
    with pytest.raises(ValueError):
        ServiceClient(*args, **options)  # type: ignore[arg-type]


def test_the_pool_sends_basic_auth_for_a_key_pair_and_bearer_for_a_token() -> None:
    with ServiceClient("http://bk_ID:sk_S@h:1") as client:
        request = client._driver.http.build_request("GET", "/health")
        flow = client._driver.http.auth.sync_auth_flow(request)  # type: ignore[union-attr]
        signed = next(flow)
        assert signed.headers["Authorization"] == httpx.BasicAuth("bk_ID", "sk_S")._auth_header
    with ServiceClient(base_url="http://h:1", token="t0k") as client:
        request = client._driver.http.build_request("GET", "/health")
        assert request.headers["Authorization"] == "Bearer t0k"


def test_timeouts_and_pool_size_reach_httpx() -> None:
    with ServiceClient("http://h:1", timeout=7.0, connect_timeout=2.0) as client:
        timeout = client._driver.http.timeout
        assert (timeout.read, timeout.write, timeout.connect) == (7.0, 7.0, 2.0)


def test_async_client_takes_the_same_options_and_closes_as_a_context_manager() -> None:
    async def scenario() -> None:
        async with AsyncServiceClient("http://bk_ID:sk_S@h:1", retries=0) as client:
            assert client.safe_uri == "http://bk_ID:****@h:1"
            assert client._driver.config.retry.retries == 0
        assert client._driver.http.is_closed

    asyncio.run(scenario())


def test_a_plain_http_client_loads_no_certificates_and_would_fail_closed() -> None:
    """Making a client must not load the CA bundle when TLS is never used (svc start-up)."""
    plain = ClientConfig(base_url="http://127.0.0.1:9000").httpx_options()["verify"]
    assert isinstance(plain, ssl.SSLContext)
    assert plain.verify_mode == ssl.CERT_REQUIRED and plain.check_hostname
    assert plain.cert_store_stats()["x509_ca"] == 0  # trusts nothing: no https can pass
    assert ClientConfig(base_url="https://example.test").httpx_options()["verify"] is True
    own = ssl.create_default_context()
    assert ClientConfig(base_url="http://h:1", verify=own).httpx_options()["verify"] is own
    assert ClientConfig(base_url="http://h:1", verify=False).httpx_options()["verify"] is False
