"""Flows for multipart uploads, including the whole ``upload_multipart`` orchestration.

The single-endpoint flows (init, part, status, complete, abort, a page of the list) are used by the
multipart session handles. ``upload_multipart`` composes them: open the source, create or
resume the session, run one sub-flow per part through a ``Parallel`` step (so the sync client
uses threads and the async one tasks, with the same logic), then complete, or abort on an
unrecoverable error. Each part's ``Call`` carries the higher ``part_retries`` count, so a
part rides out a dropped connection or a restarting server with back-off.

Pure but for one thing: the source is opened through a ``Blocking`` step and its descriptor
closed in a ``finally`` (an instant call that must run even when a driver abandons the flow).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from functools import partial

from service.client._documents import document
from service.client._exceptions import IntegrityError, ServiceError
from service.client._flow import Call, Flow, blocking, parallel, request
from service.client._headers import put_headers
from service.client._models import Object, Part, Session, parse
from service.client._models_upkeep import UploadPage
from service.client._ops_objects import sha256_of
from service.client._parts import (
    Piece,
    ProgressCallback,
    ProgressMeter,
    Source,
    choose_part_size,
    is_already_stored,
    open_source,
)
from service.client._paths import api, encode_segment
from service.client._payload import Body, MemoryBody
from service.client._wire import MAX_PART_NUMBER, MIN_PART_NUMBER, QUERY_PART_NUMBER

__all__ = [
    "abort",
    "complete",
    "init",
    "list_uploads_page",
    "status",
    "upload_multipart",
    "upload_part",
]


MIN_DECLARED_PART_SIZE = 1024 * 1024
MAX_DECLARED_PART_SIZE = 5 * 1024**3


def _declarable(part_size: int | None) -> bool:
    """Whether a session may be opened for parts of this size (smaller ones, as tests use,
    are not declared)."""
    return part_size is not None and MIN_DECLARED_PART_SIZE <= part_size <= MAX_DECLARED_PART_SIZE


def _upload_path(upload_id: str) -> str:
    return api(f"/multipart/{encode_segment(upload_id)}")


def init(
    bucket: str,
    key: str,
    *,
    content_type: str | None = None,
    metadata: Mapping[str, str] | None = None,
    part_size: int | None = None,
    size_bytes: int | None = None,
) -> Flow[Session]:
    """Open a session. ``part_size``: the size of the parts to come (the server writes
    parts of that size in place, so the bytes cross its disk once); ``size_bytes``: the
    object's size, when known (the recommendation then covers it in 10,000 parts)."""
    body = document(
        bucket=bucket,
        key=key,
        content_type=content_type,
        custom_metadata=dict(metadata) if metadata is not None else None,
        part_size=part_size,
        size_bytes=size_bytes,
    )
    reply = yield from request(Call("POST", api("/multipart/init"), json=body))
    return parse(Session.from_json, reply.json())


def upload_part(
    upload_id: str,
    part_number: int,
    body: Body,
    *,
    checksum: str | None = None,
    retries: int | None = None,
) -> Flow[Part]:
    """PUT one part. Bytes in memory are hashed and the hash sent (the server refuses a
    damaged part); the stored part's etag is checked against any hash we have."""
    if not MIN_PART_NUMBER <= part_number <= MAX_PART_NUMBER:
        raise ValueError(f"part_number must be {MIN_PART_NUMBER} to {MAX_PART_NUMBER}")
    if checksum is None and isinstance(body, MemoryBody):
        checksum = yield from sha256_of(body.data)
    headers = put_headers(content_type=None, metadata=None, checksum=checksum)
    call = Call(
        "PUT",
        f"{_upload_path(upload_id)}/part",
        params={QUERY_PART_NUMBER: str(part_number)},
        headers=headers,
        body=body,
        retries=retries,
    )
    reply = yield from request(call)
    part = parse(Part.from_json, reply.json())
    if checksum is not None and part.etag.lower() != checksum.lower():
        raise IntegrityError(
            f"part {part_number}: server stored SHA-256 {part.etag}, the data has {checksum}",
            request_id=reply.headers.get("X-Request-Id"),
        )
    return part


def status(upload_id: str) -> Flow[Session]:
    reply = yield from request(Call("GET", _upload_path(upload_id)))
    return parse(Session.from_json, reply.json())


def complete(upload_id: str, parts: Sequence[Part | tuple[int, str]] | None) -> Flow[Object]:
    """Complete with ``parts`` (Part objects or ``(number, etag)`` pairs, sorted here), or
    with every part the server holds when ``parts`` is None."""
    if parts is None:
        parts = (yield from status(upload_id)).parts
    pairs = sorted(
        (part.part_number, part.etag) if isinstance(part, Part) else (part[0], part[1])
        for part in parts
    )
    if not pairs:
        raise ValueError("a multipart upload needs at least one part to complete")
    body = {"parts": [{"part_number": number, "etag": etag} for number, etag in pairs]}
    reply = yield from request(Call("POST", f"{_upload_path(upload_id)}/complete", json=body))
    return parse(Object.from_json, reply.json())


