"""The writer's side of the local socket: workers' commits join its group commit.

A worker sends an event it pre-checked against the shared index; the writer commits it with
its own ``Engine.commit`` (so ``MetaState.apply`` re-checks every condition, as for its own
requests) and answers with the outcome, or with the engine's refusal. ``Engine.commit`` returns
only after the index transaction holding the record committed (the journal's batch listener
runs before any appender resumes), so a worker that reads the index after the answer sees the
write: read-your-writes across processes.

The writer tells every connected worker of each payload it quarantines (the scrub), so no
process serves it from the next request on. Workers also send notes there
(``service.procs.notes``): access keys' uses, which the writer journals with its own, and
request figures for its ``system/performance``.

The socket lives in a directory only the server's user may enter (``run/`` in the data dir).

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

from service.common.api_errors import ApiError
from service.engine.core import Engine
from service.index.lmdb_index import LmdbObjectIndex
from service.multipart.in_place import direct_parts_of
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

    def __init__(self, engine: Engine, performance: PerformanceRecorder, path: str) -> None:
        self._engine = engine
        self._performance = performance
        self.path = path
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._peers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._engine.quarantined = _Quarantine(self._engine.quarantined, self._tell_quarantined)
        self._server = await asyncio.start_unix_server(self._serve, path=self.path)

    def _tell_quarantined(self, payload_ids: list[str]) -> None:
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
            self._engine.key_usage.touch(key_id, at_ms)
        for sample in notes.get("put", ()):
            self._performance.record_put(*sample)
        for sample in notes.get("get", ()):
            self._performance.record_get(*sample)

    async def _commit(self, frame: list[Any], out: asyncio.StreamWriter) -> None:
        request_id, event = frame[0], frame[1]
        try:
            outcome = await self._engine.commit(event)
        except ApiError as error:
            message = [request_id, REFUSED, *encode_error(error)]
        else:
            message = [request_id, OK, encode_outcome(outcome)]
        if not out.is_closing():
            with contextlib.suppress(ConnectionError):
                out.write(pack(message))
        if message[1] == OK and outcome.ok:
            # A part a worker wrote in place: the writer carries the object's hash over it.
            await direct_parts_of(self._engine).note_committed(event)


class _Quarantine(set[str]):
    """The writer's quarantined payload ids, telling the workers of each one added."""

    def __init__(self, ids: set[str], on_add: Callable[[list[str]], None]) -> None:
        super().__init__(ids)
        self._on_add = on_add

    def add(self, payload_id: str) -> None:
        super().add(payload_id)
        self._on_add([payload_id])

    def __ior__(self, other: AbstractSet[str]) -> _Quarantine:  # type: ignore[override,misc]
        super().__ior__(other)
        self._on_add(list(other))
        return self


STALE_READERS_SECONDS = 10.0
"""How often the writer frees the LMDB reader slots of processes that died mid-read."""


async def clear_stale_readers(engine: Engine) -> None:
    """A worker SIGKILLed inside a read transaction leaves its slot in LMDB's reader table,
    which would pin old pages (the index would only grow) until someone clears it."""
    index = engine.index
    if isinstance(index, LmdbObjectIndex):
        cleared = await engine.run_blocking(index.env.reader_check)
        if cleared:
            log.info("cleared %d stale index reader slots", cleared)
