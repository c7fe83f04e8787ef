"""Image variants on demand: the cache first, else one bounded transform off the event loop.

``ImageVariants.variant(source, params)`` answers the bytes of a variant of a stored object:

1. A source file too big to be a picture within the pixel cap is refused at once (413).
2. The cache is consulted (its index is loaded from disk on first use); a hit is read and
   verified on the executor.
3. A miss computes the variant once however many requests want it at the same moment: the
   first starts a task, the others await the same task.
4. The payload is opened through the seam and its header read (``images.probe``: the
   pixel cap is checked before anything is decoded); the render's memory is estimated from
   the header (``image_budget``) and admitted against ``SERVICE_IMAGE_MEMORY_BUDGET``, so a
   burst of large renders queues instead of holding many decoded images at once. The
   render itself runs in a worker process (``image_pool``: at most ``workers`` at once,
   memory given back after), or on the engine's executor where the payload has no file
   descriptor (the simulated file system of the unit tests).
5. The result is written to the cache (best effort: a failed write is logged and the bytes
   are still answered) and evicted variants are removed.

Errors are ``service.media.images.ImageError`` subclasses; an ``OSError`` reading the payload
propagates as is.

Thread-safety: event-loop thread; blocking work goes to ``engine.run_blocking``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from fsseam.fs import ReadableFile
from service.engine.core import Engine
from service.media.image_budget import MemoryBudget, estimate_render_bytes
from service.media.image_cache import CACHE_SUBDIR, CachedVariant, ImageCache, variant_key
from service.media.image_params import ImageFormat, ImageParams
from service.media.image_pool import RenderPool
from service.media.images import (
    CONTENT_TYPES,
    ImageTooLargeError,
    RenderedImage,
    UndecodableImageError,
    configure_pillow,
    probe,
    render,
    source_bytes_limit,
)
from service.meta import ObjectVersion

log = logging.getLogger("service.media")


@dataclass(frozen=True, slots=True)
class Variant:
    """A variant's bytes and what the answer says about them."""

    data: bytes
    format: ImageFormat
    width: int
    height: int
    sha256: str
    from_cache: bool

    @property
    def content_type(self) -> str:
        return CONTENT_TYPES[self.format]


class ImageVariants:
    """The server's image variants: one per process, shared by the image handlers."""

    def __init__(
        self,
        engine: Engine,
        *,
        max_pixels: int,
        cache_bytes: int,
        memory_budget: int,
        workers: int | None = None,
        on_render: Callable[[float], None] | None = None,
    ) -> None:
        self._engine = engine
        self.max_pixels = max_pixels
        self.cache = ImageCache(
            engine.fs, os.path.join(engine.config.data_dir, CACHE_SUBDIR), cache_bytes
        )
        self.budget = MemoryBudget(memory_budget)
        self._on_render = on_render
        """Told how long each render waited for the budget (for the metrics)."""
        self._pool: RenderPool | None = RenderPool(workers or os.cpu_count() or 1)
        self._computing: dict[str, asyncio.Task[Variant]] = {}
        self._index_loaded: asyncio.Task[None] | None = None
        configure_pillow(max_pixels)

    async def variant(self, source: ObjectVersion, params: ImageParams) -> Variant:
        """The variant ``params`` make of ``source`` (a resolved, readable object version)."""
        if source.payload_id is None or source.size == 0:
            raise UndecodableImageError("the object is empty")
        limit = source_bytes_limit(self.max_pixels)
        if source.size > limit:
            raise ImageTooLargeError(
                f"the source is {source.size} bytes; an image within the pixel limit is at "
                f"most {limit} bytes"
            )
        await self._load_index()
        key = variant_key(source.sha256, params)
        cached = self.cache.lookup(key)
        if cached is not None:
            data = await self._engine.run_blocking(self.cache.read, cached)
            if data is not None:
                return _from_cache(cached, data)
            self.cache.forget(key)
        task = self._computing.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._compute(key, source, params))
            self._computing[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
        return await asyncio.shield(task)

    def close(self) -> None:
        """Stop the render workers (at server shutdown)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _finished(self, key: str, task: asyncio.Task[Variant]) -> None:
        self._computing.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved here too, in case every waiter went away

    async def _compute(self, key: str, source: ObjectVersion, params: ImageParams) -> Variant:
        engine = self._engine
        assert source.payload_id is not None  # checked in ``variant``
        payload = await engine.run_blocking(engine.store.open_payload, source.payload_id)
        try:
            info = await engine.run_blocking(probe, payload, self.max_pixels)
            fd = payload.fileno()
            asked = time.perf_counter()
            async with self.budget.reserve(estimate_render_bytes(info, params)):
                if self._on_render is not None:
                    self._on_render(time.perf_counter() - asked)
                if fd is None or self._pool is None:
                    rendered, sha256 = await engine.run_blocking(
                        _render_open_payload, payload, params, self.max_pixels
                    )
                else:
                    rendered, sha256 = await self._pool.render(fd, params, self.max_pixels)
        finally:
            payload.close()
        variant = Variant(
            rendered.data, rendered.format, rendered.width, rendered.height, sha256, False
        )
        if self.cache.keeps(len(rendered.data)):
            await self._keep(key, variant)
        return variant

    async def _keep(self, key: str, variant: Variant) -> None:
        """Write ``variant`` to the cache and evict what no longer fits; failures are logged
        (the cache is an optimisation; the answer does not depend on it)."""
        engine = self._engine
        try:
            entry = await engine.run_blocking(
                self.cache.write,
                key,
                variant.data,
                variant.sha256,
                variant.width,
                variant.height,
                variant.format,
            )
            evicted = self.cache.admit(entry)
            if evicted:
                await engine.run_blocking(self.cache.remove, evicted)
        except OSError as exc:
            log.warning("image cache: keeping a variant failed: %r", exc)

    async def _load_index(self) -> None:
        """Build the cache's index from the disk, once (concurrent first calls share it)."""
        if self._index_loaded is None:
            self._index_loaded = asyncio.get_running_loop().create_task(self._scan())
        await asyncio.shield(self._index_loaded)

    async def _scan(self) -> None:
        try:
            found = await self._engine.run_blocking(self.cache.scan)
            evicted = self.cache.load(found)
            if evicted:
                await self._engine.run_blocking(self.cache.remove, evicted)
        except OSError as exc:
            log.warning("image cache: reading %s failed: %r", self.cache.directory, exc)
        log.info(
            "image cache: %d variants, %d bytes in %s",
            len(self.cache),
            self.cache.total_bytes,
            self.cache.directory,
        )


def _from_cache(entry: CachedVariant, data: bytes) -> Variant:
    return Variant(data, entry.format, entry.width, entry.height, entry.sha256, True)


def _render_open_payload(
    payload: ReadableFile, params: ImageParams, max_pixels: int
) -> tuple[RenderedImage, str]:
    """Transform an open payload and hash the result (blocking: executor). Used where the
    payload has no descriptor a worker could open (the simulated file system)."""
    rendered = render(payload, params, max_pixels=max_pixels)
    return rendered, hashlib.sha256(rendered.data).hexdigest()
