"""Power loss and I/O errors at every file operation of every kind of operation, in-process.

See ``tests.crash.matrix`` for what one crash state is and what is checked after it. The
fast part (``make test``) tests every operation index of every kind in strict durability and
of the kinds whose safety in balanced durability rests on extra rules (releases, snapshots,
verification); the slow part (``make test-slow``) does every kind in both modes with more
random images per crash.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter
from collections.abc import Callable

import pytest

from tests.crash.indexkit import INDEX_FATES
from tests.crash.matrix import KINDS, Plan, dry_run, run_kind_sync
from tests.crash.points import all_crash_points, http_only_crash_points, standby_only_crash_points
from tests.crash.restorekit import KINDS as RESTORE_KINDS
from tests.crash.restorekit import dry_run as restore_dry_run
from tests.crash.standbymatrix import KINDS as STANDBY_KINDS
from tests.crash.standbymatrix import dry_run as standby_dry_run

BALANCED_FAST = (
    "put",
    "put_small",
    "batch",
    "overwrite",
    "delete",
    "upload_complete",
    "upload_complete_direct",
    "snapshot",
    "gc",
    "recovery",
    "event_flush",
    "webhook_cursor",
    "scrub",
    "archive_ship",
    "audit_append",
    "audit_shared",
    "audit_peer_recovery",
    "fleet_outputs",
)
FAST = [(name, "strict") for name in KINDS] + [(name, "balanced") for name in BALANCED_FAST]
SLOW = [(name, mode) for mode in ("strict", "balanced") for name in KINDS]
SPARSE = {
    "scrub": 4,
    "recovery": 2,
    "archive_ship": 2,
    "archive_snapshot": 2,
    "upload_complete_joined": 2,
    "audit_shared": 2,
    "audit_peer_recovery": 2,
    "batch_fsync": 2,
}
"""Kinds made of many alike file operations (a scrub checkpoint per version, a copy per
payload or segment) or the longest to run: the fast run crashes at every n-th index, from
a first index drawn per run (``CRASH_SEED`` replays it), and still at every sync and crash
point; the slow run at all of them."""

EXPECTED_POINTS: dict[str, frozenset[str]] = {
    "put": frozenset(
        {
            "put.staging_created",
            "put.chunk_written",
            "put.body_complete",
            "put.after_data_fsync",
            "put.after_rename",
            "put.after_dir_fsync",
            "journal.append.mid_write",
            "journal.append.after_write",
            "engine.after_apply",
        }
    ),
    "put_small": frozenset(
        {
            "put.staging_created",
            "put.chunk_written",
            "put.after_rename",
            "journal.append.after_write",
            "engine.after_apply",
        }
    ),
    "put_small_group": frozenset({"put.after_rename", "engine.before_release"}),
    "batch": frozenset(
        {
            "put.staging_created",
            "put.chunk_written",
            "put.body_complete",
            "put.after_rename",
            "batch.staged",
            "journal.append.after_write",
            "engine.after_apply",
        }
    ),
    "overwrite": frozenset({"engine.before_release"}),
    "upload_part": frozenset(
        {
            "multipart.part_promoted",
            "engine.before_release",
            "multipart.assembly_rewound",
            "multipart.assembly_appended",
        }
    ),
    "upload_complete": frozenset(
        {
            "multipart.joined_promoted",
            "multipart.after_complete_record",
            "multipart.before_parts_removed",
        }
    ),
    "upload_complete_joined": frozenset(
        {
            "multipart.mid_join",
            "multipart.joined_promoted",
            "multipart.after_complete_record",
            "multipart.before_parts_removed",
        }
    ),
    "upload_abort": frozenset({"multipart.after_abort_record"}),
    "upload_part_direct": frozenset({"multipart.direct_written", "journal.append.after_write"}),
    "upload_complete_direct": frozenset(
        {
            "multipart.direct_sealed",
            "multipart.joined_promoted",
            "multipart.after_complete_record",
            "multipart.before_parts_removed",
        }
    ),
    "upload_complete_direct_copied": frozenset(
        {"multipart.direct_copied", "multipart.direct_sealed", "multipart.after_complete_record"}
    ),
    "upload_complete_direct_restarted": frozenset(
        {"multipart.direct_sealed", "multipart.after_complete_record"}
    ),
    "upload_abort_direct": frozenset({"multipart.after_abort_record"}),
    "snapshot": frozenset({"journal.snapshot.before_rename", "journal.snapshot.after_rename"}),
    "gc": frozenset({"gc.batch"}),
    "staging_sweep": frozenset({"staging.sweep"}),
    "recovery": frozenset({"journal.replay.truncate", "engine.after_replay", "gc.batch"}),
    "archive_ship": frozenset({"archive.payloads_shipped", "archive.records_shipped"}),
    "archive_snapshot": frozenset({"archive.records_shipped", "journal.snapshot.after_rename"}),
    "audit_append": frozenset(
        {"audit.append.mid_write", "audit.append.after_write", "audit.segment.roll"}
    ),
    "audit_shared": frozenset(
        {
            "audit.append.mid_write",
            "audit.append.after_write",
            "audit.segment.named",
            "audit.segment.roll",
        }
    ),
    "audit_peer_recovery": frozenset({"audit.append.mid_write", "audit.append.after_write"}),
    "audit_prune": frozenset({"audit.prune.after_anchor"}),
    "audit_recovery": frozenset({"audit.open.truncate"}),
}
"""Crash points each kind's operation must pass (a renamed point must not go untested)."""
STRICT_POINTS: dict[str, frozenset[str]] = {
    "put_small": frozenset({"put.after_group_sync"}),
    "put_small_group": frozenset({"put.after_group_sync"}),
    "batch": frozenset({"put.after_group_sync"}),
    "batch_fsync": frozenset({"put.after_data_fsync", "put.after_dir_fsync", "batch.staged"}),
    "audit_append": frozenset({"audit.append.after_fsync"}),
    "audit_shared": frozenset({"audit.append.after_fsync"}),
    "audit_peer_recovery": frozenset({"audit.append.after_fsync"}),
}
"""More points a kind passes in strict durability only (a shared file-system sync)."""


