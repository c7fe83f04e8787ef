"""The sans-I/O core: operations as generators of steps, and the retry policy.

Every client operation is written once, as a *flow*: a generator that yields steps and gets
their outcome sent back (httpx's ``Auth.auth_flow`` is the model). The sync and async drivers
(``_sync_io``, ``_async_io``) perform the steps; the flows never touch the network, a file or
a clock, so they are shared by ``ServiceClient`` and ``AsyncServiceClient`` and can be tested
by feeding them replies.

Steps and what the driver sends back:

- ``Call``: an HTTP request. Sends a ``Reply`` for a 2xx answer; any other answer, or a
  transport failure, is *thrown* into the flow as a ``ServiceError`` (so flows handle an
  expected 404 with ``try/except``).
- ``Sleep``: wait; sends None.
- ``Blocking``: run a blocking callable (hashing, reading a file); sends its result. The async
  driver runs it on an executor so the event loop never blocks.
- ``Parallel``: run sub-flows, at most ``limit`` at once (threads or tasks); sends their
  results in order. The next sub-flow is only taken from the iterable once a slot is free, so
  a lazily produced source holds at most ``limit`` parts in memory.

``with_retries`` wraps a flow and re-issues a failed ``Call`` after a jittered exponential
back-off when ``RetryPolicy`` says that is safe. Everything here is pure; a flow object is
driven by one thread or task at a time.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import AsyncIterable, Callable, Generator, Iterable, Mapping
from typing import Any, Generic, TypeAlias, TypeVar, cast

import httpx

from service.client._exceptions import (
    ConnectionFailedError,
    ServiceError,
    ServiceUnavailableError,
    TooManyRequestsError,
    TransportError,
    UnexpectedResponseError,
)
from service.client._payload import Body, is_replayable

__all__ = [
    "Blocking",
    "Call",
    "Flow",
    "Parallel",
    "Reply",
    "RetryPolicy",
    "Sleep",
    "Step",
    "blocking",
    "parallel",
    "request",
    "with_retries",
]

T = TypeVar("T")

_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
#: Statuses that say "this attempt failed, the next may not" for a request that is safe to
#: repeat. 503 is the server refusing before doing anything, so any method may repeat it.
_RETRY_IDEMPOTENT_STATUSES = frozenset({500, 502, 503, 504})


@dataclasses.dataclass(frozen=True)
class Call:
    """One HTTP request, described. ``path`` is already percent-encoded and relative to the
    client's base URL; ``json`` is a JSON-able document sent as the body; ``stream`` leaves the
    answer's body unread for the caller (``Reply.raw``); ``retries`` overrides the client's
    retry count for this call."""

    method: str
    path: str
    params: Mapping[str, str] = dataclasses.field(default_factory=dict)
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    json: Any = None
    body: Body | None = None
    stream: bool = False
    retries: int | None = None

    @property
    def idempotent(self) -> bool:
        return self.method in _IDEMPOTENT_METHODS

    @property
    def replayable(self) -> bool:
        return is_replayable(self.body)


@dataclasses.dataclass(frozen=True)
class Reply:
    """A 2xx answer. ``content`` is the whole body, except for ``Call(stream=True)`` where
    ``raw`` is the still-open response and the caller owns closing it."""

    status: int
    headers: httpx.Headers
    content: bytes = b""
    raw: httpx.Response | None = None

    def json(self) -> Any:
        """The body as JSON; a body that is not JSON means we are not talking to the service."""
        try:
            return json.loads(self.content)
        except ValueError as exc:
            raise UnexpectedResponseError(
                f"expected a JSON body, got {self.content[:80]!r}", status=self.status
            ) from exc


@dataclasses.dataclass(frozen=True)
class Sleep:
    """Wait ``seconds`` before the next step."""

    seconds: float


@dataclasses.dataclass(frozen=True)
class Blocking:
    """Run ``function`` where blocking is allowed and send back its result."""

    function: Callable[[], object]


@dataclasses.dataclass(frozen=True)
class Parallel(Generic[T]):
    """Run the sub-flows concurrently, at most ``limit`` at a time, and send back their
    results in iteration order. The first failure stops taking new sub-flows and is raised
    once the ones in flight have ended."""

    flows: Iterable[Flow[T]] | AsyncIterable[Flow[T]]
    limit: int


Step: TypeAlias = Call | Sleep | Blocking | Parallel[Any]
Flow: TypeAlias = Generator[Step, object, T]


def request(call: Call) -> Flow[Reply]:
    """Issue ``call`` and return its 2xx reply (errors are raised at the ``yield``)."""
    reply = yield call
    return cast(Reply, reply)


def blocking(function: Callable[[], T]) -> Flow[T]:
    """Run ``function`` where blocking is allowed and return its result."""
    result = yield Blocking(function)
    return cast(T, result)


def parallel(flows: Iterable[Flow[T]] | AsyncIterable[Flow[T]], limit: int) -> Flow[list[T]]:
    """Run ``flows`` with at most ``limit`` in flight and return their results in order."""
    results = yield Parallel(flows, max(1, limit))
    return cast(list[T], results)


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before repeating a failed request.

    A request is repeated only if repeating it cannot do harm: the body can be sent again,
    and either the connection never carried it, the server said 503 or 429 (nothing was done),
    or the method is idempotent and the failure was a transport error or a 500/502/504.
    Waits grow ``backoff * 2**attempt`` up to ``max_backoff``, with "equal jitter" (between
    half and all of that) so many clients do not retry in lockstep; a 503's or 429's
    ``Retry-After`` is honoured up to ``max_backoff``. ``part_retries`` is the count for
    multipart parts, higher because a large upload should ride out a server restart.
    """

    retries: int = 2
    part_retries: int = 6
    backoff: float = 0.5
    max_backoff: float = 10.0

    def __post_init__(self) -> None:
        if self.retries < 0 or self.part_retries < 0:
            raise ValueError("retries must be >= 0")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("backoff times must be >= 0")

    def should_retry(self, call: Call, error: ServiceError) -> bool:
        """Whether repeating ``call`` after ``error`` is safe and may help."""
        if not call.replayable:
            return False
        if isinstance(error, ConnectionFailedError) or error.status in (429, 503):
            return True
        if isinstance(error, TransportError) or error.status in _RETRY_IDEMPOTENT_STATUSES:
            return call.idempotent
        return False

    def delay(self, call: Call, error: ServiceError, attempt: int, rand: float) -> float | None:
        """Seconds to wait before retry number ``attempt + 1``, or None to give up.

        ``rand`` is a uniform number in [0, 1) (passed in so the policy stays pure).

        >>> policy = RetryPolicy(retries=3, backoff=1.0, max_backoff=3.0)
        >>> failure = ConnectionFailedError("refused")
        >>> [policy.delay(Call("POST", "/x"), failure, n, 1.0) for n in range(4)]
        [1.0, 2.0, 3.0, None]
        """
        limit = self.retries if call.retries is None else call.retries
        if attempt >= limit or not self.should_retry(call, error):
            return None
        ceiling = min(self.max_backoff, self.backoff * 2.0**attempt)
        wait = ceiling / 2 + ceiling / 2 * rand
        if (
            isinstance(error, ServiceUnavailableError | TooManyRequestsError)
            and error.retry_after is not None
        ):
            wait = max(wait, min(error.retry_after, self.max_backoff))
        return wait


def with_retries(
    flow: Flow[T], policy: RetryPolicy, rand: Callable[[], float] = random.random
) -> Flow[T]:
    """``flow`` with each failed ``Call`` repeated as ``policy`` allows.

    Errors that are not retried (and errors of other steps) are thrown into ``flow`` at the
    step that failed, exactly as without this wrapper.
    """
    incoming: object = None
    error: BaseException | None = None
    while True:
        try:
            step = flow.send(incoming) if error is None else flow.throw(error)
        except StopIteration as stop:
            return cast(T, stop.value)
        incoming, error = None, None
        attempt = 0
        while True:
            try:
                incoming = yield step
                break
            except GeneratorExit:
                flow.close()
                raise
            except ServiceError as exc:
                wait = policy.delay(step, exc, attempt, rand()) if isinstance(step, Call) else None
                if wait is None:
                    error = exc
                    break
            except Exception as exc:
                error = exc
                break
            attempt += 1
            try:
                yield Sleep(wait)
            except GeneratorExit:
                flow.close()
                raise
