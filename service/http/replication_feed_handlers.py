"""The replication stream's routes on the primary (``service.replication.wire`` is the format).

An administrator's (``system:info``), read-only, answered by the process that owns the
journal (``Home.JOURNAL``: a worker forwards them), but for the bulk payloads route, which
any serving process answers from the payload files they all hold. Every read of a file
(snapshot, frames, payload) runs on the executor, so a standby's copy never holds the event
loop and never blocks a write. A server that is itself a standby has no feed: 404, but for
the payloads routes, which a standby serves too: its primary's scrub repairs a rotten
payload from the standby's copy (``service.replication.repair``).
"""

from __future__ import annotations

from collections.abc import Callable

from fsseam.fs import FileSystem
from service.auth import Action
from service.common.api_errors import ApiError
from service.engine.core import Engine
from service.http.base import ApiHandler, Home
from service.http.file_body import send_file_body
from service.http.h1_exchange import H1Exchange
from service.replication.epochs import epoch_headers
from service.replication.feed import RecordsGoneError, ReplicationFeed, StandbySlot
from service.replication.repair import standby_url
from service.replication.wire import (
    BULK_MAX_IDS,
    HEADER_FIRST,
    HEADER_FRAMES_BYTES,
    HEADER_LAST,
    HEADER_PRIMARY_SEQUENCE,
    HEADER_SERVER_ID,
    HEADER_SNAPSHOT_SEQUENCE,
    HEADER_STANDBY_ID,
    HEADER_STANDBY_LAG_BYTES,
    HEADER_STANDBY_URL,
    INLINE_MAX_BYTES,
    NOT_HELD,
    pack_entry_header,
    pack_inline,
    server_identity,
    standby_id_ok,
)
from service.storage.direct import parse_direct_id, read_region
from service.storage.layout import is_valid_payload_id

WINDOW_BYTES = 1 << 20
"""A file is sent a window of this size at a time (read on the executor)."""
OCTETS = "application/octet-stream"


class _FeedHandler(ApiHandler):
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("GET",)

    def feed(self) -> ReplicationFeed:
        self.authorize(Action.SYSTEM_INFO)
        feed = self.ctx.replication_feed
        if feed is None:
            raise ApiError("NotFound", "this server is not a primary: it has no replication feed")
        return feed

    def slot(self, feed: ReplicationFeed, confirmed: int, *, durable: bool = True) -> StandbySlot:
        standby_id = self.request.headers.get(HEADER_STANDBY_ID, "")
        if not standby_id_ok(standby_id):
            raise ApiError("InvalidArgument", f"{HEADER_STANDBY_ID} must name the standby")
        lag = self.request.headers.get(HEADER_STANDBY_LAG_BYTES, "0")
        lag_bytes = int(lag) if lag.isdigit() and len(lag) < 19 else 0
        address = self.request.remote_ip or "-"
        slot = feed.note(standby_id, address, confirmed, lag_bytes, durable=durable)
        # Where, and as whom, the scrub may fetch this standby's copies (a repair).
        slot.url = standby_url(self.request.headers.get(HEADER_STANDBY_URL, ""), address)
        slot.authorization = self.request.headers.get("Authorization")
        return slot

    async def send_file(self, path: str) -> None:
        """The whole file at ``path`` (opened on the executor; one window in memory)."""
        engine = self.ctx.engine
        source = await engine.run_blocking(engine.fs.open_read, path)
        try:
            await self.send_open(source.read)
        finally:
            source.close()

    async def send_open(self, read: Callable[[int], bytes]) -> None:
        """What ``read`` gives, a window at a time, each read on the executor."""
        engine = self.ctx.engine
        self.set_header("Content-Type", OCTETS)
        while chunk := await engine.run_blocking(read, WINDOW_BYTES):
            self.write(chunk)
            self.bytes_out += len(chunk)
            await self.flush()
        self.finish()


class SnapshotFeedHandler(_FeedHandler):
    route_name = "/api/v1/replication/snapshot"

    async def get(self) -> None:
        feed = self.feed()
        sequence, source = await feed.newest_snapshot()
        # Its slot keeps every record after the snapshot from now; nothing is confirmed yet.
        self.slot(feed, sequence, durable=False)
        self.set_header(HEADER_SNAPSHOT_SEQUENCE, str(sequence))
        if source is None:
            self.set_header("Content-Type", OCTETS)
            self.finish()
            return
        try:
            await self.send_open(source.read)
        finally:
            source.close()


