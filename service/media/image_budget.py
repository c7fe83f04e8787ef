"""The image memory budget: what a render will hold in memory, and admission against a total.

A render's memory is dominated by its decoded pixels, which the header tells before anything
is decoded (``images.probe``). ``estimate_render_bytes`` turns a header and the request into
bytes: the pixels decoded (at the reduced JPEG scale where ``render`` uses one), at Pillow's
in-memory size (4 bytes a pixel, 1 for L, P and 1-bit images), a second copy when the mode is
converted or the EXIF orientation turns the picture, the output canvas twice (resized and
encoded), and a fixed allowance for the decoder and encoder.

``MemoryBudget`` admits renders first come, first served while their estimates fit in the
total (``SERVICE_IMAGE_MEMORY_BUDGET``). A render estimated above the whole budget is not
refused (the pixel cap decides that): it waits until nothing else runs and then runs alone, so
the peak stays near the larger of the budget and the biggest single render.

Thread-safety: ``MemoryBudget`` is event-loop only; the estimate is a pure function.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from service.media.image_params import ImageParams
from service.media.images import SourceInfo, decoded_size, plan_geometry

FIXED_BYTES = 16 * 1024 * 1024
"""Decoder and encoder buffers, the output's compressed bytes, Python objects."""
_ONE_BYTE_MODES = frozenset({"1", "L", "P"})
_WORK_MODES = frozenset({"RGB", "RGBA"})
_SWAPS_AXES = frozenset({5, 6, 7, 8})


def estimate_render_bytes(info: SourceInfo, params: ImageParams) -> int:
    """Bytes a render of ``info`` with ``params`` holds at its peak (an upper estimate).

    >>> info = SourceInfo("PNG", 7000, 7000, "RGB", 1)
    >>> estimate_render_bytes(info, ImageParams(width=800)) // 2**20
    207
    """
    swapped = info.orientation in _SWAPS_AXES
    width, height = (info.height, info.width) if swapped else (info.width, info.height)
    geometry = plan_geometry(width, height, params)
    decoded_w, decoded_h = decoded_size(info, geometry)
    pixels = decoded_w * decoded_h
    total = pixels * (1 if info.mode in _ONE_BYTE_MODES else 4)
    if info.mode not in _WORK_MODES:
        total += pixels * 4
    if info.orientation != 1:
        total += pixels * 4
    total += geometry.width * geometry.height * 4 * 2
    return total + FIXED_BYTES


class MemoryBudget:
    """An async, first-come-first-served, weighted semaphore over bytes."""

    def __init__(self, total: int) -> None:
        self.total = max(1, total)
        self.used = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @asynccontextmanager
    async def reserve(self, amount: int) -> AsyncIterator[None]:
        """Hold ``amount`` bytes of the budget for the body of the ``async with``."""
        amount = min(max(0, amount), self.total)
        if not self._waiters and self.used + amount <= self.total:
            self.used += amount
        else:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append((amount, waiter))
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self.used -= amount  # granted just as it was cancelled
                self._wake()
                raise
        try:
            yield
        finally:
            self.used -= amount
            self._wake()

    def _wake(self) -> None:
        while self._waiters:
            amount, waiter = self._waiters[0]
            if waiter.done():
                self._waiters.popleft()
                continue
            if self.used + amount > self.total:
                return
            self._waiters.popleft()
            self.used += amount
            waiter.set_result(None)
