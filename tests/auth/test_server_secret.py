"""The server secret file: created once, owner-only, persistent, and never silently replaced."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fsseam.fs import RealFileSystem
from service.auth.auth_errors import ServerSecretError
from service.auth.server_secret import (
    SERVER_SECRET_BYTES,
    SERVER_SECRET_FILENAME,
    load_or_create_server_secret,
)


def test_first_load_creates_a_random_owner_only_secret(tmp_path: Path) -> None:
    secret = load_or_create_server_secret(RealFileSystem(), str(tmp_path))
    path = tmp_path / SERVER_SECRET_FILENAME
    assert len(secret) == SERVER_SECRET_BYTES
    assert path.read_bytes() == secret
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == [SERVER_SECRET_FILENAME]


def test_secret_persists_across_loads(tmp_path: Path) -> None:
    first = load_or_create_server_secret(RealFileSystem(), str(tmp_path))
    second = load_or_create_server_secret(RealFileSystem(), str(tmp_path))
    assert first == second


def test_each_data_dir_gets_its_own_secret(tmp_path: Path) -> None:
    one = load_or_create_server_secret(RealFileSystem(), str(tmp_path / "one"))
    two = load_or_create_server_secret(RealFileSystem(), str(tmp_path / "two"))
    assert one != two


def test_missing_data_dir_is_created(tmp_path: Path) -> None:
    data_dir = tmp_path / "not" / "yet"
    load_or_create_server_secret(RealFileSystem(), str(data_dir))
    assert (data_dir / SERVER_SECRET_FILENAME).is_file()


@pytest.mark.parametrize("content", [b"", b"short", b"x" * 33])
def test_damaged_secret_file_stops_startup_and_is_kept(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / SERVER_SECRET_FILENAME
    path.write_bytes(content)
    with pytest.raises(ServerSecretError) as caught:
        load_or_create_server_secret(RealFileSystem(), str(tmp_path))
    assert f"holds {len(content)} bytes" in str(caught.value)
    assert path.read_bytes() == content


def test_leftover_temporary_file_from_a_crash_is_replaced(tmp_path: Path) -> None:
    (tmp_path / (SERVER_SECRET_FILENAME + ".tmp")).write_bytes(b"torn")
    secret = load_or_create_server_secret(RealFileSystem(), str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == [SERVER_SECRET_FILENAME]
    assert (tmp_path / SERVER_SECRET_FILENAME).read_bytes() == secret
