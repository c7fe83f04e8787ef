"""Access log and logging set-up: one logfmt line per request, escaped, and never a secret."""

from __future__ import annotations

import io
import logging
import re
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.observability.access_log import (
    FinishedRequest,
    LogfmtFormatter,
    configure_logging,
    log_access,
    logfmt,
    redact,
)

_PAIR = re.compile(r'([^\s=]+)=("(?:[^"\\]|\\.)*"|[^\s"]*)')
_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t"}
ACCESS_FIELDS = [
    "ts",
    "level",
    "logger",
    "msg",
    "request_id",
    "method",
    "route",
    "status",
    "bytes_in",
    "bytes_out",
    "duration_ms",
    "credential",
    "remote",
]


def _unescape(match: re.Match[str]) -> str:
    escape = match.group(1)
    return chr(int(escape[1:], 16)) if escape[0] in "uU" else _UNESCAPES[escape]


def parse_logfmt(line: str) -> dict[str, str]:
    """A strict reader: the whole line must be key=value pairs separated by single spaces."""
    assert "\n" not in line
    pairs = list(_PAIR.finditer(line))
    assert " ".join(match.group(0) for match in pairs) == line, line
    parsed = {}
    for match in pairs:
        raw = match.group(2)
        if raw.startswith('"'):
            raw = re.sub(r"\\(u[0-9a-f]{4}|U[0-9a-f]{8}|.)", _unescape, raw[1:-1])
        parsed[match.group(1)] = raw
    return parsed


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    configure_logging("info", stream)
    yield stream
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


def access(**overrides: object) -> None:
    fields: dict[str, object] = {
        "request_id": "req-1",
        "method": "PUT",
        "route": "/api/v1/buckets/{bucket}/objects/{key}",
        "status": 200,
        "bytes_in": 1024,
        "bytes_out": 310,
        "duration_s": 0.0123456,
        "credential": "bk_abc",
        "remote": "127.0.0.1",
    }
    fields.update(overrides)
    logger = fields.pop("logger", None)
    log_access(FinishedRequest(**fields), logger)  # type: ignore[arg-type]


def test_access_line_carries_every_field_in_order(log_stream: io.StringIO) -> None:
    access()
    [line] = log_stream.getvalue().splitlines()
    parsed = parse_logfmt(line)
    assert list(parsed) == ACCESS_FIELDS
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", parsed["ts"])
    assert parsed["level"] == "info"
    assert parsed["logger"] == "service.access"
    assert parsed["route"] == "/api/v1/buckets/{bucket}/objects/{key}"
    assert (parsed["status"], parsed["bytes_in"], parsed["bytes_out"]) == ("200", "1024", "310")
    assert parsed["duration_ms"] == "12.346"
    assert parsed["credential"] == "bk_abc"


def test_anonymous_request_logs_a_dash_for_credential(log_stream: io.StringIO) -> None:
    access(credential=None, remote=None)
    parsed = parse_logfmt(log_stream.getvalue().strip())
    assert (parsed["credential"], parsed["remote"]) == ("-", "-")


def test_hostile_values_cannot_split_or_forge_a_line(log_stream: io.StringIO) -> None:
    access(request_id='x" status=500\nts=forged level=error', method="GET\r\n")
    lines = log_stream.getvalue().splitlines()
    assert len(lines) == 1
    parsed = parse_logfmt(lines[0])
    assert parsed["request_id"] == 'x" status=500\nts=forged level=error'
    assert parsed["method"] == "GET\r\n"
    assert parsed["status"] == "200"


@given(st.text(max_size=60))
def test_any_value_round_trips_through_logfmt(text: str) -> None:
    parsed = parse_logfmt(logfmt([("a", text), ("b", 1)]))
    assert parsed == {"a": redact(text), "b": "1"}


def test_access_lines_respect_the_log_level(log_stream: io.StringIO) -> None:
    configure_logging("warning", log_stream)
    access()
    logging.getLogger("service.test").warning("disk %s", "low")
    lines = log_stream.getvalue().splitlines()
    assert len(lines) == 1
    assert parse_logfmt(lines[0])["msg"] == "disk low"


def test_debug_level_lets_debug_records_through(log_stream: io.StringIO) -> None:
    configure_logging("DEBUG", log_stream)
    logging.getLogger("service.test").debug("detail")
    assert parse_logfmt(log_stream.getvalue().strip())["level"] == "debug"


def test_reconfiguring_does_not_duplicate_lines(log_stream: io.StringIO) -> None:
    configure_logging("info", log_stream)
    configure_logging("info", log_stream)
    access()
    assert len(log_stream.getvalue().splitlines()) == 1


