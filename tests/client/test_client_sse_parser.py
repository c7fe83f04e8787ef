"""The Server-Sent Events parser behind the clients' `events()` (pure: bytes in, messages out)."""

from __future__ import annotations

from service.client._sse import Message, SseParser


def feed_all(chunks: list[bytes]) -> tuple[list[Message], SseParser]:
    parser = SseParser()
    events: list[Message] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    return events, parser


STREAM = (
    b": keep-alive\n\n"
    b'id: 41\ndata: {"type": "object.created", "key": "a"}\n\n'
    b"event: custom\r\nid: 42\r\ndata: line one\r\ndata: line two\r\n\r\n"
    b"retry: 2500\rdata:no-space\r\r"
    b"data: \xc3\xbcn\xc3\xafcode\n\n"
)
EXPECTED = [
    Message('{"type": "object.created", "key": "a"}', "message", "41"),
    Message("line one\nline two", "custom", "42"),
    Message("no-space", "message", "42"),
    Message("ünïcode", "message", "42"),
]


def test_a_stream_parses_into_events_with_ids_types_and_multiline_data() -> None:
    events, parser = feed_all([STREAM])
    assert events == EXPECTED
    assert parser.last_id == "42" and parser.retry_ms == 2500


def test_every_split_of_the_stream_gives_the_same_events() -> None:
    for cut in range(1, len(STREAM)):
        events, _ = feed_all([STREAM[:cut], STREAM[cut:]])
        assert events == EXPECTED, cut


def test_byte_by_byte_feeding_splits_crlf_and_utf8_safely() -> None:
    events, _ = feed_all([STREAM[i : i + 1] for i in range(len(STREAM))])
    assert events == EXPECTED


def test_comments_and_dataless_events_dispatch_nothing() -> None:
    events, parser = feed_all([b":comment\n\nid: 9\n\nevent: x\n\n"])
    assert events == [] and parser.last_id == "9"


def test_an_unterminated_event_waits_for_its_blank_line() -> None:
    parser = SseParser()
    assert parser.feed(b"data: half") == []
    assert parser.feed(b"\n") == []
    assert parser.feed(b"\n") == [Message("half")]
