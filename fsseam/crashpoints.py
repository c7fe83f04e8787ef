"""Named crash points: places where a test or the server's crash harness may stop the process.

The journal calls ``hit("journal.append.after_write")`` and friends at the moments where a
power loss is most interesting (between a write and its fsync, between a rename and the
directory fsync, ...). By default nothing happens. A crash harness installs a hook with
``set_hook`` that decides, by name, whether to kill the process (the server's harness sends
itself SIGKILL), so every durability claim can be checked at every step that matters.

The registry is generic: any module may define its own names; the journal's are listed in
``JOURNAL_CRASH_POINTS``.

Thread-safety: the hook is one module global, replaced atomically; ``hit`` may be called from
any thread (the journal calls it from its executor thread) and calls the hook on that thread.
"""

from __future__ import annotations

from collections.abc import Callable

JOURNAL_CRASH_POINTS = (
    "journal.append.mid_write",
    "journal.append.after_write",
    "journal.append.after_fsync",
    "journal.segment.roll",
    "journal.snapshot.before_rename",
    "journal.snapshot.after_rename",
    "journal.replay.truncate",
)

_hook: Callable[[str], None] | None = None


def set_hook(hook: Callable[[str], None] | None) -> None:
    """Install ``hook`` (called with the crash point's name at every ``hit``), or remove it."""
    global _hook
    _hook = hook


def installed() -> bool:
    """Whether a hook is installed (the journal then splits batch writes to expose mid_write)."""
    return _hook is not None


def hit(name: str) -> None:
    """Pass crash point ``name``: call the installed hook, if any."""
    hook = _hook
    if hook is not None:
        hook(name)
