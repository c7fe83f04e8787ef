"""Logging in logfmt: the formatter, ``--log-level`` set-up, and the one-line access log.

Every log line, access or not, is one logfmt line on stderr::

    ts=2026-11-22T08:41:44.123Z level=info logger=service.access msg=request request_id=r1
    method=PUT route=/api/v1/buckets/{bucket}/objects/{key} status=200 bytes_in=5 bytes_out=310
    duration_ms=12.345 credential=bk_x remote=127.0.0.1

(one line in reality). Values that are empty or hold a space, ``=``, a quote or a
non-printable character are double-quoted, with ``\\``, ``"`` and control characters
escaped, so a line can never be split or forged by what a client sent. The access line carries
the route TEMPLATE, never the raw path: object keys stay out of the logs.

Secrets never reach a line: ``redact`` replaces ``sk_...`` secrets and the credential of
``Bearer``/``Basic`` authorization values with ``****``. It runs on every key and value,
messages and tracebacks included, a guard against a secret passed by mistake. It errs on the
side of safety: any ``sk_`` run is masked, even inside a word (``disk_free`` reads ``di****``).

Lines are written in batches: the server's handler holds them for at most
``flush_interval`` seconds (a warning or an error flushes at once), because one ``write``
per request costs as much as a small GET itself. A SIGKILL can lose that fraction of a
second of access lines; a graceful stop flushes them.

Thread-safety: the formatter is stateless and safe from any thread (executor threads log
too); the handler's buffer is guarded by the handler's lock; ``configure_logging`` changes
the root logger and belongs to start-up.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TextIO

from service.common.timefmt import now_ms, rfc3339_ms

LOG_LEVELS = ("debug", "info", "warning", "error")
"""Values of ``--log-level`` / ``SERVICE_LOG_LEVEL``."""
ACCESS_LOGGER_NAME = "service.access"
REDACTED = "****"

_SECRET_PATTERN = re.compile(r"sk_[A-Za-z0-9_\-]+")
_AUTHORIZATION_PATTERN = re.compile(r"\b(Bearer|Basic)\s+[^\s\"',;]+", re.IGNORECASE)
_BARE_VALUE = re.compile(r"[^\s=\"\\]+")
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
_WHITESPACE = re.compile(r"\s")
_SAFE_KEYS: dict[str, str] = {}
"""Keys already made safe (the access line's are always the same few); bounded below."""
_SAFE_KEYS_MAX = 1024
_SAFE_VALUES: dict[str, str] = {}
"""Short string values already redacted and quoted (level, logger, msg, method, route,
credential, remote repeat on every line); emptied whenever it reaches its bound."""
_SAFE_VALUES_MAX = 1024
_SAFE_VALUE_MAX_CHARS = 128
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def redact(text: str) -> str:
    """``text`` with secret keys and authorization credentials replaced by ``****``.

    >>> redact("curl -u bk_1:sk_AbC-9 -H 'Authorization: Bearer tok.en'")
    "curl -u bk_1:**** -H 'Authorization: Bearer ****'"
    """
    # Cheap exact pre-checks (the hot path is the access line, once per request): a secret
    # match needs a literal ``sk_``, an authorization match needs whitespace after the word.
    if "sk_" in text:
        text = _SECRET_PATTERN.sub(REDACTED, text)
    if _WHITESPACE.search(text) is None:
        return text
    return _AUTHORIZATION_PATTERN.sub(_redact_authorization, text)


def _redact_authorization(match: re.Match[str]) -> str:
    return f"{match.group(1)} {REDACTED}"


def _quote(value: str) -> str:
    if value and value.isprintable() and _BARE_VALUE.fullmatch(value):
        return value
    return '"' + "".join(_escape(char) for char in value) + '"'


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    if char.isprintable():
        return char
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _text(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def logfmt(pairs: Iterable[tuple[str, object]]) -> str:
    """One logfmt line (no newline) from ``(key, value)`` pairs, every value redacted.

    >>> logfmt([("status", 200), ("route", "/a/{key}"), ("msg", 'say "hi"'), ("x", None)])
    'status=200 route=/a/{key} msg="say \\\\"hi\\\\"" x=-'
    """
    parts = []
    for key, value in pairs:
        parts.append(f"{_safe_key(key)}={_value_text(value)}")
    return " ".join(parts)


def _safe_key(key: str) -> str:
    safe = _SAFE_KEYS.get(key)
    if safe is None:
        safe = _KEY_UNSAFE.sub("_", redact(key)) or "_"
        if len(_SAFE_KEYS) < _SAFE_KEYS_MAX:
            _SAFE_KEYS[key] = safe
    return safe


def _value_text(value: object) -> str:
    """``_quote(redact(_text(value)))``, skipping what cannot change numbers and None."""
    kind = type(value)
    if kind is int:
        return str(value)  # digits and a sign: bare, and nothing to redact
    if kind is float:
        return f"{value:.3f}"  # digits, sign, dot, or nan/inf: bare, nothing to redact
    if value is None:
        return "-"
    if kind is not str or not isinstance(value, str):
        return _quote(redact(_text(value)))
    safe = _SAFE_VALUES.get(value)
    if safe is None:
        safe = _quote(redact(value))
        if len(value) <= _SAFE_VALUE_MAX_CHARS:
            if len(_SAFE_VALUES) >= _SAFE_VALUES_MAX:
                _SAFE_VALUES.clear()
            _SAFE_VALUES[value] = safe
    return safe


def record_line(
    created_ms: int, level: str, logger: str, message: str, fields: Mapping[str, object]
) -> str:
    """One logfmt line: ``ts level logger msg`` and then ``fields``, in order."""
    pairs: list[tuple[str, object]] = [
        ("ts", rfc3339_ms(created_ms)),
        ("level", level),
        ("logger", logger),
        ("msg", message),
    ]
    pairs.extend(fields.items())
    return logfmt(pairs)


class LogfmtFormatter(logging.Formatter):
    """Formats any record as ``ts level logger msg`` plus the fields in ``extra={"fields":
    {...}}``, plus ``exc`` (the traceback, escaped onto the same line) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        extra: dict[str, object] = (
            {str(key): value for key, value in fields.items()} if isinstance(fields, dict) else {}
        )
        if record.exc_info:
            extra["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            extra["exc"] = record.exc_text
        return record_line(
            int(record.created * 1000),
            record.levelname.lower(),
            record.name,
            record.getMessage(),
            extra,
        )


_MAX_PENDING_LINES = 1024


class _LogfmtHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler ``configure_logging`` installs; its class marks it for replacement.

    With a ``flush_interval`` it holds lines back and writes them together: a timer
    started by the first held line writes them at most that many seconds later; a record
    at warning or above, or a full batch, writes them at once.
    """

    def __init__(self, stream: TextIO | None, flush_interval: float) -> None:
        super().__init__(stream)
        self.flush_interval = flush_interval
        self.pending: list[str] = []
        self.timer: threading.Timer | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self.take(line, record.levelno)  # Handler.handle holds self.lock around emit

    def write_line(self, line: str, level: int) -> None:
        """Write a line already formatted (the access line's shortcut, see ``log_access``)."""
        with self.lock:  # type: ignore[union-attr]  # created in Handler.__init__
            self.take(line, level)

    def take(self, line: str, level: int) -> None:
        self.pending.append(line + self.terminator)
        full = len(self.pending) >= _MAX_PENDING_LINES
        if self.flush_interval <= 0 or level >= logging.WARNING or full:
            self.write_pending()
        elif self.timer is None:
            self.timer = threading.Timer(self.flush_interval, self.flush)
            self.timer.daemon = True
            self.timer.start()

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]  # created in Handler.__init__
            self.timer = None
            self.write_pending()
            super().flush()

    def write_pending(self) -> None:
        """Write the held lines; a failure is reported as logging reports one (on stderr,
        ``Handler.handleError``) and never reaches the request that logged."""
        if not self.pending:
            return
        text = "".join(self.pending)
        self.pending.clear()
        try:
            self.stream.write(text)
            self.stream.flush()
        except Exception:
            self.handleError(logging.makeLogRecord({"msg": "writing log lines failed"}))

    def close(self) -> None:
        self.flush()
        super().close()


def _only_logfmt_handler(logger: logging.Logger) -> _LogfmtHandler | None:
    """The handler a record of ``logger`` at info would reach, when that is exactly one of
    ours and no filter stands in the way; None otherwise (then the record goes the normal
    way, to every handler configured)."""
    found: _LogfmtHandler | None = None
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters:
            return None
        for handler in current.handlers:
            if found is not None or not isinstance(handler, _LogfmtHandler):
                return None
            if handler.filters or handler.level > logging.INFO:
                return None
            found = handler
        current = current.parent if current.propagate else None
    return found


def configure_logging(
    level: str, stream: TextIO | None = None, *, flush_interval: float = 0.0
) -> None:
    """Send every log record at ``level`` or above to ``stream`` (stderr) in logfmt.

    ``flush_interval`` > 0 batches lines (see the module docstring); 0 writes each at once.
    Calling it again replaces the handler it installed before (and only that one), so tests
    and a re-configuration do not duplicate lines. Records skip what no line prints (the
    caller's frame, thread and process names), the logging HOWTO's "Optimization" advice.
    """
    name = level.strip().lower()
    if name not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _LogfmtHandler):
            root.removeHandler(handler)
            handler.close()
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = _LogfmtHandler(stream, flush_interval)
    handler.setFormatter(LogfmtFormatter())
    root.addHandler(handler)
    root.setLevel(name.upper())


