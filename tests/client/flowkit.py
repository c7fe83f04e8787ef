"""Driving client flows without I/O: the sans-I/O core tested by feeding it replies.

``ScriptedDriver`` performs a flow's steps the way the real drivers do (``Blocking`` runs
inline, ``Parallel`` runs sub-flows one after another, ``Sleep`` is recorded, not slept) and
answers each ``Call`` with whatever ``respond(call)`` returns: a ``Reply``, or an exception to
throw into the flow as the real drivers throw errors.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Callable
from typing import Any, TypeVar

import httpx

from service.client._flow import (
    Blocking,
    Call,
    Flow,
    Parallel,
    Reply,
    RetryPolicy,
    Sleep,
    with_retries,
)

T = TypeVar("T")

Responder = Callable[[Call], Reply | BaseException]


def reply(status: int = 200, body: Any = None, headers: dict[str, str] | None = None) -> Reply:
    """A 2xx reply; ``body`` is JSON-encoded unless it is bytes."""
    if isinstance(body, bytes):
        content = body
    else:
        content = b"" if body is None else json.dumps(body).encode()
    return Reply(status, httpx.Headers(headers or {}), content)


class ScriptedDriver:
    def __init__(self, respond: Responder, retry: RetryPolicy | None = None) -> None:
        self.respond = respond
        self.retry = retry
        self.calls: list[Call] = []
        self.sleeps: list[float] = []

    def run(self, flow: Flow[T]) -> T:
        steps = with_retries(flow, self.retry, rand=lambda: 0.5) if self.retry else flow
        try:
            step = next(steps)
            while True:
                try:
                    outcome = self._perform(step)
                except Exception as exc:
                    step = steps.throw(exc)
                else:
                    step = steps.send(outcome)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    def _perform(self, step: object) -> object:
        if isinstance(step, Call):
            self.calls.append(step)
            outcome = self.respond(step)
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        if isinstance(step, Sleep):
            self.sleeps.append(step.seconds)
            return None
        if isinstance(step, Blocking):
            return step.function()
        assert isinstance(step, Parallel)
        assert not isinstance(step.flows, AsyncIterable)
        return [self.run(sub) for sub in step.flows]