def abort(upload_id: str) -> Flow[None]:
    yield from request(Call("DELETE", _upload_path(upload_id)))


def list_uploads_page(
    bucket: str, *, limit: int | None = None, cursor: str | None = None
) -> Flow[UploadPage]:
    params = {"bucket": bucket}
    if limit is not None:
        params["limit"] = str(limit)
    if cursor is not None:
        params["cursor"] = cursor
    reply = yield from request(Call("GET", api("/multipart"), params=params))
    return parse(UploadPage.from_json, reply.json())


def upload_multipart(
    bucket: str,
    key: str,
    source: object,
    *,
    part_size: int | None = None,
    max_parallel: int | None = None,
    content_type: str | None = None,
    metadata: Mapping[str, str] | None = None,
    upload_id: str | None = None,
    progress: ProgressCallback | None = None,
    keep_on_error: bool = False,
    part_retries: int | None = None,
) -> Flow[Object]:
    """Upload ``source`` in parts and return the completed object (see the clients'
    ``upload_multipart`` for the behaviour)."""
    if max_parallel is not None and max_parallel < 1:
        raise ValueError("max_parallel must be at least 1")
    opened = yield from blocking(partial(open_source, source))
    try:
        return (
            yield from _upload(
                bucket,
                key,
                opened,
                part_size=part_size,
                max_parallel=max_parallel,
                content_type=content_type,
                metadata=metadata,
                upload_id=upload_id,
                progress=progress,
                keep_on_error=keep_on_error,
                part_retries=part_retries,
            )
        )
    finally:
        opened.close()


def _upload(
    bucket: str,
    key: str,
    opened: Source,
    *,
    part_size: int | None,
    max_parallel: int | None,
    content_type: str | None,
    metadata: Mapping[str, str] | None,
    upload_id: str | None,
    progress: ProgressCallback | None,
    keep_on_error: bool,
    part_retries: int | None,
) -> Flow[Object]:
    if upload_id is None:
        session = yield from init(
            bucket,
            key,
            content_type=content_type,
            metadata=metadata,
            part_size=part_size if _declarable(part_size) else None,
            size_bytes=opened.size,
        )
    else:
        session = yield from status(upload_id)
        if (session.bucket, session.key) != (bucket, key):
            raise ValueError(
                f"upload {upload_id} is for {session.bucket}/{session.key}, not {bucket}/{key}"
            )
    try:
        size = choose_part_size(part_size, session.recommended_part_size, opened.size)
        stored = {part.part_number: part for part in session.parts}
        meter = ProgressMeter(progress, opened.size)

        def part_flow(piece: Piece) -> Flow[Part]:
            return _send_piece(
                session.upload_id, piece, stored.get(piece.number), meter, part_retries
            )

        pieces = opened.pieces(size)
        flows = (
            _amap(part_flow, pieces)
            if isinstance(pieces, AsyncIterator)
            else map(part_flow, pieces)
        )
        limit = max_parallel if max_parallel is not None else session.max_parallel_parts
        parts = yield from parallel(flows, limit)
        return (yield from complete(session.upload_id, parts))
    except Exception as error:
        if keep_on_error:
            if isinstance(error, ServiceError):
                error.upload_id = session.upload_id
            error.add_note(
                f"multipart upload {session.upload_id} was kept: pass "
                f"upload_id={session.upload_id!r} to upload_multipart to resume it"
            )
            raise
        try:
            yield from abort(session.upload_id)
        except ServiceError as abort_error:
            error.add_note(f"aborting upload {session.upload_id} failed too: {abort_error}")
        raise


def _send_piece(
    upload_id: str,
    piece: Piece,
    stored: Part | None,
    meter: ProgressMeter,
    retries: int | None,
) -> Flow[Part]:
    """Upload one piece, or skip it when a resumed session already holds the same bytes."""
    digest: str | None = None
    if stored is not None and stored.size_bytes == piece.size:
        digest = yield from blocking(piece.sha256)
        if is_already_stored(stored, piece.size, digest):
            meter.advance(piece.size)
            return stored
    part = yield from upload_part(
        upload_id, piece.number, piece.body, checksum=digest, retries=retries
    )
    meter.advance(piece.size)
    return part


async def _amap(
    function: Callable[[Piece], Flow[Part]], pieces: AsyncIterator[Piece]
) -> AsyncIterator[Flow[Part]]:
    async for piece in pieces:
        yield function(piece)
