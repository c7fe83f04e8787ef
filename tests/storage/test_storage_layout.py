import doctest
import os

import pytest

from service.storage import layout
from service.storage.layout import Layout


def test_new_payload_ids_are_32_lowercase_hex_and_unique() -> None:
    ids = {layout.new_payload_id() for _ in range(1000)}
    assert len(ids) == 1000
    for payload_id in ids:
        assert len(payload_id) == 32
        assert set(payload_id) <= set("0123456789abcdef")
        assert layout.is_valid_payload_id(payload_id)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "0123456789abcdef0123456789abcde",
        "0123456789abcdef0123456789abcdef0",
        "0123456789ABCDEF0123456789abcdef",
        "0123456789abcdef0123456789abcdeg",
        "../../../../etc/passwd/aaaaaaaaaa",
        "0123456789abcdef/123456789abcdef",
    ],
)
def test_anything_but_an_id_is_refused_as_a_payload_path(value: str) -> None:
    assert not layout.is_valid_payload_id(value)
    with pytest.raises(ValueError):
        Layout("/data").payload_path(value)


def test_payload_path_fans_out_by_the_first_four_hex_digits() -> None:
    payload_id = "abcdef0123456789abcdef0123456789"
    path = Layout("/data").payload_path(payload_id)
    assert path == os.path.join("/data", "payloads", "ab", "cd", payload_id)
    assert Layout("/data").fan_out_dirs(payload_id) == (
        os.path.join("/data", "payloads", "ab"),
        os.path.join("/data", "payloads", "ab", "cd"),
    )


def test_staging_paths_are_fresh_part_files_in_the_staging_dir() -> None:
    paths = {Layout("/data").new_staging_path() for _ in range(100)}
    assert len(paths) == 100
    for path in paths:
        assert os.path.dirname(path) == os.path.join("/data", "staging")
        assert path.endswith(".part")


def test_layout_doctests_pass() -> None:
    result = doctest.testmod(layout)
    assert result.attempted > 0
    assert result.failed == 0


def test_the_package_exports_exactly_its_public_names() -> None:
    import service.storage

    for name in service.storage.__all__:
        assert getattr(service.storage, name) is not None
    assert set(service.storage.__all__) >= {"PayloadStore", "StagingUpload", "GcResult"}
