"""Where results go: text lines, tables, or one JSON document per line (``--json``).

Every command reports through one ``Output``. With ``--json`` each result is a single-line
JSON document (datetimes as RFC 3339, dataclasses as their fields); otherwise it is a text
line, and tables are drawn by rich on a terminal and written as tab-separated lines when
stdout is a pipe, so ``svc ... | cut -f1`` works. Errors never go through here (see
``main``). Writes are serialised by a lock: transfer workers report from several threads.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from service.cli.errors import describe, error_code, exit_code_for, message

__all__ = ["Output", "to_json"]


def _default(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        moment = value.astimezone(datetime.UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def to_json(document: Any) -> str:
    """One line of JSON (non-ASCII kept as is)."""
    return json.dumps(document, default=_default, ensure_ascii=False, separators=(",", ":"))


def timestamp(value: datetime.datetime | None) -> str:
    """``2026-11-22 08:41:44`` in UTC, for text output."""
    if value is None:
        return "-"
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


class Output:
    """The result channel of one command run."""

    def __init__(self, *, json_mode: bool) -> None:
        self.json = json_mode
        self.tty = sys.stdout.isatty()
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        with self._lock:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    def failure(self, subject: str, error: BaseException | None) -> None:
        """One failed item: ``svc: subject: Cause`` on stderr, or a JSON document."""
        error = error or RuntimeError("unknown failure")
        if self.json:
            document = {
                "status": "error",
                "subject": subject,
                "error": {"code": error_code(error), "message": message(error)},
                "exit_code": exit_code_for(error),
            }
            self.line(to_json(document))
            return
        cause = describe(error)
        with self._lock:
            sys.stdout.flush()
            sys.stderr.write(f"svc: {subject}: {cause}\n" if subject else f"svc: {cause}\n")
            sys.stderr.flush()

    def result(self, document: Any, text: str | None = None) -> None:
        """``document`` as JSON with ``--json``, else ``text`` (nothing when None)."""
        if self.json:
            self.line(to_json(document))
        elif text is not None:
            self.line(text)

    def table(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[str]],
        documents: Sequence[Mapping[str, Any] | Any],
        *,
        title: str | None = None,
    ) -> None:
        """Rows as a table (terminal) or tab-separated lines (pipe); JSON: one per row."""
        if self.json:
            for document in documents:
                self.line(to_json(document))
            return
        if not self.tty:
            for row in rows:
                self.line("\t".join(row))
            return
        from rich.console import Console  # only a terminal's table needs rich (start-up time)
        from rich.table import Table

        table = Table(title=title, show_edge=False, header_style="bold")
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*row)
        with self._lock:
            Console(highlight=False).print(table)
