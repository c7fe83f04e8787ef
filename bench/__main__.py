"""``python -m bench [--only server,memory] [--quick]``: every section, one table each.

Sections run in the order of ``SECTIONS``; each one's table is printed as soon as it is
done, and the whole report is also written to ``bench/results/latest.md``. A section that
fails prints its error in place of its table and the run goes on (exit status 1 at the end),
so one broken bench does not hide the others; each table ends with its duration and the
machine's load average, since other work on the 2 cores is what makes figures drift. A
section module that does not exist (yet) gets a one-row table saying so.

Thread-safety: a script.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import FULL, QUICK, REPO, Profile, Row
from bench.anchors import ensure_tools

SECTIONS: dict[str, tuple[str, str]] = {
    "journal": ("bench.journal_bench", "Journal"),
    "storage": ("bench.storage_bench", "Storage"),
    "server": ("bench.server_bench", "Server (issue 3)"),
    "multipart": ("bench.multipart_bench", "Multipart (issue 5)"),
    "auth": ("bench.auth_bench", "Auth"),
    "memory": ("bench.memory_bench", "Memory"),
    "upkeep": ("bench.upkeep_bench", "Upkeep (issue 17)"),
    "cli": ("bench.cli_bench", "Command line (issue 15)"),
    "media": ("bench.media_bench", "Media memory (issue 14)"),
    "fleet": ("bench.fleet_bench", "Media fleet: packaging on Celery workers (issue 26)"),
    "index": ("bench.index_bench", "Index store: LMDB vs SQLite (issue 12)"),
    "scale": ("bench.scale_bench", "Scale: N objects, the index beside the in-memory design"),
    "audit": ("bench.audit_bench", "Audit log: on beside off (issue 28)"),
    "replication": ("bench.replication_bench", "Replication: a standby, sync and async (issue 25)"),
}
RESULTS = os.path.join(REPO, "bench", "results", "latest.md")
_HEADERS = {"met": "met?", "anchor_value": "anchor value"}
_JOURNAL_TARGETS = {"replay 1,000,000 records": (">= 500,000 records/s", 500_000.0)}


def format_cell(key: str, value: Any) -> str:
    """A table cell: numbers rounded for reading, lists of runs joined, None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(format_cell(key, item) for item in value)
    if isinstance(value, float):
        if key == "ratio":
            return f"{value:.2f}x"
        if not math.isfinite(value):
            return str(value)
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[Row]) -> str:
    """Rows as one markdown table; columns are the rows' keys in first-seen order."""
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    head = "| " + " | ".join(_HEADERS.get(key, key.replace("_", " ")) for key in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = [
        "| " + " | ".join(format_cell(key, row.get(key)) for key in columns) + " |" for row in rows
    ]
    return "\n".join([head, rule, *body])


def journal_targets(rows: list[Row]) -> list[Row]:
    """Add target and met? to the journal bench's rows (its own targets, from its docs)."""
    by_name = {row.get("name"): row for row in rows}
    for name, (target, floor) in _JOURNAL_TARGETS.items():
        if name in by_name:
            row = by_name[name]
            row["target"] = target
            row["met"] = "yes" if row["records_per_second"] >= floor else "NO"
    one = by_name.get("append strict, 1 writers")
    many = by_name.get("append strict, 256 writers")
    if one and many and one["records_per_second"]:
        ratio = many["records_per_second"] / one["records_per_second"]
        rows.append(
            {
                "name": "strict 256 writers / strict 1 writer",
                "ratio": ratio,
                "target": ">= 20x",
                "met": "yes" if ratio >= 20 else "NO",
            }
        )
    return rows


_POST_PROCESS: dict[str, Callable[[list[Row]], list[Row]]] = {"journal": journal_targets}


def run_section(
    name: str,
    profile: Profile,
    *,
    install_tools: bool,
    scale: Any = None,
    workers: list[str | None] | None = None,
) -> list[Row]:
    """Import the section's module lazily and call its ``run``, passing what it accepts."""
    module_name, _ = SECTIONS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        return [{"measurement": name, "notes": f"{module_name} does not exist yet"}]
    run: Callable[..., list[Row]] = module.run
    accepted = inspect.signature(run).parameters
    kwargs: dict[str, Any] = {}
    if "profile" in accepted:
        kwargs["profile"] = profile
    if "install_tools" in accepted:
        kwargs["install_tools"] = install_tools
    if "scale" in accepted and scale is not None:
        kwargs["scale"] = scale
    if "workers" in accepted and workers is not None:
        kwargs["workers"] = workers
    rows = run(**kwargs)
    post = _POST_PROCESS.get(name)
    return post(rows) if post is not None else rows


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections, from: {', '.join(SECTIONS)}",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller sizes, one run each: for development"
    )
    parser.add_argument(
        "--no-install", action="store_true", help="never apt-get install nginx-light and wrk"
    )
    parser.add_argument(
        "--workers",
        help="SERVICE_WORKERS settings of the server section, comma-separated: 'default' "
        "(one process per CPU) and/or numbers (default: default,1)",
    )
    scale = parser.add_argument_group("scale section (docs/benchmarks.md)")
    scale.add_argument(
        "--objects", type=int, help="N objects (default: 1,000,000; --quick 100,000)"
    )
    scale.add_argument("--keep", metavar="DIR", help="populate into DIR (new or empty) and keep it")
    scale.add_argument("--reuse", metavar="DIR", help="measure DIR, populated by --keep before")
    scale.add_argument(
        "--populate-only", action="store_true", help="with --keep: populate, measure nothing"
    )
    scale.add_argument(
        "--skip-rebuild", action="store_true", help="do not measure a start that rebuilds the index"
    )
    args = parser.parse_args(argv)
    if args.keep and args.reuse:
        parser.error("--keep and --reuse exclude each other")
    if args.populate_only and not args.keep:
        parser.error("--populate-only needs --keep")
    args.sections = [name.strip() for name in args.only.split(",") if name.strip()]
    args.worker_settings = None
    if args.workers:
        names = [name.strip() for name in args.workers.split(",") if name.strip()]
        if not names or any(name != "default" and not name.isdigit() for name in names):
            parser.error("--workers takes 'default' and/or numbers, comma-separated")
        args.worker_settings = [None if name == "default" else name for name in names]
    unknown = [name for name in args.sections if name not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    return args


def scale_options(args: argparse.Namespace) -> Any:
    """The scale section's options (None: the section is not run; imported only then)."""
    if "scale" not in args.sections:
        return None
    from bench.scale_bench import ScaleOptions

    return ScaleOptions(
        objects=args.objects,
        keep=Path(args.keep).resolve() if args.keep else None,
        reuse=Path(args.reuse).resolve() if args.reuse else None,
        populate_only=args.populate_only,
        rebuild=not args.skip_rebuild,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    profile = QUICK if args.quick else FULL
    install = not args.no_install
    scale = scale_options(args)
    ensure_tools(install=install)
    started = time.perf_counter()
    report = [f"# Benchmarks ({profile.name} profile, {time.strftime('%Y-%m-%d %H:%M')})", ""]
    failed = False
    for name in args.sections:
        title = SECTIONS[name][1]
        section_started = time.perf_counter()
        load_before = os.getloadavg()[0]
        try:
            rows = run_section(
                name, profile, install_tools=install, scale=scale, workers=args.worker_settings
            )
            table = markdown_table(rows)
        except Exception:
            failed = True
            table = "```\n" + traceback.format_exc() + "```"
        seconds = time.perf_counter() - section_started
        text = (
            f"## {title}\n\n{table}\n\n_{seconds:.0f} s; 1-minute load average "
            f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after (2 cores)_\n"
        )
        print(text, flush=True)
        report.append(text)
    report.append(f"Total: {time.perf_counter() - started:.0f} s")
    print(report[-1])
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as file:
        file.write("\n".join(report) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