def test_unknown_log_level_is_refused() -> None:
    with pytest.raises(ValueError, match="debug, info, warning, error"):
        configure_logging("verbose", io.StringIO())


def test_traceback_stays_on_one_line(log_stream: io.StringIO) -> None:
    try:
        raise RuntimeError("boom with sk_SECRETsecret")
    except RuntimeError:
        logging.getLogger("service.test").exception("handler failed")
    [line] = log_stream.getvalue().splitlines()
    parsed = parse_logfmt(line)
    assert "RuntimeError: boom" in parsed["exc"]
    assert "SECRETsecret" not in line


def test_extra_fields_are_rendered_and_their_keys_sanitised() -> None:
    record = logging.LogRecord("service.gc", logging.INFO, __file__, 1, "swept", None, None)
    record.fields = {"removed": 3, "bad key=": "v"}
    parsed = parse_logfmt(LogfmtFormatter().format(record))
    assert parsed["removed"] == "3"
    assert parsed["bad_key_"] == "v"


def test_authorization_values_are_redacted(log_stream: io.StringIO) -> None:
    logging.getLogger("service.test").info(
        "headers Authorization: Bearer eyJhbGciOi.payload.sig and Basic YmtfMTpza18y"
    )
    line = log_stream.getvalue()
    assert "eyJhbGciOi" not in line
    assert "YmtfMTpza18y" not in line
    assert "Bearer ****" in line
    assert "Basic ****" in line


secret_bodies = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-",
    min_size=8,
    max_size=40,
)


@given(
    secret=secret_bodies,
    before=st.text(max_size=20),
    after=st.text(max_size=20),
    field=st.sampled_from(["request_id", "method", "route", "credential", "remote"]),
)
def test_no_sk_secret_survives_in_any_field(
    secret: str, before: str, after: str, field: str
) -> None:
    stream = io.StringIO()
    logger = logging.getLogger("service.test.redaction")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LogfmtFormatter())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        overrides: dict[str, object] = {field: before + "sk_" + secret + after, "logger": logger}
        access(**overrides)
    finally:
        logger.removeHandler(handler)
    line = stream.getvalue()
    assert "sk_" + secret not in line
    assert secret not in parse_logfmt(line.strip())[field] or secret in before + after


def test_batched_lines_are_written_within_the_flush_interval(log_stream: io.StringIO) -> None:
    configure_logging("info", log_stream, flush_interval=0.05)
    access(request_id="held")
    assert log_stream.getvalue() == ""  # held back, written with the next batch
    deadline = time.monotonic() + 5
    while "held" not in log_stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert parse_logfmt(log_stream.getvalue().strip())["request_id"] == "held"


def test_a_warning_writes_the_held_lines_at_once_in_order(log_stream: io.StringIO) -> None:
    configure_logging("info", log_stream, flush_interval=60)
    access(request_id="first")
    logging.getLogger("service.test").warning("then this")
    lines = [parse_logfmt(line) for line in log_stream.getvalue().splitlines()]
    assert [line.get("request_id", line["msg"]) for line in lines] == ["first", "then this"]


def test_reconfiguring_writes_the_lines_the_old_handler_held(log_stream: io.StringIO) -> None:
    configure_logging("info", log_stream, flush_interval=60)
    access(request_id="held")
    configure_logging("info", log_stream)
    assert parse_logfmt(log_stream.getvalue().strip())["request_id"] == "held"


def _without_ts(line: str) -> dict[str, str]:
    parsed = parse_logfmt(line)
    parsed.pop("ts")
    return parsed


def test_the_shortcut_line_equals_the_formatted_record(log_stream: io.StringIO) -> None:
    access(request_id='odd "id"=x')  # only our handler: written without a LogRecord
    access_logger = logging.getLogger("service.access")
    allow_all = logging.Filter()
    access_logger.addFilter(allow_all)  # a filter forces the ordinary logging path
    try:
        access(request_id='odd "id"=x')
    finally:
        access_logger.removeFilter(allow_all)
    shortcut, formatted = log_stream.getvalue().splitlines()
    assert _without_ts(shortcut) == _without_ts(formatted)
    assert shortcut.split(" ", 1)[1] == formatted.split(" ", 1)[1]


def test_another_handler_still_receives_access_records(log_stream: io.StringIO) -> None:
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    collector = Collect()
    logging.getLogger("service.access").addHandler(collector)
    try:
        access(request_id="seen-twice")
    finally:
        logging.getLogger("service.access").removeHandler(collector)
    assert [record.fields["request_id"] for record in records] == ["seen-twice"]  # type: ignore[attr-defined]
    assert parse_logfmt(log_stream.getvalue().strip())["request_id"] == "seen-twice"
