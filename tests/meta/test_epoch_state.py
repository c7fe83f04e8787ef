"""The epoch history in the metadata state: applied, refused, snapshotted."""

from __future__ import annotations

from service.meta import MetaState, decode_snapshot, encode_snapshot, records
from service.meta.epoch_state import IMPLICIT_FIRST, EpochStart


def test_a_history_without_epoch_records_reads_as_epoch_one_from_record_one() -> None:
    state = MetaState()
    assert state.epoch_history() == (IMPLICIT_FIRST,)
    assert not state.epochs_recorded()


def test_epochs_apply_in_order_and_an_older_or_earlier_one_is_refused() -> None:
    state = MetaState()
    assert state.apply(records.epoch_started(epoch=1, sequence=1, server_id="a", at=1)).ok
    assert state.apply(records.epoch_started(epoch=2, sequence=9, server_id="b", at=2)).ok
    assert not state.apply(records.epoch_started(epoch=2, sequence=12, server_id="c", at=3)).ok
    assert not state.apply(records.epoch_started(epoch=3, sequence=9, server_id="c", at=3)).ok
    assert state.epoch_history() == (EpochStart(1, 1, "a", 1), EpochStart(2, 9, "b", 2))


def test_a_promotion_of_an_old_data_dir_keeps_the_implicit_first_epoch() -> None:
    state = MetaState()
    assert state.apply(records.epoch_started(epoch=2, sequence=40, server_id="b", at=2)).ok
    assert state.epoch_history() == (IMPLICIT_FIRST, EpochStart(2, 40, "b", 2))


def test_the_history_survives_a_snapshot() -> None:
    state = MetaState()
    state.apply(records.epoch_started(epoch=1, sequence=1, server_id="a", at=1))
    state.apply(records.epoch_started(epoch=2, sequence=5, server_id="b", at=2))
    again = decode_snapshot(encode_snapshot(state.freeze()))
    assert again.epoch_history() == state.epoch_history()
