"""One transfer run: walk both ends, merge-join by key, copy what differs on a bounded pool.

For each key the worker decides: a target with the same size and SHA-256 is skipped (so a
re-run of an interrupted copy only sends what is missing); anything else is copied; with
``remove`` a target the source lacks is deleted; with ``move`` the source goes once the
target holds it. Files of at least ``multipart_threshold`` bytes go up in parallel multipart
parts, resumably (``resume``); local files below ``batch_max_file`` go up many to a request
(a batch upload: ``batching``), each still decided, reported and counted on its own, and a
server without the batch route gets one PUT per file instead. Each finished key is reported
at once and counted; a failure is reported and counted, and the run goes on (exit 7 at the
end).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from service.cli.errors import EXIT_OK, EXIT_PARTIAL, CliError
from service.cli.output import Output
from service.cli.sizes import format_size
from service.cli.transfer.batching import BATCH_BYTES, BATCH_FILES, BATCH_MAX_FILE, Batcher, Pair
from service.cli.transfer.endpoints import End, LocalEnd, RemoteEnd, hash_file
from service.cli.transfer.plan import excluded, merge
from service.cli.transfer.pool import run_bounded
from service.cli.transfer.progress import NullProgress
from service.cli.transfer.resume import ResumeStore, UploadState, fingerprint
from service.cli.transfer.walk import Entry
from service.client import NotFoundError, ServiceError
from service.client._ops_batch import route_missing

__all__ = ["Options", "Transfer"]

MIB = 1024 * 1024
#: The smallest default part: each part costs the server a durable write and a journal
#: commit, so 1 GiB went up in 1.6 s as 32 parts of 32 MiB against 3.2 s as 128 parts of
#: the server's 8 MiB recommendation (docs/cli.md, "Speed and memory").
MIN_DEFAULT_PART = 32 * MIB


@dataclass(frozen=True)
class Options:
    jobs: int = 8
    remove: bool = False
    move: bool = False
    excludes: tuple[str, ...] = ()
    part_size: int | None = None
    parallel_parts: int | None = None
    multipart_threshold: int = 64 * MIB
    batch: bool = True
    """Send small local files to a remote target in batch uploads (``--no-batch``: not)."""
    batch_max_file: int = BATCH_MAX_FILE
    batch_files: int = BATCH_FILES
    batch_bytes: int = BATCH_BYTES


@dataclass
class Result:
    status: str  # copied | skipped | removed | failed
    source: str | None
    target: str
    size: int = 0
    error: BaseException | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Summary:
    copied: int = 0
    skipped: int = 0
    removed: int = 0
    failed: int = 0
    bytes: int = 0
    started: float = field(default_factory=time.monotonic)


class Transfer:
    """Copies ``source`` to ``target`` (see the module docstring)."""

    def __init__(
        self,
        source: End,
        target: End,
        options: Options,
        output: Output,
        resume: ResumeStore,
        progress: NullProgress,
    ) -> None:
        self.source = source
        self.target = target
        self.options = options
        self.output = output
        self.resume = resume
        self.progress = progress
        self.summary = Summary()
        self._lock = threading.Lock()
        self._batching = (
            options.batch
            and isinstance(source, LocalEnd)
            and not source.single
            and isinstance(target, RemoteEnd)
        )
        """Whether small files go in batches (turned off when the server lacks the route)."""

    # -- the run ----------------------------------------------------------------------

    def run(self) -> int:
        """Transfer everything; the exit code (0, or 7 when some keys failed)."""
        self.progress.count(self.source.walk)
        try:
            run_bounded(self._tasks(), self.options.jobs, self._finished)
        finally:
            self.progress.close()
        if isinstance(self.source, LocalEnd):
            for path, error in self.source.walk_errors:
                self._report(Result("failed", path, "", error=error))
        self._report_summary()
        return EXIT_PARTIAL if self.summary.failed else EXIT_OK

    def _tasks(self) -> Iterator[Callable[[], Result | list[Result]]]:
        options = self.options
        batcher = Batcher(
            options.batch_files,
            options.batch_bytes,
            min(options.batch_max_file, options.multipart_threshold),
        )
        for source, target in merge(self.source.walk(), self.target.walk()):
            entry = source if source is not None else target
            assert entry is not None  # merge never yields (None, None)
            rel = entry.rel
            if self.options.excludes and excluded(rel, self.options.excludes):
                continue
            if rel.endswith("/") and isinstance(self.target, LocalEnd):
                continue  # a folder marker object: the directory appears with its files
            if source is None:
                if self.options.remove and target is not None:
                    yield partial(self._remove, target)
                continue
            if self._batching and batcher.takes(source):
                group = batcher.add((source, target))
                if group:
                    yield partial(self._batch, group)
                continue
            yield partial(self._one, source, target)
        group = batcher.rest()
        if group:
            yield partial(self._batch, group)

    def _finished(self, result: Result | list[Result] | None, error: BaseException | None) -> None:
        if result is None:  # a task raised (a bug): still one clear line
            result = Result("failed", None, "", error=error)
        for one in result if isinstance(result, list) else [result]:
            self._report(one)

    # -- one key ----------------------------------------------------------------------

    def _one(self, source: Entry, target: Entry | None) -> Result:
        source_name = self.source.display(source.rel)
        target_name = self.target.display(source.rel)
        try:
            if target is not None and self._same(source, target):
                self.progress.advance(source.size)
                if source.size >= self.options.multipart_threshold:
                    self.resume.clear(target_name)  # completed by an earlier run
                result = Result("skipped", source_name, target_name, source.size)
            else:
                extra = self._copy(source)
                result = Result("copied", source_name, target_name, source.size, extra=extra)
            if self.options.move:
                self._delete(self.source, source.rel)
            return result
        except Exception as error:
            return Result("failed", source_name, target_name, source.size, error=error)

    def _batch(self, pairs: list[Pair]) -> list[Result]:
        """A group of small files: each decided as ``_one`` decides (skipped when the target
        holds the same bytes), those to copy sent in one batch upload."""
        results: list[Result] = []
        sending: list[Entry] = []
        for source, target in pairs:
            try:
                if target is None or not self._same(source, target):
                    sending.append(source)
                    continue
                self.progress.advance(source.size)
                results.append(self._moved(source, "skipped"))
            except Exception as error:
                results.append(self._failed(source, error))
        if sending:
            results += self._send_batch(sending)
        return results

    def _send_batch(self, entries: list[Entry]) -> list[Result]:
        """Send ``entries`` as one batch; one result per file. A batch the server could not
        take as a whole (no batch route, a failure of the request itself), and a member the
        server failed (5xx) rather than refused, go up one PUT per file, reported as usual."""
        source, target = self.source, self.target
        assert isinstance(source, LocalEnd) and isinstance(target, RemoteEnd)
        if self._batching:
            items = [(target.key(entry.rel), source.path(entry.rel)) for entry in entries]
            try:
                outcomes = target.bucket.put_many(items)
            except Exception as error:
                if isinstance(error, ServiceError) and route_missing(error):
                    self._batching = False  # an older server or a proxy: PUTs from now on
            else:
                results = []
                for entry, outcome in zip(entries, outcomes, strict=True):
                    refusal = outcome.error
                    if refusal is not None and (refusal.status or 500) >= 500:
                        # The server's trouble, not the file's (a writer restarting, say):
                        # one PUT of it, with the client's retries.
                        results.append(self._one(entry, None))
                    elif refusal is not None:
                        results.append(self._failed(entry, refusal))
                    else:
                        self.progress.advance(entry.size)
                        results.append(self._moved(entry, "copied"))
                return results
        return [self._one(entry, None) for entry in entries]

    def _moved(self, source: Entry, status: str) -> Result:
        """The result of a file the target now holds, its source removed for ``move``."""
        source_name = self.source.display(source.rel)
        target_name = self.target.display(source.rel)
        try:
            if self.options.move:
                self._delete(self.source, source.rel)
        except Exception as error:
            return Result("failed", source_name, target_name, source.size, error=error)
        return Result(status, source_name, target_name, source.size)

    def _failed(self, source: Entry, error: BaseException) -> Result:
        source_name = self.source.display(source.rel)
        target_name = self.target.display(source.rel)
        return Result("failed", source_name, target_name, source.size, error=error)

    def _same(self, source: Entry, target: Entry) -> bool:
        if source.size != target.size:
            return False
        return self._sha256(self.source, source) == self._sha256(self.target, target)

    def _sha256(self, end: End, entry: Entry) -> str:
        if entry.sha256 is not None:
            return entry.sha256.lower()
        assert isinstance(end, LocalEnd)
        return hash_file(end.path(entry.rel))

    def _remove(self, target: Entry) -> Result:
        name = self.target.display(target.rel)
        try:
            self._delete(self.target, target.rel)
            return Result("removed", None, name, target.size)
        except Exception as error:
            return Result("failed", None, name, target.size, error=error)

    @staticmethod
    def _delete(end: End, rel: str) -> None:
        if isinstance(end, LocalEnd):
            end.path(rel).unlink()
        else:
            end.bucket.delete(end.key(rel))

    # -- copying ----------------------------------------------------------------------

    def _copy(self, entry: Entry) -> dict[str, Any]:
        source, target = self.source, self.target
        if isinstance(source, LocalEnd) and isinstance(target, RemoteEnd):
            return self._upload(source.path(entry.rel), entry, target, target.key(entry.rel))
        if isinstance(source, RemoteEnd) and isinstance(target, LocalEnd):
            self._download(source, source.key(entry.rel), entry, target.path(entry.rel))
            return {}
        assert isinstance(source, RemoteEnd) and isinstance(target, RemoteEnd)
        self._server_copy(source, entry, target, target.key(entry.rel))
        return {}

    def _upload(self, path: Path, entry: Entry, target: RemoteEnd, key: str) -> dict[str, Any]:
        if entry.size < self.options.multipart_threshold:
            target.bucket.put(key, path)
            self.progress.advance(entry.size)
            return {}
        destination = target.display("") if target.single else target.display(entry.rel)
        upload_id, part_size, stored = self._session(target, key, destination, path)
        sent = [0]

        def advance(done: int, total: int | None) -> None:
            self.progress.advance(done - sent[0])
            sent[0] = done

        target.bucket.upload_multipart(
            key,
            path,
            part_size=part_size,
            max_parallel=self.options.parallel_parts,
            upload_id=upload_id,
            keep_on_error=True,
            progress=advance,
        )
        self.resume.clear(destination)
        return {"upload_id": upload_id, "part_size": part_size, "parts_already_stored": stored}

    def _session(
        self, target: RemoteEnd, key: str, destination: str, path: Path
    ) -> tuple[str, int, int]:
        """The multipart session to use: the remembered one when it is still open and was
        for this same source, else a new one (remembered before any part is sent)."""
        mark = fingerprint(path)
        state = self.resume.load(destination)
        if state is not None and state.fingerprint == mark:
            try:
                session = target.bucket.get_multipart_upload(state.upload_id).session
                return state.upload_id, state.part_size, len(session.parts)
            except NotFoundError:
                pass  # expired or completed: start afresh
        elif state is not None:
            with contextlib.suppress(NotFoundError):  # the source changed: old parts are useless
                target.bucket.get_multipart_upload(state.upload_id).abort()
        wanted = self.options.part_size or MIN_DEFAULT_PART
        # Declared at init, so the server writes each part once, straight into place.
        declared = wanted if MIB <= wanted <= 5 * 1024 * MIB else None
        upload = target.bucket.create_multipart_upload(key, part_size=declared)
        part_size = upload.recommended_part_size if declared is not None else wanted
        self.resume.save(UploadState(destination, upload.upload_id, part_size, mark))
        return upload.upload_id, part_size, 0

    def _download(self, source: RemoteEnd, key: str, entry: Entry, path: Path) -> None:
        check_relative(entry.rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        with source.bucket.get(key) as obj:
            obj.write_to_file(path)
        self.progress.advance(entry.size)

    def _server_copy(self, source: RemoteEnd, entry: Entry, target: RemoteEnd, key: str) -> None:
        with source.bucket.get(source.key(entry.rel)) as obj:
            content_type = obj.metadata.content_type
            metadata = obj.metadata.custom_metadata or None
            if entry.size >= self.options.multipart_threshold:
                target.bucket.upload_multipart(
                    key,
                    obj.iter_bytes(),
                    part_size=self.options.part_size,
                    max_parallel=self.options.parallel_parts,
                    content_type=content_type,
                    metadata=metadata,
                )
            else:
                target.bucket.put(
                    key,
                    obj.iter_bytes(),
                    content_type=content_type,
                    metadata=metadata,
                    checksum=entry.sha256,
                )
        self.progress.advance(entry.size)

    # -- reporting --------------------------------------------------------------------

    def _report(self, result: Result) -> None:
        with self._lock:
            summary = self.summary
            if result.status == "copied":
                summary.copied += 1
                summary.bytes += result.size
            elif result.status == "skipped":
                summary.skipped += 1
            elif result.status == "removed":
                summary.removed += 1
            else:
                summary.failed += 1
        if result.status != "removed":
            self.progress.file_done()
        if result.status == "failed":
            self.output.failure(result.source or result.target, result.error)
            return
        if result.status == "skipped":
            return
        document: dict[str, Any] = {
            "status": result.status,
            "source": result.source,
            "target": result.target,
        }
        document.update(size=result.size, **result.extra)
        if result.status == "removed":
            text = f"removed `{result.target}`"
        else:
            text = f"`{result.source}` -> `{result.target}`"
        if self.output.tty and not self.output.json:
            return  # the progress bar told it; the summary follows
        self.output.result(document, text)

    def _report_summary(self) -> None:
        summary = self.summary
        seconds = max(time.monotonic() - summary.started, 1e-6)
        document = {
            "status": "summary",
            "copied": summary.copied,
            "skipped": summary.skipped,
            "removed": summary.removed,
            "failed": summary.failed,
            "bytes": summary.bytes,
            "seconds": round(seconds, 3),
        }
        text = (
            f"copied {summary.copied} ({format_size(summary.bytes)}), skipped "
            f"{summary.skipped}, removed {summary.removed}, failed {summary.failed} in "
            f"{seconds:.1f} s ({format_size(summary.bytes / seconds)}/s)"
        )
        self.output.result(document, text)


def check_relative(rel: str) -> None:
    """Refuse a key that would leave the target directory (``..``, ``/x``, ``a//b``)."""
    if rel and any(part in ("", ".", "..") for part in rel.split("/")):
        raise CliError("", "UnsafeKey: the key is not a safe relative file path")
