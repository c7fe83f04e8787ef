"""Fixtures of the client's end-to-end tests: ``client`` is parametrized over
``ServiceClient`` and ``AsyncServiceClient`` (seen through ``dualclient.blocking_view``), so
one test body checks that both flavours behave the same; ``bucket`` is a fresh bucket of it.
A module that needs other client settings (``test_client_upkeep``: no timeout, for event
streams) defines its own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import cast

import pytest

from service.client import AsyncServiceClient, BucketClient, NotFoundError, ServiceClient
from tests.client.dualclient import LoopThread, blocking_view
from tests.serverproc import ServerProcess


@pytest.fixture(params=["sync", "async"])
def client(request: pytest.FixtureRequest, server: ServerProcess) -> Iterator[ServiceClient]:
    if request.param == "sync":
        with ServiceClient(server.connection_string) as sync_client:
            yield sync_client
        return
    loop = LoopThread()
    view = blocking_view(lambda: AsyncServiceClient(server.connection_string), loop)
    try:
        yield cast(ServiceClient, view)
    finally:
        view.close()
        loop.stop()


@pytest.fixture
def bucket(client: ServiceClient, bucket_name: str) -> Iterator[BucketClient]:
    client.buckets.create(bucket_name)
    handle = client.bucket(bucket_name)
    yield handle
    with contextlib.suppress(NotFoundError):
        handle.delete_bucket(force=True)
