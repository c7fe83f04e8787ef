"""The workload of the kill/restart test: client threads and what they know of their keys.

``Worker`` is one of ``KillKit``'s client threads: random PUTs, DELETEs, version deletes
and multipart uploads on keys of its own, each acknowledgement recorded in the kit's ledger
and in the worker's own view of its keys. The kit (``tests.crash.killkit``) runs the cycles
and the checks; this module is what the server is put under while it is killed.

Thread-safety: each ``Worker`` runs on its own thread with its own httpx client; the ledger
it shares with the other workers is guarded by ``KillKit.lock``.
"""

from __future__ import annotations

import io
import json
import random
import tarfile
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from tests.crash.model import MARKER, Fate, KeyState, sha256, visible

if TYPE_CHECKING:
    from tests.crash.killkit import KillKit

PLAIN = "kill-plain"
VERSIONED = "kill-versioned"
REQUEST_TIMEOUT = 30.0
MAX_VERSIONS = 4
"""A versioned key with more entries has its oldest known version deleted for good."""
LARGE_SHARE = 0.03
BATCH_SHARE = 0.1
"""Of the steps, the share that are batch uploads (docs/batch.md) of 1-3 of a worker's keys."""
UNIFORM_PART = 1024 * 1024
"""The part size some multipart uploads declare at init (the smallest the server takes)."""

Entry = tuple[str, str | None]
"""One version as a worker knows it: (SHA-256 or MARKER, version id if known), oldest first."""
Thing = tuple[str, str, str]
"""What an operation touched: ("key", bucket, key), ("upload", upload_id, ""), ..."""


def key_thing(bucket: str, key: str) -> Thing:
    return ("key", bucket, key)


def upload_thing(upload_id: str) -> Thing:
    return ("upload", upload_id, "")


def object_path(bucket: str, key: str) -> str:
    return f"/buckets/{bucket}/objects/{quote(key, safe='/')}"


def worker_keys(index: int) -> list[tuple[str, str]]:
    """The keys one worker owns (odd names on purpose: they travel percent-encoded)."""
    return [
        (PLAIN, f"w{index}/a"),
        (PLAIN, f"w{index}/b c"),
        (PLAIN, f"w{index}/ü/d"),
        (VERSIONED, f"w{index}/v1"),
        (VERSIONED, f"w{index}/v2"),
    ]


def short(state: tuple[str, ...] | frozenset[Any] | None) -> str:
    if state is None:
        return "closed"
    if isinstance(state, frozenset):
        return "{" + ", ".join(f"{n}:{d[:8]}" for n, d in sorted(state)) + "}"
    return "(" + ", ".join("M" if item == MARKER else item[:8] for item in state) + ")"


@dataclass(frozen=True)
class Reply:
    """An HTTP answer; ``status`` None when no connection could be opened (nothing was
    sent, so nothing happened), 0 when the exchange broke off (anything may have)."""

    status: int | None
    headers: httpx.Headers
    content: bytes
    error: str = ""

    @property
    def fate(self) -> str:
        if self.status is None:
            return Fate.REFUSED
        return Fate.of_status(self.status)

    def json(self) -> Any:
        return json.loads(self.content)


def send(client: httpx.Client, method: str, url: str, **kwargs: Any) -> Reply:
    try:
        response = client.request(method, url, **kwargs)
    except httpx.ConnectError as exc:
        return Reply(None, httpx.Headers(), b"", repr(exc))
    except httpx.HTTPError as exc:
        return Reply(0, httpx.Headers(), b"", repr(exc))
    return Reply(response.status_code, response.headers, response.content)