@dataclass(frozen=True, slots=True)
class FinishedRequest:
    """One answered request, as every path that answers one records it (handlers, bare
    delegates, the connection's refusals, the forwarding of a worker): the access line's
    fields and what the request metrics count."""

    request_id: str
    method: str
    route: str
    """The route TEMPLATE (``/api/v1/buckets/{bucket}``), never the raw path."""
    status: int
    bytes_in: int
    bytes_out: int
    duration_s: float
    credential: str | None
    """The access key id or user id that authenticated it; None when anonymous."""
    remote: str | None


def log_access(finished: FinishedRequest, logger: logging.Logger | None = None) -> None:
    """Log the one access line of a finished request, at info level (``credential`` None is
    logged as ``-``; never a secret)."""
    target = logger if logger is not None else logging.getLogger(ACCESS_LOGGER_NAME)
    if not target.isEnabledFor(logging.INFO):
        return
    fields: dict[str, object] = {
        "request_id": finished.request_id,
        "method": finished.method,
        "route": finished.route,
        "status": finished.status,
        "bytes_in": finished.bytes_in,
        "bytes_out": finished.bytes_out,
        "duration_ms": finished.duration_s * 1000,
        "credential": finished.credential,
        "remote": finished.remote,
    }
    handler = _only_logfmt_handler(target)
    if handler is None:
        target.info("request", extra={"fields": fields})
        return
    # The same line the formatter would make, without a LogRecord and the logging
    # machinery around it: a quarter of our own work on a small GET went there.
    handler.write_line(record_line(now_ms(), "info", target.name, "request", fields), logging.INFO)
