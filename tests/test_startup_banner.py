"""What every start prints once it serves (``service.banner``): the console's URL, the user to
sign in as, where the credentials are (a restart too), never a secret again; with one serving
process and with several."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

import service.banner
from tests.serverproc import ServerProcess

GENERATED = {
    "SERVICE_ROOT_ACCESS_KEY": "",
    "SERVICE_ROOT_SECRET_KEY": "",
    "SERVICE_ADMIN_PASSWORD": "",
}


def test_doctests() -> None:
    failures, tried = doctest.testmod(service.banner)
    assert tried > 0 and failures == 0


def start_log(server: ServerProcess, number: int) -> str:
    return (server.data_dir.parent / f"{server.data_dir.name}-server-{number}.log").read_text()


@pytest.mark.parametrize("processes", ["1", "3"])
def test_first_start_and_restart_say_where_the_console_and_the_credentials_are(
    tmp_path: Path, processes: str
) -> None:
    server = ServerProcess(
        tmp_path / "data", env_overrides={**GENERATED, "SERVICE_WORKERS": processes}
    )
    server.start()
    try:
        server.restart()
    finally:
        server.stop()
    credentials = f"{server.data_dir}/credentials.json"
    first, second = start_log(server, 1), start_log(server, 2)
    secret = re.search(r"secret key: (sk_\S+)", first)
    assert secret, first
    for log in (first, second):
        assert f"  console:     {server.url}/console/ (user admin)\n" in log, log
        assert f"  credentials: {credentials} (written at the first start; mode 0600)\n" in log
        assert f"  API:         {server.url}/api/v1/docs (docs/api.md)\n" in log
    assert secret[1] not in second  # printed once, at the first start only
    assert "First start" not in second


def test_configured_credentials_are_named_by_their_settings(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", env_overrides={"SERVICE_WORKERS": "1"})
    server.start()
    server.stop()
    log = start_log(server, 1)
    assert "  credentials: the SERVICE_ROOT_ACCESS_KEY, SERVICE_ROOT_SECRET_KEY and " in log
    assert server.secret_key not in log
