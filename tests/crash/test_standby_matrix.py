"""The standby's apply under power loss, in-process: every file operation and crash point of
a standby's bootstrap and of its following, cut, then every image of its disk restarted and
checked (``tests.crash.standbykit``), in both durability modes.

The real-process ``test_standby_crash.py`` kills a real standby at the same points (HTTP, a
real primary); this matrix adds what a kill cannot show: unsynced writes lost, kept in part
or torn.
"""

from __future__ import annotations

import asyncio

import pytest

from journal.model import Durability
from tests.crash.points import standby_only_crash_points
from tests.crash.standbymatrix import KINDS, run_kind

EXPECTED_POINTS = {
    "standby_bootstrap": {
        "standby.snapshot_fetched",
        "standby.payloads_written",
        "standby.payloads_stored",
        "put.after_rename",
        "engine.after_replay",
    },
    "standby_follow": {
        "put.after_rename",
        "standby.payloads_written",
        "standby.payloads_stored",
        "journal.append.after_write",
        "engine.after_apply",
    },
}
STRICT_POINTS = {
    "standby_bootstrap": {"put.after_data_fsync", "put.after_dir_fsync"},
    "standby_follow": {"put.after_data_fsync", "put.after_dir_fsync", "journal.append.after_fsync"},
}
"""Passed in strict durability only (a copy's own fsyncs, the append's)."""


CASES = [(name, mode) for name in KINDS for mode in ("strict", "balanced")]


@pytest.mark.parametrize(("kind", "durability"), CASES, ids=[f"{k}-{d}" for k, d in CASES])
def test_no_crash_of_a_standby_breaks_its_promise(kind: str, durability: Durability) -> None:
    tally = asyncio.run(run_kind(KINDS[kind], durability))
    print(f"{kind}/{durability}: {tally.operations} file operations, {tally.crash_states} states")
    assert tally.problems == [], "\n".join(tally.problems[:30])
    expected = EXPECTED_POINTS[kind] | (STRICT_POINTS[kind] if durability == "strict" else set())
    missing = expected - set(tally.hits)
    assert not missing, f"{kind} never passed {sorted(missing)}"
    assert tally.crash_states > 2 * tally.operations


def test_every_standby_point_is_expected_here() -> None:
    assert standby_only_crash_points() <= set().union(*EXPECTED_POINTS.values())
