"""The sync and async drivers: parallel sub-flows, blocking work, and the network boundary."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from service.client import AsyncServiceClient, ConnectionFailedError, ServiceClient
from service.client._flow import Flow, blocking, parallel

DriverRun = Callable[[Flow[object]], object]


def closed_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Gauge:
    """Counts sub-flows in flight (thread-safe) and remembers the highest count."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.produced = 0

    def work(self, value: int, fail: bool = False) -> int:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(0.02)
        with self.lock:
            self.now -= 1
        if fail:
            raise RuntimeError(f"part {value} failed")
        return value * 10

    def flows(self, count: int, fail_at: int | None = None) -> Iterator[Flow[int]]:
        for value in range(count):
            with self.lock:
                self.produced += 1
            yield blocking(lambda v=value: self.work(v, v == fail_at))


def run_sync(flow: Flow[object]) -> object:
    with ServiceClient(base_url="http://127.0.0.1:1") as client:
        return client._driver.run(flow)


def run_async(flow: Flow[object]) -> object:
    async def go() -> object:
        async with AsyncServiceClient(base_url="http://127.0.0.1:1") as client:
            return await client._driver.run(flow)

    return asyncio.run(go())


DRIVERS = [pytest.param(run_sync, id="sync"), pytest.param(run_async, id="async")]


@pytest.mark.parametrize("run", DRIVERS)
def test_parallel_keeps_order_and_the_in_flight_limit(run: DriverRun) -> None:
    gauge = Gauge()
    results = run(parallel(gauge.flows(12), limit=3))
    assert results == [value * 10 for value in range(12)]
    assert gauge.peak == 3


@pytest.mark.parametrize("run", DRIVERS)
def test_parallel_takes_a_sub_flow_only_when_a_slot_is_free(run: DriverRun) -> None:
    """A lazy source is never read more than ``limit`` parts ahead of the uploads."""
    gauge = Gauge()
    in_flight_at_production: list[int] = []

    def flows() -> Iterator[Flow[int]]:
        for value in range(10):
            with gauge.lock:
                in_flight_at_production.append(gauge.now)
            yield blocking(lambda v=value: gauge.work(v))

    run(parallel(flows(), limit=2))
    assert len(in_flight_at_production) == 10
    assert max(in_flight_at_production) < 2, "produced while every slot was busy"


@pytest.mark.parametrize("run", DRIVERS)
def test_the_first_failure_stops_production_and_is_raised(run: DriverRun) -> None:
    gauge = Gauge()
    with pytest.raises(RuntimeError, match="part 2 failed"):
        run(parallel(gauge.flows(50, fail_at=2), limit=2))
    assert gauge.produced < 10
    assert gauge.now == 0


@pytest.mark.parametrize("run", DRIVERS)
def test_a_failing_source_is_raised_after_in_flight_work_ends(run: DriverRun) -> None:
    gauge = Gauge()

    def flows() -> Iterator[Flow[int]]:
        yield blocking(lambda: gauge.work(1))
        raise OSError("source broke")

    with pytest.raises(OSError, match="source broke"):
        run(parallel(flows(), limit=2))
    assert gauge.now == 0


def test_blocking_work_of_the_async_driver_runs_off_the_event_loop() -> None:
    loop_threads: list[int] = []

    def where() -> int:
        return threading.get_ident()

    async def go() -> None:
        loop_threads.append(threading.get_ident())
        async with AsyncServiceClient(base_url="http://127.0.0.1:1") as client:
            worker = await client._driver.run(blocking(where))
        assert worker != loop_threads[0]

    asyncio.run(go())


def test_a_refused_connection_is_retried_then_raised_as_connection_failed() -> None:
    port = closed_port()
    with ServiceClient(base_url=f"http://127.0.0.1:{port}", retries=2, backoff=0.01) as client:
        started = time.monotonic()
        with pytest.raises(ConnectionFailedError) as raised:
            client.health()
        assert time.monotonic() - started < 5
    assert raised.value.__cause__ is not None
    assert raised.value.status is None


def test_the_async_client_translates_a_refused_connection_the_same_way() -> None:
    port = closed_port()

    async def go() -> None:
        async with AsyncServiceClient(base_url=f"http://127.0.0.1:{port}", retries=0) as client:
            await client.health()

    with pytest.raises(ConnectionFailedError):
        asyncio.run(go())
