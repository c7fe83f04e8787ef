"""Promotion: a standby becomes the primary of the next epoch, and stays one.

``POST /api/v1/replication/promote`` (``service.http.replication_handlers``) reaches the
standby's journal owner (``service.roles.standby.StandbyOwner.promote``), which, in order:

1. stops the follower (no primary record is appended after this point);
2. writes the promotion mark, ``standby/promoted`` (``{"epoch", "follow"}``), durably: from
   here a restart serves as a primary even though ``SERVICE_FOLLOW`` still names the old
   primary (``resolve_role``);
3. commits ``EpochStarted`` for the next epoch at the next sequence
   (``service.replication.epochs.start_epoch``); a crash between 2 and 3 is finished at the
   next start, which commits the epoch the mark names before it serves;
4. switches the process's parts in place: the committer accepts writes, the primary's feed
   and background work start, every process stops refusing writes (a worker looks for the
   mark before it refuses one, ``promoted_probe``), and the status says ``primary`` and the
   new epoch.

No re-exec: nothing is replayed and no connection is cut, so the first write is
acknowledged within the time of one journal commit after the answer.

``SERVICE_FOLLOW`` on a promoted data dir: the same URL as at the promotion is ignored (one
warning at each start: unset it); another URL means the operator points this server at a new
primary, so the mark is removed and it follows that one (a divergence check decides whether
it may, ``service.replication.epochs``). ``SERVICE_FOLLOW_RESEED`` always follows.

Thread-safety: the file functions are blocking (call them off the loop, or before it runs);
``promoted_probe``'s stat is cheap enough for the loop.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable

from fsseam.durable import make_dirs_durably, read_file, replace_file
from fsseam.fs import FileSystem
from service.config import Config
from service.replication.bootstrap import STANDBY_DIR

MARK_FILENAME = "promoted"


def mark_path(data_dir: str) -> str:
    return os.path.join(data_dir, STANDBY_DIR, MARK_FILENAME)


def read_mark(fs: FileSystem, data_dir: str) -> dict[str, object] | None:
    """The promotion mark (None: this data dir was never promoted, or follows again)."""
    raw = read_file(fs, mark_path(data_dir))
    if raw is None:
        return None
    try:
        found = json.loads(raw)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def write_mark(fs: FileSystem, data_dir: str, epoch: int, follow: str | None) -> None:
    """Durably: a restart after this serves as a primary (module docstring)."""
    make_dirs_durably(fs, os.path.join(data_dir, STANDBY_DIR))
    replace_file(fs, mark_path(data_dir), json.dumps({"epoch": epoch, "follow": follow}).encode())


def remove_mark(fs: FileSystem, data_dir: str) -> None:
    path = mark_path(data_dir)
    if fs.exists(path):
        fs.unlink(path)
        fs.fsync_dir(os.path.dirname(path))  # so a power loss cannot bring the mark back


def marked_epoch(fs: FileSystem, data_dir: str) -> int:
    """The epoch the mark names (0: none)."""
    mark = read_mark(fs, data_dir)
    epoch = mark.get("epoch") if mark is not None else None
    return epoch if isinstance(epoch, int) else 0


def resolve_role(config: Config, fs: FileSystem) -> Config:
    """The configuration this start serves with: ``follow`` dropped on a promoted data dir
    whose ``SERVICE_FOLLOW`` still names the old primary (module docstring). Blocking."""
    if not config.follow:
        return config
    mark = read_mark(fs, config.data_dir)
    if mark is None:
        return config
    if mark.get("follow") == config.follow and not config.follow_reseed:
        print(
            f"service: this server was promoted to epoch {mark.get('epoch')}; it serves as "
            f"the primary and ignores SERVICE_FOLLOW={config.follow} (unset it)",
            file=sys.stderr,
            flush=True,
        )
        return dataclasses.replace(config, follow=None)
    remove_mark(fs, config.data_dir)
    return config


def promoted_probe(fs: FileSystem, data_dir: str) -> Callable[[], bool]:
    """For a standby's worker: whether the mark exists now (a stat; step 4)."""
    path = mark_path(data_dir)
    return lambda: fs.exists(path)
