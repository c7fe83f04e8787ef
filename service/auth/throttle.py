"""Login throttling: failed logins slow down further attempts per username and per address.

Each username and each client address has a failure count. Once it reaches the rule's
``max_failures``, every further failure locks that name or address out for an exponentially
growing time (``base_lockout``, doubled per failure, capped at ``max_lockout``). A count is
forgotten after ``window`` seconds without failures, counted from the end of the last lockout
so a capped lockout cannot be waited out into a fresh allowance. A success clears the
username (its owner proved the password) but not the address, so an attacker holding one
account cannot reset the counter of the address it guesses other accounts from.

The caller asks ``check`` first and, if it answers more than 0, refuses the login without
verifying the password (answering with ``Retry-After``); otherwise it verifies and reports
the outcome with ``record_failure`` or ``record_success``.

Memory is bounded: each table keeps at most ``max_entries`` names or addresses in
least-recently-failed order, drops forgotten entries from its old end as it goes, and when
full evicts the oldest. Spraying many usernames can therefore evict a locked username; the
per-address rule still limits such a spray from one address.

Pure: the clock is the ``now`` argument. Not thread-safe: use from one thread (the event
loop's).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

_MAX_USERNAME_KEY_CHARS = 256
_MAX_ADDRESS_KEY_CHARS = 64


@dataclass(frozen=True, slots=True)
class ThrottleRule:
    """How failures of one kind of key (username or address) turn into lockouts."""

    max_failures: int = 5
    """Failures allowed before the first lockout."""
    window: float = 900.0
    """Seconds without failure (after any lockout ends) after which the count is forgotten."""
    base_lockout: float = 1.0
    """Lockout after the ``max_failures``-th failure; doubles with each further failure."""
    max_lockout: float = 900.0
    """Cap on one lockout."""

    def lockout_after(self, failures: int) -> float:
        """Seconds locked out after the ``failures``-th failure in a row.

        >>> [ThrottleRule(max_failures=3).lockout_after(n) for n in range(1, 7)]
        [0.0, 0.0, 1.0, 2.0, 4.0, 8.0]
        """
        if failures < self.max_failures:
            return 0.0
        doublings = min(failures - self.max_failures, 64)
        return min(self.base_lockout * 2.0**doublings, self.max_lockout)


class _Entry:
    __slots__ = ("failures", "last_failure", "locked_until")

    def __init__(self) -> None:
        self.failures = 0
        self.last_failure = 0.0
        self.locked_until = 0.0

    def forgotten(self, rule: ThrottleRule, now: float) -> bool:
        return now - max(self.last_failure, self.locked_until) >= rule.window


class _FailureTable:
    """Failure entries of one kind of key, bounded, in least-recently-failed order."""

    def __init__(self, rule: ThrottleRule, max_entries: int) -> None:
        self._rule = rule
        self._max_entries = max_entries
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def retry_after(self, key: str, now: float) -> float:
        entry = self._entries.get(key)
        return max(0.0, entry.locked_until - now) if entry is not None else 0.0

    def record_failure(self, key: str, now: float) -> float:
        entry = self._entries.pop(key, None)
        if entry is None or entry.forgotten(self._rule, now):
            entry = _Entry()
        entry.failures += 1
        entry.last_failure = now
        lockout = self._rule.lockout_after(entry.failures)
        if lockout > 0:
            entry.locked_until = now + lockout
        self._entries[key] = entry
        self._evict(now)
        return self.retry_after(key, now)

    def forget(self, key: str) -> None:
        self._entries.pop(key, None)

    def _evict(self, now: float) -> None:
        while self._entries:
            oldest = next(iter(self._entries.values()))
            if len(self._entries) <= self._max_entries and not oldest.forgotten(self._rule, now):
                return
            self._entries.popitem(last=False)


class LoginThrottle:
    """Per-username and per-address failure tracking for the login endpoint."""

    def __init__(
        self,
        *,
        username_rule: ThrottleRule | None = None,
        address_rule: ThrottleRule | None = None,
        max_entries: int = 10_000,
    ) -> None:
        """``address_rule`` defaults to 20 failures, since many users may share one address."""
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._usernames = _FailureTable(username_rule or ThrottleRule(), max_entries)
        self._addresses = _FailureTable(address_rule or ThrottleRule(max_failures=20), max_entries)

    def check(self, username: str, address: str, now: float) -> float:
        """Seconds to wait before this login may be tried (the ``Retry-After``); 0 if allowed."""
        return max(
            self._usernames.retry_after(_username_key(username), now),
            self._addresses.retry_after(_address_key(address), now),
        )

    def record_failure(self, username: str, address: str, now: float) -> float:
        """Count a failed login (unknown usernames too); return the resulting ``check``."""
        return max(
            self._usernames.record_failure(_username_key(username), now),
            self._addresses.record_failure(_address_key(address), now),
        )

    def record_success(self, username: str) -> None:
        """Clear the username's failures; the address keeps its count (module docstring)."""
        self._usernames.forget(_username_key(username))

    @property
    def tracked(self) -> tuple[int, int]:
        """(usernames, addresses) currently held, for metrics and the memory-bound tests."""
        return len(self._usernames), len(self._addresses)


def _username_key(username: str) -> str:
    # Case-folded so "Admin" and "admin" share one budget whatever the lookup's case rules.
    return username[:_MAX_USERNAME_KEY_CHARS].casefold()


def _address_key(address: str) -> str:
    return address[:_MAX_ADDRESS_KEY_CHARS]
