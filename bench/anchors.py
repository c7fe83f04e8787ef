"""Anchors: simple things doing the same work as the server, measured in the same run.

- ``raw_write_fsync``, ``raw_small_files`` and ``copy_fsync``: what the disk does with plain
  ``os`` calls, the ceilings for a durable PUT (large and small) and for a multipart join.
  They write FRESH blocks: every call makes new files and keeps them until the bench's
  scratch directory goes. A file deleted and rewritten at once lands on the blocks it just
  freed, which this thin-provisioned disk writes 3-4x faster than blocks a new object gets;
- ``Nginx``: nginx (one worker, ``sendfile on``) serving files from a directory, the
  reference for serving bytes from the page cache; ``/dav/`` takes PUTs (WebDAV module,
  no fsync: the reference for a balanced small PUT);
- ``NaiveServer``: a Tornado app written the way most people would: GET reads the file in
  256 KiB chunks on the event loop and writes each one (a single ``Range`` honoured); PUT
  takes the buffered body, writes it to a file (fsync'd when strict) and renames it into
  place. Run as ``python -m bench.anchors ROOT PORT strict|balanced``;
- ``FloorServer``: the same file work as the naive app under a bare Tornado
  ``HTTPMessageDelegate`` (no ``RequestHandler``, no routing): the floor of what a Tornado
  process pays per request. Run as ``python -m bench.anchors ROOT PORT MODE floor``;
- ``ensure_tools``: installs nginx-light and wrk from Debian's packages when missing.

Thread-safety: one caller; each server object owns one child process.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

from bench import MIB, REPO

NAIVE_CHUNK = 256 * 1024
_fresh_names = itertools.count()
_APT_PACKAGES = ("nginx-light", "wrk")


def ensure_tools(*, install: bool) -> dict[str, str]:
    """Return ``{tool: reason}`` for nginx and wrk still missing, installing them first.

    Installation runs once per call (``apt-get update`` then ``apt-get install``) and only
    when ``install`` is set and we are root; a failure is reported, never raised, so the
    bench degrades to rows that say what is missing.
    """
    missing = [tool for tool in ("nginx", "wrk") if not _which(tool)]
    if missing and install and os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for command in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", *_APT_PACKAGES],
        ):
            try:
                subprocess.run(command, env=env, capture_output=True, check=True, timeout=600)
            except (subprocess.SubprocessError, OSError) as exc:
                print(f"bench: {' '.join(command)} failed: {exc}", file=sys.stderr)
                break
    return {
        tool: f"{tool} not installed (apt-get install {package} failed or was not tried)"
        for tool, package in (("nginx", "nginx-light"), ("wrk", "wrk"))
        if not _which(tool)
    }


def _which(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin")


def raw_write_fsync(directory: str, size: int, *, hashed: bool = False) -> float:
    """Seconds to write ``size`` bytes in 1 MiB writes to a new file and fsync it.

    ``hashed`` adds a SHA-256 of every block on the same thread: the least work any PUT
    that checksums its body must do, which is the fairer anchor when the disk is faster
    than SHA-256 on one core.
    """
    block = memoryview(os.urandom(MIB))
    digest = hashlib.sha256()
    path = os.path.join(directory, f"raw-write-{next(_fresh_names)}.bin")
    started = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        written = 0
        while written < size:
            piece = block[: min(MIB, size - written)]
            if hashed:
                digest.update(piece)
            written += os.write(fd, piece)
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - started


def raw_small_files(directory: str, size: int, threads: int, seconds: float) -> float:
    """Files/s that ``threads`` threads make durable: write, fsync, rename, fsync the dir.

    The ceiling a strict small PUT can reach on this disk with this much concurrency;
    concurrent fsyncs share the file system's journal commits, as a group commit does.
    """
    block = os.urandom(size)
    directory = os.path.join(directory, f"round-{next(_fresh_names)}")
    os.makedirs(directory)
    deadline = time.monotonic() + seconds
    counts = [0] * threads

    def worker(number: int) -> None:
        while time.monotonic() < deadline:
            final = os.path.join(directory, f"{number}-{counts[number]}")
            staging = final + ".tmp"
            fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, block)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(staging, final)
            directory_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(directory_fd)
            finally:
                os.close(directory_fd)
            counts[number] += 1

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, range(threads)))
    return sum(counts) / (time.perf_counter() - started)


def copy_fsync(source: str, directory: str) -> float:
    """Seconds for a plain file copy (``shutil.copyfile``, as ``cp`` does) plus fsync."""
    target = os.path.join(directory, f"copy-{next(_fresh_names)}.bin")
    started = time.perf_counter()
    shutil.copyfile(source, target)
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - started


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and all its live descendants (nginx's
    worker, our serving processes and their helpers).

    On a shared machine the server's CPU time per request varies far less than its
    requests/s, so the benches report it beside every load.
    """
    total = 0.0
    for each in descendants(pid):
        try:
            with open(f"/proc/{each}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            if each == pid:
                raise
            continue  # a child that exited meanwhile
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it (from /proc)."""
    found = [pid]
    for each in found:
        try:
            tasks = os.listdir(f"/proc/{each}/task")
        except FileNotFoundError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{each}/task/{task}/children") as children:
                    found += [int(child) for child in children.read().split()]
            except FileNotFoundError:
                continue  # a thread that ended between the listing and the read
    return found


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"anchor server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"anchor server did not listen on port {port}")


class _ChildServer:
    """A child process serving HTTP on a loopback port, stopped on exit."""

    process: subprocess.Popen[bytes] | None = None

    def __init__(self, port: int) -> None:
        self.port = port

    def command(self) -> list[str]:
        raise NotImplementedError

    def __enter__(self) -> _ChildServer:
        self.process = subprocess.Popen(
            self.command(), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port(self.port, self.process)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


class Nginx(_ChildServer):
    """nginx serving ``root`` at ``/`` on ``port``: one worker, sendfile on, access log on.

    ``tcp_nopush`` stays off (nginx's default): with it on, every 64 KiB ranged response on
    loopback stalls 40 ms (its last partial segment waits for the client's delayed ACK),
    which made nginx look 25x slower than it is. One worker, because our server is one
    process and the load generator needs the other core.
    """

    def __init__(self, root: str, prefix: str, port: int) -> None:
        super().__init__(port)
        self.root = root
        self.prefix = prefix

    def command(self) -> list[str]:
        os.makedirs(self.prefix, exist_ok=True)
        user = "user root;" if os.geteuid() == 0 else ""
        config = f"""
daemon off;
worker_processes 1;
{user}
pid {self.prefix}/nginx.pid;
error_log {self.prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {self.prefix}/access.log;
    client_body_temp_path {self.prefix}/body;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush off;
    tcp_nodelay on;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{self.port};
        root {self.root};
        location /dav/ {{
            root {self.prefix};
            dav_methods PUT;
            create_full_put_path on;
            client_max_body_size 0;
        }}
    }}
}}
"""
        path = os.path.join(self.prefix, "nginx.conf")
        with open(path, "w") as file:
            file.write(config)
        binary = _which("nginx") or "nginx"
        return [binary, "-p", self.prefix, "-e", f"{self.prefix}/error.log", "-c", path]


class NaiveServer(_ChildServer):
    """The naive Tornado app of the module docstring, serving ``root`` under ``/files/``."""

    kind = "naive"

    def __init__(self, root: str, port: int, durability: str) -> None:
        super().__init__(port)
        self.root = root
        self.durability = durability

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "bench.anchors",
            self.root,
            str(self.port),
            self.durability,
            self.kind,
        ]


class FloorServer(NaiveServer):
    """The naive app's file work under a bare ``HTTPMessageDelegate`` (module docstring)."""

    kind = "floor"


