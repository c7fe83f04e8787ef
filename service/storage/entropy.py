"""Random hex names (payload ids, staging names, version tokens) without a syscall each.

Every PUT names a payload, a staging file and a version; ``secrets.token_hex`` asks the
kernel each time, and ``os.urandom`` gives up the GIL around the call, so on the event
loop each name cost a GIL hand-off to whichever executor thread was waiting. Here the bytes
still come from the OS's random source (``os.urandom``), drawn ``DRAW_BYTES`` at a time and
handed out in slices: each byte is used once, so names are exactly as unpredictable and
unique as before.

A forked child (``SERVICE_WORKERS``: the supervisor forks its serving processes) must never
hand out the bytes its parent holds, or two processes would name payloads alike: the pool
is emptied in the child at fork (``os.register_at_fork``).

Thread-safety: ``random_hex`` may be called from any thread (a lock guards the pool).
"""

from __future__ import annotations

import os
import threading

DRAW_BYTES = 4096
"""Bytes drawn from the OS at a time: a few hundred names per draw."""


class _Pool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bytes = b""
        self._offset = 0

    def take(self, count: int) -> bytes:
        with self._lock:
            end = self._offset + count
            if end > len(self._bytes):
                self._bytes = os.urandom(max(DRAW_BYTES, count))
                self._offset, end = 0, count
            chunk = self._bytes[self._offset : end]
            self._offset = end
            return chunk

    def forget(self) -> None:
        """Drop what is held (in a forked child: the parent holds the same bytes)."""
        self._lock = threading.Lock()  # a fork may copy it held by another thread
        self._bytes = b""
        self._offset = 0


_POOL = _Pool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.forget)


def random_hex(count: int) -> str:
    """``2 * count`` lowercase hex characters of ``count`` bytes from the OS's random source,
    as ``secrets.token_hex(count)``."""
    return _POOL.take(count).hex()
