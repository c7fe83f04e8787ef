"""The epochs of a data dir's history: its part of the metadata state and of ``apply``.

An epoch is one primary's stretch of the journal, like a Postgres timeline: a primary's
first start commits ``EpochStarted`` for epoch 1, and each promotion of a standby commits
the next epoch at the sequence where it begins (``service.replication.promotion``). The
history (which epoch began at which sequence, and on which server) is kept with the state,
so snapshots, the index's rest and a standby's bootstrap carry it, and a standby applies
its primary's epoch records like any other. ``service.replication.epochs`` compares two
histories to refuse a primary of an older epoch or a diverged former primary.

A data dir written before epochs existed holds no ``EpochStarted``: its history reads as
epoch 1 from sequence 1 on a server of unknown id (``history`` below), deterministically, so
every older data dir and every standby copied from one agree.

Thread-safety: like ``MetaState``, mutate only on the event-loop thread; entries are
immutable tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from service.meta import fields, records
from service.meta.outcome import Outcome, accepted, rejected

Handler = Callable[[Mapping[str, Any]], Outcome]


class EpochStart(NamedTuple):
    """Epoch ``epoch`` began at record ``sequence`` on server ``server_id`` at ``at`` (ms)."""

    epoch: int
    sequence: int
    server_id: str | None
    at: int


IMPLICIT_FIRST = EpochStart(1, 1, None, 0)
"""The first epoch of a history that recorded none (a data dir older than epochs)."""


class Epochs:
    """The epoch records applied, oldest first (module docstring)."""

    def __init__(self) -> None:
        self._recorded: list[EpochStart] = []

    def handlers(self) -> dict[str, Handler]:
        return {records.EPOCH_STARTED: self._epoch_started}

    def _epoch_started(self, event: Mapping[str, Any]) -> Outcome:
        entry = EpochStart(
            fields.integer(event, "epoch", minimum=1),
            fields.integer(event, "sequence", minimum=1),
            fields.text(event, "server_id"),
            fields.integer(event, "at"),
        )
        current = self.history()[-1]
        if self._recorded and entry.epoch <= current.epoch:
            return rejected("InvalidState", f"epoch {entry.epoch} is not after {current.epoch}")
        if entry.epoch > 1 and entry.sequence <= current.sequence:
            return rejected("InvalidState", f"epoch {entry.epoch} cannot begin before its parent")
        self._recorded.append(entry)
        return accepted(None)

    def history(self) -> tuple[EpochStart, ...]:
        """Every epoch, oldest first; never empty (module docstring)."""
        recorded = tuple(self._recorded)
        if not recorded or recorded[0].epoch != 1:
            return (IMPLICIT_FIRST, *recorded)
        return recorded

    def recorded(self) -> bool:
        """Whether any ``EpochStarted`` was applied (a primary commits epoch 1 if not)."""
        return bool(self._recorded)

    def images(self) -> tuple[EpochStart, ...]:
        return tuple(self._recorded)

    def load(self, rows: tuple[EpochStart, ...]) -> None:
        self._recorded = list(rows)
