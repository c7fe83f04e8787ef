"""The checks of the kill/restart kit (``tests.crash.killkit``), after each restart: every key's
versions, every upload's parts, every bucket, the stray keys, the server's info and, at the
end, the files on disk, against the ledger of acknowledged operations; then the open sessions
are closed so the next cycle starts clean. A mixin of ``KillKit``, whose state (ledger, tally,
server, views) it reads: kept apart so each file does one job."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx

from service.storage.layout import (
    PAYLOADS_DIR,
    QUARANTINE_DIR,
    STAGING_DIR,
    is_valid_payload_id,
)
from tests.crash.killworkload import (
    PLAIN,
    VERSIONED,
    Entry,
    Reply,
    Thing,
    key_thing,
    object_path,
    send,
    short,
    upload_thing,
)
from tests.crash.model import MARKER, UploadState, sha256, visible


class KillChecks:
    """The checks; see the module docstring."""

    def check(self, *, disk: bool = False) -> None:
        """Everything the ledger knows is in an allowed state and readable; settle on it,
        count the acknowledged operations checked and lost, then close every open session."""
        bad: set[Thing] = set()

        def fail(thing: Thing, message: str) -> None:
            bad.add(thing)
            self.problem(message)

        ledger = self.ledger
        with self.http() as client:
            identities = {
                item["name"]: item["bucket_id"]
                for item in self.listing(client, "/buckets", "buckets")
            }
            buckets = set(identities)
            for name, possible in ledger.buckets.items():
                if (name in buckets) not in possible.firm:
                    fail(("bucket", name, ""), f"bucket {name}: exists={name in buckets}")
                possible.settle(name in buckets)
                problem = ledger.identity_problem(name, identities.get(name), firm=True)
                if problem is not None:
                    fail(("bucket", name, ""), problem)
            for name in buckets - ledger.buckets.keys():
                fail(("bucket", name, ""), f"unknown bucket {name}")
            observed = self.observe_versions(client, fail)
            self.check_keys(client, observed, fail)
            uploads = self.check_uploads(client, observed, fail)
            strays = self.check_strays(client, fail)
            self.check_info(client, observed, uploads, strays, fail)
            self.check_audit(client)
            lost = sum(1 for _, things in self.unchecked if bad.intersection(things))
            self.tally.checked += len(self.unchecked)
            self.tally.lost += lost
            self.unchecked = []
            if disk:
                self.check_disk(observed, uploads, self.parts_in_place(client, uploads))
            self.views = {bk: list(entries) for bk, entries in observed.items()}
            for bk in ledger.keys:
                self.views.setdefault(bk, [])
            self.close_uploads(client, uploads, strays)
        self.forget_bodies()

    def check_audit(self, client: httpx.Client) -> None:
        """The audit chain verifies, and every request a strict server acknowledged since the
        last check has its record: no acknowledged request without its record."""
        verified = client.get("/system/audit/verify").json()
        if not verified["ok"]:
            self.problem(f"audit chain broken at record {verified['first_bad_sequence']}")
        seen: set[str] = set()
        after: int | str = self.audit_after
        while True:
            page = client.get("/system/audit", params={"since": after, "limit": 1000}).json()
            seen |= {record["request_id"] for record in page["records"]}
            if page["records"]:
                self.audit_after = page["records"][-1]["sequence"]
            if page["next_cursor"] is None:
                break
            after = page["next_cursor"]
        with self.lock:
            acked, self.acked_requests = self.acked_requests, {}
        for request_id, what in sorted(acked.items()):
            if request_id not in seen:
                self.problem(f"acknowledged request {request_id} ({what}) has no audit record")

    def listing(
        self, client: httpx.Client, url: str, field_name: str, **query: str
    ) -> list[dict[str, Any]]:
        """Every item of a paginated listing."""
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params = {**query, "cursor": cursor} if cursor else dict(query)
            reply = send(client, "GET", url, params=params)
            if reply.status != 200:
                raise RuntimeError(f"GET {url}: {reply.status} {reply.error} {reply.content!r}")
            body = reply.json()
            items += body[field_name]
            cursor = body.get("next_cursor")
            if not cursor:
                return items

    def observe_versions(
        self, client: httpx.Client, fail: Callable[[Thing, str], None]
    ) -> dict[tuple[str, str], list[Entry]]:
        """Every key's versions, oldest first (the listing gives them newest first)."""
        observed: dict[tuple[str, str], list[Entry]] = {}
        for bucket in (PLAIN, VERSIONED):
            for item in self.listing(client, f"/buckets/{bucket}/versions", "versions"):
                entry = (
                    MARKER if item["is_delete_marker"] else item["sha256_checksum"],
                    item["version_id"],
                )
                observed.setdefault((bucket, item["key"]), []).insert(0, entry)
        for bucket, key in observed.keys() - self.ledger.keys.keys():
            fail(key_thing(bucket, key), f"unknown key {bucket}/{key}")
        return observed

    def check_keys(
        self,
        client: httpx.Client,
        observed: dict[tuple[str, str], list[Entry]],
        fail: Callable[[Thing, str], None],
    ) -> None:
        """States allowed; every version byte-exact; latest and listing agree; settle."""
        bodies = self.ledger.bodies
        listed: dict[str, set[str]] = {}
        for bucket in (PLAIN, VERSIONED):
            items = self.listing(client, f"/buckets/{bucket}/objects", "objects")
            listed[bucket] = {item["key"] for item in items}
        for (bucket, key), possible in self.ledger.keys.items():
            thing = key_thing(bucket, key)
            entries = observed.get((bucket, key), [])
            state = tuple(item for item, _ in entries)
            if state not in possible.firm:
                allowed = ", ".join(short(s) for s in possible.firm)
                fail(thing, f"{bucket}/{key}: {short(state)} not among allowed {allowed}")
            for item, version_id in entries:
                if item == MARKER or bucket != VERSIONED:
                    continue  # a plain key's one version is the latest, read below
                params = {"version_id": version_id}
                reply = send(client, "GET", object_path(bucket, key), params=params)
                where = f"GET {bucket}/{key}?version_id={version_id}"
                problem = self.read_problem(reply, item, bodies)
                if problem:
                    fail(thing, f"{where}: {problem}")
            reply = send(client, "GET", object_path(bucket, key))
            if visible(state):
                problem = self.read_problem(reply, state[-1], bodies)
                if problem:
                    fail(thing, f"GET {bucket}/{key} (latest): {problem}")
            elif reply.status != 404:
                fail(thing, f"GET {bucket}/{key} of a deleted key answered {reply.status}")
            if visible(state) != (key in listed[bucket]):
                fail(thing, f"{bucket}/{key}: listed={key in listed[bucket]}, state {short(state)}")
            possible.settle(state)

    @staticmethod
    def read_problem(reply: Reply, digest: str, bodies: dict[str, bytes]) -> str:
        """What is wrong with a GET that must serve exactly the body ``digest``, or ''."""
        if reply.status != 200:
            return f"answered {reply.status} {reply.error} {reply.content[:200]!r}"
        content = reply.content
        served = sha256(content)
        headers = (reply.headers.get("X-Checksum-Sha256"), reply.headers.get("ETag", "").strip('"'))
        if served != digest or digest not in bodies or len(content) != len(bodies[digest]):
            return f"served {len(content)} bytes with SHA-256 {served[:12]}, not {digest[:12]}"
        if set(headers) != {digest}:
            return f"headers {headers} for body {digest[:12]}"
        if reply.headers.get("Content-Length") != str(len(content)):
            return f"Content-Length {reply.headers.get('Content-Length')} for {len(content)}"
        return ""

    def check_uploads(
        self,
        client: httpx.Client,
        observed: dict[tuple[str, str], list[Entry]],
        fail: Callable[[Thing, str], None],
    ) -> dict[str, UploadState]:
        """Every known session's parts allowed; an interrupted complete all or nothing."""
        seen: dict[str, UploadState] = {}
        for upload_id, possible in self.ledger.uploads.items():
            thing = upload_thing(upload_id)
            reply = send(client, "GET", f"/multipart/{upload_id}")
            state: UploadState
            if reply.status == 200:
                parts = reply.json()["parts"]
                state = frozenset((part["part_number"], part["etag"]) for part in parts)
            elif reply.status == 404:
                state = None
            else:
                fail(thing, f"GET /multipart/{upload_id}: {reply.status} {reply.error}")
                continue
            if state not in possible.firm:
                allowed = ", ".join(short(s) for s in possible.firm)
                fail(thing, f"upload {upload_id}: {short(state)} not among allowed {allowed}")
            pending = self.pending.get(upload_id)
            if pending is not None:
                self.tally.interrupted_completes += 1
                entries = observed.get((pending.bucket, pending.key), [])
                made = bool(entries) and entries[-1][0] == pending.digest
                shown = any(item == pending.digest for item, _ in entries)
                where = f"interrupted complete of {upload_id} -> {pending.bucket}/{pending.key}"
                if state is None and not made:
                    fail(thing, f"{where}: session closed but the object is not there")
                if state is not None and shown:
                    fail(thing, f"{where}: session open but the object exists")
            possible.settle(state)
            seen[upload_id] = state
        return seen

    def check_strays(self, client: httpx.Client, fail: Callable[[Thing, str], None]) -> set[str]:
        """Open sessions the ledger does not know: at most one per unanswered init."""
        strays: set[str] = set()
        for bucket in (PLAIN, VERSIONED):
            sessions = self.listing(client, "/multipart", "uploads", bucket=bucket)
            strays |= {s["upload_id"] for s in sessions} - self.ledger.uploads.keys()
        for upload_id in strays & self.closed_uploads:
            fail(upload_thing(upload_id), f"closed upload {upload_id} is open again")
        if len(strays) > self.ledger.unknown_uploads:
            fail(
                ("upload", "?", ""),
                f"{len(strays)} open uploads nobody started, {self.ledger.unknown_uploads} "
                "inits went unanswered",
            )
        return strays

    def check_info(
        self,
        client: httpx.Client,
        observed: dict[tuple[str, str], list[Entry]],
        uploads: dict[str, UploadState],
        strays: set[str],
        fail: Callable[[Thing, str], None],
    ) -> None:
        """The server's own counts agree with what it lists."""
        info = send(client, "GET", "/system/info").json()
        versions = sum(item != MARKER for entries in observed.values() for item, _ in entries)
        sessions = sum(state is not None for state in uploads.values()) + len(strays)
        if (info["objects"], info["multipart_uploads"]) != (versions, sessions):
            fail(
                ("info", "", ""),
                f"system/info counts {info['objects']} objects and {info['multipart_uploads']} "
                f"uploads; the listings show {versions} and {sessions}",
            )
        if info["journal"]["read_only"]:
            fail(("info", "", ""), "the server came up read-only")

    def parts_in_place(self, client: httpx.Client, uploads: dict[str, UploadState]) -> Counter[str]:
        """Digests of the open uploads' parts found whole at their offset in their upload's
        file (written in place): those have no payload file of their own."""
        found: Counter[str] = Counter()
        for upload_id, state in uploads.items():
            path = self.data_dir / "assembly" / f"{upload_id}.direct"
            if not state or not path.exists():
                continue
            reply = send(client, "GET", f"/multipart/{upload_id}")
            if reply.status != 200:
                continue
            session = reply.json()
            stride = session["recommended_part_size"]
            with open(path, "rb") as file:
                for part in session["parts"]:
                    file.seek((part["part_number"] - 1) * stride)
                    if sha256(file.read(part["size_bytes"])) == part["etag"]:
                        found[part["etag"]] += 1
        return found

    def check_disk(
        self,
        observed: dict[tuple[str, str], list[Entry]],
        uploads: dict[str, UploadState],
        in_place: Counter[str],
    ) -> None:
        """Payload files == the stored versions and parts the server lists (same count, same
        digests, each in its id's fan-out directory), but for parts found written in place in
        their upload's file; no staging file; no quarantine."""
        expected = Counter(
            item for entries in observed.values() for item, _ in entries if item != MARKER
        )
        for state in uploads.values():
            expected.update(digest for _, digest in state or ())
        expected -= in_place
        root = self.data_dir / PAYLOADS_DIR
        found: Counter[str] = Counter()
        for path in sorted(root.rglob("*")):
            if path.is_dir():
                continue
            parts = path.relative_to(root).parts
            if not (
                len(parts) == 3
                and is_valid_payload_id(parts[2])
                and parts[2][0:2] == parts[0]
                and parts[2][2:4] == parts[1]
            ):
                self.problem(f"junk in the payload tree: {path}")
            found[hashlib.sha256(path.read_bytes()).hexdigest()] += 1
        if found != expected:
            extra = sorted(d[:12] for d in (found - expected).elements())
            missing = sorted(d[:12] for d in (expected - found).elements())
            self.problem(
                f"{found.total()} payload files for {expected.total()} stored versions and "
                f"parts: unreferenced {extra}, missing {missing}"
            )
        staging = sorted(os.listdir(self.data_dir / STAGING_DIR))
        if staging:
            self.problem(f"staging files left after the TTL and a restart: {staging}")
        quarantine = self.data_dir / QUARANTINE_DIR
        if quarantine.exists() and os.listdir(quarantine):
            self.problem(f"quarantined after SIGKILLs: {os.listdir(quarantine)}")
        self.log(f"disk check: {found.total()} payload files, {expected.total()} expected")

    def close_uploads(
        self, client: httpx.Client, uploads: dict[str, UploadState], strays: set[str]
    ) -> None:
        """Finish every session still open: an interrupted complete is tried again (it must
        work, and serve the joined bytes), the rest are completed or aborted at random."""
        for upload_id in sorted(strays):
            # Started by an init that got no answer: the ledger cannot name it.
            reply = send(client, "DELETE", f"/multipart/{upload_id}")
            self.outcome(reply, f"abort stray {upload_id}", 204)
            self.closed_uploads.add(upload_id)
        self.ledger.unknown_uploads = 0
        interrupted, self.pending = self.pending, {}
        for upload_id, state in sorted(uploads.items(), key=lambda item: item[0]):
            if state is None:
                continue
            bucket, key = self.ledger.upload_targets[upload_id]
            pending = interrupted.get(upload_id)
            if pending is not None:
                if self.complete(client, upload_id, bucket, key, pending.parts):
                    self.tally.completed_again += 1
                    reply = send(client, "GET", object_path(bucket, key))
                    problem = self.read_problem(reply, pending.digest, self.ledger.bodies)
                    if problem:
                        self.problem(f"{bucket}/{key} completed again by {upload_id}: {problem}")
            elif state and self.rng.random() < 0.6:
                self.complete(client, upload_id, bucket, key, tuple(sorted(state)))
            else:
                self.abort(client, upload_id)
        for upload_id, possible in list(self.ledger.uploads.items()):
            if possible.firm == {None}:
                del self.ledger.uploads[upload_id]
                del self.ledger.upload_targets[upload_id]
                self.closed_uploads.add(upload_id)

    def forget_bodies(self) -> None:
        """Drop the bodies no allowed state names any more (the soak would hoard them)."""
        keep: set[str] = set()
        for key_possible in self.ledger.keys.values():
            for key_state in key_possible.firm | key_possible.loose:
                keep.update(key_state)
        for upload_possible in self.ledger.uploads.values():
            for upload_state in upload_possible.firm | upload_possible.loose:
                keep.update(digest for _, digest in upload_state or ())
        self.ledger.bodies = {d: b for d, b in self.ledger.bodies.items() if d in keep}
