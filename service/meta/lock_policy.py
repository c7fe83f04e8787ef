"""Object lock: when a version may not go, and which retention changes are allowed.

The one place the lock rules live. ``MetaState.apply`` asks it before every removal of a
version (a DELETE by version id, a lifecycle delete, the null version replaced in place, a
forced bucket deletion) and before every retention change, with the event's own time, so
startup replay and run time reach the same verdicts. The request paths and the background
tasks may ask it too, to refuse early or skip what is locked, but ``apply`` decides.

The rules (the contract's "Object lock and legal hold"):

- A version is *locked* while it is under legal hold, or under a retention whose
  ``retain_until`` lies after the event's time. A locked version cannot be removed by anyone.
- A retention may always be set where there is none (or the one there has ended), and
  always lengthened; ``governance`` may become ``compliance``. Shortening, removing or
  weakening (``compliance`` -> ``governance``) an active retention is refused, except an
  active ``governance`` one when the request says ``bypass`` (an admin who sent
  ``X-Bypass-Governance-Retention: true``: the HTTP layer decides who may). An active
  ``compliance`` retention gives way to no one until it ends.
- The clock rule: an event whose time is earlier than the newest time already journaled
  (``trusted`` False) comes from a clock that went back, so nothing counts as ended for
  it: every retention that is set holds. Once the clock has caught up, times count again.

Pure: no I/O, no clock (times arrive as arguments, in ms since the epoch).

Thread-safety: pure functions over immutable records, safe from any thread.
"""

from __future__ import annotations

import datetime

from service.meta.model import ObjectVersion

GOVERNANCE = "governance"
COMPLIANCE = "compliance"
MODES = (GOVERNANCE, COMPLIANCE)
DAY_MS = 86_400_000
MAX_RETENTION_DAYS = 36_500
"""A default retention's longest ``days`` (100 years)."""


def _when(epoch_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def retention_holds(version: ObjectVersion, at: int, *, trusted: bool = True) -> bool:
    """Whether the version's retention holds at ``at`` (any set retention holds when the
    time is not ``trusted``: see the module docstring)."""
    if version.retention_mode is None or version.retain_until is None:
        return False
    return not trusted or at < version.retain_until


def lock_problem(version: ObjectVersion, at: int, *, trusted: bool = True) -> str | None:
    """Why ``version`` may not be removed at ``at``, or None when it may."""
    if version.legal_hold:
        return "it is under legal hold"
    if retention_holds(version, at, trusted=trusted):
        assert version.retain_until is not None
        clock = "" if trusted else " (the server's clock is behind the journal's newest time)"
        return (
            f"it is under {version.retention_mode} retention until "
            f"{_when(version.retain_until)}{clock}"
        )
    return None


def is_locked(version: ObjectVersion, at: int, *, trusted: bool = True) -> bool:
    return lock_problem(version, at, trusted=trusted) is not None


def default_retention(mode: str | None, days: float | None, at: int) -> tuple[str, int] | None:
    """The retention a version written at ``at`` gets from its bucket's default."""
    if mode is None or days is None:
        return None
    return mode, at + round(days * DAY_MS)


def retention_argument_problem(mode: str | None, retain_until: int | None, at: int) -> str | None:
    """What is wrong with a retention ``(mode, retain_until)`` asked for at ``at`` (both
    None: none), whatever the version holds now; None when nothing."""
    if (mode is None) != (retain_until is None):
        return "mode and retain_until go together (both null removes the retention)"
    if mode is not None and mode not in MODES:
        return f"unknown retention mode {mode!r}"
    if retain_until is not None and retain_until <= at:
        return "retain_until must lie in the future"
    return None


def retention_change_problem(
    version: ObjectVersion,
    mode: str | None,
    retain_until: int | None,
    at: int,
    *,
    trusted: bool,
    bypass: bool,
) -> str | None:
    """Why the version's retention may not become ``(mode, retain_until)`` (a valid one:
    ``retention_argument_problem``; both None: removed) at ``at``, or None when it may.
    ``bypass``: an admin's governance bypass."""
    if not retention_holds(version, at, trusted=trusted):
        return None
    assert version.retain_until is not None
    current, until = version.retention_mode, version.retain_until
    stronger = retain_until is not None and retain_until >= until
    if current == COMPLIANCE:
        if mode == COMPLIANCE and stronger:
            return None
        return (
            f"the version is under compliance retention until {_when(until)}: it can be "
            "neither shortened nor removed, by anyone, until then"
        )
    if stronger or bypass:
        return None
    return (
        f"the version is under governance retention until {_when(until)}: only an admin "
        "sending X-Bypass-Governance-Retention: true may shorten or remove it"
    )
