"""The engine's refusals: domain errors with a code and a hint, never an HTTP detail.

The engine (``service.engine.journaled``, and a worker's ``service.procs.link_committer``)
raises these; the HTTP layer alone turns them into a status and headers
(``service.http.request_contract`` takes the status from the contract's code table and
writes ``retry_after`` as ``Retry-After``). They are ``ServiceError``s, the base that
``ApiError`` shares, so every caller that answers a refusal in the contract's shape
(handlers, the upload drain, the video runner) answers them too.

- ``NotServingError``: the engine is starting or stopping; retry after ``retry_after`` s.
- ``ReadOnlyError``: a journal fault turned the engine read-only until a restart.
- ``StorageFullError``: the disk is full (ENOSPC) at a commit; the engine is read-only.
- ``CommitFailedError``: any other journal write failure; the engine is read-only.

Thread-safety: plain exception values.
"""

from __future__ import annotations

from service.common.api_errors import ServiceError

READ_ONLY_RETRY_SECONDS = 30
"""How long a client is told to wait before retrying a mutation on a read-only engine."""


class NotServingError(ServiceError):
    """The engine is not accepting commits right now (starting or shutting down)."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__("ServiceUnavailable", message, retry_after=retry_after)


class ReadOnlyError(NotServingError):
    """A journal fault made the engine read-only; a restart recovers."""

    def __init__(self) -> None:
        super().__init__(
            "the server is read-only after a journal fault; restart it to recover",
            READ_ONLY_RETRY_SECONDS,
        )


class StorageFullError(ServiceError):
    """A commit failed for lack of disk space; the engine turned read-only."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            "InsufficientStorage",
            "the disk is full; the server is now read-only",
            log_detail=detail,
        )


class CommitFailedError(ServiceError):
    """A commit failed (its record's fate is decided by the next replay); now read-only."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            "InternalError",
            "the metadata commit failed; the server is now read-only",
            log_detail=detail,
        )
