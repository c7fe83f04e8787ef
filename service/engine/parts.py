"""The two parts of an engine that a role chooses: where a mutation goes, where state is read.

A serving process's role (``service.roles``) picks them once, at start; the engine itself
never asks which role it serves.

- ``Committer``: takes an event and returns the outcome of applying it, or refuses it with
  one of the engine's errors (``service.engine.errors``). ``JournalCommitter``
  (``service.engine.journaled``) appends it to this process's journal and applies it; a
  worker's ``LinkCommitter`` (``service.procs.link_committer``) sends it to the writer.
- ``StateSource``: the ``MetaState`` a request reads. ``OwnState`` (below) is the state
  this process applies committed records to; a worker's ``SharedIndexState``
  (``service.procs.shared_state``) is the writer's index, read-only, looked at again in
  each request.

A fourth role adds its own implementations (a standby following a shipped journal: its own
state, and a committer that refuses every mutation); docs/architecture.md, "Roles".

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from journal import JournalStats
from service.meta import MetaState, Outcome

if TYPE_CHECKING:
    from service.engine.core import Engine


class Committer(Protocol):
    """Where this process's mutations are committed."""

    replay_seconds: float
    """How long the start took to bring the state up to date (0 where nothing replays)."""

    @property
    def read_only_reason(self) -> str | None:
        """Why no mutation is accepted until a restart; None while they are."""
        ...

    async def start(self, engine: Engine) -> None:
        """Ready to commit (a journal: replayed, its crash left-overs handled)."""

    async def stop(self) -> None:
        """Commit nothing more; what was committed is durable when this returns."""

    async def commit(self, event: dict[str, Any]) -> Outcome:
        """Commit ``event``; the outcome of applying it (``service.engine.errors`` refuses)."""
        ...

    def ensure_writable(self) -> None:
        """Refuse a mutation up front when commits are refused now."""

    def release(self, payload_ids: list[str]) -> None:
        """Payload files no record references any more: remove them (where this process
        owns the files) once the releasing record may no longer be lost."""

    def last_sequence(self) -> int:
        """The sequence of the last record committed, as this process knows it."""
        ...

    async def sync(self) -> None:
        """Make every record committed so far durable (before a file they released goes)."""

    def journal_stats(self) -> JournalStats | None:
        """The journal's figures, where this process keeps it (else None)."""
        ...


class StateSource(Protocol):
    """Where this process reads the metadata state."""

    def current(self) -> MetaState:
        """The state a request reads now."""
        ...

    def begin_request(self) -> None:
        """A request begins: the state it reads must show every commit answered so far."""

    async def start(self, engine: Engine) -> None:
        """Ready to be read."""

    async def stop(self) -> None:
        """Release what reading needed."""


class OwnState:
    """The state this process applies committed records to (its committer, or a standby's
    follower, sets ``state`` at start and applies to it); always up to date here."""

    def __init__(self) -> None:
        self.state = MetaState()

    def current(self) -> MetaState:
        return self.state

    def begin_request(self) -> None:
        """Nothing to check: every commit answered so far was applied here."""

    async def start(self, engine: Engine) -> None:
        """The committer fills ``state`` as it replays."""

    async def stop(self) -> None:
        """Nothing held."""