def in_chunks(data: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    """The body as an iterator: httpx then sends it with chunked transfer encoding."""
    for start in range(0, len(data), size):
        yield data[start : start + size]


def drop_entry(index: int, item: str) -> Callable[[KeyState], KeyState]:
    """DELETE ?version_id=: the entry at ``index`` (known to be ``item``) goes for good."""

    def effect(state: KeyState) -> KeyState:
        if len(state) > index and state[index] == item:
            return state[:index] + state[index + 1 :]
        return state

    return effect


@dataclass(frozen=True)
class PendingComplete:
    """A complete that got no answer: its session and its key must agree after restart."""

    bucket: str
    key: str
    parts: tuple[tuple[int, str], ...]
    digest: str


class Worker:
    """One client thread: random operations on its own keys until told to stop or the
    server stops answering (its first answer that is not a success ends its cycle)."""

    def __init__(self, kit: KillKit, index: int, seed: int, stop: threading.Event) -> None:
        self.kit = kit
        self.index = index
        self.rng = random.Random(seed)
        self.stop = stop
        self.keys = worker_keys(index)
        self.client: httpx.Client | None = None

    def run(self) -> None:
        try:
            with self.kit.http(REQUEST_TIMEOUT) as client:
                self.client = client
                while not self.stop.is_set() and self.step():
                    pass
        except Exception:
            self.kit.problem(f"worker {self.index} failed:\n{traceback.format_exc()}")

    def send(self, method: str, url: str, **kwargs: Any) -> Reply:
        assert self.client is not None
        return send(self.client, method, url, **kwargs)

    def step(self) -> bool:
        bucket, key = self.rng.choice(self.keys)
        entries = self.kit.views[(bucket, key)]
        state = tuple(item for item, _ in entries)
        with self.kit.lock:
            firm = set(self.kit.ledger.key(bucket, key).firm)
        if len(firm) > 1:
            return False  # the checker's close-out got no answer (a problem already)
        if firm != {state}:
            self.kit.problem(f"test bug: {bucket}/{key} view {short(state)} vs ledger {firm}")
            return False
        roll = self.rng.random()
        if roll < 0.2:
            return self.multipart(bucket, key)
        if roll < 0.2 + BATCH_SHARE:
            return self.batch(bucket)
        if roll < 0.4 and visible(state):
            return self.delete(bucket, key)
        if bucket == VERSIONED and len(entries) > MAX_VERSIONS:
            return self.prune(bucket, key)
        return self.put(bucket, key)

    def body(self, size: int) -> bytes:
        return self.kit.new_body(self.rng, size)

    def put(self, bucket: str, key: str) -> bool:
        large = self.rng.random() < LARGE_SHARE
        size = self.rng.randint(600_000, 1_200_000) if large else self.rng.randint(0, 3000)
        data = self.body(size)
        digest = sha256(data)
        headers = {"Content-Type": "application/octet-stream"}
        if self.rng.random() < 0.3:
            headers["X-Checksum-Sha256"] = digest
        content: bytes | Iterator[bytes] = in_chunks(data) if self.rng.random() < 0.3 else data
        reply = self.send("PUT", object_path(bucket, key), content=content, headers=headers)
        what = f"PUT {bucket}/{key} ({len(data)} bytes)"
        fate = self.kit.outcome(reply, what, 200)
        with self.kit.lock:
            self.kit.ledger.put(bucket, key, data, fate)
            self.kit.note(fate, what, key_thing(bucket, key))
        if fate != Fate.ACKED:
            return False
        self.kit.expect_object(reply, digest, what)
        entry = (digest, reply.headers.get("X-Version-Id"))
        self.kit.views[(bucket, key)] = (
            [*self.kit.views[(bucket, key)], entry] if bucket == VERSIONED else [entry]
        )
        return True

    def batch(self, bucket: str) -> bool:
        """One batch upload of 1-3 of this worker's keys in ``bucket`` (one sometimes over
        256 KiB, streamed through a staging file); each member is its own PUT in the ledger."""
        keys = [key for name, key in self.keys if name == bucket]
        chosen = self.rng.sample(keys, self.rng.randint(1, len(keys)))
        for key in chosen:
            state = tuple(item for item, _ in self.kit.views[(bucket, key)])
            with self.kit.lock:
                if set(self.kit.ledger.key(bucket, key).firm) != {state}:
                    return False  # left unsettled by an earlier answer (a problem already)
        bodies = []
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w|", format=tarfile.PAX_FORMAT) as archive:
            for key in chosen:
                large = self.rng.random() < 0.1
                data = self.body(300_000 if large else self.rng.randint(0, 3000))
                info = tarfile.TarInfo(key)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
                bodies.append(data)
        content = buffer.getvalue()
        reply = self.send(
            "POST",
            f"/buckets/{bucket}/batch",
            content=in_chunks(content) if self.rng.random() < 0.3 else content,
            headers={"Content-Type": "application/x-tar"},
        )
        what = f"batch {bucket} {chosen}"
        fate = self.kit.outcome(reply, what, 200)
        results = reply.json()["results"] if fate == Fate.ACKED else [None] * len(chosen)
        for key, data, result in zip(chosen, bodies, results, strict=True):
            member = fate
            if result is not None and "error" in result:
                status = result["error"]["status"]
                member = Fate.of_status(status)
                # A member whose commit met a writer killed mid-batch: unknown, as a PUT's.
                if not (self.kit.serving_killed and status == 503):
                    self.kit.problem(f"{what}: {key} refused: {result['error']}")
            with self.kit.lock:
                self.kit.ledger.put(bucket, key, data, member)
                self.kit.note(member, f"{what}: {key}", key_thing(bucket, key))
            if member != Fate.ACKED:
                continue
            digest = sha256(data)
            if result["sha256_checksum"] != digest:
                self.kit.problem(f"{what}: {key} acknowledged with {result['sha256_checksum']}")
            with self.kit.lock:
                self.kit.acked_digests.add(digest)
            entry = (digest, result["version_id"])
            self.kit.views[(bucket, key)] = (
                [*self.kit.views[(bucket, key)], entry] if bucket == VERSIONED else [entry]
            )
        return fate == Fate.ACKED

    def delete(self, bucket: str, key: str) -> bool:
        reply = self.send("DELETE", object_path(bucket, key))
        what = f"DELETE {bucket}/{key}"
        fate = self.kit.outcome(reply, what, 204)
        with self.kit.lock:
            self.kit.ledger.delete(bucket, key, fate)
            self.kit.note(fate, what, key_thing(bucket, key))
        if fate != Fate.ACKED:
            return False
        views = self.kit.views
        marked = [*views[(bucket, key)], (MARKER, None)]
        views[(bucket, key)] = marked if bucket == VERSIONED else []
        return True

    def prune(self, bucket: str, key: str) -> bool:
        """Delete the oldest version whose id is known, for good (keeps checks short)."""
        entries = self.kit.views[(bucket, key)]
        index = next((i for i, (_, vid) in enumerate(entries[:-1]) if vid is not None), None)
        if index is None:
            return self.put(bucket, key)
        item, version_id = entries[index]
        reply = self.send("DELETE", object_path(bucket, key), params={"version_id": version_id})
        what = f"DELETE {bucket}/{key}?version_id={version_id}"
        fate = self.kit.outcome(reply, what, 204)
        with self.kit.lock:
            self.kit.ledger.key(bucket, key).record(fate, drop_entry(index, item))
            self.kit.note(fate, what, key_thing(bucket, key))
        if fate != Fate.ACKED:
            return False
        self.kit.views[(bucket, key)] = entries[:index] + entries[index + 1 :]
        return True

    def multipart(self, bucket: str, key: str) -> bool:
        """Init, 1-4 parts (one sometimes sent twice), then complete (all parts or a
        subset), abort, or leave the session open for the checker to finish.

        Three shapes, so every multipart path is killed in: small parts of declared length
        (written in place at 8 MiB strides; complete joins them), parts sent chunked (their
        own files, assembled as they arrive), and 1 MiB parts declared at init (written in
        place; complete seals the upload's file, copying part 1, re-sent, into place)."""
        kit = self.kit
        shape = self.rng.random()
        chunked, uniform = shape < 0.3, 0.3 <= shape < 0.5
        init = {"bucket": bucket, "key": key, **({"part_size": UNIFORM_PART} if uniform else {})}
        reply = self.send("POST", "/multipart/init", json=init)
        fate = kit.outcome(reply, f"init {bucket}/{key}", 201)
        upload_id: str | None = reply.json()["upload_id"] if fate == Fate.ACKED else None
        with kit.lock:
            kit.ledger.upload_started(upload_id, bucket, key, fate)
            if upload_id is not None:
                kit.note(fate, f"init {upload_id}", upload_thing(upload_id))
        if upload_id is None:
            return False
        parts: dict[int, str] = {}
        numbers = list(range(1, self.rng.randint(2 if uniform else 1, 4) + 1))
        if len(numbers) > 1 and (uniform or self.rng.random() < 0.25):
            numbers.append(1 if uniform else self.rng.choice(numbers))
        for number in numbers:
            if self.stop.is_set():
                return False
            size = 300_000 if self.rng.random() < 0.1 else self.rng.randint(1, 20_000)
            full = uniform and number < len(set(numbers))
            data = self.body(UNIFORM_PART if full else size)
            if full:
                data = data[:UNIFORM_PART]  # exactly the declared size, unique prefix and all
            reply = self.send(
                "PUT",
                f"/multipart/{upload_id}/part",
                params={"partNumber": number},
                content=in_chunks(data) if chunked else data,
            )
            what = f"part {number} of {upload_id}"
            fate = kit.outcome(reply, what, 200)
            with kit.lock:
                kit.ledger.part_stored(upload_id, number, data, fate)
                kit.note(fate, what, upload_thing(upload_id))
            if fate != Fate.ACKED:
                return False
            if reply.json().get("etag") != sha256(data):
                kit.problem(f"{what}: acknowledged with etag {reply.json().get('etag')}")
            parts[number] = sha256(data)
        choice = 1.0 if uniform else self.rng.random()  # uniform: complete all (the seal)
        if choice < 0.1:
            return True
        if choice < 0.3:
            return kit.abort(self.client_or_fail(), upload_id)
        chosen = sorted(parts.items())
        if len(chosen) > 1 and not uniform and self.rng.random() < 0.3:
            chosen = sorted(self.rng.sample(chosen, self.rng.randint(1, len(chosen) - 1)))
        return kit.complete(self.client_or_fail(), upload_id, bucket, key, tuple(chosen))

    def client_or_fail(self) -> httpx.Client:
        assert self.client is not None
        return self.client