class SecretFeedHandler(_FeedHandler):
    route_name = "/api/v1/replication/secret"

    async def get(self) -> None:
        feed = self.feed()
        await self.send_file(feed.secret_path())


class PayloadFeedHandler(_FeedHandler):
    route_name = "/api/v1/replication/payloads/{payload_id}"

    async def get(self, payload_id: str) -> None:
        self.authorize(Action.SYSTEM_INFO)
        if self.ctx.replication_feed is None and self.ctx.follower is None:
            raise ApiError("NotFound", "this server has no replication role")
        engine = self.ctx.engine
        located = parse_direct_id(payload_id)
        try:
            if located is not None:
                upload_id, offset, size = located
                path = engine.store.direct_file(upload_id)
                data = await engine.run_blocking(_read_whole_region, engine.fs, path, offset, size)
                self.set_header("Content-Type", OCTETS)
                self.bytes_out += len(data)
                self.finish(data)
                return
            if not is_valid_payload_id(payload_id):
                raise ApiError("InvalidArgument", "not a payload id")
            if payload_id in engine.quarantined:
                raise FileNotFoundError(payload_id)
            source = await engine.run_blocking(engine.store.open_payload, payload_id)
        except (FileNotFoundError, EOFError):
            raise ApiError("NotFound", f"payload {payload_id} is not held here") from None
        try:
            self.set_header("Content-Length", str(source.size()))
            await self.send_open(source.read)
        finally:
            source.close()


class BulkPayloadFeedHandler(_FeedHandler):
    """Many payloads in one answer (a bootstrap's batches): for each ``id`` asked, an entry
    header (``wire.pack_entry_header``: size -1 when not held here), then its bytes.

    The answer declares its length (the sizes are looked up first, on the executor), so a
    file's bytes go out as a large GET's do (``service.http.file_body``: read and written by
    an executor thread, no chunked framing, no copy through the event loop). A payload that
    goes between the look-up and its turn cuts the answer (the standby asks again)."""

    route_name = "/api/v1/replication/payloads"
    home = Home.ANY  # payload files are every process's: no hop through the journal's owner

    async def get(self) -> None:
        self.authorize(Action.SYSTEM_INFO)
        ids = self.get_query_arguments("id")
        if not 0 < len(ids) <= BULK_MAX_IDS:
            raise ApiError("InvalidArgument", f"name 1 to {BULK_MAX_IDS} payloads with id=")
        for payload_id in ids:
            if parse_direct_id(payload_id) is None and not is_valid_payload_id(payload_id):
                raise ApiError("InvalidArgument", f"not a payload id: {payload_id[:80]}")
        engine = self.ctx.engine
        quarantined = set(engine.quarantined)
        found = await engine.run_blocking(_look_up, engine, ids, quarantined)
        sizes = [size for size, _ in found]
        headers = [pack_entry_header(each, size) for each, size in zip(ids, sizes, strict=True)]
        length = sum(map(len, headers)) + sum(size for size in sizes if size != NOT_HELD)
        self.set_header("Content-Type", OCTETS)
        self.set_header("Content-Length", str(length))
        for payload_id, header, (size, data) in zip(ids, headers, found, strict=True):
            self.write(header)
            if data is not None:
                self.write(data)  # a small one, read with the look-up
            elif size != NOT_HELD:
                await self._send_body(payload_id, size)
            self.bytes_out += max(size, 0)
        self.finish()

    async def _send_body(self, payload_id: str, size: int) -> None:
        engine = self.ctx.engine
        located = parse_direct_id(payload_id)
        try:
            if located is not None:
                upload_id, offset, _ = located
                path = engine.store.direct_file(upload_id)
                data = await engine.run_blocking(_read_whole_region, engine.fs, path, offset, size)
                self.write(data)
                return
            source = await engine.run_blocking(engine.store.open_payload, payload_id)
        except FileNotFoundError:
            raise OSError(f"payload {payload_id} went while it was being sent") from None
        try:
            connection = self.request.connection
            await self.flush()  # the headers and the entry's header go out first
            if isinstance(connection, H1Exchange):
                await send_file_body(
                    connection,
                    source,
                    0,
                    size,
                    executor=engine.executor,
                    idle_timeout=self.ctx.config.idle_timeout,
                )
                return
            left = size  # another connection (none of ours): a window at a time
            while left > 0:
                chunk = await engine.run_blocking(source.read, min(WINDOW_BYTES, left))
                if not chunk:
                    raise OSError(f"payload {payload_id} ended early")
                self.write(chunk)
                left -= len(chunk)
                await self.flush()
        finally:
            await engine.run_blocking(source.close)


