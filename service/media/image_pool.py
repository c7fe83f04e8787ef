"""Image renders in worker processes that give their memory back.

Why processes: a render of a large image allocates hundreds of megabytes; freed inside a
long-lived server, most of it stays in the allocator's arenas and the server's resident
memory never comes down. A render in a worker process can be given back for sure:

- each worker calls ``malloc_trim(0)`` after every render (glibc returns freed pages);
- a worker is replaced after ``MAX_RENDERS_PER_WORKER`` renders (fragmentation is bounded);
- the whole pool is shut down once it has been idle for ``IDLE_SECONDS``, so a server that
  rendered a burst of images goes back to its idle size; the next render starts a worker
  again (a fork of a ``forkserver`` that has Pillow imported already: milliseconds).

A worker dies with the server (``_die_with_server``): a server killed outright (SIGKILL, the
OOM killer) cannot shut its pool down, and a worker waits on its task queue for ever (it
holds the queue's write end itself), keeping the fork server and multiprocessing's resource
tracker alive with it. Each worker watches the server's pidfd and exits when it fires; the
fork server and the tracker then see their last peer gone and exit too.

How the payload reaches the worker: the server opens it through the file-system seam and
keeps it open for the render; the worker opens ``/proc/<server pid>/fd/<fd>``, the same
open file, so an object overwritten or deleted meanwhile is still read whole and consistent
(the video worker gets its source the same way, as ``/dev/fd/<n>``).

Errors raised by ``images.render`` (``ImageError`` subclasses, ``OSError``) come back to the
caller as they were raised; a worker that dies (killed, out of memory) is
``RenderCrashedError`` and the pool is replaced.

Thread-safety: ``RenderPool`` is used from the event-loop thread only.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import hashlib
import multiprocessing
import os
import select
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from fsseam.fs import RealFileSystem
from service.media.image_params import ImageParams
from service.media.images import RenderedImage, configure_pillow, render

MAX_RENDERS_PER_WORKER = 16
IDLE_SECONDS = 2.0
_PRELOAD = ["service.media.image_pool"]


class RenderCrashedError(Exception):
    """A render worker died before answering (the request is answered 500)."""


def _trim_memory() -> None:
    """Give freed heap pages back to the OS (glibc only; elsewhere a no-op)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return
    libc = ctypes.CDLL(name)
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim(0)


def _die_with_server(server: int) -> None:
    """In a worker, at its start: exit as soon as process ``server`` ends (see the module
    docstring). A pidfd names the process itself, so a recycled pid cannot fool it."""
    try:
        watched = os.pidfd_open(server)
    except ProcessLookupError:
        os._exit(1)  # the server is gone already

    def watch() -> None:
        select.select([watched], [], [])  # readable once the server has exited
        os._exit(1)

    threading.Thread(target=watch, name="server-watch", daemon=True).start()


def render_file(path: str, params: ImageParams, max_pixels: int) -> tuple[RenderedImage, str]:
    """In a worker: render the image at ``path``; the result and its SHA-256."""
    configure_pillow(max_pixels)
    source = RealFileSystem().open_read(path)
    try:
        rendered = render(source, params, max_pixels=max_pixels)
    finally:
        source.close()
        _trim_memory()
    return rendered, hashlib.sha256(rendered.data).hexdigest()


class RenderPool:
    """Up to ``workers`` render processes, started on demand and retired when idle."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(_PRELOAD)
        self._pool: ProcessPoolExecutor | None = None
        self._running = 0
        self._last_used = time.monotonic()
        self._idle_timer: asyncio.TimerHandle | None = None
        self.renders = 0
        self.pools_started = 0

    async def render(
        self, source_fd: int, params: ImageParams, max_pixels: int
    ) -> tuple[RenderedImage, str]:
        """Render the open payload ``source_fd`` in a worker; see the module docstring."""
        pool = self._ensure_pool()
        path = f"/proc/{os.getpid()}/fd/{source_fd}"
        self._running += 1
        try:
            future = pool.submit(render_file, path, params, max_pixels)
            return await asyncio.wrap_future(future)
        except BrokenProcessPool:
            self._discard(pool)
            raise RenderCrashedError("an image render worker died") from None
        finally:
            self._running -= 1
            self.renders += 1
            self._last_used = time.monotonic()
            self._schedule_retire()

    def _ensure_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=self._context,
                max_tasks_per_child=MAX_RENDERS_PER_WORKER,
                initializer=_die_with_server,
                initargs=(os.getpid(),),
            )
            self.pools_started += 1
        return self._pool

    def _schedule_retire(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        loop = asyncio.get_running_loop()
        self._idle_timer = loop.call_later(IDLE_SECONDS, self._retire_if_idle)

    def _retire_if_idle(self) -> None:
        self._idle_timer = None
        if self._running or self._pool is None:
            return
        if time.monotonic() - self._last_used < IDLE_SECONDS:
            self._schedule_retire()
            return
        self._discard(self._pool)

    def _discard(self, pool: ProcessPoolExecutor) -> None:
        if self._pool is pool:
            self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the workers (at server shutdown)."""
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if self._pool is not None:
            self._discard(self._pool)
