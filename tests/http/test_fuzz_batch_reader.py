"""The fuzz target ``fuzz/fuzz_batch_reader.py`` on its seeds and on Hypothesis inputs, in
every test run: random bytes, the attack shapes of issue 23 damaged further, and archives
``tarfile`` wrote, damaged by flips, cuts and inserted bytes (``test_tar_reader_props``)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.http.tarkit import ATTACKS, CORPUS_DIR, corpus
from tests.http.test_tar_reader_props import damaged

FUZZ_TARGET = os.path.join(os.path.dirname(__file__), "..", "..", "fuzz", "fuzz_batch_reader.py")


def _load_target() -> Callable[[bytes], None]:
    spec = importlib.util.spec_from_file_location("fuzz_batch_reader", FUZZ_TARGET)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    check: Callable[[bytes], None] = module.check_tar_bytes
    return check


check_tar_bytes = _load_target()


def test_the_committed_seeds_are_the_attack_shapes() -> None:
    """``fuzz/corpus/batch_reader`` holds exactly ``tarkit.corpus()``; after changing the
    attacks, rewrite it with ``tarkit.write_corpus()``."""
    committed = {path.name: path.read_bytes() for path in CORPUS_DIR.glob("*.tar")}
    assert committed == corpus()
    assert {"gnu_sparse_bomb.tar", "pax_size_thirty_digits.tar", "name_not_utf8.tar"} <= set(
        committed
    )


@pytest.mark.parametrize("name", sorted(corpus()))
@pytest.mark.parametrize("piece", range(8))
def test_every_seed_in_every_feeding(name: str, piece: int) -> None:
    check_tar_bytes(bytes([piece]) + corpus()[name][1:])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048))
def test_reader_survives_arbitrary_bytes(data: bytes) -> None:
    check_tar_bytes(data)


@st.composite
def damaged_attacks(draw: st.DrawFn) -> bytes:
    body = bytearray(
        draw(st.sampled_from([a.body for a in ATTACKS.values() if len(a.body) < 1 << 17]))
    )
    for _ in range(draw(st.integers(1, 3))):
        position = draw(st.integers(0, len(body) - 1))
        if draw(st.booleans()):
            body[position] ^= 1 << draw(st.integers(0, 7))
        else:
            body[position:position] = draw(st.binary(min_size=1, max_size=40))
    return bytes([draw(st.integers(0, 7))]) + bytes(body)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_attacks())
def test_reader_survives_damaged_attack_shapes(data: bytes) -> None:
    check_tar_bytes(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged(), st.integers(0, 7))
def test_reader_survives_damaged_archives(body: bytes, piece: int) -> None:
    check_tar_bytes(bytes([piece]) + body)
