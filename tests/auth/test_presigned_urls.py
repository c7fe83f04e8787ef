"""Presigned URL signatures: round trip, every field tampered, expiry, malformed input."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.auth.presign import (
    CREDENTIAL_PARAM,
    EXPIRES_PARAM,
    MAX_EXPIRES_IN,
    SIGNATURE_PARAM,
    PresignResult,
    canonical_string,
    presign_expires_at,
    presign_query,
    sign_presigned,
    validate_expires_in,
    verify_presigned,
)

SECRET = b"\x01" * 32
NOW = 1_800_000_000.5
EXPIRES = 1_800_003_600


@dataclasses.dataclass(frozen=True)
class Request:
    """A presigned request as the server sees it."""

    method: str = "PUT"
    bucket: str = "photos"
    key: str = "2026/cat.jpg"
    expires: str = str(EXPIRES)
    credential: str = "bk_ABCDEFGHIJKLMNOPQRST"
    signature: str = ""
    content_type: str | None = "image/jpeg"

    def signed(self) -> Request:
        signature = sign_presigned(
            SECRET,
            self.method,
            self.bucket,
            self.key,
            int(self.expires),
            self.credential,
            self.content_type,
        )
        return dataclasses.replace(self, signature=signature)

    def verify(self, now: float = NOW, secret: bytes = SECRET) -> PresignResult:
        return verify_presigned(
            secret,
            self.method,
            self.bucket,
            self.key,
            self.expires,
            self.credential,
            self.signature,
            self.content_type,
            now,
        )


PUT = Request().signed()
GET = Request(method="GET", content_type=None).signed()


@pytest.mark.parametrize("method", ["GET", "PUT", "HEAD"])
def test_signed_request_verifies(method: str) -> None:
    assert Request(method=method).signed().verify() is PresignResult.OK


@pytest.mark.parametrize(
    "change",
    [
        {"method": "GET"},
        {"method": "HEAD"},
        {"method": "POST"},
        {"method": "DELETE"},
        {"method": "put"},
        {"bucket": "photos2"},
        {"bucket": "Photos"},
        {"key": "2026/cat.jpeg"},
        {"key": "2026/cat.jpg "},
        {"key": "2026//cat.jpg"},
        {"expires": str(EXPIRES + 1)},
        {"expires": str(EXPIRES - 1)},
        {"expires": str(EXPIRES + 86400 * 365)},
        {"credential": "bk_ABCDEFGHIJKLMNOPQRSU"},
        {"credential": "u_admin"},
        {"content_type": "image/png"},
        {"content_type": "image/jpeg; charset=utf-8"},
        {"content_type": None},
        {"content_type": ""},
    ],
)
def test_changing_any_signed_field_of_a_put_makes_it_invalid(change: dict[str, str]) -> None:
    assert dataclasses.replace(PUT, **change).verify() is PresignResult.INVALID


@pytest.mark.parametrize(
    "change",
    [{"method": "HEAD"}, {"method": "PUT"}, {"bucket": "other"}, {"key": "other"}],
)
def test_changing_the_method_or_object_of_a_get_makes_it_invalid(change: dict[str, str]) -> None:
    assert dataclasses.replace(GET, **change).verify() is PresignResult.INVALID


def test_content_type_is_not_signed_for_get() -> None:
    assert dataclasses.replace(GET, content_type="text/html").verify() is PresignResult.OK


def test_unsigned_put_content_type_means_none_may_be_sent() -> None:
    bare = Request(content_type=None).signed()
    assert bare.verify() is PresignResult.OK
    assert dataclasses.replace(bare, content_type="").verify() is PresignResult.OK
    assert dataclasses.replace(bare, content_type="text/html").verify() is PresignResult.INVALID


def test_every_single_character_change_of_the_signature_is_invalid() -> None:
    for position, original in enumerate(PUT.signature):
        for replacement in "0123456789abcdef":
            if replacement != original:
                signature = PUT.signature[:position] + replacement + PUT.signature[position + 1 :]
                altered = dataclasses.replace(PUT, signature=signature)
                assert altered.verify() is PresignResult.INVALID


def test_request_is_valid_until_just_before_expiry_and_expired_from_it() -> None:
    assert PUT.verify(now=EXPIRES - 0.001) is PresignResult.OK
    assert PUT.verify(now=EXPIRES) is PresignResult.EXPIRED
    assert PUT.verify(now=EXPIRES + 10**6) is PresignResult.EXPIRED


def test_tampered_and_expired_request_is_invalid() -> None:
    tampered = dataclasses.replace(PUT, key="other")
    assert tampered.verify(now=EXPIRES + 1) is PresignResult.INVALID


def test_extending_the_expiry_of_an_expired_url_is_invalid() -> None:
    extended = dataclasses.replace(PUT, expires=str(EXPIRES + 3600))
    assert extended.verify(now=EXPIRES + 1) is PresignResult.INVALID


def test_another_server_secret_makes_it_invalid() -> None:
    assert PUT.verify(secret=b"\x02" * 32) is PresignResult.INVALID


@pytest.mark.parametrize(
    "expires",
    [
        "",
        "abc",
        "-1",
        "+1800003600",
        "01800003600",
        " 1800003600",
        "1800003600 ",
        "1.8e9",
        "1800003600.0",
        "١٨٠٠٠٠٣٦٠٠",
        "9" * 40,
        "0x6b49d200",
    ],
)
def test_malformed_expiry_is_invalid(expires: str) -> None:
    assert dataclasses.replace(PUT, expires=expires).verify() is PresignResult.INVALID


@pytest.mark.parametrize(
    "signature",
    ["", "zz", PUT.signature.upper(), PUT.signature[:-1], PUT.signature + "0", " " + PUT.signature],
)
def test_malformed_signature_is_invalid(signature: str) -> None:
    assert dataclasses.replace(PUT, signature=signature).verify() is PresignResult.INVALID


@given(
    method=st.text(max_size=8),
    key=st.text(max_size=50),
    expires=st.text(max_size=20),
    credential=st.text(max_size=30),
    signature=st.text(max_size=70),
    content_type=st.none() | st.text(max_size=30),
)
def test_verify_never_raises_on_arbitrary_input(
    method: str, key: str, expires: str, credential: str, signature: str, content_type: str | None
) -> None:
    result = verify_presigned(
        SECRET, method, "b", key, expires, credential, signature, content_type, NOW
    )
    assert result is PresignResult.INVALID


Fields = tuple[str, str, str, int, str, str | None]
field_tuples = st.tuples(
    st.sampled_from(["GET", "PUT", "HEAD"]),
    st.text(max_size=6),
    st.text(max_size=6),
    st.integers(min_value=0, max_value=10**12),
    st.text(max_size=6),
    st.none() | st.text(max_size=6),
)


def _signed_meaning(fields: Fields) -> Fields:
    """Two requests that differ only in what is not signed mean the same thing."""
    method, bucket, key, expires, credential, content_type = fields
    return (
        method,
        bucket,
        key,
        expires,
        credential,
        (content_type or "") if method == "PUT" else "",
    )


@given(first=field_tuples, second=field_tuples)
def test_canonical_string_is_unambiguous(first: Fields, second: Fields) -> None:
    same_meaning = _signed_meaning(first) == _signed_meaning(second)
    assert (canonical_string(*first) == canonical_string(*second)) is same_meaning


def test_moving_characters_between_fields_changes_the_canonical_string() -> None:
    assert canonical_string("GET", "ab", "c", 1, "x", None) != canonical_string(
        "GET", "a", "bc", 1, "x", None
    )
    assert canonical_string("GET", "a", "b\n3:c", 1, "x", None) != canonical_string(
        "GET", "a", "b", 1, "c", None
    )


def test_sign_refuses_methods_that_cannot_be_presigned() -> None:
    with pytest.raises(ValueError):
        sign_presigned(SECRET, "DELETE", "b", "k", EXPIRES, "bk_ID", None)


def test_query_carries_the_three_contract_parameters() -> None:
    query = presign_query(SECRET, "GET", "photos", "a b/c", EXPIRES, "bk_ID")
    assert query == {
        EXPIRES_PARAM: str(EXPIRES),
        CREDENTIAL_PARAM: "bk_ID",
        SIGNATURE_PARAM: sign_presigned(SECRET, "GET", "photos", "a b/c", EXPIRES, "bk_ID"),
    }
    assert (EXPIRES_PARAM, CREDENTIAL_PARAM, SIGNATURE_PARAM) == (
        "X-Expires",
        "X-Credential",
        "X-Signature",
    )


def test_expiry_is_at_least_the_requested_seconds_away() -> None:
    assert presign_expires_at(100.0, 1) == 101
    assert presign_expires_at(100.2, 1) == 102
    assert presign_expires_at(100.2, MAX_EXPIRES_IN) == 101 + MAX_EXPIRES_IN


@pytest.mark.parametrize(
    ("value", "acceptable"),
    [
        (1, True),
        (3600, True),
        (604800, True),
        (0, False),
        (-1, False),
        (604801, False),
        (True, False),
        (3600.0, False),
        ("3600", False),
        (None, False),
        ([3600], False),
    ],
)
def test_expires_in_bounds(value: object, acceptable: bool) -> None:
    assert (validate_expires_in(value) is None) is acceptable
