"""Per-user caps on what a user may accumulate, and case-insensitive usernames.

Caps, where the contract is silent (docs/security.md "Per-user caps"): at most
``MAX_ACCESS_KEYS_PER_USER`` access keys (active or revoked: a revoked key is still a stored
record; delete it to make room) and ``MAX_OPEN_UPLOADS_PER_USER`` open multipart sessions per
user. Past a cap the request is 409 InvalidState: the state, not the request, is what must
change (delete keys, complete or abort uploads), and the same request succeeds afterwards.

Usernames are unique without regard to case (``casefold``): ``Alice`` and ``alice`` are one
name. Older versions may have stored two names that differ only in case; they keep working,
and a login matches the exact name first.

The counts come from the state, which changes only when a commit is applied, after its
journal write; ``Reservations`` also counts the creations still in flight, so concurrent
requests cannot pass a cap (or a username) together.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from service.common.api_errors import ApiError
from service.meta import MetaState, User

MAX_ACCESS_KEYS_PER_USER = 100
MAX_OPEN_UPLOADS_PER_USER = 1000


def fold(username: str) -> str:
    """The form of a username that uniqueness and login compare.

    >>> fold("Stra\\u00dfe") == fold("STRASSE")
    True
    """
    return username.casefold()


def user_by_any_case(state: MetaState, username: str) -> User | None:
    """The user called ``username``: the exact name first, else the one whose name differs
    only in case (None when there is none, or several)."""
    exact = state.user_by_username(username)
    if exact is not None:
        return exact
    folded = fold(username)
    matches = [user for user in state.list_users() if fold(user.username) == folded]
    return matches[0] if len(matches) == 1 else None


class Reservations:
    """Creations in flight, per (kind, owner), and usernames being created."""

    def __init__(self) -> None:
        self._pending: Counter[tuple[str, str]] = Counter()
        self._usernames: set[str] = set()

    @contextmanager
    def within_cap(self, kind: str, owner: str, current: int, cap: int) -> Iterator[None]:
        """Hold one place of ``owner``'s ``kind`` while creating it; 409 past ``cap``."""
        slot = (kind, owner)
        if current + self._pending[slot] >= cap:
            raise ApiError(
                "InvalidState", f"a user may hold at most {cap} {kind}; remove some first"
            )
        self._pending[slot] += 1
        try:
            yield
        finally:
            self._pending[slot] -= 1
            if self._pending[slot] <= 0:
                del self._pending[slot]

    @contextmanager
    def new_username(self, state: MetaState, username: str) -> Iterator[None]:
        """Hold ``username`` while its user is created; 409 if taken in any case."""
        folded = fold(username)
        taken = folded in self._usernames or any(
            fold(user.username) == folded for user in state.list_users()
        )
        if taken:
            raise ApiError("UserAlreadyExists", f"user {username!r} already exists")
        self._usernames.add(folded)
        try:
            yield
        finally:
            self._usernames.discard(folded)
