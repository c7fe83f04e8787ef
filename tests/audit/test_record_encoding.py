"""The audit record's fast encoding is its canonical JSON, byte for byte.

``service.audit.record.prepare`` builds a record's line from templates (and falls back to
``canonical`` for unusual fields); the chain's hashes are only verifiable if both give the
same bytes for every record, whatever the strings hold.
"""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from service.audit.record import FIELDS, GENESIS, canonical, parse_line, prepare, seal

TEXT = st.text(
    st.characters(codec="utf-8"),  # every code point a request can carry, quotes and controls
    max_size=40,
)
SCALAR = st.one_of(st.none(), TEXT, st.integers(-(2**70), 2**70))
UNUSUAL = st.one_of(st.booleans(), st.lists(st.integers(), max_size=2))
PRINCIPAL = st.dictionaries(
    st.sampled_from(["user_id", "access_key_id", "token", "presigned", "share", 'z"q']),
    st.one_of(st.none(), TEXT, UNUSUAL),
    max_size=3,
)


def by_definition(fields: dict[str, Any], sequence: int, prev: str) -> tuple[str, bytes]:
    record = {name: fields.get(name) for name in FIELDS}
    record["sequence"] = sequence
    record["prev"] = prev
    body = canonical(record)
    hash_hex = hashlib.sha256(body).hexdigest()
    return hash_hex, body[:-1] + b',"hash":"' + hash_hex.encode() + b'"}\n'


@given(
    fields=st.fixed_dictionaries(
        {name: SCALAR for name in FIELDS if name != "principal"},
        optional={"principal": PRINCIPAL},
    ),
    odd=st.one_of(st.none(), st.sampled_from([name for name in FIELDS])),
    odd_value=UNUSUAL,
    sequence=st.integers(1, 10**18),
    prev=st.one_of(st.just(GENESIS), st.text("0123456789abcdef", min_size=64, max_size=64)),
)
def test_the_line_is_the_canonical_json_of_the_record(
    fields: dict[str, Any], odd: str | None, odd_value: object, sequence: int, prev: str
) -> None:
    if odd is not None:
        fields = {**fields, odd: odd_value}
    expected = by_definition(fields, sequence, prev)
    assert seal(fields, sequence, prev) == expected
    record = parse_line(expected[1])
    assert record is not None and record["hash"] == expected[0]


def test_the_templates_name_every_field_once() -> None:
    prepared = prepare({name: None for name in FIELDS} | {"principal": {}})
    text = prepared.head + GENESIS + prepared.middle + "7" + prepared.tail + "}"
    record = parse_line(text.encode())
    assert record is not None
    assert sorted(record) == sorted([*FIELDS, "sequence", "prev"])
