"""A worker's side of the local socket: send events to the writer, await their outcomes.

Notes go to the writer the same way, batched per loop iteration, without an answer: access
keys' uses (the writer keeps every process's and journals them, ``service.engine.key_usage``) and
each PUT's and GET's figures (the writer's ``system/performance`` covers every process).

One connection, opened on first use and again after it broke; many commits in flight on it,
each matched to its answer by a request id. While the writer is down (restarting after a
crash, or stopping) a commit raises ``NotServingError`` with a retry hint: the client gets 503
and ``Retry-After``. A commit whose answer was lost with the connection gets the same: the
record may or may not have been applied, which is what a crash of a single process means too
(the client retries, and a retry of a PUT or DELETE is idempotent in effect).

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from typing import Any

from service.engine.errors import NotServingError
from service.meta import Outcome
from service.procs.wire import (
    NOTE_ID,
    OK,
    FrameError,
    decode_error,
    decode_outcome,
    pack,
    read_frame,
)

log = logging.getLogger("service.procs")

RETRY_SECONDS = 1
"""The hint sent while the writer is away (it restarts within about a second)."""


class _Connection:
    """One connection to the writer and the commits awaiting an answer on it."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        on_note: Callable[[dict[str, Any]], None],
    ) -> None:
        self.writer = writer
        self._on_note = on_note
        self.pending: dict[int, asyncio.Future[list[Any]]] = {}
        self.reading = asyncio.get_running_loop().create_task(self._read(reader))

    @property
    def open(self) -> bool:
        return not self.writer.is_closing()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                frame = await read_frame(reader)
                if frame[0] == NOTE_ID:
                    self._on_note(frame[1])
                    continue
                future = self.pending.get(frame[0])
                if future is not None and not future.done():
                    future.set_result(frame)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except (FrameError, ValueError) as exc:
            log.error("the writer sent a malformed frame (%s)", exc)
        finally:
            self.writer.close()
            lost = NotServingError(
                "the metadata writer stopped before answering; retry", RETRY_SECONDS
            )
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(lost)


class WriterLink:
    """Commits through the writer listening on ``path``."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._connection: _Connection | None = None
        self._connecting: asyncio.Lock | None = None
        self._ids = itertools.count(1)
        self._notes: dict[str, Any] | None = None
        self.on_note: Callable[[dict[str, Any]], None] = lambda note: None
        """Told of the writer's notes (payloads it quarantined)."""

    def note_use(self, access_key_id: str, at_ms: int) -> None:
        """An access key was used (the writer keeps every process's uses and journals them)."""
        uses = self._pending()["uses"]
        uses[access_key_id] = max(at_ms, uses.get(access_key_id, 0))

    def note_put(self, sample: list[float]) -> None:
        """One PUT's figures for the writer's ``PerformanceRecorder.record_put``."""
        self._pending()["put"].append(sample)

    def note_stored(self, figures: list[int]) -> None:
        """``[count, bytes]`` for the writer's ``PerformanceRecorder.record_stored``."""
        self._pending()["stored"].append(figures)

    def note_get(self, sample: list[float]) -> None:
        """One GET's figures for the writer's ``PerformanceRecorder.record_get``."""
        self._pending()["get"].append(sample)

    def _pending(self) -> dict[str, Any]:
        """The notes to send at the end of this loop iteration (one frame for all)."""
        if self._notes is None:
            self._notes = {"uses": {}, "put": [], "stored": [], "get": []}
            asyncio.get_running_loop().call_soon(self._send_notes)
        return self._notes

    def _send_notes(self) -> None:
        notes, self._notes = self._notes, None
        connection = self._connection
        if connection is not None and connection.open:
            connection.writer.write(pack([NOTE_ID, notes]))
        else:
            asyncio.get_running_loop().create_task(self._send_notes_connected(notes))

    async def _send_notes_connected(self, notes: dict[str, Any] | None) -> None:
        try:
            connection = await self._connect()
        except NotServingError:
            return  # lost: figures and last-use times are freshness, not data
        connection.writer.write(pack([NOTE_ID, notes]))

    async def commit(self, event: dict[str, Any]) -> Outcome:
        """The outcome of committing ``event`` in the writer, or the writer's refusal."""
        connection = await self._connect()
        request_id = next(self._ids)
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        connection.pending[request_id] = future
        try:
            connection.writer.write(pack([request_id, event]))
            reply = await future
        finally:
            connection.pending.pop(request_id, None)
        if reply[1] == OK:
            return decode_outcome(reply[2])
        raise decode_error(reply[2:])

    async def connect(self) -> None:
        """Connect now if not connected (so the writer's notes reach this process); a writer
        that is away is tried again at the next call."""
        with contextlib.suppress(NotServingError):
            await self._connect()

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.writer.close()
            connection.reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await connection.reading

    async def _connect(self) -> _Connection:
        if self._connection is not None and self._connection.open:
            return self._connection
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._connection is None or not self._connection.open:
                try:
                    reader, writer = await asyncio.open_unix_connection(self._path)
                except OSError:
                    raise NotServingError(
                        "the metadata writer is restarting", RETRY_SECONDS
                    ) from None
                self._connection = _Connection(reader, writer, self.on_note)
            return self._connection
