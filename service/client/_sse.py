"""A Server-Sent Events parser (the WHATWG ``text/event-stream`` rules), bytes in, events out.

Pure and incremental: ``feed`` takes chunks as they arrive (a line or a UTF-8 character may
be split across chunks) and returns the events completed so far. Lines end in LF, CRLF or CR;
``:`` starts a comment (keep-alives); ``data`` lines join with LF; an event is dispatched at
a blank line and only when it has data; ``id`` persists across events (``last_id``, what a
reconnect sends as ``Last-Event-ID``); ``retry`` sets the reconnection delay. The bucket event
stream of both clients (``_async_events``, ``_events``) reads through it.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

__all__ = ["Message", "SseParser"]


@dataclass(frozen=True)
class Message:
    data: str
    event: str = "message"
    id: str | None = None


class SseParser:
    """Feed it bytes; it returns complete events.

    >>> parser = SseParser()
    >>> parser.feed(b"id: 7\\ndata: {\\"a\\"")
    []
    >>> parser.feed(b": 1}\\r\\n\\r\\n")
    [Message(data='{"a": 1}', event='message', id='7')]
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._data: list[str] = []
        self._event = ""
        self.last_id: str | None = None
        self.retry_ms: int | None = None
        self._skip_lf = False
        self._first = True

    def feed(self, chunk: bytes) -> list[Message]:
        text = self._decoder.decode(chunk)
        if self._first and text:
            text = text.removeprefix("\ufeff")
            self._first = False
        if self._skip_lf and text.startswith("\n"):
            text = text[1:]
        self._skip_lf = False
        self._buffer += text
        events: list[Message] = []
        while True:
            cut = _line_end(self._buffer)
            if cut is None:
                break
            end, width = cut
            if width == 1 and self._buffer[end] == "\r" and end + 1 == len(self._buffer):
                self._skip_lf = True  # a CR at the chunk's end may be half of a CRLF
            line, self._buffer = self._buffer[:end], self._buffer[end + width :]
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> Message | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self.last_id = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> Message | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return Message("\n".join(data), event or "message", self.last_id)


def _line_end(text: str) -> tuple[int, int] | None:
    """Where the first line of ``text`` ends and how wide its terminator is."""
    for index, char in enumerate(text):
        if char == "\n":
            return index, 1
        if char == "\r":
            return (index, 2) if text[index + 1 : index + 2] == "\n" else (index, 1)
    return None
