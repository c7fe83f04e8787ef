"""Webhook delivery: each webhook's events, in sequence order, at least once, across crashes.

One worker task per configured webhook reads the event feed forward from the webhook's
cursor, a page at a time (so memory stays bounded however far behind it is), of its bucket
only, by identity (``service.events.scope``), and POSTs each
event it wants to its URL: the event as the JSON body, ``X-Event-Id`` and
``X-Signature-Sha256: hex(HMAC-SHA256(secret, body))``. Any 2xx acknowledges; anything else
(a status, a refused connection, a timeout) is retried with exponential backoff from
``FIRST_RETRY_SECONDS`` doubling up to ``webhook_max_backoff``, for as long as the webhook
exists: a later event is never sent before an earlier one is acknowledged.

A webhook is known by its bucket's identity and its id (``<bucket_id>/<id>``): a bucket
deleted and created again under its name is another bucket, whose webhooks start with fresh
cursors and figures, and the old bucket's workers, until they stop, read only the old
bucket's events. A checkpoint from before identities names buckets by name; its entries go
to the bucket that has the name at start.

Durability: cursors and figures are checkpointed to ``<data_dir>/events/webhooks.json``
(written to a temporary file, fsynced, renamed) as soon as one changes, then at most every
``CHECKPOINT_SECONDS``. A cursor only moves past acknowledged events, so after a crash a
webhook resumes at or before its true position: it may deliver an event again (same
``X-Event-Id``), never skips one.
The event feed keeps the files a webhook still needs for up to ``webhook_hold_seconds`` of no
progress; a webhook that stays broken longer loses the dropped events (counted in ``skipped``,
named in ``last_error``).

Where a webhook may deliver is checked at every attempt (``service.events.targets``): the
URL's name is resolved, every address must be one the operator allows (public ones, plus
``SERVICE_WEBHOOK_ALLOWED_NETWORKS``), and the POST goes to the checked address; a refused
target is a failed attempt like a refused connection (retried, named in ``last_error``).

Thread-safety: event-loop thread only; the checkpoint file is written on the executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

import httpx

from fsseam.durable import read_file, replace_file
from service.common.timefmt import rfc3339_seconds
from service.config import Config
from service.engine.core import Engine
from service.events.feed import FeedEvent
from service.events.scope import BucketScope
from service.events.targets import TargetPolicy, TargetRefused
from service.meta import is_bucket_id
from service.meta.notification_state import Webhook

log = logging.getLogger("service.webhooks")

CHECKPOINT_NAME = "webhooks.json"
CHECKPOINT_SECONDS = 0.2
RECONCILE_SECONDS = 0.5
FIRST_RETRY_SECONDS = 1.0
PAGE = 100
IDLE_WAIT_SECONDS = 5.0
MAX_ERROR_CHARS = 200
STOP_GRACE_SECONDS = 2.0
"""How long a stop waits for POSTs already sent: a receiver that has an event and answers
in time is recorded as acknowledged, not sent again after the restart."""


class _Stopped(Exception):
    """The dispatcher is stopping: the worker ends after the POST it had in flight."""


@dataclass(slots=True)
class Progress:
    """What one webhook has done; ``cursor`` is the sequence of the last event it is done
    with (acknowledged, or not wanted)."""

    cursor: int = 0
    delivered: int = 0
    failed_attempts: int = 0
    skipped: int = 0
    last_error: str | None = None
    last_delivered_at: float | None = None
    last_progress_at: float = 0.0
    """Wall time of the last acknowledgement (or of start): the hold clock."""
    pending: int = 0
    """Wanted events after ``cursor`` (not checkpointed: counted again at start)."""
    counted: bool = False
    """Whether ``pending`` is complete (new events are then counted as they come)."""


CHECKPOINTED = (
    "cursor",
    "delivered",
    "failed_attempts",
    "skipped",
    "last_error",
    "last_delivered_at",
)


def signature(secret: str, body: bytes) -> str:
    """The ``X-Signature-Sha256`` value: lowercase hex HMAC-SHA256 of the body."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _key(scope: BucketScope, hook: Webhook) -> str:
    return f"{scope.bucket_id}/{hook.id}"


