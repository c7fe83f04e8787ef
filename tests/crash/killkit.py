"""Kill a real server under load, restart it, and check every durability claim over HTTP.

The in-process crash matrix (``tests.crash.matrix``) cuts the power at every file operation
of one operation at a time. This kit checks the same claims on the real thing: a server
process under 8 concurrent clients, SIGKILLed at a random moment or at a named crash point
(``SERVICE_CRASH_POINT``, see ``service.engine.core.install_crash_hook``), restarted on the same
data dir and port, and checked over HTTP only, as a user would see it.

A SIGKILL keeps the OS page cache, so in either durability mode every acknowledged operation
must survive: only the ledger's ``firm`` states are allowed. One cycle:

1. start the server, armed with a crash point or in balanced durability if the cycle says so
   (between two crashes it is stopped gracefully, so clean shutdowns are mixed in);
2. run the workload (``Worker``, in ``tests.crash.killworkload``): 8 threads, each with
   its own httpx client and its own keys, so that the order of one key's operations is the
   order its thread sent them, which is what the ledger needs (two racing PUTs of one key
   have no order a client could know);
3. the armed point kills the server (it must die by SIGKILL), or the test sends SIGKILL
   after a random delay;
4. optionally start it armed with a startup crash point (replay, torn-tail repair, startup
   GC, staging sweep), which must kill it again before it is ready;
5. start it plain and check (``KillKit.check``): every key's versions, every upload's parts
   and every bucket are in a state the ledger allows; every stored version serves exactly
   its bytes, checksum and ETag; deleted keys answer 404 and the object listing agrees; an
   unacknowledged complete either closed the session and made the object or did neither;
   then the model settles on what was seen, and every session left open is completed
   (an interrupted complete is tried again: it must work now) or aborted.

A webhook receiver (``tests.events.receiver``) listens beside the server, configured on both
buckets: at the end every acknowledged write must have been delivered as an
``object.created`` event (matched by its SHA-256), each bucket's first deliveries in
sequence order and every one signed, however many kills fell between commit and delivery.
The scrub runs continuously through the cycles; it must have checked objects and found none
corrupt (a SIGKILL never tears a payload).

After the last cycle the kit waits out the staging TTL and the GC grace, restarts so that
the startup sweep and GC run, and checks the disk: the files under ``payloads/`` are exactly
the stored versions and parts (same count, same SHA-256 digests), ``staging/`` is empty and
nothing was quarantined. The server ships to a continuous archive all along
(``tests.crash.killarchive``): at the very end the archive must verify, and a server started on
a data dir restored from it must pass the same final checks.

Thread-safety: the ledger, the list of unchecked acknowledgements and the problem list are
guarded by ``KillKit.lock``; each worker owns its keys' entries in ``KillKit.views``; the
checker runs only while no worker does.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from service.storage.layout import (
    QUARANTINE_DIR,
    UNSYNCED_MARKER,
)
from tests.crash.killarchive import archive_dir, restore, wait_archived
from tests.crash.killchecks import KillChecks
from tests.crash.killplan import (
    STARTUP_ENV,
    UNREACHABLE,
    Cycle,
    cycle_for,
    reachable_points,
)
from tests.crash.killprocs import PROCESSES, kill_serving_process
from tests.crash.killupkeep import UPKEEP_ENV, check_upkeep, webhook
from tests.crash.killworkload import (
    PLAIN,
    REQUEST_TIMEOUT,
    VERSIONED,
    Entry,
    PendingComplete,
    Reply,
    Thing,
    Worker,
    key_thing,
    send,
    upload_thing,
    worker_keys,
)
from tests.crash.model import Fate, Ledger
from tests.events.receiver import Receiver
from tests.serverproc import ServerProcess

WORKERS = 8

STAGING_TTL = 5.0
GC_GRACE = 5.0
SERVER_ENV = {
    "SERVICE_DURABILITY": "strict",
    # Small enough that a few dozen records roll a segment and take a snapshot, so the
    # workload passes the journal's roll and snapshot crash points within a cycle.
    "SERVICE_JOURNAL_SEGMENT_BYTES": "8192",
    "SERVICE_SNAPSHOT_EVERY": "40",
    "SERVICE_SNAPSHOT_INTERVAL": "1",
    # The periodic GC and staging sweep run during the workload too, with a grace and TTL
    # short enough to wait out once at the end (and far above a PUT's promote-to-commit).
    "SERVICE_GC_INTERVAL": "0.5",
    "SERVICE_GC_GRACE": str(GC_GRACE),
    "SERVICE_STAGING_TTL": str(STAGING_TTL),
    "SERVICE_LOG_LEVEL": "warning",
    # Small enough that the workload rolls the audit log's segments too.
    "SERVICE_AUDIT_SEGMENT_BYTES": "16384",
    **UPKEEP_ENV,
}

ARM_DEADLINE = 6.0
"""Seconds the workload runs before an armed point that did not fire counts as missed."""
KILL_DELAY = (0.03, 0.5)
MAX_PROBLEMS = 40


@dataclass
class Tally:
    cycles: int = 0
    checked: int = 0
    """Acknowledged operations whose effect a check after a restart looked at."""
    lost: int = 0
    """... of which the thing they touched was found in a state they do not allow."""
    unknown: int = 0
    """Operations whose outcome the client could not know (cut off by the kill)."""
    webhook_events: int = 0
    """Distinct events the webhook receiver got (checked for order and signatures)."""
    interrupted_completes: int = 0
    """Completes without an answer whose session and key were checked after a restart..."""
    completed_again: int = 0
    """... and of those found still open, how many the checker completed afterwards."""
    armed: Counter[str] = field(default_factory=Counter)
    hits: Counter[str] = field(default_factory=Counter)
    missed: Counter[str] = field(default_factory=Counter)
    victims: Counter[str] = field(default_factory=Counter)
    """Serving processes SIGKILLed alone (writer, worker) in two-process cycles."""
    problems: list[str] = field(default_factory=list)


class KillKit(KillChecks):
    """The server, the ledger and the cycles; see the module docstring."""

    def __init__(
        self,
        root: Path,
        seed: int,
        *,
        kill_delay: tuple[float, float] = KILL_DELAY,
        log: Callable[[str], None] = print,
    ) -> None:
        """``kill_delay``: bounds in seconds of the random wait before an unarmed kill."""
        self.root = root
        archive = {"SERVICE_ARCHIVE": str(archive_dir(root))}
        self.proc = ServerProcess(root / "data", env_overrides={**SERVER_ENV, **archive})
        self.kill_delay = kill_delay
        self.seed = seed
        self.rng = random.Random(seed)
        self.log = log
        self.lock = threading.Lock()
        self.ledger = Ledger()
        self.views: dict[tuple[str, str], list[Entry]] = {}
        self.pending: dict[str, PendingComplete] = {}
        self.closed_uploads: set[str] = set()
        self.unchecked: list[tuple[str, tuple[Thing, ...]]] = []
        self.tally = Tally()
        self.label = "setup"
        self.serving_killed = False
        """A serving process was SIGKILLed alone this cycle: 503 + Retry-After is allowed."""
        self.running: tuple[str | None, str, int] | None = None
        """(crash point spec, durability, serving processes) of the running server; None
        while it is down."""
        self.serial = itertools.count()
        self.receiver = Receiver()
        self.acked_digests: set[str] = set()
        """SHA-256 of every acknowledged write: each must reach the webhook receiver."""
        self.acked_requests: dict[str, str] = {}
        """Request id -> what, of every request acknowledged by a strict server since the
        last check: each must have its audit record (``KillChecks.check_audit``)."""
        self.audit_after = 0
        """The audit log's last sequence the checks have read."""

    # -- bookkeeping --------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self.proc.data_dir

    def http(self, timeout: float = REQUEST_TIMEOUT) -> httpx.Client:
        return httpx.Client(base_url=self.proc.api, auth=self.proc.auth, timeout=timeout)

    def problem(self, message: str) -> None:
        with self.lock:
            self.tally.problems.append(f"[seed {self.seed}, {self.label}] {message}")

    def new_body(self, rng: random.Random, size: int) -> bytes:
        """``size`` random bytes after a unique prefix, so no two bodies share a digest."""
        return f"{next(self.serial)}|".encode() + rng.randbytes(size)

    def note(self, fate: str, what: str, *things: Thing) -> None:
        """Count an operation's fate (caller holds the lock)."""
        if fate == Fate.ACKED:
            self.unchecked.append((what, things))
        elif fate == Fate.UNKNOWN:
            self.tally.unknown += 1

    def outcome(self, reply: Reply, what: str, expected: int) -> str:
        """The fate of ``reply``; any answer but ``expected`` from a live server is a
        problem: this workload never sends a request the server should refuse or fail."""
        if self.serving_killed and reply.status == 503 and "Retry-After" in reply.headers:
            return reply.fate  # a commit while the writer recovers (``tests.crash.killprocs``)
        if reply.status not in (None, 0, expected):
            detail = reply.content[:300].decode(errors="replace")
            self.problem(f"{what}: expected {expected}, got {reply.status} {detail}")
        running = self.running
        if reply.fate == Fate.ACKED and running is not None and running[1] == "strict":
            with self.lock:
                self.acked_requests[reply.headers.get("X-Request-Id", "")] = what
        return reply.fate

    def expect_object(self, reply: Reply, digest: str, what: str) -> None:
        """An acknowledged write must report the SHA-256 of what was sent."""
        body = reply.json()
        seen = (
            body.get("sha256_checksum"),
            body.get("etag"),
            reply.headers.get("ETag", "").strip('"'),
        )
        if set(seen) != {digest}:
            self.problem(f"{what}: acknowledged with checksums {seen}, sent {digest}")
        with self.lock:
            self.acked_digests.add(digest)

    # -- operations the checker shares with the workers --------------------------------

    def complete(
        self,
        client: httpx.Client,
        upload_id: str,
        bucket: str,
        key: str,
        parts: tuple[tuple[int, str], ...],
    ) -> bool:
        manifest = {"parts": [{"part_number": number, "etag": etag} for number, etag in parts]}
        reply = send(client, "POST", f"/multipart/{upload_id}/complete", json=manifest)
        what = f"complete {upload_id} -> {bucket}/{key}"
        fate = self.outcome(reply, what, 200)
        with self.lock:
            digest = self.ledger.upload_completed(upload_id, parts, fate)
            self.note(fate, what, key_thing(bucket, key), upload_thing(upload_id))
            if fate == Fate.UNKNOWN:
                self.pending[upload_id] = PendingComplete(bucket, key, parts, digest)
        if fate != Fate.ACKED:
            return False
        self.expect_object(reply, digest, what)
        entry = (digest, reply.json().get("version_id"))
        views = self.views
        views[(bucket, key)] = [*views[(bucket, key)], entry] if bucket == VERSIONED else [entry]
        return True

    def abort(self, client: httpx.Client, upload_id: str) -> bool:
        reply = send(client, "DELETE", f"/multipart/{upload_id}")
        what = f"abort {upload_id}"
        fate = self.outcome(reply, what, 204)
        with self.lock:
            self.ledger.upload_aborted(upload_id, fate)
            self.note(fate, what, upload_thing(upload_id))
        return fate == Fate.ACKED

    # -- the server ---------------------------------------------------------------------

    def setup(self) -> None:
        """Start the server and the webhook receiver, create the two buckets with a
        webhook each, register every worker's keys."""
        self.receiver.__enter__()
        self.serve()
        with self.http() as client:
            for name, versioned in ((PLAIN, False), (VERSIONED, True)):
                body = {"name": name, "versioning_enabled": versioned}
                reply = send(client, "POST", "/buckets", json=body)
                fate = self.outcome(reply, f"create bucket {name}", 201)
                bucket_id = reply.json()["bucket_id"] if fate == Fate.ACKED else None
                self.ledger.bucket_created(name, versioned, fate, bucket_id)
                if fate != Fate.ACKED:
                    raise RuntimeError(f"cannot create bucket {name}: {reply}")
                path = f"/buckets/{name}/notifications"
                reply = send(client, "PUT", path, json=webhook(self.receiver))
                if reply.status != 200:
                    raise RuntimeError(f"cannot configure the webhook of {name}: {reply}")
        for index in range(WORKERS):
            for bucket, key in worker_keys(index):
                self.ledger.key(bucket, key)
                self.views[(bucket, key)] = []

    def serve(self, arm: str | None = None, durability: str = "strict", processes: int = 1) -> None:
        """Have a server running with this crash point, durability and number of serving
        processes (restart if needed)."""
        wanted = (arm, durability, processes)
        if self.proc.process is not None and self.running == wanted:
            return
        if self.proc.process is not None:
            code = self.proc.stop()
            if code != 0:
                self.problem(f"graceful stop exited with {code}")
        env = {"SERVICE_DURABILITY": durability, "SERVICE_WORKERS": str(processes)}
        if arm is not None:
            env["SERVICE_CRASH_POINT"] = arm
        self.proc.start(extra_env=env)  # a server that cannot start again fails the run
        self.running = wanted

    def run(self, number: int, cycle: Cycle) -> None:
        """One cycle: start, load, kill, (startup crash), restart, check."""
        self.label = f"cycle {number}: {cycle.describe()}"
        self.serving_killed = False
        processes = PROCESSES if cycle.victim else 1
        self.serve(f"{cycle.arm}:{cycle.nth}" if cycle.arm else None, cycle.durability, processes)
        if cycle.arm:
            self.tally.armed[cycle.arm] += 1
        code = self.load_and_kill(cycle)
        if cycle.arm is not None:
            if code is None:
                self.tally.missed[cycle.arm] += 1
            elif code == -signal.SIGKILL:
                self.tally.hits[cycle.arm] += 1
            else:
                self.problem(f"server exited with {code}, not by SIGKILL at {cycle.arm}")
        elif code is not None:
            self.problem(f"server died by itself ({code}) with no crash point armed")
        if cycle.then is not None:
            self.start_armed(cycle.then)
        self.serve()
        self.check()
        self.tally.cycles += 1

    def load_and_kill(self, cycle: Cycle) -> int | None:
        """Run the workload until the server dies; return its exit code if it died by
        itself, None if the test killed it (after the random delay or the arm deadline)."""
        process = self.proc.process
        assert process is not None
        stop = threading.Event()
        workers = [Worker(self, i, self.rng.getrandbits(64), stop) for i in range(WORKERS)]
        threads = [threading.Thread(target=w.run, name=f"kill-worker-{w.index}") for w in workers]
        for thread in threads:
            thread.start()
        wait = ARM_DEADLINE if cycle.arm else self.rng.uniform(*self.kill_delay)
        if cycle.victim:
            time.sleep(wait)
            self.serving_killed = True
            problem = kill_serving_process(self.proc, cycle.victim)
            if problem:
                self.problem(problem)
            self.tally.victims[cycle.victim] += 1
            wait = self.rng.uniform(*self.kill_delay)  # load through the recovery
        deadline = time.monotonic() + wait
        code = process.poll()
        while code is None and time.monotonic() < deadline:
            time.sleep(0.002)
            code = process.poll()
        self.proc.kill()  # SIGKILL now if it still runs; reap it either way
        self.running = None
        stop.set()
        for thread in threads:
            thread.join(timeout=2 * REQUEST_TIMEOUT)
            if thread.is_alive():
                self.problem(f"{thread.name} still running after the kill")
        return code

    def start_armed(self, point: str) -> None:
        """Start with a startup crash point armed: it must kill the server before it is
        ready (or, for an unreachable point, must not fire at all)."""
        self.tally.armed[point] += 1
        env = {"SERVICE_CRASH_POINT": point, **STARTUP_ENV.get(point, {})}
        if point in UNREACHABLE:
            if not (self.data_dir / UNSYNCED_MARKER).exists():
                self.problem("a killed balanced run left no unsynced marker: nothing verified")
            try:
                self.proc.start(extra_env=env)
            except RuntimeError:
                code = self.proc.start_exit
                self.proc.kill()
                self.problem(f"start after a kill died ({code}) though nothing can be torn")
                return
            quarantine = self.data_dir / QUARANTINE_DIR
            if quarantine.exists() and any(quarantine.iterdir()):
                self.problem(f"payloads quarantined after a SIGKILL: {os.listdir(quarantine)}")
            self.proc.stop()
            return
        try:
            self.proc.start(extra_env=env)
        except RuntimeError:
            code = self.proc.start_exit
            self.proc.kill()
            if code == -signal.SIGKILL:
                self.tally.hits[point] += 1
            else:
                self.problem(f"start armed at {point} exited with {code}")
            return
        # The orphans' sweep runs just after the start answers (with an archive it first
        # waits for the archive to know its position): give it the arm deadline to fire.
        process = self.proc.process
        deadline = time.monotonic() + ARM_DEADLINE
        while process is not None and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if process is not None and process.returncode == -signal.SIGKILL:
            self.proc.kill()
            self.tally.hits[point] += 1
            return
        self.tally.missed[point] += 1
        self.proc.stop()

    # -- whole runs ---------------------------------------------------------------------

    def unhit(self) -> set[str]:
        return {point for point in reachable_points() if self.tally.hits[point] == 0}

    def run_all(self, cycles: list[Cycle], *, retries: int = 0, first: int = 1) -> None:
        """Run ``cycles`` (numbered from ``first``); then re-arm each reachable point never
        hit, up to ``retries`` more times (a point can miss by chance, e.g. a startup point
        whose prerequisite kill did not leave what it needs)."""
        number = first - 1
        for cycle in cycles:
            number += 1
            self.run(number, cycle)
            if len(self.tally.problems) >= MAX_PROBLEMS:
                return
        for _ in range(retries):
            for point in sorted(self.unhit()):
                number += 1
                self.run(number, cycle_for(point, self.rng))

    def finish(self) -> None:
        """Wait out the staging TTL and GC grace, restart, check the disk; once more
        after the sessions were closed and a clean restart."""
        self.label = "final check"
        self.proc.kill()
        self.running = None
        time.sleep(max(STAGING_TTL, GC_GRACE) + 0.5)
        self.serve()
        self.check(disk=True)
        self.label = "final check after a clean restart"
        self.proc.stop()
        self.running = None
        self.serve()
        self.check(disk=True)
        with self.http() as client:
            events = check_upkeep(self.receiver, self.acked_digests, client, self.problem)
        self.tally.webhook_events = events
        redelivered = len(self.receiver.received()) - events
        self.log(f"upkeep check: {events} webhook events, {redelivered} redelivered")
        with self.http() as client:
            archived = wait_archived(client, self.problem)
        self.proc.stop()
        self.running = None
        self.receiver.__exit__()
        restored = None if archived is None else restore(self.root, archived, self.problem)
        if restored is not None:
            self.label = "final check of a data dir restored from the archive"
            self.proc = ServerProcess(restored, env_overrides=SERVER_ENV)
            self.serve()
            self.check(disk=True)
            self.proc.stop()
            self.running = None

    def report(self) -> str:
        tally = self.tally
        return (
            f"{tally.cycles} kill/restart cycles, acknowledged operations checked: "
            f"{tally.checked}, lost: {tally.lost}; {tally.unknown} outcomes unknown; "
            f"{tally.interrupted_completes} interrupted completes checked, "
            f"{tally.completed_again} of them completed again; "
            f"{tally.webhook_events} webhook events delivered; "
            f"crash points hit {sum(tally.hits.values())} times "
            f"({len(tally.hits)} distinct), missed {dict(tally.missed) or 'none'}; "
            f"serving processes killed alone: {dict(tally.victims) or 'none'}"
        )
