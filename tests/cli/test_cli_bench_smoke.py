"""The ``cli`` bench section runs and gives well-formed rows (tiny sizes; speed not asserted)."""

from __future__ import annotations

import pytest

from bench import SMOKE
from bench.cli_bench import run

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # runs every CLI case: in make test-slow


def test_cli_section_measures_every_case_beside_its_anchor() -> None:
    rows = run(SMOKE)

    units = ["s", "s", "MiB/s", "MiB/s", "MiB/s", "files/s", "files/s", "s", "MiB"]
    assert [row["unit"] for row in rows] == units
    for row in rows:
        assert isinstance(row["value"], float) and row["value"] > 0
        assert isinstance(row["anchor_value"], float) and row["anchor_value"] > 0
    startup, measured = rows[:2], rows[2:]
    assert all(row["target"] == "" and row["met"] == "" for row in startup)
    assert startup[0]["anchor"] == "python -c pass"
    unbatched = measured.pop(4)  # for honesty, beside the same anchor, with no target
    assert "--no-batch" in unbatched["measurement"] and unbatched["target"] == ""
    assert unbatched["anchor"] == measured[3]["anchor"]
    assert all(row["met"] in {"yes", "NO"} for row in measured)
    assert measured[0]["target"] == ">= 0.9x" and measured[2]["target"] == ">= 0.9x"
    assert "SERVICE_WORKERS=1" in measured[2]["measurement"]
    assert measured[3]["target"] == ">= 3x" and "batch" in measured[3]["measurement"]
    assert measured[4]["target"] == "< 10 s" and measured[5]["target"] == "< 100 MiB"
