"""What must hold before the server touches anything: the port, the data dir, its lock.

A start that cannot work must say so in one line and leave nothing behind, so the order is:

1. bind the listening socket (port in use, not allowed or an unknown address fail here,
   before a single file is written, and before first-run credentials are made);
2. check the data dir: not a file, creatable, writable (a read-only disk or a path through
   a file fails here);
3. refuse a data dir a restore has not finished building (``restore-incomplete``);
4. take the data dir's exclusive lock (``<data_dir>/LOCK``, ``flock`` through the seam):
   a second server on the same data dir would run its startup GC over payloads the first is
   still writing, so it is refused, naming the pid that holds the lock.

Each failure is a ``StartupError`` whose message is the one line ``python -m service``
prints (after ``service: cannot start: ``), saying what and how to fix it.

With several serving processes the port check is the same, but the supervisor then keeps the
port with ``SO_REUSEPORT`` sockets that are bound and never listen (``hold_port``), and every
serving process opens its own listening socket on the same address (``listen_like``): the
kernel hashes incoming connections across the listening sockets of the group, so a burst of
connections is spread over the processes instead of going to whichever woke first on one
shared socket. A socket that is bound but not listening takes no connections, so the
supervisor (which serves nothing) never gets any; it keeps the port from anyone else
(binding without ``SO_REUSEPORT``, or as another user, fails) while its children come and go.

Thread-safety: called once, before the event loop runs.
"""

from __future__ import annotations

import errno
import os
import socket

import tornado.netutil

from fsseam.durable import make_dirs_durably
from fsseam.fs import FileLock, FileSystem
from service.config import Config

LOCK_FILENAME = "LOCK"
RESTORE_INCOMPLETE = "restore-incomplete"
"""In a data dir a restore is building (``service.archive.restore``): it is not ready, and a
server refuses to start on it."""

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


LISTEN_BACKLOG = 128
"""Pending connections each serving process's listening socket queues (Tornado's default)."""


def hold_port(config: Config) -> list[socket.socket]:
    """Check the port as ``bind_listener`` does, then hold it for serving processes that each
    listen on it (``listen_like``): ``SO_REUSEPORT`` sockets, bound to the same addresses,
    never listening. The check binds without ``SO_REUSEPORT``, so it also fails when another
    server of ours (whose sockets have it) already listens there."""
    probes = bind_listener(config)
    addresses = [(probe.family, probe.getsockname()) for probe in probes]
    for probe in probes:
        probe.close()
    held: list[socket.socket] = []
    try:
        for family, address in addresses:
            held.append(_reuseport_socket(family, address))
    except OSError as exc:  # taken in the instant between the check and the hold
        for sock in held:
            sock.close()
        raise StartupError(
            f"cannot listen on {config.host}:{config.port}: {reason(exc)}; stop what uses it "
            "or choose another port with --port / SERVICE_PORT"
        ) from None
    return held


def listen_like(held: list[socket.socket]) -> list[socket.socket]:
    """This serving process's own listening sockets, on the addresses the supervisor holds
    (``OSError`` if the kernel refuses)."""
    sockets: list[socket.socket] = []
    try:
        for each in held:
            sock = _reuseport_socket(each.family, each.getsockname())
            sock.setblocking(False)
            sock.listen(LISTEN_BACKLOG)
            sockets.append(sock)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _reuseport_socket(family: int, address: tuple[object, ...]) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def claim_data_dir(fs: FileSystem, data_dir: str) -> FileLock:
    """Create ``data_dir`` if needed and lock it for this process, or ``StartupError``."""
    fix = "point --data-dir / SERVICE_DATA_DIR at a writable directory"
    try:
        if fs.exists(data_dir) and not fs.stat(data_dir).is_dir:
            raise StartupError(f"data dir {data_dir} is a file, not a directory; {fix}")
        make_dirs_durably(fs, data_dir)
        if fs.exists(os.path.join(data_dir, RESTORE_INCOMPLETE)):
            raise StartupError(
                f"data dir {data_dir} holds a restore that did not finish ({RESTORE_INCOMPLETE})"
                "; delete the directory and run python -m service restore again"
            )
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
