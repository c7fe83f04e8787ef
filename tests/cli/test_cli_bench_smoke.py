"""The ``cli`` bench section runs and gives well-formed rows (tiny sizes; speed not asserted)."""

from __future__ import annotations

import pytest

from bench import SMOKE
from bench.cli_bench import run

pytestmark = pytest.mark.e2e


def test_cli_section_measures_every_case_beside_its_anchor() -> None:
    rows = run(SMOKE)

    assert [row["unit"] for row in rows] == ["MiB/s", "MiB/s", "files/s", "s", "MiB"]
    for row in rows:
        assert isinstance(row["value"], float) and row["value"] > 0
        assert isinstance(row["anchor_value"], float) and row["anchor_value"] > 0
        assert row["met"] in {"yes", "NO"}
    assert rows[0]["target"] == ">= 0.9x" and rows[2]["target"] == ">= 3x"
    assert rows[3]["target"] == "< 10 s" and rows[4]["target"] == "< 100 MiB"
