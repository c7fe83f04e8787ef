"""``bucket.put_many``: many objects in one batch request, through both clients, against a
real server (the shared one)."""

from __future__ import annotations

import hashlib
import io
import pathlib
import tarfile
from typing import Any

import pytest

from service.client import (
    BadRequestError,
    BatchEntry,
    BucketClient,
    NotFoundError,
    QuotaExceededError,
    ServiceClient,
)
from service.client._ops_batch import tar_stream

pytestmark = pytest.mark.e2e


def test_put_many_stores_bytes_and_files_in_order(
    bucket: BucketClient,
    tmp_path: pathlib.Path,
) -> None:
    small = tmp_path / "small.txt"
    small.write_bytes(b"from a file\n" * 10)
    large = tmp_path / "large.bin"
    large.write_bytes(bytes(range(256)) * 5000)  # > 1 MiB: streamed, hashed on the way
    entries: list[Any] = [
        ("a/one.txt", b"one"),
        ("a/été/ü.bin", bytearray(b"\x00\x01" * 3000)),
        ("files/small.txt", small),
        ("files/large.bin", large),
        BatchEntry("typed", b"# title", content_type="text/markdown", metadata={"owner": "zoë"}),
        ("empty", b""),
    ]
    results = bucket.put_many(iter(entries), prefix="up/")
    assert [result.key for result in results] == [
        "a/one.txt",
        "a/été/ü.bin",
        "files/small.txt",
        "files/large.bin",
        "typed",
        "empty",
    ]
    assert all(result.ok and result.error is None for result in results), results
    datas = [b"one", b"\x00\x01" * 3000, small.read_bytes(), large.read_bytes(), b"# title", b""]
    for result, data in zip(results, datas, strict=True):
        assert result.object is not None
        assert result.object.key == "up/" + result.key
        assert result.object.sha256_checksum == hashlib.sha256(data).hexdigest()
        with bucket.get("up/" + result.key) as stream:
            assert stream.read() == data
    typed = results[4].object
    assert typed is not None and typed.content_type == "text/markdown"
    assert typed.custom_metadata == {"owner": "zoë"}


def test_entries_refused_alone_carry_their_error_and_the_rest_land(
    client: ServiceClient,
    bucket_name: str,
) -> None:
    client.buckets.create(bucket_name, quota_bytes=100)
    handle = client.bucket(bucket_name)
    results = handle.put_many(
        [("fits", b"x" * 60), ("bad\x01key", b"k"), ("too-much", b"y" * 60), ("also", b"z")]
    )
    assert [result.ok for result in results] == [True, False, False, True]
    assert isinstance(results[1].error, BadRequestError)
    assert results[1].error.code == "InvalidKey"
    assert isinstance(results[2].error, QuotaExceededError)
    assert sorted(obj.key for obj in handle.list()) == ["also", "fits"]
    handle.delete_bucket(force=True)


def test_whole_request_failures_raise(client: ServiceClient) -> None:
    with pytest.raises(NotFoundError) as caught:
        client.bucket("no-such-bucket-for-batch").put_many([("a", b"a")])
    assert caught.value.code == "NoSuchBucket"


def test_bad_entries_are_refused_before_anything_is_sent(
    bucket: BucketClient,
) -> None:
    with pytest.raises(TypeError):
        bucket.put_many([("a", "text is not taken as a path")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="starting with"):
        bucket.put_many([("./a", b"a")])
    assert list(bucket.list()) == []


def test_the_stream_is_a_pax_tar_with_checksums() -> None:
    sent: list[tuple[str, str]] = []
    raw = b"".join(tar_stream([("k/ä", b"data"), ("x" * 300, b"")], sent))
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r|") as archive:
        members = [(info.name, info.size, dict(info.pax_headers)) for info in archive]
    assert [(name, size) for name, size, _ in members] == [("k/ä", 4), ("x" * 300, 0)]
    assert members[0][2]["SERVICE.sha256"] == hashlib.sha256(b"data").hexdigest()
    assert sent == [
        ("k/ä", hashlib.sha256(b"data").hexdigest()),
        ("x" * 300, hashlib.sha256(b"").hexdigest()),
    ]
