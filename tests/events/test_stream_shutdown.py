"""A graceful stop with event streams open: the streams end cleanly and nothing is logged
against them (no "Cannot send error response after headers written", no traceback).

A stream is not among the requests a stop waits for; the stop ends it, and the client sees
its body end properly (it reconnects with ``Last-Event-ID``). Run with one serving process
and with two (the stream then passes through a worker to the writer).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx
import pytest

from tests.serverproc import ServerProcess


def hold_stream(
    proc: ServerProcess, bucket: str, opened: threading.Event, lines: list[str]
) -> None:
    """Read a bucket's stream until the server ends it, noting every line."""
    with (
        proc.client() as api,
        api.stream("GET", f"/buckets/{bucket}/events", timeout=httpx.Timeout(30.0)) as response,
    ):
        assert response.status_code == 200
        try:
            for line in response.iter_lines():
                lines.append(line)
                opened.set()
        except httpx.HTTPError as error:  # the stop may cut the chunked body short
            lines.append(f"ended: {type(error).__name__}")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_stop_ends_open_streams_without_an_error_in_the_log(
    server_factory: Callable[..., ServerProcess], workers: str
) -> None:
    proc = server_factory(SERVICE_WORKERS=workers)
    with proc.client() as api:
        assert api.post("/buckets", json={"name": "watched"}).status_code == 201
    streams = []
    for _ in range(3):
        opened, lines = threading.Event(), list[str]()
        reader = threading.Thread(target=hold_stream, args=(proc, "watched", opened, lines))
        reader.start()
        assert opened.wait(10.0), "the stream did not open"
        streams.append((reader, lines))
    assert proc.stop() == 0
    for reader, lines in streams:
        reader.join(10.0)
        assert not reader.is_alive(), "the stream did not end at the stop"
        assert lines[0] == ": stream of object events"
        assert not [line for line in lines if line.startswith("ended:")], lines
    logs = proc.logs()
    assert "Cannot send error response" not in logs, logs
    assert "Traceback" not in logs, logs
    assert "shutting down" in logs
