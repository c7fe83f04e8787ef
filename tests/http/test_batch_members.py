"""Pure rules of a batch member (``service.ops.batch.member_intent``): what a PUT of it declares."""

from __future__ import annotations

import doctest

import pytest

from service.common.api_errors import ApiError
from service.http import batch_handlers
from service.ops import batch
from service.ops.batch import BatchLimits, member_intent
from service.ops.tar_reader import Kind, Member

LIMITS = BatchLimits(max_member_bytes=1000)


def info(name: str, size: int = 3, kind: Kind = Kind.FILE, refusal: str = "", **pax: str) -> Member:
    return Member(name=name, kind=kind, size=size, records=pax, refusal=refusal)


def refusal(member: Member) -> str:
    with pytest.raises(ApiError) as caught:
        member_intent("b", "p/", member, LIMITS)
    return caught.value.code


@pytest.mark.parametrize("module", [batch, batch_handlers])
def test_doctests(module: object) -> None:
    failures, tried = doctest.testmod(module)  # type: ignore[arg-type]
    assert failures == 0 and tried > 0


def test_a_plain_member_is_a_put_of_prefix_plus_name_with_a_guessed_type() -> None:
    intent = member_intent("b", "p/", info("./dir/x.json", 10), LIMITS)
    assert (intent.bucket, intent.key, intent.content_length) == ("b", "p/dir/x.json", 10)
    assert intent.content_type == "application/json"
    assert intent.expected_sha256 is None and dict(intent.custom_metadata) == {}


def test_pax_records_give_type_checksum_and_metadata() -> None:
    records = {
        "SERVICE.content_type": "text/plain; charset=utf-8",
        "SERVICE.sha256": " " + "AB" * 32 + " ",
        "SERVICE.meta.Team": "média",
        "SCHILY.xattr.user.x": "ignored: another vendor's record",
    }
    intent = member_intent("b", "", info("k", **records), LIMITS)
    assert intent.content_type == "text/plain; charset=utf-8"
    assert intent.expected_sha256 == "ab" * 32
    assert dict(intent.custom_metadata) == {"team": "média"}


def test_what_a_put_would_refuse_is_refused() -> None:
    assert refusal(info("bad\x00key")) == "InvalidKey"
    assert refusal(info("x" * 1030)) == "InvalidKey"
    assert refusal(info("big", 1001)) == "EntityTooLarge"
    assert refusal(info("t", **{"SERVICE.content_type": "not a type"})) == "InvalidArgument"
    assert refusal(info("c", **{"SERVICE.sha256": "abc"})) == "InvalidArgument"
    assert refusal(info("m", **{"SERVICE.meta.bad name": "v"})) == "InvalidArgument"
    assert refusal(info("m", **{"SERVICE.meta.x": "a\rb"})) == "InvalidArgument"


def test_a_refused_kind_is_named_in_its_error() -> None:
    with pytest.raises(ApiError) as caught:
        member_intent("b", "", info("l", 0, Kind.REFUSED, "a symbolic link"), LIMITS)
    assert caught.value.code == "InvalidArgument"
    assert caught.value.message == "a symbolic link is not stored: only regular files are"
    assert refusal(info("bad\x01key", 0, Kind.REFUSED, "a FIFO")) == "InvalidKey"  # key first
