"""The parent of the serving processes: fork, watch, restart, drain.

``python -m service`` with ``SERVICE_WORKERS`` > 1 checks and holds the port (bound
``SO_REUSEPORT`` sockets that never listen) and takes the data dir's lock (``service.startup``),
then becomes this supervisor, which never serves a request itself:

1. it forks the writer (the one process with the journal and the index writes) and waits
   until the writer says it is ready (replay done, the commit socket listening);
2. it forks the workers; every process opens its own listening socket on the held addresses
   (``SO_REUSEPORT``: the kernel spreads new connections across them), so a process forked
   again after a death listens again, and one that stops takes only its own queue with it;
3. a worker that dies is forked again; the writer dying is a crash: a new writer replays the
   journal (workers keep serving reads meanwhile; their commits get 503 and Retry-After);
4. SIGTERM or SIGINT: the workers are told first and drain (their in-flight uploads still
   commit through the writer), then the writer drains and writes its final snapshot. Exit 0
   when every process stopped cleanly.

A writer that fails before it is ready (a damaged journal, say) stops the service: exit 1.

The supervisor blocks SIGCHLD, SIGTERM and SIGINT and waits for them with ``sigtimedwait``;
children unblock SIGCHLD, ignore SIGINT and let SIGTERM in once they can drain. Children
leave with ``os._exit``: the data dir's lock is the parent's, and only the parent releases it.

Thread-safety: single-threaded by design (it forks).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from fsseam.fs import RealFileSystem
from service.banner import startup_banner
from service.config import Config
from service.procs import shared_metrics

RUN_DIRNAME = "run"
SOCKET_NAME = "writer.sock"
WORKER_STOP_SECONDS = 45.0
"""How long the workers get to drain (beyond the server's own 30 s grace) before SIGKILL."""
WRITER_STOP_SECONDS = 120.0
"""How long the writer gets to drain and write its final snapshot before SIGKILL."""
RESPAWN_PAUSE_SECONDS = 1.0
"""A process that died this soon after its start is forked again only after this pause."""
_SOCKET_PATH_LIMIT = 100
"""Bytes of a unix socket's path that fit ``sun_path`` (108) with the ``-http`` variant."""
_PR_SET_PDEATHSIG = 1
_SIGNALS = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT}


@dataclass(frozen=True)
class WriterSeat:
    """What the supervisor tells the writer it forks."""

    socket_path: str
    """Where its workers commit (``service.procs.writer_service``)."""
    metrics_dir: str
    ready_fd: int
    """Written once the writer serves (replay done), then closed."""
    workers_running: bool
    """The writer starts while workers serve (a restart): they may be promoting payloads."""

    def ready(self) -> None:
        """This process serves and handles SIGTERM now: let a pending SIGTERM in, and tell
        the supervisor."""
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        os.write(self.ready_fd, b"1")
        os.close(self.ready_fd)


@dataclass(frozen=True)
class WorkerSeat:
    """What the supervisor tells a worker it forks."""

    socket_path: str
    """The writer's commit socket."""
    metrics_dir: str

    def ready(self) -> None:
        """This process serves and handles SIGTERM now: let a pending SIGTERM in."""
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


RunWriter = Callable[[Config, list[socket.socket], WriterSeat], None]
RunWorker = Callable[[Config, list[socket.socket], WorkerSeat], None]


def writer_socket_path(data_dir: str) -> str:
    """``<data_dir>/run/writer.sock``, or, where that path is too long for a unix socket, the
    same name in a new private directory of the temp dir. Only the server's user can reach
    either (the directories are 0700)."""
    run_dir = os.path.join(data_dir, RUN_DIRNAME)
    os.makedirs(run_dir, mode=0o700, exist_ok=True)
    os.chmod(run_dir, 0o700)
    path = os.path.join(run_dir, SOCKET_NAME)
    if len(path.encode()) < _SOCKET_PATH_LIMIT:
        return path
    return os.path.join(tempfile.mkdtemp(prefix="service-"), SOCKET_NAME)


def forward_socket_path(socket_path: str) -> str:
    """The writer's internal HTTP listener, beside its commit socket
    (``service.procs.forward``)."""
    return socket_path[: -len(".sock")] + "-http.sock"


