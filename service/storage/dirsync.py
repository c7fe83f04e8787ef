"""Directory fsyncs shared between concurrent promotes, as the journal shares its fsync.

A strict promote renames a payload into its leaf directory and must make that rename durable
before the journal may name the payload: an fsync of the directory. Concurrent promotes into
the same directory need only one fsync between them, provided it starts after every one of
their renames. ``DirectorySync.sync`` gives exactly that guarantee: it returns once an fsync
of the directory that *started after the call* has completed. The first caller to find no
fsync running leads and runs one; callers that arrive while it runs wait for it to finish and
then the next leader's fsync covers all of them at once (leader/follower group commit).

To let concurrent promotes land in the same directory at all, ``PayloadStore`` hands out
payload ids that share their fan-out prefix for a short run (``GroupedIds``).

Failure rule: an fsync that fails raises in its leader, and in every caller it would have
covered (none of their renames is known durable); the next caller starts afresh. As in
``journal.writer``, a failed fsync is never retried on the same promise.

Thread-safety: every method may be called from any thread (executor threads, concurrently).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from service.storage.entropy import random_hex

GROUP_RUN = 64
"""Payload ids handed out under one fan-out prefix before a new random prefix is drawn."""


class GroupedIds:
    """Payload ids (32 lowercase hex) whose first 4 characters (the leaf directory) stay
    the same for ``run`` ids in a row, the other 112 bits fresh from the OS each time
    (``service.storage.entropy``).

    Prefixes are drawn at random, so the 65,536 leaf directories still fill evenly.
    """

    def __init__(self, run: int = GROUP_RUN) -> None:
        if run < 1:
            raise ValueError("run must be at least 1")
        self._run = run
        self._lock = threading.Lock()
        self._prefix = ""
        self._left = 0

    def next(self) -> str:
        with self._lock:
            if self._left == 0:
                self._prefix = random_hex(2)
                self._left = self._run
            self._left -= 1
            prefix = self._prefix
        return prefix + random_hex(14)


@dataclass
class _Directory:
    """Group-commit bookkeeping of one directory, under ``DirectorySync._lock``."""

    started: int = 0
    """fsyncs started so far."""
    done: int = 0
    """The highest started fsync known complete (fsyncs complete in start order)."""
    running: bool = False
    failed: dict[int, BaseException] = field(default_factory=dict)
    """Errors of failed fsyncs by number, kept while a waiter may still need them."""
    waiters: int = 0


class DirectorySync:
    """Shared directory fsyncs; see the module docstring."""

    def __init__(self, fsync_dir: Callable[[str], None]) -> None:
        self._fsync_dir = fsync_dir
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._directories: dict[str, _Directory] = {}
        self.fsyncs = 0
        """fsyncs run in all (tests read it to see that promotes shared them)."""

    def sync(self, directory: str) -> None:
        """Return once an fsync of ``directory`` that started after this call completed."""
        with self._changed:
            state = self._directories.setdefault(directory, _Directory())
            needed = state.started + 1
            state.waiters += 1
            try:
                while state.done < needed:
                    if needed in state.failed:
                        raise state.failed[needed]
                    if state.running:
                        self._changed.wait()
                        continue
                    needed = state.started + 1  # any fsync started from now on covers us
                    self._lead(directory, state)
            finally:
                state.waiters -= 1
                if state.waiters == 0 and not state.running:
                    del self._directories[directory]

    def _lead(self, directory: str, state: _Directory) -> None:
        """Run one fsync with the lock released; called and returns with it held."""
        state.running = True
        state.started += 1
        number = state.started
        error: BaseException | None = None
        self._lock.release()
        try:
            # One fsync makes every rename into the directory before it durable.
            self._fsync_dir(directory)
        except BaseException as exc:
            error = exc
        finally:
            self._lock.acquire()
            state.running = False
            self.fsyncs += 1
            if error is None:
                state.done = number
            else:
                state.failed[number] = error
            self._changed.notify_all()
        if error is not None:
            raise error
