"""A fleet worker's HTTP calls to the server, made with its attempt's job token only.

One ``AttemptClient`` per attempt. It holds the current token (the claim token, then the
lease token that every heartbeat renews) and turns the server's answers into the worker's
three outcomes: a result, ``AttemptLost`` (the server no longer runs this attempt: 409 or 404
on an attempt route, 403 on an object route; the worker stops and keeps nothing), or
``AttemptRefused`` (any other refusal: a bug or bad input, the job fails). A connection that
fails, a 502/503/504 (the server restarting, its writer away) or a 429 (the server busy:
its upload slots full) is tried again, with a growing pause, until ``patience`` seconds
have passed; the lease is what bounds how long the server waits for this worker.

Never logs a token.

Thread-safety: the token is swapped under a lock (the heartbeat thread renews it while the
attempt's thread uploads); the one ``httpx.Client`` of the process is shared by both
(its connection pool is thread-safe).
"""

from __future__ import annotations

import hashlib
import tarfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import httpx

TAR_BLOCK = 512
RETRIED_STATUSES = frozenset({429, 502, 503, 504})
FIRST_PAUSE = 0.2
LONGEST_PAUSE = 5.0
TIMEOUT = httpx.Timeout(60.0, connect=5.0)
CHUNK_BYTES = 1024 * 1024


_shared: httpx.Client | None = None
_shared_lock = threading.Lock()


