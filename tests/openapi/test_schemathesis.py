"""Schemathesis against a live server, from the server's own OpenAPI document.

Every phase runs (examples, coverage, fuzzing, and stateful chains that follow the
document's links: create a bucket then read, change and delete it; open a multipart
upload, send a part, complete it), every check is on but the exclusions in
``schemathesis.toml``, each naming its reason. The goal the tests hold: no 5xx and no
failed check. The bounded run is part of ``make test``; the long one is ``make test-slow``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.openapi import strun
from tests.serverproc import ServerProcess


# One serving process and several: answers must match the document with either (a field
# only several processes add is a schema violation that one process never shows). The
# three-process runs are in ``make test-slow`` (``make test`` checks three processes'
# answers against the document in tests/openapi/test_process_counts.py).
@pytest.fixture(
    params=["1", pytest.param("3", marks=pytest.mark.slow)], ids=["one-process", "three-processes"]
)
def live_server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path / "data", env_overrides={"SERVICE_WORKERS": request.param})
    server.start()
    yield server
    server.stop()


def check_run(server: ServerProcess, figures: strun.Figures) -> None:
    print(figures.summary())  # the figures, in the test's output
    assert figures.operations >= 50, figures.output[-3000:]
    assert figures.test_cases > 0, figures.output[-3000:]
    assert figures.links_covered > 0, figures.output[-3000:]
    assert figures.failures == [], "\n".join(figures.failures[:20])
    assert figures.errors == [], "\n".join(figures.errors[:5])
    assert figures.exit_code == 0, figures.output[-6000:]
    # The run's own token still works (it never locked itself out, so its requests were
    # real), and the root key, which it never used, too.
    token = {"Authorization": f"Bearer {figures.token}"}
    assert httpx.get(f"{server.api}/buckets", headers=token).status_code == 200
    # The root key, which the run never used, still works: the run broke nothing for good.
    with server.client() as client:
        assert client.get("/buckets").status_code == 200


def test_bounded_run_finds_no_5xx_and_no_schema_violation(
    live_server: ServerProcess, tmp_path: Path
) -> None:
    figures = strun.run(live_server, tmp_path, max_examples=3, max_steps=15, timeout=280)
    check_run(live_server, figures)


@pytest.mark.slow
@pytest.mark.timeout(3300)
def test_long_run_finds_no_5xx_and_no_schema_violation(
    live_server: ServerProcess, tmp_path: Path
) -> None:
    figures = strun.run(live_server, tmp_path, max_examples=200, max_steps=200, timeout=3200)
    check_run(live_server, figures)
