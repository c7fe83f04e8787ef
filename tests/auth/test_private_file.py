"""Owner-only secret files written atomically through the file-system seam."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fsseam.fs import RealFileSystem
from service.auth.private_file import read_private_file, write_private_file


def test_written_file_holds_exactly_the_data_and_is_owner_only(tmp_path: Path) -> None:
    path = str(tmp_path / "secret")
    write_private_file(RealFileSystem(), path, b"\x00\x01secret")
    assert read_private_file(RealFileSystem(), path) == b"\x00\x01secret"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_failed_write_leaves_neither_temporary_nor_target(tmp_path: Path) -> None:
    path = str(tmp_path / "secret")
    with pytest.raises(TypeError):
        write_private_file(RealFileSystem(), path, "not bytes")  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []


def test_failed_rewrite_keeps_the_previous_file(tmp_path: Path) -> None:
    path = str(tmp_path / "secret")
    write_private_file(RealFileSystem(), path, b"old")
    with pytest.raises(TypeError):
        write_private_file(RealFileSystem(), path, "not bytes")  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == ["secret"]
    assert Path(path).read_bytes() == b"old"
