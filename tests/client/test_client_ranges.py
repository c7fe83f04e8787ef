"""Byte ranges in their three accepted forms, and Content-Range answers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.client import ByteRange, ContentRange
from service.client._ranges import coerce_range

offsets = st.integers(min_value=0, max_value=2**40)


@pytest.mark.parametrize(
    ("value", "header"),
    [
        (ByteRange(0, 99), "bytes=0-99"),
        (ByteRange(start=100), "bytes=100-"),
        (ByteRange(suffix=10), "bytes=-10"),
        ((0, 0), "bytes=0-0"),
        ((5, 9), "bytes=5-9"),
        ((5, None), "bytes=5-"),
        ("bytes=5-9", "bytes=5-9"),
        ("bytes=7-", "bytes=7-"),
        ("bytes=-3", "bytes=-3"),
        (" bytes = 1 - 2 ", "bytes=1-2"),
    ],
)
def test_every_form_becomes_the_same_range_header(value: object, header: str) -> None:
    assert coerce_range(value).header == header  # type: ignore[arg-type]


def test_tuple_end_is_inclusive_as_in_http() -> None:
    assert coerce_range((0, 9)) == ByteRange(start=0, end=9)
    assert coerce_range((0, 9)).length(100) == 10


@pytest.mark.parametrize(
    "text", ["bytes=", "bytes=-", "bytes=5-2", "bytes=-0", "items=1-2", "bytes=1-2,4-5", "1-2"]
)
def test_malformed_range_strings_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        coerce_range(text)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"start": -1}, {"start": 5, "end": 4}, {"suffix": 0}, {"start": 1, "suffix": 2}],
)
def test_impossible_ranges_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        ByteRange(**kwargs)


@pytest.mark.parametrize("value", [(1,), (1, 2, 3), ("a", 2), 5, None, [0, 1]])
def test_other_types_are_refused(value: object) -> None:
    with pytest.raises(TypeError):
        coerce_range(value)  # type: ignore[arg-type]


@given(start=offsets, length=st.one_of(st.none(), offsets))
def test_a_range_survives_header_round_trip(start: int, length: int | None) -> None:
    original = ByteRange(start, None if length is None else start + length)
    assert ByteRange.parse(original.header) == original


@given(suffix=st.integers(min_value=1, max_value=2**40))
def test_a_suffix_range_survives_header_round_trip(suffix: int) -> None:
    assert ByteRange.parse(ByteRange(suffix=suffix).header) == ByteRange(suffix=suffix)


@given(start=offsets, end=offsets, size=offsets)
def test_length_is_what_the_server_would_send(start: int, end: int, size: int) -> None:
    start, end = min(start, end), max(start, end)
    expected = len(range(size)[start : end + 1])
    assert ByteRange(start, end).length(size) == expected


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("bytes 0-9/100", ContentRange(0, 9, 100)),
        ("bytes */0", ContentRange(None, None, 0)),
        ("bytes 5-5/*", ContentRange(5, 5, None)),
        ("items 0-1/2", None),
    ],
)
def test_content_range_answers_parse(text: str, parsed: ContentRange | None) -> None:
    assert ContentRange.parse(text) == parsed
