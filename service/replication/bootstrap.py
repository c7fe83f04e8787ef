"""A fresh standby's copy of its primary: the signing secret, the newest snapshot, and every
payload that snapshot references; then the journal opens at that snapshot.

A data dir is fresh when its journal holds neither a snapshot nor a segment. The copy is
made in an order that a crash (a SIGKILL of the standby, a cut connection) can interrupt
anywhere and the next start resumes:

1. the signing secret (``server-secret``), replaced durably: presigned URLs and share links
   made on the primary verify here;
2. the newest snapshot, streamed into ``standby/snapshot.partial``, fsynced;
3. every payload it references that is not in place yet, in batches of ``PAYLOAD_BATCH``
   (``service.replication.payloads``: fetched in bulk and verified; what a previous attempt
   placed is read back, not copied again), made durable before step 4 (strict with a
   ``syncfs``: by syncs that run while the next batches are fetched, ``_Writeback``, and a
   last one; else each batch by its own sync);
4. the snapshot renamed into the journal directory, and that directory fsynced: from here on
   the data dir is a standby's, and the journal opens at the snapshot.

The snapshot itself (metadata only) is fetched again at each attempt, so a resumed bootstrap
starts from the primary's newest state; payloads of an older attempt that the new snapshot
no longer references are orphans the start's sweep removes.

The standby's id (``standby/id``), made once, names it to the primary (its slot).

Thread-safety: blocking; runs on the engine's executor before the journal opens.
"""

from __future__ import annotations

import logging
import os
import secrets
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from fsseam import crashpoints
from fsseam.durable import make_dirs_durably, read_file, replace_file
from fsseam.fs import FileSystem
from journal.segment import list_segments
from journal.snapshot import list_snapshots, load_snapshot, snapshot_name
from service.archive.refs import PayloadRef, for_each_snapshot_payload_batch
from service.auth.server_secret import SERVER_SECRET_FILENAME
from service.config import Config
from service.engine.core import Engine
from service.replication.payloads import (
    FETCH_CONNECTIONS,
    Fetched,
    PayloadFetcher,
    ReplicationError,
)
from service.replication.source import HttpSource, PrimarySource
from service.replication.wire import HEADER_STANDBY_ID, HEADER_STANDBY_URL, parse_credentials

log = logging.getLogger("service.replication")

STANDBY_DIR = "standby"
PARTIAL = "snapshot.partial"
PAYLOAD_BATCH = 256
HTTP_TIMEOUT = httpx.Timeout(60.0, connect=10.0)


@dataclass(frozen=True)
class PrimaryLink:
    """Where the primary is and how this standby talks to it."""

    url: str
    access_key: str
    secret_key: str
    standby_id: str
    standby_url: str = ""
    """Where this standby serves (``X-Standby-Url``: the primary's scrub repairs from it)."""

    def sync_client(self) -> httpx.Client:
        return httpx.Client(**self.client_options())

    def async_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(**self.client_options())

    def client_options(self) -> dict[str, Any]:
        return dict(
            base_url=self.url.rstrip("/"),
            auth=(self.access_key, self.secret_key),
            headers={HEADER_STANDBY_ID: self.standby_id, HEADER_STANDBY_URL: self.standby_url},
            timeout=HTTP_TIMEOUT,
        )


def standby_id(fs: FileSystem, data_dir: str) -> str:
    """This data dir's standby id, made (durably) at its first start."""
    directory = os.path.join(data_dir, STANDBY_DIR)
    path = os.path.join(directory, "id")
    found = read_file(fs, path)
    if found:
        return found.decode().strip()
    make_dirs_durably(fs, directory)
    made = "sb_" + secrets.token_hex(8)
    replace_file(fs, path, made.encode())
    return made


def primary_link(config: Config, fs: FileSystem) -> PrimaryLink:
    """The primary a standby's settings name (``load_config`` checked them)."""
    assert config.follow is not None and config.follow_credentials is not None
    key, secret = parse_credentials(config.follow_credentials)
    own_url = config.public_url or f"http://{config.host}:{config.port}"
    return PrimaryLink(config.follow, key, secret, standby_id(fs, config.data_dir), own_url)


def is_fresh(engine: Engine) -> bool:
    """Whether the journal holds nothing yet (no snapshot, no segment)."""
    fs, journal_dir = engine.fs, engine.config.journal_dir
    if not fs.exists(journal_dir):
        return True
    return not list_snapshots(fs, journal_dir) and not list_segments(fs, journal_dir)


def bootstrap_if_needed(engine: Engine, primary: PrimaryLink) -> int:
    """Copy the primary into a fresh data dir (module docstring); the payloads copied."""
    if not is_fresh(engine):
        return 0
    log.info("bootstrapping this standby from %s", primary.url)
    with primary.sync_client() as client:
        return bootstrap_from(engine, HttpSource(client))


