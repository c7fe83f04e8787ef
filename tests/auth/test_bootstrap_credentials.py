"""First-start credentials: environment overrides, generation, and credentials.json."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest

from fsseam.fs import RealFileSystem
from service.auth.auth_errors import BootstrapError
from service.auth.bootstrap import (
    ADMIN_PASSWORD_ENV,
    CREDENTIALS_FILENAME,
    ROOT_ACCESS_KEY_ENV,
    ROOT_SECRET_KEY_ENV,
    BootstrapCredentials,
    resolve_bootstrap,
    write_credentials_file,
)
from service.auth.passwords import validate_password

KEY_ID = "bk_ROOTKEY123"
SECRET = "sk_operator-chosen-secret"
PASSWORD = "operator password"


def test_empty_environment_generates_everything() -> None:
    credentials = resolve_bootstrap({})
    assert re.fullmatch(r"bk_[A-Z2-7]{20}", credentials.access_key_id)
    assert re.fullmatch(r"sk_[A-Za-z0-9_-]{43}", credentials.secret_key)
    assert validate_password(credentials.admin_password) is None
    assert len(credentials.admin_password) >= 24
    assert credentials.generated and credentials.key_generated and credentials.password_generated
    assert credentials.generated_payload() == {
        "username": "admin",
        "access_key_id": credentials.access_key_id,
        "secret_key": credentials.secret_key,
        "admin_password": credentials.admin_password,
    }


def test_two_generations_differ() -> None:
    first, second = resolve_bootstrap({}), resolve_bootstrap({})
    assert first.access_key_id != second.access_key_id
    assert first.secret_key != second.secret_key
    assert first.admin_password != second.admin_password


def test_environment_chooses_all_and_nothing_is_generated() -> None:
    env = {ROOT_ACCESS_KEY_ENV: KEY_ID, ROOT_SECRET_KEY_ENV: SECRET, ADMIN_PASSWORD_ENV: PASSWORD}
    assert resolve_bootstrap(env) == BootstrapCredentials(
        admin_password=PASSWORD,
        access_key_id=KEY_ID,
        secret_key=SECRET,
        password_generated=False,
        key_generated=False,
    )
    assert not resolve_bootstrap(env).generated


def test_only_the_unset_parts_are_generated_and_written() -> None:
    credentials = resolve_bootstrap({ADMIN_PASSWORD_ENV: PASSWORD})
    assert credentials.admin_password == PASSWORD
    assert credentials.key_generated and not credentials.password_generated
    assert "admin_password" not in credentials.generated_payload()
    assert credentials.generated_payload()["secret_key"] == credentials.secret_key

    credentials = resolve_bootstrap({ROOT_ACCESS_KEY_ENV: KEY_ID, ROOT_SECRET_KEY_ENV: SECRET})
    assert (credentials.access_key_id, credentials.secret_key) == (KEY_ID, SECRET)
    assert credentials.password_generated and not credentials.key_generated
    assert "secret_key" not in credentials.generated_payload()


def test_empty_and_none_values_count_as_unset() -> None:
    env = {ROOT_ACCESS_KEY_ENV: "", ROOT_SECRET_KEY_ENV: None, ADMIN_PASSWORD_ENV: ""}
    credentials = resolve_bootstrap(env)
    assert credentials.key_generated and credentials.password_generated


@pytest.mark.parametrize(
    "env",
    [
        {ROOT_ACCESS_KEY_ENV: KEY_ID},
        {ROOT_SECRET_KEY_ENV: SECRET},
        {ROOT_ACCESS_KEY_ENV: "AKIAROOTKEY", ROOT_SECRET_KEY_ENV: SECRET},
        {ROOT_ACCESS_KEY_ENV: KEY_ID, ROOT_SECRET_KEY_ENV: "operator-secret-no-prefix"},
        {ROOT_ACCESS_KEY_ENV: KEY_ID, ROOT_SECRET_KEY_ENV: "sk_short"},
        {ROOT_ACCESS_KEY_ENV: "bk_has:colon", ROOT_SECRET_KEY_ENV: SECRET},
        {ADMIN_PASSWORD_ENV: "short"},
        {ADMIN_PASSWORD_ENV: "         "},
    ],
)
def test_unusable_settings_fail_without_echoing_the_value(env: dict[str, str]) -> None:
    with pytest.raises(BootstrapError) as caught:
        resolve_bootstrap(env)
    message = str(caught.value)
    assert any(name in message for name in env)
    for value in env.values():
        assert value not in message


def test_credentials_file_is_owner_only_json(tmp_path: Path) -> None:
    payload = resolve_bootstrap({}).generated_payload()
    path = write_credentials_file(RealFileSystem(), str(tmp_path), payload)
    assert path == str(tmp_path / CREDENTIALS_FILENAME)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads(Path(path).read_text("utf-8")) == payload
    assert sorted(os.listdir(tmp_path)) == [CREDENTIALS_FILENAME]


def test_credentials_file_is_replaced_whole(tmp_path: Path) -> None:
    fs = RealFileSystem()
    write_credentials_file(fs, str(tmp_path), {"secret_key": "sk_" + "a" * 100})
    path = write_credentials_file(fs, str(tmp_path), {"secret_key": "sk_new"})
    assert json.loads(Path(path).read_text("utf-8")) == {"secret_key": "sk_new"}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_credentials_file_stays_private_under_a_permissive_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        path = write_credentials_file(RealFileSystem(), str(tmp_path), {"k": "v"})
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