def shared_client() -> httpx.Client:
    """One client per worker process, for every attempt and the heartbeat thread: its
    connections are kept alive across calls, and its TLS context (loading the CA bundle
    costs tens of milliseconds of CPU) is made once, not per attempt."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = httpx.Client(timeout=TIMEOUT)
        return _shared


class AttemptLost(Exception):
    """The server gave this attempt up (lease lapsed, job cancelled or moved on)."""


class AttemptRefused(Exception):
    """The server refused a call for a reason that retrying will not change."""


def _reason(response: httpx.Response) -> str:
    try:
        error = response.json()["error"]
        return f"{response.status_code} {error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return f"{response.status_code}"


class AttemptClient:
    """The calls of one attempt (see the module docstring)."""

    def __init__(self, server: str, job_id: str, claim_token: str, *, patience: float) -> None:
        self.api = server.rstrip("/") + "/api/v1"
        self.job_id = job_id
        self.patience = patience
        self._token = claim_token
        self._lock = threading.Lock()

    @property
    def token(self) -> str:
        with self._lock:
            return self._token

    @token.setter
    def token(self, value: str) -> None:
        with self._lock:
            self._token = value

    def _client(self) -> httpx.Client:
        return shared_client()

    def close(self) -> None:
        """Nothing to release: the connection pool is the process's (``shared_client``)."""

    # -- one call, retried -------------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        *,
        attempt_route: bool = False,
        **kwargs: Any,
    ) -> httpx.Response:
        """``method path`` with the current token; the 2xx answer (see the docstring)."""
        deadline = time.monotonic() + self.patience
        pause = FIRST_PAUSE
        extra = kwargs.pop("headers", {})
        while True:
            headers = {"Authorization": f"Bearer {self.token}", **extra}
            try:
                response = self._client().request(
                    method, self.api + path, headers=headers, **kwargs
                )
            except httpx.TransportError as exc:
                problem = f"cannot reach the server: {type(exc).__name__}"
            else:
                if response.is_success:
                    return response
                if response.status_code not in RETRIED_STATUSES:
                    raise self._refusal(response, attempt_route)
                problem = _reason(response)
            if time.monotonic() + pause > deadline:
                raise AttemptRefused(f"{method} {path}: {problem}")
            time.sleep(pause)
            pause = min(LONGEST_PAUSE, pause * 2)

    def _refusal(self, response: httpx.Response, attempt_route: bool) -> Exception:
        status = response.status_code
        if (attempt_route and status in (404, 409)) or (not attempt_route and status == 403):
            return AttemptLost(_reason(response))
        return AttemptRefused(_reason(response))

    # -- the attempt routes ------------------------------------------------------------

    def attempt(self, verb: str, body: dict[str, Any]) -> dict[str, Any]:
        path = f"/videos/jobs/{quote(self.job_id, safe='')}/{verb}"
        answer: dict[str, Any] = self.call("POST", path, attempt_route=True, json=body).json()
        if "token" in answer:
            self.token = answer["token"]
        return answer

    # -- the object routes -------------------------------------------------------------

    def download(self, bucket: str, key: str, path: str) -> None:
        """The source object into the file ``path`` (started again after a cut)."""
        url = f"/buckets/{quote(bucket, safe='')}/objects/{quote(key, safe='/')}"
        deadline = time.monotonic() + self.patience
        while True:
            try:
                with self._stream("GET", url) as response, open(path, "wb") as out:
                    for chunk in response.iter_bytes(CHUNK_BYTES):
                        out.write(chunk)
                return
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(FIRST_PAUSE)

    @contextmanager
    def _stream(self, method: str, path: str) -> Iterator[httpx.Response]:
        headers = {"Authorization": f"Bearer {self.token}"}
        with self._client().stream(method, self.api + path, headers=headers) as response:
            if not response.is_success:
                response.read()
                raise self._refusal(response, attempt_route=False)
            yield response

    def upload(self, bucket: str, key: str, path: str, content_type: str) -> dict[str, Any]:
        """The file ``path`` as a multipart session on ``key``, left open; its
        ``{"upload_id", "parts"}`` for the completion."""
        with open(path, "rb") as source:
            size = source.seek(0, 2)
            source.seek(0)
            body = {"bucket": bucket, "key": key, "content_type": content_type, "size_bytes": size}
            session = self.call("POST", "/multipart/init", json=body).json()
            upload_id = session["upload_id"]
            part_size = int(session["recommended_part_size"])
            parts = []
            number = 1
            while True:
                data = source.read(part_size)
                if not data and number > 1:
                    break
                digest = hashlib.sha256(data).hexdigest()
                stored = self.call(
                    "PUT",
                    f"/multipart/{upload_id}/part",
                    params={"partNumber": number},
                    content=data,
                    headers={"X-Checksum-Sha256": digest},
                ).json()
                parts.append({"part_number": number, "etag": stored["etag"]})
                number += 1
                if len(data) < part_size:
                    break
        return {"upload_id": upload_id, "parts": parts}

    def upload_bundle(self, files: Sequence[tuple[str, str]]) -> dict[str, Any]:
        """The files ``(name, path)`` in one request, as a tar stream, each kept by the
        server as an open multipart upload on ``<output prefix><name>``; their
        ``{name: {"upload_id", "parts"}}`` for the completion (``fleet_outputs``)."""
        path = f"/videos/jobs/{quote(self.job_id, safe='')}/outputs"
        bundle = _Bundle(files)
        headers = {"Content-Type": "application/x-tar", "Content-Length": str(bundle.size)}
        answer: dict[str, Any] = self.call("POST", path, content=bundle, headers=headers).json()
        return dict(answer["outputs"])


class _Bundle:
    """A tar stream of files read as it is sent (never whole in memory); iterable again for
    a retried request. Plain ustar headers: output names are short and ASCII."""

    def __init__(self, files: Sequence[tuple[str, str]]) -> None:
        self._members = []
        for name, path in files:
            with open(path, "rb") as source:
                size = source.seek(0, 2)
            info = tarfile.TarInfo(name)
            info.size, info.mode = size, 0o644
            self._members.append((info.tobuf(tarfile.USTAR_FORMAT), path, size))
        self.size = (
            sum(len(header) + size + -size % TAR_BLOCK for header, _, size in self._members)
            + 2 * TAR_BLOCK
        )

    def __iter__(self) -> Iterator[bytes]:
        for header, path, size in self._members:
            yield header
            with open(path, "rb") as source:
                while chunk := source.read(CHUNK_BYTES):
                    yield chunk
            if size % TAR_BLOCK:
                yield bytes(-size % TAR_BLOCK)
        yield bytes(2 * TAR_BLOCK)  # the end of the archive
