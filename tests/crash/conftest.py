"""The crash suite's report: how many crash states it checked, and what the soak counted.

Tests attach counts with ``record_property`` (``crash_states``, ``acknowledged_checked``,
``acknowledged_lost``, ``kill_cycles``); this hook adds them up across every test and xdist
worker and prints one line at the end of the run.
"""

from __future__ import annotations

import pytest

COUNTED = ("crash_states", "kill_cycles", "acknowledged_checked", "acknowledged_lost")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    totals = dict.fromkeys(COUNTED, 0)
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "call":
                continue
            for name, value in getattr(report, "user_properties", ()):
                if name in totals:
                    totals[name] += int(value)
    if any(totals.values()):
        terminalreporter.write_line(
            "crash suite: "
            + ", ".join(f"{value} {name.replace('_', ' ')}" for name, value in totals.items())
        )
