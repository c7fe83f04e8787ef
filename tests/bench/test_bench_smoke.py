"""Smoke tests of the bench code: tiny sizes, a second of load, assertions on shape only.

Speed is never asserted here (benchmarks measure speed, tests do not); these prove that the
bench still runs against the current server and produces well-formed rows, so a change to
the server or the benches cannot silently break ``make bench``.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from bench import SMOKE, compare, file_windows
from bench.__main__ import markdown_table, parse_args
from bench.anchors import NaiveServer
from bench.audit_bench import run as run_audit
from bench.index_bench import run as run_index
from bench.loadgen import LoadSpec, run_load, wrk_available
from bench.memory_bench import peak_rss_mib
from bench.multipart_bench import run as run_multipart
from bench.peer import weed_binary
from bench.scale_bench import MARKER, ScaleOptions
from bench.scale_bench import run as run_scale
from bench.server_bench import run as run_server
from bench.upkeep_bench import run as run_upkeep
from tests.serverproc import free_port

pytestmark = pytest.mark.e2e

ROW_KEYS = {
    "measurement",
    "value",
    "unit",
    "anchor",
    "anchor_value",
    "ratio",
    "target",
    "met",
    "runs",
    "notes",
}


def assert_measured(row: dict[str, object]) -> None:
    assert set(row) == ROW_KEYS
    assert isinstance(row["value"], float) and row["value"] > 0
    assert isinstance(row["anchor_value"], float) and row["anchor_value"] > 0
    assert row["ratio"] == pytest.approx(row["value"] / row["anchor_value"])
    assert "ERRORS" not in str(row["notes"])


def test_small_put_and_get_cases_report_each_figure_beside_its_anchor() -> None:
    rows = run_server(SMOKE, cases=["small_put", "small_get"])

    by_label = {(row["measurement"], row["anchor"]): row for row in rows}
    connections = SMOKE.small_connections
    put_strict = by_label[f"4 KiB PUT, strict, {connections} conns", "naive Tornado PUT, strict"]
    put_balanced = by_label[
        f"4 KiB PUT, balanced, {connections} conns", "naive Tornado PUT, balanced"
    ]
    get_naive = by_label[f"4 KiB GET, {connections} conns", "naive Tornado"]
    for row in (put_strict, put_balanced, get_naive):
        assert_measured(row)
    assert put_strict["unit"] == "objects/s"
    assert get_naive["target"] == ">= 1x"
    assert get_naive["met"] in {"yes", "NO"}
    # The peer store in the same rounds: measured when weed is installed, else said so.
    peer_rows = [row for row in rows if str(row["anchor"]).startswith("SeaweedFS")]
    if weed_binary() is None:
        assert not peer_rows
        assert any("weed not installed" in str(row["notes"]) for row in rows)
    else:
        rates = [row for row in peer_rows if row["target"] == ">= 1x"]
        assert len(rates) == 3  # 4 KiB GET, PUT strict (?fsync=true), PUT balanced
        for row in peer_rows:
            assert_measured(row)


def test_multipart_section_times_the_upload_and_the_complete_step() -> None:
    rows = run_multipart(SMOKE)

    assert [row["unit"] for row in rows] == ["MiB/s", "s"]
    for row in rows:
        assert_measured(row)
        assert row["met"] in {"yes", "NO"}
    assert rows[1]["target"] == "<= 1.5x"


@pytest.mark.parametrize("tool", ["python", "wrk"])
def test_load_generator_sends_unique_puts_ranges_and_counts_errors(
    tool: str, tmp_path: Path
) -> None:
    if tool == "wrk" and not wrk_available():
        pytest.skip("wrk is not installed (make bench installs it)")
    (tmp_path / "small.bin").write_bytes(b"x" * 4096)
    with NaiveServer(str(tmp_path), free_port(), "balanced") as naive:
        spec = LoadSpec(port=naive.port, path="/files/small.bin", connections=2, seconds=0.3)
        put_spec = replace(
            spec, path="/files/put", method="PUT", body_bytes=4096, unique_paths=True
        )
        puts = run_load(put_spec, tool)
        again = run_load(put_spec, tool)  # a second round names new keys, never the first's
        ranged = run_load(replace(spec, range_span=4096, range_length=1024), tool)
        missing = run_load(replace(spec, path="/files/absent"), tool)

    stored = [path for path in tmp_path.iterdir() if path.name.startswith("put-")]
    assert puts.tool == tool
    assert puts.requests > 0 and puts.errors == 0
    assert len(stored) >= puts.requests + again.requests
    assert {path.stat().st_size for path in stored} == {4096}
    assert ranged.requests > 0 and ranged.errors == 0
    assert missing.requests > 0 and missing.errors == missing.requests


def test_rows_render_as_one_markdown_table_with_target_columns() -> None:
    rows = [
        compare("1 GiB PUT", [90.0, 100.0, 110.0], "MiB/s", anchor="raw", anchor_values=[100.0]),
        compare(
            "complete",
            [3.0],
            "s",
            anchor="copy",
            anchor_values=[1.0],
            target=1.5,
            lower_is_better=True,
        ),
    ]

    lines = markdown_table(rows).splitlines()

    assert lines[0].startswith("| measurement | value | unit | anchor |")
    assert "| target | met? |" in lines[0]
    assert len(lines) == 4
    assert "| 1.00x |" in lines[2] and "| 90.00, 100, 110 |" in lines[2]
    assert "| <= 1.5x | NO |" in lines[3]


def test_only_names_sections_and_rejects_unknown_ones() -> None:
    assert parse_args(["--only", "server,memory", "--quick"]).sections == ["server", "memory"]
    with pytest.raises(SystemExit):
        parse_args(["--only", "nonsense"])


def test_file_windows_repeat_the_data_file_and_peak_rss_is_read_from_proc() -> None:
    assert file_windows(0, 20, 8) == [(0, 8), (0, 8), (0, 4)]
    assert peak_rss_mib(os.getpid()) > 1


def test_index_section_sets_every_lmdb_figure_beside_sqlites() -> None:
    rows = run_index(SMOKE)

    names = [str(row["measurement"]).split(",")[0] for row in rows]
    assert names[:5] == [
        "populate rows/s",
        "bytes/object",
        "lookups/s",
        "page prefix+delimiter ms",
        "page delimiter only ms",
    ]
    assert sum(name.startswith("apply rows/s") for name in names) == 3
    for row in rows:
        assert row["LMDB"] > 0 and row["SQLite WAL"] > 0
        assert row["LMDB / SQLite"] == pytest.approx(row["LMDB"] / row["SQLite WAL"])


@pytest.mark.slow
def test_scale_section_sets_the_index_beside_the_in_memory_design() -> None:
    rows = run_scale(SMOKE)

    by_name = {str(row["measurement"]).split(",")[0]: row for row in rows}
    assert 0 < by_name["index bytes per object"]["index"] < 10_000
    for name in ("start after clean stop", "start after SIGKILL", "anonymous RSS", "4 KiB GET"):
        assert by_name[name]["index"] > 0 and by_name[name]["in-memory"] > 0
    pages = [row for row in rows if "-key page at the" in str(row["measurement"])]
    assert len(pages) == 3
    cpu = [row for row in rows if "-key page: server CPU at the" in str(row["measurement"])]
    assert len(cpu) == 3 and all(row["index"] >= 0 for row in cpu)
    for page in pages:
        assert page["index"] > 0 and page["in-memory"] > 0
    for name in ("prefix + delimiter page (a middle directory)", "delimiter-only page (1"):
        assert by_name[name]["index"] > 0 and by_name[name]["in-memory"] > 0
    for name in ("start rebuilding the deleted index", "peak anonymous RSS while rebuilding"):
        assert by_name[name]["index"] > 0 and by_name[name]["in-memory"] is None
    for name in ("start after clean stop", "anonymous RSS"):
        assert by_name[name]["empty data dir"] > 0


def test_scale_section_keeps_a_populated_dir_and_refuses_what_it_cannot_reuse(
    tmp_path: Path,
) -> None:
    kept = tmp_path / "kept"
    rows = run_scale(SMOKE, ScaleOptions(objects=300, keep=kept, populate_only=True))
    assert [row["measurement"] for row in rows] == [
        "populate 300 objects",
        "index bytes per object",
    ]
    assert rows[0]["index"] > 0 and rows[1]["index"] > 0
    assert '"objects": 300' in (kept / MARKER).read_text()
    assert (kept / "data" / "journal").is_dir()
    with pytest.raises(RuntimeError, match="not empty"):
        run_scale(SMOKE, ScaleOptions(objects=300, keep=kept, populate_only=True))
    with pytest.raises(RuntimeError, match="not populated"):
        run_scale(SMOKE, ScaleOptions(reuse=tmp_path))
    assert parse_args(["--only", "scale", "--reuse", "x"]).reuse == "x"
    with pytest.raises(SystemExit):
        parse_args(["--only", "scale", "--keep", "x", "--reuse", "y"])
    with pytest.raises(SystemExit):
        parse_args(["--only", "scale", "--populate-only"])


def test_upkeep_section_reports_delivery_scrub_pace_and_gets_during_a_scrub() -> None:
    rows = run_upkeep(SMOKE)
    assert [row["unit"] for row in rows] == ["events/s", "MB/s", "req/s"]
    for row in rows:
        assert_measured(row)
    delivered = str(rows[0]["notes"]).split(" of ", 1)[0]
    assert int(delivered) > 0, rows[0]["notes"]


@pytest.mark.slow  # servers under load for each row: a minute on 2 cores; `make bench` runs it
def test_audit_section_sets_each_audited_load_beside_its_unaudited_twin() -> None:
    rows = run_audit(SMOKE)

    by_label = {row["measurement"]: row for row in rows}
    connections = SMOKE.small_connections
    put = by_label[f"4 KiB PUT, strict, audit on (default), {connections} conns"]
    get = by_label[f"4 KiB GET, SERVICE_AUDIT_READS=1, {connections} conns"]
    for row in (put, get):
        assert_measured(row)
        assert row["target"] == ">= 0.9x" and row["met"] in {"yes", "NO"}
    assert put["anchor"] == "the same, audit off"
    assert get["anchor"] == "the same, reads not recorded"
    cpu = by_label["CPU per request, 4 KiB GET, SERVICE_AUDIT_READS=1"]
    assert_measured(cpu)
    assert "audit records written" in cpu["notes"]


@pytest.mark.slow  # redis, Celery workers and three packagings: minutes on 2 cores
def test_fleet_section_packages_the_same_videos_three_ways_and_sets_cpu_beside_in_server() -> None:
    from bench import SMOKE
    from bench.fleet_bench import run

    rows = run(SMOKE)
    names = [row["measurement"] for row in rows]
    assert [name.rsplit(", ", 1)[1] for name in names[:3]] == ["embedded", "fleet x1", "fleet x2"]
    assert all(row["value"] > 0 for row in rows)
    cpu = rows[3]
    assert cpu["anchor"] == "in-server" and cpu["anchor_value"] > 0 and cpu["ratio"] > 0
    assert "server CPU per packaged minute" in names[4] and "rate" in names[5]
    hop = rows[6]
    assert "outside the packager" in names[6] and hop["anchor_value"] > 0
    packager = rows[7]
    assert "in the packager" in names[7] and packager["anchor_value"] > 0
    assert "core of its own" in names[8]


@pytest.mark.slow  # servers under load for each row: a minute on 2 cores; `make bench` runs it
def test_replication_section_sets_sync_async_bootstrap_and_restore_beside_their_anchors() -> None:
    from bench.replication_bench import run as run_replication

    rows = run_replication(SMOKE)
    by_label = {row["measurement"]: row for row in rows}
    connections = SMOKE.small_connections
    sync = by_label[f"4 KiB PUT, strict, sync standby, {connections} conns"]
    assert sync["target"] == ">= 0.7x" and sync["met"] in {"yes", "NO"}
    assert sync["anchor"] == "the same, no standby"
    for row in rows:
        label = str(row["measurement"])
        if not label.startswith("promotion time") and label != "lag p99, the same":
            assert_measured(row)
    p99 = by_label["lag p99, the same"]
    assert isinstance(p99["value"], float) and p99["value"] > 0
    assert p99["target"] == "< 1 s" and p99["met"] in {"yes", "NO"}
    assert "probes" in str(p99["notes"]) and not str(p99["notes"]).startswith("0 ")
    [boot] = [row for row in rows if row["measurement"].startswith("bootstrap of a fresh")]
    assert boot["target"] == ">= 0.8x" and "cp -a" in boot["anchor"]
    [restored] = [row for row in rows if row["measurement"].startswith("restore of the archive")]
    assert "cp -a" in restored["anchor"]
    assert rows[-1]["measurement"].startswith("promotion time")
