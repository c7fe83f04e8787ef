"""The fuzz target ``fuzz/fuzz_journal_reader.py`` on Hypothesis inputs, in every test run.

Inputs are random bytes, and valid segments damaged by flips, cuts, splices and inserted
garbage, so the search reaches the deep paths (checksummed records with undecodable bodies,
sequence breaks, salvage after a hole) that random bytes alone rarely do.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable, Iterator

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fsseam.simfs import SimFileSystem
from journal import Journal, JournalCorruptionError
from journal.framing import MAGIC, encode_record
from journal.segment import segment_name

FUZZ_TARGET = os.path.join(os.path.dirname(__file__), "..", "..", "fuzz", "fuzz_journal_reader.py")


def _load_target() -> Callable[[bytes], None]:
    spec = importlib.util.spec_from_file_location("fuzz_journal_reader", FUZZ_TARGET)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    check: Callable[[bytes], None] = module.check_segment_bytes
    return check


check_segment_bytes = _load_target()


@pytest.fixture(autouse=True)
def _quiet_journal() -> Iterator[None]:
    logger = logging.getLogger("journal")
    logger.disabled = True
    yield
    logger.disabled = False


bodies = st.one_of(
    st.dictionaries(
        st.sampled_from(["type", "k", "v"]), st.integers(-(2**63), 2**64 - 1) | st.text(max_size=8)
    ).map(msgpack.packb),
    st.binary(min_size=1, max_size=20),  # checksummed but not an event
)


@st.composite
def damaged_segments(draw: st.DrawFn) -> bytes:
    count = draw(st.integers(0, 6))
    records = []
    for sequence in range(1, count + 1):
        body = draw(bodies)
        durable = draw(st.integers(0, sequence))  # sometimes implausible (== sequence)
        records.append(
            encode_record(draw(st.sampled_from([sequence, sequence + 1])), durable, body)
        )
    data = bytearray(b"".join(records))
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["flip", "cut", "insert", "magic"]))
        position = draw(st.integers(0, len(data)))
        if action == "flip" and data:
            data[min(position, len(data) - 1)] ^= 1 << draw(st.integers(0, 7))
        elif action == "cut":
            del data[position:]
        elif action == "insert":
            data[position:position] = draw(st.binary(max_size=12))
        else:
            data[position:position] = MAGIC
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_reader_survives_arbitrary_bytes(data: bytes) -> None:
    check_segment_bytes(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_segments())
def test_reader_survives_damaged_segments(data: bytes) -> None:
    check_segment_bytes(data)


@pytest.mark.parametrize(
    "body",
    [msgpack.packb([1, 2, 3]), msgpack.packb({"kind": 1}), msgpack.packb({"type": 1}) + b"\x00"],
    ids=["list", "no-type", "trailing-byte"],
)
def test_checksummed_body_that_is_not_one_event_raises_corruption(body: bytes) -> None:
    fs = SimFileSystem()
    fs.write_bytes(f"/j/{segment_name(1)}", encode_record(1, 0, body))
    journal = Journal.open("/j", fs=fs)
    with pytest.raises(JournalCorruptionError):
        list(journal.replay())
    check_segment_bytes(encode_record(1, 0, body))
