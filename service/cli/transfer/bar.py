"""The transfer display on a terminal: files, bytes, rate and ETA.

``BarProgress`` draws with rich on stderr (stdout keeps the results) and is fed from worker
threads (rich's ``Progress`` is thread-safe). Its totals grow while a background thread
counts the source, so the ETA firms up as soon as the count is done, without holding the
listing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from service.cli.transfer.progress import NullProgress
from service.cli.transfer.walk import Entry

__all__ = ["BarProgress"]


class BarProgress(NullProgress):
    """A rich progress bar: ``files done/total``, bytes, rate and ETA."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._files = 0
        self._total_files = 0
        self._counted = False
        self._lock = threading.Lock()
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._task = self._progress.add_task(self._describe(), total=None)
        self._progress.start()

    def _describe(self) -> str:
        total = str(self._total_files) if self._counted else f"{self._total_files}+"
        return f"{self._label} {self._files}/{total} files"

    def count(self, walk: Callable[[], Iterable[Entry]]) -> None:
        """Count the source on a daemon thread; the bar's total grows as it goes."""

        def run() -> None:
            size = 0
            try:
                for entry in walk():
                    size += entry.size
                    with self._lock:
                        self._total_files += 1
                    if self._total_files % 500 == 0:
                        self._progress.update(self._task, total=size, description=self._describe())
            except Exception:
                return  # the count is cosmetic; the transfer reports real errors
            with self._lock:
                self._counted = True
            self._progress.update(self._task, total=size, description=self._describe())

        threading.Thread(target=run, name="svc-count", daemon=True).start()

    def advance(self, size: int) -> None:
        self._progress.advance(self._task, size)

    def file_done(self) -> None:
        with self._lock:
            self._files += 1
            description = self._describe()
        self._progress.update(self._task, description=description)

    def close(self) -> None:
        self._progress.stop()