class WebhookDispatcher:
    """Runs the workers, keeps the cursors and answers the status figures."""

    def __init__(self, engine: Engine, config: Config) -> None:
        self._engine = engine
        self._config = config
        self._path = os.path.join(config.data_dir, "events", CHECKPOINT_NAME)
        self._progress: dict[str, Progress] = {}
        self._workers: dict[str, tuple[Webhook, BucketScope, asyncio.Task[None]]] = {}
        self._dirty = False
        self._changed = asyncio.Event()
        self._client: httpx.AsyncClient | None = None
        self._targets = TargetPolicy.parse(config.webhook_allowed_networks)
        self._tasks: list[asyncio.Task[None]] = []
        self._posting: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self.delivered_total = 0
        self.failures_total = 0

    # -- start and stop ------------------------------------------------------------------

    async def load(self) -> None:
        """Take the cursors and figures of the checkpoint (blocking part on the executor).

        A cursor past the journal's last record is brought back to it: in balanced
        durability a power cut can lose records whose events were delivered (the checkpoint
        is fsynced, the records were not yet), and their sequences go to new records, whose
        events must not be skipped."""
        loaded = await self._engine.run_blocking(self._load)
        last = self._engine.committer.last_sequence()
        now = time.time()
        for saved_key, doc in loaded.items():
            key = self._current_key(saved_key)
            if key is not None and isinstance(doc, dict):
                saved = {name: doc[name] for name in CHECKPOINTED if name in doc}
                progress = Progress(**saved, last_progress_at=now)
                if progress.cursor > last:
                    log.warning(
                        "webhook %s: cursor %d is past the journal's end %d (records lost "
                        "to a power cut); delivering from there",
                        key,
                        progress.cursor,
                        last,
                    )
                    progress.cursor = last
                self._progress[key] = progress

    def _current_key(self, saved: str) -> str | None:
        """A checkpoint's key as this version names it: ``<bucket name>/<id>`` (from before
        identities) becomes ``<bucket_id>/<id>`` of the bucket of that name, if any."""
        bucket, _, hook_id = saved.partition("/")
        if is_bucket_id(bucket):
            return saved
        bucket_id = self._engine.state.bucket_id_of(bucket)
        return None if bucket_id is None else f"{bucket_id}/{hook_id}"

    def scope_of(self, hook: Webhook) -> BucketScope | None:
        """The bucket ``hook`` belongs to now (None: gone, and its webhooks with it)."""
        bucket = self._engine.state.get_bucket(hook.bucket)
        return None if bucket is None else BucketScope.of(bucket)

    def progress(self, hook: Webhook, scope: BucketScope) -> Progress:
        """The webhook's progress (created at its configured start when new)."""
        progress = self._progress.setdefault(
            _key(scope, hook), Progress(last_progress_at=time.time())
        )
        progress.cursor = max(progress.cursor, hook.start_after)
        return progress

    async def start(self) -> None:
        """Load the checkpoint and start a worker per webhook (and the housekeeping)."""
        await self.load()
        self._engine.events.hold = self.hold
        self._engine.events.listeners.append(self._count_new)
        self._reconcile()
        self._tasks.append(asyncio.create_task(self._housekeeping()))

    async def stop(self) -> None:
        """Stop the workers: idle ones at once, one with a POST in flight once its receiver
        answers (at most ``STOP_GRACE_SECONDS``), so that an event the receiver has is
        recorded as delivered before the last checkpoint; then write that checkpoint."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        workers = [task for _, _, task in self._workers.values()]
        for task in workers:
            if task not in self._posting:
                task.cancel()
        if self._posting:
            await asyncio.wait(set(self._posting), timeout=STOP_GRACE_SECONDS)
        for task in workers:
            task.cancel()
        await asyncio.gather(*self._tasks, *workers, return_exceptions=True)
        self._workers.clear()
        with contextlib.suppress(OSError):
            await self.checkpoint()
        if self._client is not None:
            await self._client.aclose()

    def _mark(self) -> None:
        """Progress changed: the housekeeping writes a checkpoint soon."""
        self._dirty = True
        self._changed.set()

    async def _housekeeping(self) -> None:
        """Reconcile the workers with the configuration every ``RECONCILE_SECONDS``, and
        write a checkpoint as soon as something changed, then at most every
        ``CHECKPOINT_SECONDS`` (a crash redelivers what the last one did not record)."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), RECONCILE_SECONDS)
            self._changed.clear()
            self._reconcile()
            try:
                await self.checkpoint()
            except OSError as exc:
                log.error("writing the webhook checkpoint failed (retrying): %s", exc)
            await asyncio.sleep(CHECKPOINT_SECONDS)

    def _reconcile(self) -> None:
        """Start workers for new or changed webhooks, stop those of removed ones."""
        wanted: dict[str, tuple[Webhook, BucketScope]] = {}
        for hook in self._engine.state.notifications.all_webhooks():
            scope = self.scope_of(hook)
            if scope is not None:
                wanted[_key(scope, hook)] = (hook, scope)
        for key, (hook, scope, task) in list(self._workers.items()):
            if wanted.get(key) != (hook, scope):
                task.cancel()
                del self._workers[key]
        for key, (hook, scope) in wanted.items():
            if key not in self._workers:
                progress = self.progress(hook, scope)
                task = asyncio.create_task(self._run(hook, scope, progress))
                self._workers[key] = (hook, scope, task)
        for key in [k for k in self._progress if k not in wanted]:
            del self._progress[key]
            self._mark()

    # -- the worker ----------------------------------------------------------------------

    async def _run(self, hook: Webhook, scope: BucketScope, progress: Progress) -> None:
        await self._count_pending(hook, scope, progress)
        with contextlib.suppress(_Stopped):
            while not self._stopping:
                if not await self.deliver_page(hook, scope, progress):
                    await self._engine.events.wait(progress.cursor, IDLE_WAIT_SECONDS)

    async def deliver_page(
        self, hook: Webhook, scope: BucketScope, progress: Progress, limit: int = PAGE
    ) -> bool:
        """Deliver the next page of the webhook's events after its cursor (each until it is
        acknowledged) and move the cursor past them; whether the cursor moved (then the
        caller reads on at once: a page can hold no event of this bucket and still cover
        sequences, or be an expired stretch skipped)."""
        start = progress.cursor
        try:
            items, through = await self._engine.events.read(
                progress.cursor, self._engine.executor, scope, limit
            )
        except LookupError:
            self._skip_expired(hook, scope, progress)
            return True
        for item in items:
            if hook.wants(item.type, item.key):
                await self._deliver(hook, progress, item)
                progress.pending = max(0, progress.pending - 1)
            progress.cursor = item.sequence
            self._mark()
        if through > progress.cursor:
            progress.cursor = through
            self._mark()
        return progress.cursor > start

    async def _count_pending(self, hook: Webhook, scope: BucketScope, progress: Progress) -> None:
        """Count the wanted events after the cursor (read in pages; never all in memory),
        then let ``_count_new`` count the new ones: the scan runs until it has caught up,
        and nothing can arrive between its last check and the hand-over (no await)."""
        feed, after = self._engine.events, progress.cursor
        progress.pending, progress.counted = 0, False
        while after < feed.last_sequence:
            try:
                items, through = await feed.read(after, self._engine.executor, scope, 1000)
            except LookupError:
                after = feed.covered_after
                continue
            progress.pending += sum(1 for item in items if hook.wants(item.type, item.key))
            if through <= after:
                break
            after = through
        progress.counted = True

    def _count_new(self, item: FeedEvent) -> None:
        """A new event: one more pending for each webhook of its bucket that wants it."""
        for hook, scope, _ in self._workers.values():
            if scope.holds(item) and hook.wants(item.type, item.key):
                progress = self._progress.get(_key(scope, hook))
                if progress is not None and progress.counted:
                    progress.pending += 1

    def _skip_expired(self, hook: Webhook, scope: BucketScope, progress: Progress) -> None:
        covered = self._engine.events.covered_after
        progress.skipped += 1
        progress.last_error = (
            f"events after sequence {progress.cursor} expired before delivery; "
            f"resumed after {covered}"
        )
        log.error("webhook %s: %s", _key(scope, hook), progress.last_error)
        progress.cursor = covered
        self._mark()

    async def _deliver(self, hook: Webhook, progress: Progress, item: FeedEvent) -> None:
        """POST one event until a 2xx answers it (the worker is cancelled if the webhook
        goes)."""
        body = item.body.rstrip(b"\n")
        event_id = json.loads(body)["event_id"]
        headers = {
            "Content-Type": "application/json",
            "X-Event-Id": event_id,
            "X-Signature-Sha256": signature(hook.secret, body),
        }
        delay = min(FIRST_RETRY_SECONDS, self._config.webhook_max_backoff)
        while True:
            if self._stopping:
                raise _Stopped
            error = await self._post_tracked(hook.url, body, headers)
            if error is None:
                progress.delivered += 1
                progress.last_delivered_at = progress.last_progress_at = time.time()
                progress.last_error = None
                self.delivered_total += 1
                return
            progress.failed_attempts += 1
            progress.last_error = error[:MAX_ERROR_CHARS]
            self.failures_total += 1
            self._mark()
            if self._stopping:
                raise _Stopped
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._config.webhook_max_backoff)

    async def _post_tracked(self, url: str, body: bytes, headers: dict[str, str]) -> str | None:
        """``_post``, with the worker known as one a stop waits for until it answers."""
        worker = asyncio.current_task()
        assert worker is not None
        self._posting.add(worker)
        try:
            return await self._post(url, body, headers)
        finally:
            self._posting.discard(worker)

    async def _http(self) -> httpx.AsyncClient:
        """The client of every delivery, made at the first one, on a thread: its TLS context
        costs about 0.1 s of CPU, which a server with no webhook should not pay at its
        start, nor its event loop at a delivery."""
        if self._client is None:
            client = await asyncio.to_thread(self._new_client)
            if self._client is None:
                self._client = client
            else:  # another worker's came first
                await client.aclose()
        return self._client

    def _new_client(self) -> httpx.AsyncClient:
        # No redirects (one could lead inside) and no proxy from the environment: the POST
        # goes to the address the target check pinned.
        return httpx.AsyncClient(
            timeout=self._config.webhook_timeout, follow_redirects=False, trust_env=False
        )

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> str | None:
        """None when the receiver acknowledged, else what went wrong (never raises)."""
        try:
            target = await self._targets.pin(url)
        except TargetRefused as exc:
            return f"refused: {exc}"
        client = await self._http()
        try:
            response = await client.post(
                target.url,
                content=body,
                headers={**headers, "Host": target.host_header},
                extensions=target.extensions,
            )
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code}"

    # -- figures and retention -----------------------------------------------------------

    def status(self, hook: Webhook) -> dict[str, Any]:
        """The contract's ``status`` of one webhook (plus ``cursor`` and ``skipped``)."""
        scope = self.scope_of(hook)
        saved = self._progress.get(_key(scope, hook)) if scope is not None else None
        progress = saved or Progress(cursor=hook.start_after)
        return {
            "delivered": progress.delivered,
            "pending": progress.pending,
            "failed_attempts": progress.failed_attempts,
            "last_error": progress.last_error,
            "last_delivered_at": (
                rfc3339_seconds(progress.last_delivered_at) if progress.last_delivered_at else None
            ),
            "cursor": max(progress.cursor, hook.start_after),
            "skipped": progress.skipped,
        }

    def pending_total(self) -> int:
        return sum(progress.pending for progress in self._progress.values())

    def hold(self) -> int | None:
        """The lowest cursor of a webhook that made progress within the hold window."""
        horizon = time.time() - self._config.webhook_hold_seconds
        cursors = [p.cursor for p in self._progress.values() if p.last_progress_at >= horizon]
        return min(cursors, default=None)

    # -- checkpoint ----------------------------------------------------------------------

    async def checkpoint(self) -> None:
        """Write the cursors and figures if they changed since the last checkpoint."""
        if not self._dirty:
            return
        self._dirty = False
        doc = {
            key: {name: getattr(progress, name) for name in CHECKPOINTED}
            for key, progress in self._progress.items()
        }
        data = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
        try:
            await self._engine.run_blocking(self._write, data)
        except BaseException:
            self._mark()
            raise

    def _write(self, data: bytes) -> None:
        replace_file(self._engine.fs, self._path, data)  # whole, or the previous one

    def _load(self) -> dict[str, dict[str, Any]]:
        data = read_file(self._engine.fs, self._path)
        if data is None:
            return {}
        try:
            doc = json.loads(data)
        except ValueError:
            log.error("webhook checkpoint %s is unreadable; cursors restart", self._path)
            return {}
        return doc if isinstance(doc, dict) else {}
