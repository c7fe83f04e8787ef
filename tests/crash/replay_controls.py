"""What makes a crash scenario exact and repeatable: the crash points it counts and cuts the
power at (``CrashPoints``, installed as ``fsseam.crashpoints``' hook), and the names the server
draws, taken from a seed (``seeded_names``), so that a scenario's random images replay
identically. Used by the in-process crash matrix and the stateful engine test."""

from __future__ import annotations

import contextlib
import random
import threading
from collections import Counter
from collections.abc import Iterator

from fsseam import crashpoints
from fsseam.simfs import SimFileSystem, SimulatedCrash
from service.multipart import operations as multipart
from service.storage import direct, entropy

# -- crash points -----------------------------------------------------------------------


class CrashPoints:
    """Counts every crash point hit; optionally cuts the power at the Nth hit of one name."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._target: tuple[str, int, SimFileSystem] | None = None

    def arm(self, name: str, nth: int, fs: SimFileSystem) -> None:
        with self._lock:
            self._target = (name, nth, fs)

    def disarm(self) -> None:
        with self._lock:
            self._target = None

    def __call__(self, name: str) -> None:
        with self._lock:
            self.hits[name] += 1
            target = self._target
            fire = target is not None and target[0] == name and self.hits[name] >= target[1]
            if fire:
                self._target = None
        if fire:
            assert target is not None
            target[2].crash()
            raise SimulatedCrash(f"crash point {name}")

    @contextlib.contextmanager
    def installed(self) -> Iterator[CrashPoints]:
        crashpoints.set_hook(self)
        try:
            yield self
        finally:
            crashpoints.set_hook(None)


# -- reproducible names -----------------------------------------------------------------


class SeededTokens:
    """Stands in for the ``secrets`` module where the server draws names (payload ids,
    staging names, upload ids, version suffixes), so that a crash scenario, whose random
    images depend on the order of names, replays identically from its seed."""

    def __init__(self, seed: str) -> None:
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def token_hex(self, nbytes: int) -> str:
        return self.take(nbytes).hex()

    def take(self, nbytes: int) -> bytes:
        """As ``service.storage.entropy``'s pool: the names of payloads, staging files and
        versions."""
        with self._lock:
            return self._random.randbytes(nbytes)


@contextlib.contextmanager
def seeded_names(seed: str) -> Iterator[None]:
    tokens = SeededTokens(seed)
    modules = (multipart, direct)
    saved = [module.secrets for module in modules]
    saved_pool = entropy._POOL
    for module in modules:
        module.secrets = tokens  # type: ignore[assignment]
    entropy._POOL = tokens  # type: ignore[assignment]
    try:
        yield
    finally:
        for module, original in zip(modules, saved, strict=True):
            module.secrets = original
        entropy._POOL = saved_pool
