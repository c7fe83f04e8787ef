"""Load generation for the benches: wrk for many small requests, raw sockets for big bodies.

Why not httpx: on a 2-core machine the client competes with the server for CPU, so a Python
HTTP client would measure itself. Many small requests go through wrk (C, one thread), driven
by a generated Lua script that adds unique keys, PUT bodies or random ``Range`` headers,
optionally pinned to CPUs with ``taskset`` (``LoadSpec.cpus``);
when wrk is missing, a thread-per-connection Python generator stands in (slower, and the
row says so). Big bodies go through ``HttpConnection``: a blocking HTTP/1.1 connection that
sends request bodies with ``os.sendfile`` from a file in the page cache and drains response
bodies with ``recv_into`` into one reused buffer, so the client costs a small fraction of
what the server does.

Load only ever targets 127.0.0.1.

Thread-safety: an ``HttpConnection`` belongs to one thread; ``run_load`` is called from one
thread and manages its own workers.
"""

from __future__ import annotations

import base64
import json
import os
import random
import secrets
import select
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

HOST = "127.0.0.1"
_RECV_BYTES = 4 * 1024 * 1024
_HEAD_LIMIT = 64 * 1024


def basic_auth(access_key: str, secret_key: str) -> dict[str, str]:
    """The ``Authorization`` header of an access key (HTTP Basic, as in the contract)."""
    token = base64.b64encode(f"{access_key}:{secret_key}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    """Empty when the body was drained rather than kept (``download``)."""
    body_bytes: int


class HttpConnection:
    """One keep-alive HTTP/1.1 connection to 127.0.0.1 with zero-copy uploads."""

    def __init__(self, port: int, timeout: float = 300.0) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._pending = bytearray()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> HttpConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes = b""
    ) -> Response:
        """Send a request with an in-memory body; read the whole response."""
        self._send_head(method, path, headers, len(body))
        if body:
            self.sock.sendall(body)
        return self._read_response(keep_body=True, has_body=method != "HEAD")

    def upload(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        fd: int,
        segments: Sequence[tuple[int, int]],
    ) -> Response:
        """Send ``(offset, length)`` windows of ``fd`` as the body, with ``os.sendfile``."""
        self._send_head(method, path, headers, sum(length for _, length in segments))
        for offset, length in segments:
            sent = 0
            while sent < length:
                try:
                    count = os.sendfile(self.sock.fileno(), fd, offset + sent, length - sent)
                except BlockingIOError:  # the socket has a timeout, so it is non-blocking
                    self._wait_writable()
                    continue
                if count == 0:
                    raise EOFError("source file ended before the declared length")
                sent += count
        return self._read_response(keep_body=True)

    def _wait_writable(self) -> None:
        if not select.select([], [self.sock], [], self.sock.gettimeout())[1]:
            raise TimeoutError("the server stopped reading the request body")

    def download(self, path: str, headers: Mapping[str, str]) -> Response:
        """GET ``path`` and count the body's bytes without keeping them."""
        self._send_head("GET", path, headers, None)
        return self._read_response(keep_body=False)

    def _send_head(
        self, method: str, path: str, headers: Mapping[str, str], length: int | None
    ) -> None:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if length is not None:
            lines.append(f"Content-Length: {length}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def _read_response(self, *, keep_body: bool, has_body: bool = True) -> Response:
        """The next response; a HEAD's (``has_body`` False) ends with its head."""
        while (end := self._pending.find(b"\r\n\r\n")) < 0:
            if len(self._pending) > _HEAD_LIMIT:
                raise ValueError("response head too long")
            self._fill()
        head = bytes(self._pending[:end]).decode("latin-1").split("\r\n")
        del self._pending[: end + 4]
        status = int(head[0].split(" ", 2)[1])
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if status in (204, 304) or not has_body:
            length = 0  # no body by definition (RFC 9110)
        elif "content-length" in headers:
            length = int(headers["content-length"])
        else:
            raise ValueError(f"response without Content-Length (status {status})")
        if keep_body:
            while len(self._pending) < length:
                self._fill()
            body = bytes(self._pending[:length])
            del self._pending[:length]
            return Response(status, headers, body, length)
        return Response(status, headers, b"", self._drain(length))

    def _drain(self, length: int) -> int:
        taken = min(length, len(self._pending))
        del self._pending[:taken]
        buffer = memoryview(bytearray(_RECV_BYTES))
        remaining = length - taken
        while remaining > 0:
            count = self.sock.recv_into(buffer, min(remaining, _RECV_BYTES))
            if count == 0:
                raise EOFError("connection closed mid-body")
            remaining -= count
        return length

    def _fill(self) -> None:
        data = self.sock.recv(256 * 1024)
        if not data:
            raise EOFError("connection closed mid-response")
        self._pending += data


@dataclass(frozen=True)
class LoadSpec:
    """Many small requests from ``connections`` keep-alive connections for ``seconds``."""

    port: int
    path: str
    method: str = "GET"
    headers: Mapping[str, str] = field(default_factory=dict)
    body_bytes: int = 0
    """A PUT body of this many bytes, the same for every request."""
    unique_paths: bool = False
    """Append ``-<run>-<worker>-<n>`` to the path so every request names a new key: ``run``
    is new for every load applied, so a repeated round writes new keys too (an overwrite
    also removes the old object: not the fresh-key PUT a row names)."""
    query: str = ""
    """Appended after the path (and its unique suffix): ``?fsync=true``."""
    range_span: int = 0
    """When > 0, each request asks for a random ``range_length`` window inside this size."""
    range_length: int = 0
    connections: int = 16
    seconds: float = 5.0
    cpus: str | None = None
    """Run wrk under ``taskset -c cpus`` (None: where the scheduler puts it). The Python
    stand-in runs in the caller's process and is never pinned."""


@dataclass(frozen=True)
class LoadResult:
    tool: str
    requests: int
    seconds: float
    errors: int
    """Responses outside 2xx/3xx plus socket errors and timeouts."""
    p50_ms: float
    p99_ms: float
    cpus: str | None = None
    """The CPUs the generator was pinned to, if it was."""

    @property
    def requests_per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def run_load(spec: LoadSpec, tool: str | None = None) -> LoadResult:
    """Apply the load with ``tool`` ("wrk" or "python"; default wrk when installed)."""
    if tool is None:
        tool = "wrk" if wrk_available() else "python"
    return _run_wrk(spec) if tool == "wrk" else _run_python(spec)


def _lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a valid Lua string literal here


_WRK_SCRIPT = """
local method, base, query, run = {method}, {path}, {query}, {run}
local base_headers = {{ {headers} }}
local body_bytes, unique = {body_bytes}, {unique}
local range_span, range_length = {range_span}, {range_length}
local body = nil
if body_bytes > 0 then body = string.rep("b", body_bytes) end
local counter = 0
local next_id = 1

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end

function init(args)
  math.randomseed(os.time() * 100 + id)
end

function request()
  counter = counter + 1
  local path = base
  if unique then path = base .. "-" .. run .. "-" .. id .. "-" .. counter end
  path = path .. query
  local headers = {{}}
  for name, value in pairs(base_headers) do headers[name] = value end
  if range_span > 0 then
    local first = math.random(0, range_span - range_length)
    headers["Range"] = "bytes=" .. first .. "-" .. (first + range_length - 1)
  end
  return wrk.format(method, path, headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "\\nWRK_JSON {{\\"requests\\": %d, \\"duration_us\\": %d, \\"errors\\": %d, "
    .. "\\"p50_us\\": %d, \\"p99_us\\": %d}}\\n",
    summary.requests, summary.duration,
    e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def _run_wrk(spec: LoadSpec) -> LoadResult:
    headers = ", ".join(
        f"[{_lua_string(name)}] = {_lua_string(value)}" for name, value in spec.headers.items()
    )
    script = _WRK_SCRIPT.format(
        method=_lua_string(spec.method),
        path=_lua_string(spec.path),
        query=_lua_string(spec.query),
        headers=headers,
        body_bytes=spec.body_bytes,
        unique="true" if spec.unique_paths else "false",
        run=_lua_string(secrets.token_hex(4)),
        range_span=spec.range_span,
        range_length=spec.range_length,
    )
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as file:
        file.write(script)
    try:
        pinning = [] if spec.cpus is None else ["taskset", "-c", spec.cpus]
        completed = subprocess.run(
            [
                *pinning,
                "wrk",
                "-t1",
                f"-c{spec.connections}",
                f"-d{max(1, round(spec.seconds))}s",
                "--timeout",
                "30s",
                "-s",
                file.name,
                f"http://{HOST}:{spec.port}",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=spec.seconds + 120,
        )
    finally:
        os.unlink(file.name)
    marker = next(
        (line for line in completed.stdout.splitlines() if line.startswith("WRK_JSON ")), None
    )
    if marker is None:
        raise RuntimeError(f"wrk printed no summary:\n{completed.stdout}\n{completed.stderr}")
    summary = json.loads(marker.removeprefix("WRK_JSON "))
    return LoadResult(
        tool="wrk",
        requests=summary["requests"],
        seconds=summary["duration_us"] / 1e6,
        errors=summary["errors"],
        p50_ms=summary["p50_us"] / 1000,
        p99_ms=summary["p99_us"] / 1000,
        cpus=spec.cpus,
    )


def _run_python(spec: LoadSpec) -> LoadResult:
    """Thread-per-connection stand-in for wrk: same requests, far less load per core."""
    body = b"b" * spec.body_bytes
    run = secrets.token_hex(4)
    deadline = time.monotonic() + spec.seconds
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()

    def worker(worker_id: int) -> None:
        rng = random.Random(worker_id)
        mine: list[float] = []
        failed = 0
        counter = 0
        with HttpConnection(spec.port, timeout=30.0) as connection:
            while time.monotonic() < deadline:
                counter += 1
                path = (
                    f"{spec.path}-{run}-{worker_id}-{counter}" if spec.unique_paths else spec.path
                )
                path += spec.query
                headers = dict(spec.headers)
                if spec.range_span:
                    first = rng.randint(0, spec.range_span - spec.range_length)
                    headers["Range"] = f"bytes={first}-{first + spec.range_length - 1}"
                started = time.perf_counter()
                response = connection.request(spec.method, path, headers, body)
                mine.append(time.perf_counter() - started)
                failed += response.status >= 400
        with lock:
            latencies.extend(mine)
            errors[0] += failed

    started = time.perf_counter()
    threads = [
        threading.Thread(target=worker, args=(number + 1,)) for number in range(spec.connections)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if len(latencies) > 1:
        quantiles = statistics.quantiles(latencies, n=100)
    else:
        quantiles = (latencies or [0.0]) * 99
    return LoadResult(
        tool="python",
        requests=len(latencies),
        seconds=elapsed,
        errors=errors[0],
        p50_ms=quantiles[49] * 1000,
        p99_ms=quantiles[98] * 1000,
    )
