"""When a failed request is repeated, how long the client waits, and when it gives up."""

from __future__ import annotations

import pytest

from service.client import (
    BadRequestError,
    ConnectionFailedError,
    InsufficientStorageError,
    InternalServerError,
    ServiceUnavailableError,
    TooManyRequestsError,
    TransportError,
)
from service.client import _ops_objects as objects
from service.client._flow import Call, Flow, Reply, RetryPolicy, request
from service.client._payload import body_from
from tests.client.flowkit import ScriptedDriver, reply


def failing(*errors: BaseException, then: Reply | None = None):  # type: ignore[no-untyped-def]
    outcomes = list(errors)

    def respond(call: Call) -> Reply | BaseException:
        return outcomes.pop(0) if outcomes else (then or reply(200, {}))

    return respond


def one_call(method: str, body: object = None) -> Flow[Reply]:
    return request(Call(method, "/x", body=body_from(body) if body is not None else None))


POLICY = RetryPolicy(retries=3, backoff=1.0, max_backoff=5.0)


def test_a_refused_connection_is_retried_even_for_post() -> None:
    driver = ScriptedDriver(failing(ConnectionFailedError("refused")), retry=POLICY)
    assert driver.run(one_call("POST")).status == 200
    assert len(driver.calls) == 2 and driver.sleeps == [0.75]


def test_a_broken_answer_is_retried_only_for_idempotent_methods() -> None:
    driver = ScriptedDriver(failing(TransportError("reset")), retry=POLICY)
    assert driver.run(one_call("PUT", b"data")).status == 200
    driver = ScriptedDriver(failing(TransportError("reset")), retry=POLICY)
    with pytest.raises(TransportError):
        driver.run(one_call("POST"))
    assert len(driver.calls) == 1


@pytest.mark.parametrize(
    ("error", "method", "retried"),
    [
        (InternalServerError("x", status=500), "GET", True),
        (InternalServerError("x", status=500), "POST", False),
        (ServiceUnavailableError("x", status=503), "POST", True),
        (TooManyRequestsError("x", status=429), "POST", True),
        (InsufficientStorageError("x", status=507), "PUT", False),
        (BadRequestError("x", status=400), "GET", False),
    ],
)
def test_which_statuses_are_worth_repeating(error: Exception, method: str, retried: bool) -> None:
    driver = ScriptedDriver(failing(error), retry=POLICY)
    if retried:
        driver.run(one_call(method))
    else:
        with pytest.raises(type(error)):
            driver.run(one_call(method))
    assert len(driver.calls) == (2 if retried else 1)


def test_a_stream_body_is_never_sent_twice() -> None:
    driver = ScriptedDriver(failing(ConnectionFailedError("refused")), retry=POLICY)
    with pytest.raises(ConnectionFailedError):
        driver.run(one_call("PUT", iter([b"once"])))
    assert len(driver.calls) == 1


def test_waits_grow_exponentially_up_to_the_cap_then_the_error_is_raised() -> None:
    errors = [ConnectionFailedError(f"refused {n}") for n in range(10)]
    driver = ScriptedDriver(failing(*errors), retry=POLICY)
    with pytest.raises(ConnectionFailedError, match="refused 3"):
        driver.run(one_call("GET"))
    # equal jitter with rand=0.5: three quarters of 1, 2, 4 seconds
    assert driver.sleeps == [0.75, 1.5, 3.0]
    assert len(driver.calls) == 4


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    busy = ServiceUnavailableError("busy", status=503, retry_after=4.0)
    driver = ScriptedDriver(failing(busy), retry=POLICY)
    driver.run(one_call("PUT", b"x"))
    assert driver.sleeps == [4.0]
    capped = TooManyRequestsError("cap full", status=429, retry_after=3.0)
    driver = ScriptedDriver(failing(capped), retry=POLICY)
    driver.run(one_call("POST", b"x"))
    assert driver.sleeps == [3.0]
    very_busy = ServiceUnavailableError("busy", status=503, retry_after=600.0)
    driver = ScriptedDriver(failing(very_busy), retry=POLICY)
    driver.run(one_call("PUT", b"x"))
    assert driver.sleeps == [5.0]


def test_a_call_may_carry_its_own_retry_count() -> None:
    errors = [ConnectionFailedError("refused")] * 5
    call = Call("PUT", "/part", body=body_from(b"p"), retries=5)
    driver = ScriptedDriver(failing(*errors), retry=RetryPolicy(retries=0, backoff=0.0))
    assert driver.run(request(call)).status == 200
    assert len(driver.calls) == 6


def test_an_error_the_flow_expects_is_delivered_to_it_after_retries() -> None:
    """``delete`` turns NoSuchKey into False: retries must not swallow or change that."""
    from service.client import NotFoundError

    missing = NotFoundError("gone", status=404, code="NoSuchKey")
    driver = ScriptedDriver(failing(TransportError("reset"), missing), retry=POLICY)
    assert driver.run(objects.delete_object("b", "k")) is False
    assert len(driver.calls) == 2


def test_retry_policy_rejects_negative_settings() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(retries=-1)
    with pytest.raises(ValueError):
        RetryPolicy(backoff=-0.1)
