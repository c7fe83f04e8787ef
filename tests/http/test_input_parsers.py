"""Unit tests of the pure input parsers: numbers, the JSON loader, header-bound fields,
RFC 2047 (server and client side), the content-type guess and the CORS policy."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.client._headers import decode_value, encode_value
from service.common.api_errors import ApiError
from service.common.header_fields import (
    MAX_METADATA_BYTES,
    WORD_BYTES,
    content_type_problem,
    decode_header_value,
    encode_header_value,
    guess_content_type,
    text_problem,
    validate_custom_metadata,
)
from service.common.numbers import MAX_DIGITS, bounded_int, require_int
from service.http.conditions import ByteWindow, RangeResult, parse_range
from service.http.json_body import (
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    load_json,
    load_json_object,
    nesting_depth_exceeds,
)
from service.limits.caps import fold
from service.limits.cors import EXPOSED_HEADERS, CorsPolicy

# -- numbers -------------------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=10**MAX_DIGITS - 1))
def test_every_ascii_number_parses_to_itself(value: int) -> None:
    assert bounded_int(str(value), 0, 10**MAX_DIGITS) == value


@given(st.text())
def test_anything_but_ascii_digits_is_refused(text: str) -> None:
    parsed = bounded_int(text, 0, 10**30)
    ascii_digits = text.isascii() and text.isdigit() and 1 <= len(text) <= MAX_DIGITS
    assert (parsed is not None) == ascii_digits
    if parsed is not None:
        assert parsed == int(text)


@given(st.integers(min_value=0, max_value=10**6), st.integers(0, 100), st.integers(0, 100))
def test_range_bounds_are_inclusive(value: int, low: int, span: int) -> None:
    parsed = bounded_int(str(value), low, low + span)
    assert (parsed is not None) == (low <= value <= low + span)


def test_require_int_names_the_field_and_code() -> None:
    with pytest.raises(ApiError) as raised:
        require_int("\u0663", "partNumber", 1, 10, code="InvalidPartNumber")
    assert raised.value.code == "InvalidPartNumber" and "partNumber" in raised.value.message


# -- JSON ----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**17), 10**17) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=30,
)


def depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((depth(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(item) for item in value.values()), default=0)
    return 0


@given(json_values, st.integers(0, 8))
def test_depth_check_is_exact_on_valid_json(value: object, limit: int) -> None:
    data = json.dumps(value).encode()
    assert nesting_depth_exceeds(data, limit) == (depth(value) > limit)


@given(json_values)
def test_loader_reads_what_the_standard_library_reads(value: object) -> None:
    data = json.dumps(value, ensure_ascii=False).encode()
    if depth(value) <= MAX_JSON_DEPTH:
        assert load_json(data) == json.loads(data)


@given(st.binary(max_size=200))
def test_loader_refuses_garbage_with_the_contract_codes(data: bytes) -> None:
    try:
        load_json(data)
    except ApiError as error:
        assert error.code in ("MalformedJSON", "InvalidArgument")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("[" * 33 + "]" * 33, "MalformedJSON"),
        ("[" * 100_000, "MalformedJSON"),
        ("1" * 19, "InvalidArgument"),
        ("-" + "1" * 19, "InvalidArgument"),
        ("1e999", "InvalidArgument"),
        ("0." + "1" * 100, "InvalidArgument"),
        ("NaN", "MalformedJSON"),
        ('"\\ud800 lone"', None),
        ("[1.0, 2.5e3, 2.5]", None),
    ],
)
def test_loader_limits(text: str, code: str | None) -> None:
    if code is None:
        load_json(text.encode())
        return
    with pytest.raises(ApiError) as raised:
        load_json(text.encode())
    assert raised.value.code == code


def test_integral_numbers_are_integers_and_objects_are_required() -> None:
    assert load_json(b"[1548.0, 1.5e3, 2.5]") == [1548, 1500, 2.5]
    assert type(load_json(b"1548.0")) is int
    assert load_json_object(b"  ") == {}
    with pytest.raises(ApiError) as raised:
        load_json_object(b"[]")
    assert raised.value.code == "MalformedJSON"
    with pytest.raises(ApiError) as raised:
        load_json(b" " * (MAX_JSON_BYTES + 1))
    assert raised.value.code == "EntityTooLarge"


# -- header-bound fields --------------------------------------------------------------------

safe_text = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=300)


@given(safe_text)
def test_encoded_values_round_trip_and_fit_a_header(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded.isascii() and "\r" not in encoded and "\n" not in encoded
    assert encoded == encoded.strip()
    assert decode_header_value(encoded, "v") == value
    assert decode_value(encoded) == value  # the client reads what the server wrote
    for word in encoded.split(" "):
        if word.startswith("=?"):
            assert len(word) <= 75


@given(safe_text)
def test_the_client_writes_what_the_server_reads(value: str) -> None:
    assert decode_header_value(encode_value(value), "v") == value


@given(st.text(max_size=100))
def test_any_stored_text_is_sent_safely(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded.isascii()
    assert all(32 <= ord(char) < 127 for char in encoded)


def test_words_never_split_a_character() -> None:
    value = "\u65e5" * 100
    words = encode_header_value(value).split(" ")
    assert len(words) > 1
    assert all(len(word) <= 75 for word in words) and WORD_BYTES % 3 == 0


@pytest.mark.parametrize(
    "raw",
    ["=?UTF-8?B?####?=", "=?koi8-r?B?w6k=?=", "=?UTF-8?B?/w==?=", "\xe9", "=?UTF-8?Q?a=0Ab?="],
)
def test_bad_incoming_values_are_refused(raw: str) -> None:
    with pytest.raises(ApiError):
        decode_header_value(raw, "v")


def test_raw_utf8_and_q_words_are_read() -> None:
    assert decode_header_value("caf\u00c3\u00a9", "v") == "caf\u00e9"  # UTF-8 bytes as Latin-1
    assert decode_header_value("a =?UTF-8?Q?b_c?=  =?UTF-8?B?ZA==?= e", "v") == "a b cd e"


@given(st.characters(min_codepoint=0, max_codepoint=0x9F))
def test_control_characters_are_refused(char: str) -> None:
    is_control = ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F
    assert (text_problem(f"a{char}b", "v") is not None) == is_control


def test_metadata_validation() -> None:
    assert validate_custom_metadata({"Color": "blue"}) == {"color": "blue"}
    for bad in (
        {"a b": "x"},
        {"": "x"},
        {"x" * 129: "x"},
        {"a": "x\ny"},
        {"a": 1},
        {"a": "x", "A": "y"},
        {"a": "x" * MAX_METADATA_BYTES},
        ["not", "an", "object"],
    ):
        with pytest.raises(ApiError):
            validate_custom_metadata(bad)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("text/plain", True),
        ('text/plain; charset="utf-8"', True),
        ("multipart/form-data; boundary=----x", True),
        ("application/vnd.api+json;v=2", True),
        ("text/plain;", True),
        ("text", False),
        ("text/", False),
        ("text/plain; charset", False),
        ("text/plain\r\nX: y", False),
        ("t\u00e9xt/plain", False),
        ("text/plain; a=" + "b" * 2000, False),
    ],
)
def test_content_types(value: str, valid: bool) -> None:
    assert (content_type_problem(value) is None) == valid


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("a/b/cat.jpeg", "image/jpeg"),
        ("movie.MP4", "video/mp4"),
        ("x.tar.bz2", "application/x-bzip2"),
        ("dir.v2/noext", "application/octet-stream"),
        ("data:image/png,x", "application/octet-stream"),
        (".jpg", "application/octet-stream"),  # a dot file has no extension
    ],
)
def test_content_type_guess(key: str, expected: str) -> None:
    assert guess_content_type(key) == expected


# -- CORS and usernames ---------------------------------------------------------------------


def test_cors_policy() -> None:
    policy = CorsPolicy.parse("https://A.example/, http://localhost:3000")
    assert policy.allow("https://a.example") == "https://a.example"
    assert policy.allow("https://b.example") is None
    assert policy.allow(None) is None
    assert policy.allow(None, public=True) == "*"
    headers = dict(policy.headers("http://localhost:3000"))
    assert headers["Access-Control-Expose-Headers"] == EXPOSED_HEADERS
    assert headers["Vary"] == "Origin"
    preflight = dict(policy.preflight("https://a.example", "X-Meta-A, Content-Type") or [])
    assert preflight["Access-Control-Allow-Headers"] == "X-Meta-A, Content-Type"
    assert "Access-Control-Allow-Headers" not in dict(
        policy.preflight("https://a.example", "bad header\r\n") or []
    )
    assert policy.preflight("https://evil.example", None) is None
    assert CorsPolicy.parse("*").allow("https://any.example") == "*"
    assert CorsPolicy.parse("").headers("https://a.example") == []
    with pytest.raises(ValueError):
        CorsPolicy.parse("not-an-origin")


def test_usernames_fold() -> None:
    assert fold("Alice") == fold("ALICE") == fold("alice")
    assert fold("alice") != fold("alicf")


# -- ranges ----------------------------------------------------------------------------------


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(1, 10**6))
def test_range_windows_stay_inside_the_object(start: int, end: int, size: int) -> None:
    result = parse_range(f"bytes={start}-{end}", size)
    if isinstance(result, ByteWindow):
        assert 0 <= result.start < result.end <= size
        assert result.start == start and result.end == min(end + 1, size)
    elif end < start:
        assert result is RangeResult.WHOLE
    else:
        assert result is RangeResult.UNSATISFIABLE and start >= size


@pytest.mark.parametrize(
    "header", ["bytes=\u0663-", "bytes=0-\u00b2", "bytes=-\uff11", "bytes=0-" + "9" * 19]
)
def test_range_positions_are_ascii_numbers(header: str) -> None:
    with pytest.raises(ApiError) as raised:
        parse_range(header, 100)
    assert raised.value.code == "InvalidArgument"
