"""The writer's side of the local socket: workers' commits join its group commit.

A worker sends an event it pre-checked against the shared index; the writer commits it with
its own ``Engine.commit`` (so ``MetaState.apply`` re-checks every condition, as for its own
requests) and answers with the outcome, or with the engine's refusal. ``Engine.commit`` returns
only after the index transaction holding the record committed (the journal's batch listener
runs before any appender resumes), so a worker that reads the index after the answer sees the
write: read-your-writes across processes.

The writer tells every connected worker of each payload it quarantines (the scrub;
``tell_quarantined`` listens to the engine's quarantine), so no process serves it from the
next request on. Workers also send notes there (``service.procs.notes``): access keys' uses,
which the writer journals with its own, and request figures for its ``system/performance``.
Whoever else must hear of a worker's committed event (the multipart uploads carry the
object's hash over a part written in place) is given as ``on_committed``.

The socket lives in a directory only the server's user may enter (``run/`` in the data dir).

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from service.common.api_errors import ServiceError
from service.engine.core import Engine
from service.observability import PerformanceRecorder
from service.procs.wire import (
    NOTE_ID,
    OK,
    REFUSED,
    FrameError,
    encode_error,
    encode_outcome,
    pack,
    read_frame,
)

log = logging.getLogger("service.procs")


class CommitService:
    """Listens on ``path`` and commits what workers send (see the module docstring)."""

    engine: Engine
    """Set at ``start``."""

    def __init__(self, performance: PerformanceRecorder, path: str) -> None:
        self._performance = performance
        self.path = path
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._peers: set[asyncio.StreamWriter] = set()

    async def start(
        self,
        engine: Engine,
        on_committed: Callable[[Mapping[str, Any]], Awaitable[None]],
    ) -> None:
        """Commit with ``engine``; ``on_committed`` hears of each event a worker committed."""
        self.engine = engine
        self._on_committed = on_committed
        self._server = await asyncio.start_unix_server(self._serve, path=self.path)

    def tell_quarantined(self, payload_ids: list[str]) -> None:
        """Workers refuse a quarantined payload from the next request on."""
        frame = pack([NOTE_ID, {"quarantined": payload_ids}])
        for peer in list(self._peers):
            if not peer.is_closing():
                peer.write(frame)

    async def stop(self) -> None:
        """Stop listening; commits already received finish and are answered."""
        if self._server is not None:
            self._server.close()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._peers.add(writer)
        try:
            while True:
                frame = await read_frame(reader)
                if frame[0] == NOTE_ID:
                    self._observe(frame[1])
                    continue
                task = asyncio.get_running_loop().create_task(self._commit(frame, writer))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the worker went away
        except (FrameError, ValueError) as exc:
            log.error("a worker sent a malformed frame (%s); closing its connection", exc)
        finally:
            self._peers.discard(writer)
            writer.close()

    def _observe(self, notes: dict[str, Any]) -> None:
        """A worker's notes: access keys' uses and request figures (``service.procs.notes``)."""
        for key_id, at_ms in notes.get("uses", {}).items():
            self.engine.key_usage.touch(key_id, at_ms)
        for sample in notes.get("put", ()):
            self._performance.record_put(*sample)
        for count, size_bytes in notes.get("stored", ()):
            self._performance.record_stored(count, size_bytes)
        for sample in notes.get("get", ()):
            self._performance.record_get(*sample)

    async def _commit(self, frame: list[Any], out: asyncio.StreamWriter) -> None:
        request_id, event = frame[0], frame[1]
        try:
            outcome = await self.engine.commit(event)
        except ServiceError as error:
            message = [request_id, REFUSED, *encode_error(error)]
        else:
            message = [request_id, OK, encode_outcome(outcome)]
        if not out.is_closing():
            with contextlib.suppress(ConnectionError):
                out.write(pack(message))
        if message[1] == OK and outcome.ok:
            await self._on_committed(event)
