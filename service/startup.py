"""What must hold before the server touches anything: the port, the data dir, its lock.

A start that cannot work must say so in one line and leave nothing behind, so the order is:

1. bind the listening socket (port in use, not allowed or an unknown address fail here,
   before a single file is written, and before first-run credentials are made);
2. check the data dir: not a file, creatable, writable (a read-only disk or a path through
   a file fails here);
3. take the data dir's exclusive lock (``<data_dir>/LOCK``, ``flock`` through the seam):
   a second server on the same data dir would run its startup GC over payloads the first is
   still writing, so it is refused, naming the pid that holds the lock.

Each failure is a ``StartupError`` whose message is the one line ``python -m service``
prints (after ``service: cannot start: ``), saying what and how to fix it.

Thread-safety: called once, before the event loop runs.
"""

from __future__ import annotations

import errno
import os
import socket

import tornado.netutil

from fsseam.fs import FileLock, FileSystem, make_dirs_durably
from service.config import Config

LOCK_FILENAME = "LOCK"

_REASONS = {
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.ENOSPC: "the disk is full",
    errno.EEXIST: "a file is in the way",
}


class StartupError(Exception):
    """The server cannot start; the message is one line (what, and how to fix it)."""


def reason(exc: OSError) -> str:
    return _REASONS.get(exc.errno or 0, exc.strerror or type(exc).__name__)


def bind_listener(config: Config) -> list[socket.socket]:
    """The listening sockets for ``host:port``, or ``StartupError``."""
    where = f"{config.host}:{config.port}"
    try:
        return tornado.netutil.bind_sockets(config.port, address=config.host)
    except socket.gaierror:
        raise StartupError(
            f"unknown host {config.host!r}; set --host / SERVICE_HOST to a local address"
        ) from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(
                f"port {config.port} on {config.host} is already in use; stop what uses it "
                "or choose another port with --port / SERVICE_PORT"
            ) from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise StartupError(
                f"{config.host} is not an address of this machine; set --host / SERVICE_HOST"
            ) from None
        if exc.errno == errno.EACCES:
            raise StartupError(
                f"not allowed to listen on {where} (ports below 1024 need privileges); "
                "choose another port with --port / SERVICE_PORT"
            ) from None
        raise StartupError(f"cannot listen on {where}: {reason(exc)}") from None


def claim_data_dir(fs: FileSystem, data_dir: str) -> FileLock:
    """Create ``data_dir`` if needed and lock it for this process, or ``StartupError``."""
    fix = "point --data-dir / SERVICE_DATA_DIR at a writable directory"
    try:
        if fs.exists(data_dir) and not fs.stat(data_dir).is_dir:
            raise StartupError(f"data dir {data_dir} is a file, not a directory; {fix}")
        make_dirs_durably(fs, data_dir)
        lock_path = os.path.join(data_dir, LOCK_FILENAME)
        lock = fs.try_lock(lock_path)
    except OSError as exc:
        raise StartupError(f"cannot use data dir {data_dir}: {reason(exc)}; {fix}") from None
    if lock is None:
        holder = fs.lock_holder(lock_path)
        by = f" (pid {holder})" if holder else ""
        raise StartupError(
            f"data dir {data_dir} is in use by another server{by}; stop it first, or give "
            "this one its own --data-dir / SERVICE_DATA_DIR"
        )
    return lock