def _look_up(
    engine: Engine, ids: list[str], quarantined: set[str]
) -> list[tuple[int, bytes | None]]:
    """Each payload's size here (``NOT_HELD`` for one not held, or quarantined), with the
    bytes of a small one (``INLINE_MAX_BYTES`` at most: read now, in this one executor job,
    instead of a file sent on its own)."""
    found: list[tuple[int, bytes | None]] = []
    for payload_id in ids:
        located = parse_direct_id(payload_id)
        if payload_id in quarantined:
            found.append((NOT_HELD, None))
            continue
        try:
            if located is not None:
                upload_id, offset, size = located
                path = engine.store.direct_file(upload_id)
                small = size <= INLINE_MAX_BYTES
                data = _read_whole_region(engine.fs, path, offset, size) if small else None
                if data is None and not engine.fs.exists(path):
                    raise FileNotFoundError(path)
            else:
                source = engine.store.open_payload(payload_id)
                try:
                    size = source.size()
                    data = source.read(size) if size <= INLINE_MAX_BYTES else None
                finally:
                    source.close()
                if data is not None and len(data) != size:
                    raise EOFError(payload_id)
        except (FileNotFoundError, EOFError):
            found.append((NOT_HELD, None))
            continue
        found.append((size, data))
    return found


def _read_whole_region(fs: FileSystem, path: str, offset: int, size: int) -> bytes:
    """A part written in place (at most a part's size); gone with its upload's file."""
    try:
        return b"".join(bytes(window) for window in read_region(fs, path, offset, size))
    except OSError as exc:
        raise FileNotFoundError(path) from exc


class RecordsFeedHandler(_FeedHandler):
    route_name = "/api/v1/replication/records"

    async def get(self) -> None:
        feed = self.feed()
        first = self._number("from", None)
        if first < 1:
            raise ApiError("InvalidArgument", "from must be a sequence >= 1")
        wait = float(self._number("wait", 0))
        inline = self._number("inline", 0) == 1
        # What the standby holds: at most what it no longer asks for.
        confirmed = min(self._number("confirmed", first - 1), first - 1)
        # This primary's epochs, on errors too: a standby checks them first (epochs).
        epochs = epoch_headers(self.ctx.engine.state.epoch_history())
        try:
            slot = self.slot(feed, confirmed)
            frames = await feed.records(slot, first, wait, inline=inline)
        except RecordsGoneError as exc:
            raise ApiError(
                "RecordsGone",
                f"{exc}: the standby must bootstrap again from a snapshot",
                headers=epochs,
            ) from None
        except ValueError as exc:
            raise ApiError("InvalidState", str(exc), headers=epochs) from None
        for name, value in epochs.items():
            self.set_header(name, value)
        self.set_header("Content-Type", OCTETS)
        self.set_header(HEADER_FIRST, str(frames.first))
        self.set_header(HEADER_LAST, str(frames.last))
        self.set_header(HEADER_PRIMARY_SEQUENCE, str(frames.primary_sequence))
        self.set_header(HEADER_SERVER_ID, server_identity(self.ctx.server_secret))
        body = frames.data
        if inline:
            self.set_header(HEADER_FRAMES_BYTES, str(len(body)))
            body += pack_inline(frames.inline)
        self.bytes_out += len(body)
        self.finish(body)

    def _number(self, name: str, default: int | None) -> int:
        return _query_number(self, name, default)


class ConfirmFeedHandler(_FeedHandler):
    """A standby's confirmation that it holds every record up to ``sequence`` durably: sent
    the moment a batch is durable, so a sync primary acknowledges the writes it covers at
    once (``ConfirmationWaiters.confirm`` wakes them all in one pass)."""

    route_name = "/api/v1/replication/confirm"

    async def get(self) -> None:
        feed = self.feed()
        sequence = _query_number(self, "sequence", None)
        try:
            self.slot(feed, sequence)
        except ValueError as exc:
            raise ApiError("InvalidState", str(exc)) from None
        self.set_status(204)
        self.finish()


def _query_number(handler: ApiHandler, name: str, default: int | None) -> int:
    raw = handler.get_query_argument(name, None)
    if raw is None:
        if default is None:
            raise ApiError("InvalidArgument", f"{name} is required")
        return default
    if not raw.isdigit() or len(raw) > 18:
        raise ApiError("InvalidArgument", f"{name} must be a non-negative integer")
    return int(raw)
