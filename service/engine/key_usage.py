"""Access keys' last use: noted per request in memory, journaled in batches.

Last use changes on every request, so it is not journaled per request, and it is not part
of the metadata state either until it is journaled (the state changes only in ``apply``):
``touch`` notes a use here, ``pending`` offers the uses newer than what the state holds,
the engine's owner journals them in one ``AccessKeysUsed`` event now and then, and applying
that event makes them durable (``MetaState.key_last_used``), after which they are no longer
pending. A lost batch only loses freshness, never correctness.

Thread-safety: event-loop thread only, like the state it sits beside.
"""

from __future__ import annotations

from service.meta import MetaState


class KeyUsage:
    """Uses of access keys not yet journaled, by access key id (ms since the epoch)."""

    def __init__(self) -> None:
        self._touched: dict[str, int] = {}

    def touch(self, access_key_id: str, at_ms: int) -> None:
        """Note a use of the key (the caller authenticated it)."""
        if at_ms > self._touched.get(access_key_id, -1):
            self._touched[access_key_id] = at_ms

    def last_used(self, state: MetaState, access_key_id: str) -> int | None:
        """The key's last use, journaled or only noted; None if never used."""
        durable = state.key_last_used(access_key_id)
        touched = self._touched.get(access_key_id)
        if touched is None or (durable is not None and durable >= touched):
            return durable
        return touched

    def pending(self, state: MetaState) -> dict[str, int]:
        """Uses newer than the state's, of keys that still exist: the payload of an
        ``AccessKeysUsed`` event. Uses the state already holds are forgotten here."""
        batch: dict[str, int] = {}
        for key_id, at_ms in list(self._touched.items()):
            durable = state.key_last_used(key_id)
            if state.get_access_key(key_id) is None or (durable is not None and durable >= at_ms):
                del self._touched[key_id]
            else:
                batch[key_id] = at_ms
        return batch