def supervise(
    config: Config,
    sockets: list[socket.socket],
    processes: int,
    run_writer: RunWriter,
    run_worker: RunWorker,
) -> int:
    """Run ``processes`` serving processes until SIGTERM/SIGINT; the exit code. A forked
    writer runs ``run_writer``, a forked worker ``run_worker``."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    return _Supervisor(config, sockets, processes, run_writer, run_worker).run()


class _Supervisor:
    def __init__(
        self,
        config: Config,
        sockets: list[socket.socket],
        processes: int,
        run_writer: RunWriter,
        run_worker: RunWorker,
    ) -> None:
        self._config = config
        self._sockets = sockets
        self._workers_wanted = processes - 1
        self._run_writer = run_writer
        self._run_worker = run_worker
        self._socket_path = writer_socket_path(config.data_dir)
        self._metrics_dir = shared_metrics.prepare(os.path.join(config.data_dir, RUN_DIRNAME))
        self._writer = 0
        self._workers: dict[int, float] = {}
        """pid -> when it was forked."""
        self._stopping = False
        self._failed = False

    def run(self) -> int:
        if not self._start_writer():
            _say("the metadata writer failed to start; see the lines above")
            return 1
        for _ in range(self._workers_wanted):
            self._start_worker()
        detail = f", {self._workers_wanted + 1} serving processes, supervisor {os.getpid()}"
        print(startup_banner(self._config, RealFileSystem(), detail), flush=True)
        while not self._stopping:
            received = signal.sigtimedwait(_SIGNALS, 1.0)
            if received is not None and received.si_signo != signal.SIGCHLD:
                break
            self._reap()
        return self._shutdown()

    # -- forking ----------------------------------------------------------------------

    def _fork(self, run: Callable[[], None]) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid:
            return pid
        code = 1
        try:
            _die_with(parent)
            # SIGTERM stays blocked until the process can drain (``WriterSeat.ready``); SIGINT (a
            # terminal's Ctrl-C reaches the whole group) is the supervisor's alone, which
            # then stops the workers before the writer.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            run()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # the child's last word, then it exits
            traceback.print_exc()
        finally:
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _start_writer(self) -> bool:
        """Fork the writer and wait until it is ready; False if it died first."""
        read_fd, write_fd = os.pipe()
        seat = WriterSeat(self._socket_path, self._metrics_dir, write_fd, bool(self._workers))
        self._writer = self._fork(lambda: self._run_writer(self._config, self._sockets, seat))
        os.close(write_fd)
        _say(f"the metadata writer is process {self._writer}")
        try:
            while True:
                readable, _, _ = select.select([read_fd], [], [], 0.5)
                if readable:
                    if os.read(read_fd, 1) == b"1":
                        return True
                    break  # closed without a word: it died
                if self._exited(self._writer):
                    break
        finally:
            os.close(read_fd)
        return False

    def _start_worker(self) -> None:
        seat = WorkerSeat(self._socket_path, self._metrics_dir)
        pid = self._fork(lambda: self._run_worker(self._config, self._sockets, seat))
        self._workers[pid] = time.monotonic()

    # -- watching ---------------------------------------------------------------------

    def _exited(self, pid: int) -> bool:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            _say(f"serving process {pid} ended ({_describe(status)})")
            shared_metrics.forget(self._metrics_dir, pid)
        return bool(done)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            shared_metrics.forget(self._metrics_dir, pid)
            if pid == self._writer:
                _say(f"the metadata writer ({pid}) ended ({_describe(status)}); restarting it")
                if not self._start_writer():
                    _say("the metadata writer failed to restart; stopping")
                    self._failed = self._stopping = True
                    return
            elif pid in self._workers:
                started = self._workers.pop(pid)
                _say(f"worker {pid} ended ({_describe(status)}); starting another")
                if time.monotonic() - started < RESPAWN_PAUSE_SECONDS:
                    time.sleep(RESPAWN_PAUSE_SECONDS)
                self._start_worker()

    # -- stopping ---------------------------------------------------------------------

    def _shutdown(self) -> int:
        """Workers drain first (their uploads commit through the writer), then the writer."""
        clean = not self._failed
        clean &= _stop_all(list(self._workers), WORKER_STOP_SECONDS)
        self._workers.clear()
        if self._writer:
            clean &= _stop_all([self._writer], WRITER_STOP_SECONDS)
        return 0 if clean else 1


def _stop_all(pids: list[int], timeout: float) -> bool:
    """SIGTERM ``pids`` and wait (SIGKILL after ``timeout``); whether all exited 0."""
    clean = True
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    waiting = set(pids)
    while waiting:
        for pid in list(waiting):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                waiting.discard(pid)
                continue
            if done:
                waiting.discard(pid)
                clean &= os.waitstatus_to_exitcode(status) == 0
        if waiting and time.monotonic() > deadline:
            for pid in waiting:
                _say(f"serving process {pid} did not stop in time; killing it")
                os.kill(pid, signal.SIGKILL)
            deadline = float("inf")
            clean = False
        time.sleep(0.05)
    return clean


def _die_with(parent: int) -> None:
    """SIGKILL this child when the supervisor dies (Linux ``PR_SET_PDEATHSIG``): serving
    processes without their parent would hold the port and the data dir's lock, and a new
    start must be able to recover as after any crash."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0 or os.getppid() != parent:
        os._exit(1)  # no such guard, or the parent is already gone


def _describe(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"signal {-code}" if code < 0 else f"exit code {code}"


def _say(line: str) -> None:
    print(f"service: {line}", file=sys.stderr, flush=True)
