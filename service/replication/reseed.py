"""``SERVICE_FOLLOW_RESEED``: a standby discards its data dir's state and copies afresh.

A former primary that diverged from the new one (``service.replication.epochs``) holds
records nobody else has; it may follow again only from a fresh copy. Before anything opens
the data dir (``service.server.main``, with the lock held), every entry of it but the lock,
the processes' run directory, the audit log (this node's own record of what it answered),
the data dir's identity and the standby's id is moved into ``reseed-previous/``; the start
then finds a fresh data dir and bootstraps (``service.replication.bootstrap``). The old state
is removed only once the new copy is durable (the bootstrap's commit point calls
``discard_previous``), so a reseed cut short by a crash or a lost primary never leaves the
node with neither: the old state stays in ``reseed-previous/`` until a bootstrap completes.
A second start with the setting while ``reseed-previous/`` exists resumes that bootstrap
instead of moving the partial copy aside.

Thread-safety: blocking, before the event loop (``move_aside``) or on the executor.
"""

from __future__ import annotations

import logging
import os

from fsseam.fs import FileSystem
from service.replication.bootstrap import STANDBY_DIR

log = logging.getLogger("service.replication")

PREVIOUS_DIRNAME = "reseed-previous"
KEPT = frozenset({"LOCK", "run", "audit", "server-id", STANDBY_DIR, PREVIOUS_DIRNAME})
"""Entries of the data dir a reseed keeps (module docstring)."""
KEPT_IN_STANDBY = frozenset({"id"})


def move_aside(fs: FileSystem, data_dir: str) -> int:
    """Move the data dir's state into ``reseed-previous/``; the entries moved (0 when a
    reseed is already under way)."""
    previous = os.path.join(data_dir, PREVIOUS_DIRNAME)
    if fs.exists(previous) or not fs.exists(data_dir):
        return 0
    fs.mkdir(previous)
    moved = 0
    for name in sorted(fs.listdir(data_dir)):
        if name in KEPT:
            continue
        fs.rename(os.path.join(data_dir, name), os.path.join(previous, name))  # aside, whole
        moved += 1
    standby = os.path.join(data_dir, STANDBY_DIR)
    if fs.exists(standby):
        fs.mkdir(os.path.join(previous, STANDBY_DIR))
        for name in sorted(fs.listdir(standby)):
            if name not in KEPT_IN_STANDBY:
                # The promotion mark and a partial snapshot: this start follows afresh.
                fs.rename(os.path.join(standby, name), os.path.join(previous, STANDBY_DIR, name))
        fs.fsync_dir(standby)  # the mark is gone for good before the copy begins
    fs.fsync_dir(previous)
    fs.fsync_dir(data_dir)  # every move survives a power loss before the bootstrap writes
    return moved


def discard_previous(fs: FileSystem, data_dir: str) -> None:
    """The new copy is durable: the state a reseed moved aside goes."""
    previous = os.path.join(data_dir, PREVIOUS_DIRNAME)
    if not fs.exists(previous):
        return
    _remove_tree(fs, previous)
    fs.fsync_dir(data_dir)  # the removal is final (a later start finds no reseed under way)
    log.info("reseed: the previous state of this data dir is removed")


def _remove_tree(fs: FileSystem, path: str) -> None:
    for name in fs.listdir(path):
        child = os.path.join(path, name)
        if fs.stat(child).is_dir:
            _remove_tree(fs, child)
        else:
            fs.unlink(child)
    fs.rmdir(path)
