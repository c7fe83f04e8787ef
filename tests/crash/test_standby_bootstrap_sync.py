"""A bootstrap's payloads are made durable by syncs that run while later batches are fetched
and one last sync before its commit point (``service.replication.bootstrap._Writeback``). A
sync that fails leaves nothing it was to cover in place as if durable: those files are
removed, the bootstrap fails, and its retry copies them again. In-process, on the crash
matrix's simulated disk, whose ``syncfs`` is made to fail once with EIO."""

from __future__ import annotations

import asyncio
import errno
import logging
from typing import Any

import pytest

from service.replication.committer import StandbyCommitter
from tests.crash.checkkit import Verdict
from tests.crash.standbykit import StandbyMachine, check_payloads
from tests.crash.standbymatrix import KINDS


def test_a_failed_sync_of_a_bootstrap_is_copied_again_by_its_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> tuple[int, int, list[str]]:
        context: dict[str, Any] = {"durability": "strict"}
        standby: StandbyMachine = await KINDS["standby_bootstrap"].setup(context)
        standby.fs.fail_at(0, errno.EIO, operations=["syncfs"])
        engine = await standby.boot()
        try:
            committer = standby.journal
            assert isinstance(committer, StandbyCommitter)
            verdict = Verdict()
            await check_payloads(standby, verdict)
            stored = len(list(engine.store.list_payload_ids()))
            return committer.bootstrapped_payloads, stored, verdict.problems
        finally:
            await standby.power_cut()

    with caplog.at_level(logging.ERROR, logger="service.replication"):
        copied, stored, problems = asyncio.run(main())
    assert any("syncing the copied payloads failed" in r.getMessage() for r in caplog.records)
    assert problems == []
    assert stored > 0
    assert copied == stored  # the retry copied again every file the failed sync covered
