"""What a transfer reports its progress to: ``NullProgress`` draws nothing.

It is all the engine knows of progress, so the engine does not depend on rich;
``bar.BarProgress`` is what a terminal gets. ``NullProgress`` is used when stdout or stderr
is not a terminal, or with ``--json``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from service.cli.transfer.walk import Entry

__all__ = ["NullProgress"]


class NullProgress:
    """Counts nothing, draws nothing."""

    def count(self, walk: Callable[[], Iterable[Entry]]) -> None:
        return None

    def advance(self, size: int) -> None:
        return None

    def file_done(self) -> None:
        return None

    def close(self) -> None:
        return None