def bootstrap_from(
    engine: Engine, source: PrimarySource, connections: int = FETCH_CONNECTIONS
) -> int:
    """The copy itself, from any ``PrimarySource`` (the crash matrix hands it an in-process
    primary); the payloads copied."""
    _copy_secret(engine, source)
    sequence, partial = _fetch_snapshot(engine, source)
    if sequence == 0:
        log.info("the primary has no record yet: following from the first")
        return 0
    fetcher = PayloadFetcher(engine, source, connections)
    copied = _fetch_payloads(engine, fetcher, partial, sequence, connections)
    fs, journal_dir = engine.fs, engine.config.journal_dir
    make_dirs_durably(fs, journal_dir)
    # The commit point of the bootstrap: the journal now opens at this snapshot.
    fs.rename(partial, os.path.join(journal_dir, snapshot_name(sequence)))
    fs.fsync_dir(journal_dir)  # the renamed snapshot survives a power loss
    log.info("bootstrapped at record %d: %d payloads copied", sequence, copied)
    return copied


def _copy_secret(engine: Engine, source: PrimarySource) -> None:
    path = os.path.join(engine.config.data_dir, SERVER_SECRET_FILENAME)
    secret = source.secret()
    make_dirs_durably(engine.fs, engine.config.data_dir)
    replace_file(engine.fs, path, secret, mode=0o600)


def _fetch_snapshot(engine: Engine, source: PrimarySource) -> tuple[int, str]:
    fs = engine.fs
    directory = os.path.join(engine.config.data_dir, STANDBY_DIR)
    make_dirs_durably(fs, directory)
    partial = os.path.join(directory, PARTIAL)
    if fs.exists(partial):
        fs.unlink(partial)  # an earlier attempt's: the primary's newest is fetched again
    with source.snapshot() as (sequence, chunks):
        if sequence == 0:
            return 0, partial
        target = fs.create(partial)
        try:
            for chunk in chunks:
                target.write(chunk)
            target.fsync()  # the snapshot's bytes are durable before it is renamed into use
        finally:
            target.close()
    fs.fsync_dir(directory)  # so a resumed bootstrap finds what it fetched
    crashpoints.hit("standby.snapshot_fetched")
    if load_snapshot(fs, partial, sequence) is None:
        raise ReplicationError(f"the primary's snapshot {sequence} arrived damaged")
    return sequence, partial


def _fetch_payloads(
    engine: Engine, fetcher: PayloadFetcher, path: str, sequence: int, connections: int
) -> int:
    snapshot = load_snapshot(engine.fs, path, sequence, verify=False)
    if snapshot is None:
        raise ReplicationError(f"snapshot {sequence} cannot be read")
    copied = 0
    syncs = _Writeback(fetcher, background=connections > 1)
    share = fetcher.syncs_the_file_system()

    def on_batch(batch: list[PayloadRef]) -> None:
        nonlocal copied
        fetched = fetcher.fetch(batch, sync=not share)
        if share:
            syncs.add(fetched)
        if fetched.payloads:
            log.info("bootstrap: %d payloads (%d bytes) copied", fetched.payloads, fetched.bytes)
        copied += fetched.payloads

    try:
        for_each_snapshot_payload_batch(snapshot, PAYLOAD_BATCH, on_batch)
        if share:
            syncs.finish()
    finally:
        syncs.close()
    return copied


class _Writeback:
    """Strict with a ``syncfs``: the bootstrap's payloads need only be durable before its
    commit point (the snapshot's rename), not batch by batch, so a batch does not wait for
    the disk. A sync starts whenever the one before has ended, on a thread of its own
    (``background``; in line without it, as the crash matrix needs its file operations in
    one order), so the disk writes while the next batches are fetched, and ``finish``'s last
    sync has little left: the copy runs at the slower of the network and the disk, not
    their sum. A failed sync removes every file it was to cover and every later one (their
    bytes are not known durable) and raises; the retry copies them again."""

    def __init__(self, fetcher: PayloadFetcher, *, background: bool) -> None:
        self._fetcher = fetcher
        self._pool = (
            ThreadPoolExecutor(1, thread_name_prefix="bootstrap-sync") if background else None
        )
        self._running: Future[None] | None = None
        self._covered: list[str] = []
        """What the running sync makes durable."""
        self._window: list[str] = []
        """Placed since the running sync started."""
        self._lost: list[str] = []

    def add(self, fetched: Fetched) -> None:
        self._window.extend(fetched.placed)
        self._lost.extend(fetched.lost)
        if self._running is not None and not self._running.done():
            return
        self._settle()
        self._covered, self._window = self._window, []
        if self._pool is None:
            self._sync(self._covered)
        else:
            self._running = self._pool.submit(self._fetcher.sync_all)

    def finish(self) -> None:
        """Every payload copied durable; then the lost ones quarantined."""
        self._settle()
        self._sync(self._window)
        self._window = []
        self._fetcher.stored(Fetched(lost=self._lost))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def _settle(self) -> None:
        running, self._running = self._running, None
        if running is not None:
            try:
                running.result()
            except OSError as exc:
                self._failed(exc, self._covered + self._window)

    def _sync(self, placed: list[str]) -> None:
        try:
            self._fetcher.sync_all()
        except OSError as exc:
            self._failed(exc, placed)

    def _failed(self, exc: OSError, placed: list[str]) -> None:
        self._fetcher.forget(placed)
        self._covered, self._window = [], []
        raise ReplicationError(f"syncing the copied payloads failed: {exc}") from exc
