"""Run one end-to-end test body against both clients.

``blocking_view(async_client)`` presents an ``AsyncServiceClient`` with the synchronous
client's interface: every coroutine it returns is run to completion on a private event loop
thread, async iterators become lazy plain iterators, async context managers plain ones, and
the async handles it returns (bucket handles, multipart sessions, object streams) are wrapped
the same way. So a test written against ``ServiceClient`` also checks that
``AsyncServiceClient`` behaves identically, through its real async code paths.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

import service.client as client_module

T = TypeVar("T")

_WRAPPED = tuple(
    getattr(client_module, name)
    for name in (
        "AsyncServiceClient",
        "AsyncBuckets",
        "AsyncUsers",
        "AsyncAccessKeys",
        "AsyncVideos",
        "AsyncBucketClient",
        "AsyncMultipartUpload",
        "AsyncObjectStream",
    )
)
#: Sync reader names that the async stream spells differently.
_RENAMED = {"iter_bytes": "aiter_bytes"}


class LoopThread:
    """An event loop running on its own thread, for as long as a test needs it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, awaitable: Awaitable[T]) -> T:
        async def wrapper() -> T:
            return await awaitable

        future: Future[T] = asyncio.run_coroutine_threadsafe(wrapper(), self.loop)
        return future.result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class BlockingView:
    """A synchronous face on one async client object (see the module docstring)."""

    def __init__(self, target: Any, loop: LoopThread) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_loop", loop)

    def __getattr__(self, name: str) -> Any:
        target = object.__getattribute__(self, "_target")
        attribute = getattr(target, _RENAMED.get(name, name))
        if callable(attribute):
            return self._wrap_callable(attribute)
        return self._convert(attribute)

    def _wrap_callable(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._convert(function(*args, **kwargs))

        return call

    def _convert(self, value: Any) -> Any:
        loop: LoopThread = object.__getattribute__(self, "_loop")
        if inspect.isawaitable(value):
            value = loop.run(value)
        if isinstance(value, AsyncIterator):
            return _iterate(value, loop)
        if isinstance(value, _WRAPPED):
            return BlockingView(value, loop)
        return value

    def __iter__(self) -> Iterator[Any]:
        return iter(self.__getattr__("iter_bytes")())

    def __enter__(self) -> BlockingView:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.__getattr__("close")()

    def __repr__(self) -> str:
        return f"BlockingView({object.__getattribute__(self, '_target')!r})"


def _iterate(iterator: AsyncIterator[T], loop: LoopThread) -> Iterator[T]:
    sentinel = object()
    while True:
        item = loop.run(anext(iterator, sentinel))
        if item is sentinel:
            return
        yield item  # type: ignore[misc]


def blocking_view(factory: Callable[[], Any], loop: LoopThread) -> BlockingView:
    """Build the async client on ``loop`` (httpx binds its pool to the loop that uses it)."""

    async def build() -> Any:
        return factory()

    return BlockingView(loop.run(build()), loop)
