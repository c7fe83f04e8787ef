"""An in-memory cache of small payload bodies, so a hot small GET needs no disk read.

A GET of a small object otherwise costs one executor job (open, read, close) and the hop
to a thread and back, which is most of what such a request costs beyond Tornado itself.
Payload files are immutable once promoted and their ids are never reused, so an entry can
never go stale: the cache needs no invalidation, only eviction. Entries are dropped when the
engine releases their payloads (overwrite, delete, replaced part, completed upload) so the
memory goes back at once, and otherwise in least-recently-used order.

Bounds: only bodies of at most ``max_entry_bytes`` are kept, and the bodies held never
exceed ``max_bytes`` in total (``small_object_cache_bytes``; 0 disables the cache). The cache
starts empty at every start, after the startup integrity checks have quarantined whatever
failed them, and quarantined payloads are refused before any read anyway.

The cache also holds the open descriptors of recently read payloads
(``service.storage.descriptors``): a body too large to keep, or a range of one, is then read
on the event loop when the page cache has it. Both are dropped by the same ``discard``.

Thread-safety: none; the cache lives on the event-loop thread (the GET handler reads and
fills it there, the engine evicts from its commit listener there). Bodies are read from disk
on the executor as before; only the finished ``bytes`` are handed to the cache.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from service.storage.descriptors import DEFAULT_MAX_OPEN, OpenPayloads

DEFAULT_MAX_ENTRY_BYTES = 64 * 1024


class PayloadCache:
    """Whole bodies of small payloads by payload id, LRU within a byte budget."""

    def __init__(
        self,
        max_bytes: int,
        max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
        max_open: int = DEFAULT_MAX_OPEN,
    ) -> None:
        if max_bytes < 0 or max_entry_bytes < 0:
            raise ValueError("cache bounds must not be negative")
        self.descriptors = OpenPayloads(max_open)
        """Open descriptors of recently read payloads (``storage.descriptors``)."""
        self.max_bytes = max_bytes
        self.max_entry_bytes = min(max_entry_bytes, max_bytes)
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    @property
    def size_bytes(self) -> int:
        """Bytes of bodies held."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def accepts(self, size: int) -> bool:
        """Whether a body of ``size`` bytes would be kept."""
        return 0 < size <= self.max_entry_bytes

    def get(self, payload_id: str) -> bytes | None:
        """The whole body of ``payload_id``, or None when it is not held."""
        body = self._entries.get(payload_id)
        if body is None:
            self.misses += 1
            return None
        self._entries.move_to_end(payload_id)
        self.hits += 1
        return body

    def put(self, payload_id: str, body: bytes) -> None:
        """Keep ``body`` (the payload's whole content) if it fits the bounds."""
        size = len(body)
        if not self.accepts(size) or payload_id in self._entries:
            return
        self._entries[payload_id] = body
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= len(evicted)

    def discard(self, payload_ids: Iterable[str]) -> None:
        """Forget the bodies and descriptors of payloads that are being removed."""
        payload_ids = list(payload_ids)
        self.descriptors.discard(payload_ids)
        if not self._entries:
            return
        for payload_id in payload_ids:
            body = self._entries.pop(payload_id, None)
            if body is not None:
                self._bytes -= len(body)

    def clear(self) -> None:
        self.descriptors.clear()
        self._entries.clear()
        self._bytes = 0