def _check(kind: str, durability: str, plan: Plan, record_property: Callable[..., None]) -> None:
    fates_before = Counter(INDEX_FATES)
    tally = run_kind_sync(KINDS[kind], plan)
    record_property("crash_states", tally.crash_states)
    for fate, count in (INDEX_FATES - fates_before).items():
        record_property(f"index_{fate}", count)
    print(
        f"{kind}/{durability}: {tally.operations} file operations, {tally.scenarios} "
        f"scenarios, {tally.crash_states} crash states checked"
    )
    assert tally.problems == [], "\n".join(tally.problems[:30])
    expected = EXPECTED_POINTS.get(kind, frozenset())
    if durability == "strict":
        expected |= STRICT_POINTS.get(kind, frozenset())
    missing = expected - set(tally.hits)
    assert not missing, f"{kind} never passed {sorted(missing)}"


@pytest.mark.parametrize(("kind", "durability"), FAST, ids=[f"{k}-{d}" for k, d in FAST])
def test_no_crash_state_breaks_the_durability_claims(
    kind: str, durability: str, record_property: Callable[..., None]
) -> None:
    every_k = SPARSE.get(kind, 1)
    seed = int(os.environ.get("CRASH_SEED") or random.SystemRandom().getrandbits(32))
    plan = Plan(
        durability,  # type: ignore[arg-type]
        errno_faults=2,
        errno_modes=("lose_unsynced",),
        every_k=every_k,
        first_index=random.Random(seed).randrange(every_k),
    )
    print(f"{kind}/{durability}: every {every_k} index from {plan.first_index} (seed {seed})")
    _check(kind, durability, plan, record_property)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "durability"), SLOW, ids=[f"{k}-{d}" for k, d in SLOW])
def test_no_crash_state_breaks_the_durability_claims_exhaustively(
    kind: str, durability: str, record_property: Callable[..., None]
) -> None:
    plan = Plan(durability, random_seeds=8)  # type: ignore[arg-type]
    _check(kind, durability, plan, record_property)


def test_every_named_crash_point_is_passed_in_process() -> None:
    """Each point outside the HTTP layer is reached by some operation of the matrix, of the
    standby's matrix (``test_standby_matrix.py``) or of the restore's
    (``test_restore_matrix.py``); the real-process suites cover the HTTP layer's, and kill
    the server (and a standby) at every point."""
    hits: Counter[str] = Counter()
    for mode in ("strict", "balanced"):
        for kind in KINDS.values():
            hits.update(asyncio.run(dry_run(kind, Plan(mode))).hits)  # type: ignore[arg-type]
        for standby_kind in STANDBY_KINDS.values():
            hits.update(asyncio.run(standby_dry_run(standby_kind, mode))[1])  # type: ignore[arg-type]
    for restore_kind in RESTORE_KINDS.values():
        hits.update(asyncio.run(restore_dry_run(restore_kind))[1])
    wanted = all_crash_points() - http_only_crash_points()
    assert standby_only_crash_points() <= wanted
    assert wanted - set(hits) == set()
    assert len(wanted) >= 25


def test_the_crash_point_scan_finds_the_points_of_every_layer() -> None:
    names = all_crash_points()
    assert {"journal.append.after_fsync", "put.after_rename", "put.before_response"} <= names
    assert http_only_crash_points() == {"put.before_response"}
