"""One server per test module and an ``svc`` runner with its alias ``local`` set up."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator

import httpx
import pytest

from tests.cli.svckit import Svc
from tests.serverproc import ServerProcess

_names = itertools.count()


@pytest.fixture(scope="module")
def cli_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("cli-server") / "data")
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def svc(cli_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Svc:
    runner = Svc(tmp_path_factory.mktemp("cli-home"))
    runner("alias", "set", "local", cli_server.url, cli_server.access_key, cli_server.secret_key)
    return runner


@pytest.fixture(scope="module")
def api(cli_server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cli_server.api, auth=cli_server.auth, timeout=30) as client:
        yield client


@pytest.fixture
def bucket(api: httpx.Client) -> str:
    """A fresh, empty bucket."""
    name = f"cli-{next(_names)}-{secrets.token_hex(3)}"
    assert api.post("/buckets", json={"name": name}).status_code == 201
    return name