def _single_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``(start, end)`` of a ``bytes=a-b`` header, clamped; None for anything else.

    >>> _single_range("bytes=10-19", 100), _single_range("bytes=90-200", 100)
    ((10, 19), (90, 99))
    """
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[6:].partition("-")
    if not first.isdigit() or not last.isdigit():
        return None
    start, end = int(first), min(int(last), size - 1)
    return (start, end) if start <= end else None


def _store_file(root: str, name: str, body: bytes, strict: bool) -> None:
    """The naive PUT: write a staging file (fsync when strict), rename, fsync the dir."""
    path = os.path.join(root, name)
    staging = path + ".tmp"
    with open(staging, "wb") as file:
        file.write(body)
        if strict:
            file.flush()
            os.fsync(file.fileno())
    os.replace(staging, path)
    if strict:
        directory = os.open(root, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def _serve_naive(root: str, port: int, durability: str) -> None:
    import asyncio

    import tornado.web

    strict = durability == "strict"

    class FileHandler(tornado.web.RequestHandler):
        async def get(self, name: str) -> None:
            path = os.path.join(root, name)
            size = os.path.getsize(path)
            span = _single_range(self.request.headers.get("Range"), size)
            start, left = (0, size) if span is None else (span[0], span[1] - span[0] + 1)
            if span is not None:
                self.set_status(206)
            self.set_header("Content-Length", str(left))
            with open(path, "rb") as file:
                file.seek(start)
                while left > 0 and (chunk := file.read(min(NAIVE_CHUNK, left))):
                    left -= len(chunk)
                    self.write(chunk)
                    await self.flush()

        def put(self, name: str) -> None:
            _store_file(root, name, self.request.body, strict)
            self.finish({"size_bytes": len(self.request.body)})

    async def main() -> None:
        app = tornado.web.Application([(r"/files/(.+)", FileHandler)])
        app.listen(port, "127.0.0.1", max_body_size=4 * 1024 * MIB)
        await asyncio.Event().wait()

    asyncio.run(main())


def _serve_floor(root: str, port: int, durability: str) -> None:
    import asyncio

    from tornado.httpserver import HTTPServer
    from tornado.httputil import (
        HTTPHeaders,
        HTTPMessageDelegate,
        HTTPServerConnectionDelegate,
        HTTPServerRequest,
        ResponseStartLine,
    )

    strict = durability == "strict"

    class Floor(HTTPMessageDelegate):
        def __init__(self, request: HTTPServerRequest) -> None:
            self.request = request
            self.chunks: list[bytes] = []

        def data_received(self, chunk: bytes) -> None:
            self.chunks.append(chunk)

        def finish(self) -> None:
            name = self.request.path.removeprefix("/files/")
            body = b""
            status = 200
            if self.request.method == "PUT":
                _store_file(root, name, b"".join(self.chunks), strict)
            else:
                path = os.path.join(root, name)
                size = os.path.getsize(path)
                span = _single_range(self.request.headers.get("Range"), size)
                start, length = (0, size) if span is None else (span[0], span[1] - span[0] + 1)
                status = 200 if span is None else 206
                with open(path, "rb") as file:
                    file.seek(start)
                    body = file.read(length)
            headers = HTTPHeaders({"Content-Length": str(len(body))})
            connection = self.request.connection
            assert connection is not None
            connection.write_headers(ResponseStartLine("HTTP/1.1", status, "OK"), headers, body)
            connection.finish()

    class Delegates(HTTPServerConnectionDelegate):
        def start_request(self, server_conn: object, request_conn: object) -> HTTPMessageDelegate:
            return _Start(request_conn)

    class _Start(HTTPMessageDelegate):
        """Builds the request from the start line and headers, then hands over to Floor."""

        def __init__(self, connection: object) -> None:
            self.connection = connection
            self.inner: Floor | None = None

        def headers_received(self, start_line: object, headers: HTTPHeaders) -> None:
            request = HTTPServerRequest(
                connection=self.connection,  # type: ignore[arg-type]
                start_line=start_line,  # type: ignore[arg-type]
                headers=headers,
            )
            self.inner = Floor(request)

        def data_received(self, chunk: bytes) -> None:
            assert self.inner is not None
            self.inner.data_received(chunk)

        def finish(self) -> None:
            assert self.inner is not None
            self.inner.finish()

    async def main() -> None:
        server = HTTPServer(Delegates(), max_body_size=4 * 1024 * MIB)
        server.listen(port, "127.0.0.1")
        await asyncio.Event().wait()

    asyncio.run(main())


if __name__ == "__main__":
    serve = _serve_floor if sys.argv[4:5] == ["floor"] else _serve_naive
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3])
