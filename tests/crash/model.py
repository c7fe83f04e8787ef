"""The model the crash tests check against: which states each key, bucket and upload may be in.

Every operation a test sends is recorded with what it got back:

- acknowledged (a success was sent): the new state is the only one allowed, unless
  acknowledged writes may be lost (balanced durability after a power cut), in which case the
  old states stay allowed too;
- refused (a 4xx): nothing changed;
- anything else (a 5xx, no answer, a crash): the operation may or may not have happened, so
  both the old and the new states are allowed.

A state is a plain value that can be read back from the server: a key's versions as a tuple
of SHA-256 digests (``MARKER`` for a delete marker), oldest first, ``()`` for an absent key; a
bucket's existence; an upload's parts as a frozenset of (number, digest), None once closed.
Beside its existence, a bucket's identity (``bucket_id``) is kept from the answer that created
it or the first recovery that shows it: every later recovery must show the same one, unless
acknowledged writes may be lost: then a recovery to an earlier point of the journal may show an
earlier bucket of the same name (its deletion and the re-creation lost), so any identity the
name was answered with is allowed.
After a recovery the test observes each state, checks it is allowed, and settles the model
on it, since the operation's fate is decided from then on.

Two sets are kept per thing: ``firm`` (acknowledged operations must survive: strict
durability, a process kill, or an image that kept every unsynced write) and ``loose``
(acknowledged operations may be lost: balanced durability after a power cut). Which one a
check uses is the caller's choice.

Thread-safety: none; the real-process test guards its ledger with a lock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

MARKER = "<delete-marker>"

KeyState = tuple[str, ...]
UploadState = frozenset[tuple[int, str]] | None
S = TypeVar("S", bound=Hashable)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Fate:
    """How an operation ended, as far as its caller can tell."""

    ACKED = "acked"
    REFUSED = "refused"
    UNKNOWN = "unknown"

    @staticmethod
    def of_status(status: int) -> str:
        """200-299 acknowledged, 400-499 refused, anything else (5xx, 0 = no answer) unknown."""
        if 200 <= status < 300:
            return Fate.ACKED
        if 400 <= status < 500:
            return Fate.REFUSED
        return Fate.UNKNOWN


@dataclass
class Possible(Generic[S]):
    """The states one thing may be in; see the module docstring for ``firm`` and ``loose``."""

    firm: set[S]
    loose: set[S]

    @classmethod
    def known(cls, state: S) -> Possible[S]:
        return cls({state}, {state})

    def record(self, fate: str, effect: Callable[[S], S]) -> None:
        if fate == Fate.REFUSED:
            return
        firm_next = {effect(state) for state in self.firm}
        loose_next = {effect(state) for state in self.loose}
        self.firm = firm_next if fate == Fate.ACKED else self.firm | firm_next
        self.loose |= loose_next

    def allowed(self, *, firm: bool) -> set[S]:
        return self.firm if firm else self.loose

    def settle(self, observed: S) -> None:
        self.firm = {observed}
        self.loose = {observed}


def visible(state: KeyState) -> bool:
    return bool(state) and state[-1] != MARKER


def put_effect(digest: str, versioned: bool) -> Callable[[KeyState], KeyState]:
    """A PUT: a new latest version (versioned) or the one null version replaced."""
    if versioned:
        return lambda state: (*state, digest)
    return lambda state: (digest,)


def delete_effect(versioned: bool) -> Callable[[KeyState], KeyState]:
    """A DELETE without a version id; a no-op where the key is not visible (NoSuchKey)."""
    if versioned:
        return lambda state: (*state, MARKER) if visible(state) else state
    return lambda state: () if visible(state) else state


@dataclass
class Ledger:
    """Allowed states of every key, bucket and upload a test touched, and every body sent."""

    keys: dict[tuple[str, str], Possible[KeyState]] = field(default_factory=dict)
    buckets: dict[str, Possible[bool]] = field(default_factory=dict)
    versioned: dict[str, bool] = field(default_factory=dict)
    uploads: dict[str, Possible[UploadState]] = field(default_factory=dict)
    upload_targets: dict[str, tuple[str, str]] = field(default_factory=dict)
    bodies: dict[str, bytes] = field(default_factory=dict)
    unknown_uploads: int = 0
    """Upload inits without an answer: sessions the test cannot name but may find open."""
    durable_payloads: set[str] = field(default_factory=set)
    """Payloads a completed snapshot covered: on disk in either durability mode, so never
    an excuse for an integrity error."""
    identities: dict[str, str] = field(default_factory=dict)
    """Each existing bucket's identity, as its creation answered or a recovery first showed."""
    identity_history: dict[str, set[str]] = field(default_factory=dict)
    """Every identity each bucket name was created with: what a recovery that lost
    acknowledged writes may show again."""

    # -- recording --------------------------------------------------------------------

    def key(self, bucket: str, key: str) -> Possible[KeyState]:
        return self.keys.setdefault((bucket, key), Possible.known(()))

    def body(self, data: bytes) -> str:
        digest = sha256(data)
        self.bodies[digest] = data
        return digest

    def bucket_created(
        self, name: str, versioned: bool, fate: str, bucket_id: str | None = None
    ) -> None:
        self.versioned.setdefault(name, versioned)
        self.buckets.setdefault(name, Possible.known(False)).record(fate, lambda _: True)
        if bucket_id is not None:
            self.identities[name] = bucket_id
            self.identity_history.setdefault(name, set()).add(bucket_id)

    def identity_problem(self, name: str, observed: str | None, *, firm: bool) -> str | None:
        """Settle on the identity a recovery shows for bucket ``name`` (None: absent); a
        problem if it differs from the one known for the bucket since it was created (when
        not ``firm``, an earlier identity of the name is allowed too: see the module)."""
        known = self.identities.pop(name, None)
        if observed is None:
            return None
        self.identities[name] = observed
        earlier = not firm and observed in self.identity_history.get(name, set())
        if known is not None and known != observed and not earlier:
            return f"bucket {name}: identity {observed} after recovery, was {known}"
        return None

    def bucket_deleted(self, name: str, fate: str) -> None:
        self.identities.pop(name, None)  # a later bucket of the name is another
        self.buckets[name].record(fate, lambda _: False)
        for (bucket, _), possible in self.keys.items():
            if bucket == name:
                possible.record(fate, lambda _: ())
        for upload_id, (bucket, _) in self.upload_targets.items():
            if bucket == name:
                self.uploads[upload_id].record(fate, lambda _: None)

    def put(self, bucket: str, key: str, data: bytes, fate: str) -> None:
        digest = self.body(data)
        self.key(bucket, key).record(fate, put_effect(digest, self.versioned[bucket]))

    def delete(self, bucket: str, key: str, fate: str) -> None:
        self.key(bucket, key).record(fate, delete_effect(self.versioned[bucket]))

    def upload_started(self, upload_id: str | None, bucket: str, key: str, fate: str) -> None:
        if upload_id is None:
            if fate != Fate.REFUSED:
                self.unknown_uploads += 1
            return
        self.upload_targets[upload_id] = (bucket, key)
        self.uploads[upload_id] = Possible(firm={frozenset()}, loose={None, frozenset()})

    def part_stored(self, upload_id: str, number: int, data: bytes, fate: str) -> None:
        digest = self.body(data)

        def effect(state: UploadState) -> UploadState:
            if state is None:
                return None
            return frozenset({(n, d) for n, d in state if n != number} | {(number, digest)})

        self.uploads[upload_id].record(fate, effect)

    def upload_completed(self, upload_id: str, parts: Iterable[tuple[int, str]], fate: str) -> str:
        """Record a complete naming ``parts`` (number, digest); return the joined digest."""
        chosen = list(parts)
        joined = b"".join(self.bodies[digest] for _, digest in chosen)
        digest = self.body(joined)
        bucket, key = self.upload_targets[upload_id]
        wanted = set(chosen)
        upload = self.uploads[upload_id]
        if fate == Fate.REFUSED:
            return digest
        # The key changes only in the worlds where the session held exactly these parts.
        completable = any(state is not None and wanted <= state for state in upload.loose)
        if completable:
            self.key(bucket, key).record(fate, put_effect(digest, self.versioned[bucket]))
        upload.record(fate, lambda state: None if state is not None and wanted <= state else state)
        return digest

    def upload_aborted(self, upload_id: str, fate: str) -> None:
        self.uploads[upload_id].record(fate, lambda _: None)
