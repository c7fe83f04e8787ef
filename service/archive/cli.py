"""``python -m service restore ...`` and ``python -m service archive verify ...``.

Both print progress on stderr, a one-line result on stdout, and exit 0 on success; a failure
is one line on stderr (``service: ...``) and exit status 1 (2 for bad arguments), never a
traceback.

Thread-safety: a command-line entry point.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from service.archive.restore import restore
from service.archive.targets import ArchiveError, open_target
from service.archive.verify import verify

COMMANDS = ("restore", "archive")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"service: {message}", file=sys.stderr)
        raise SystemExit(2)


def _time_ms(text: str) -> int:
    """Unix seconds, or an RFC 3339 time (``2026-11-27T20:00:00Z``)."""
    from datetime import datetime

    if text.replace(".", "", 1).isdigit() and text.isascii():
        return int(float(text) * 1000)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither unix seconds nor an RFC 3339 time"
        ) from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} needs a time zone (e.g. Z)")
    return int(moment.timestamp() * 1000)


def _sequence(text: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= 19):
        raise argparse.ArgumentTypeError(f"{text!r} is not a record sequence")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m service", description="Archive tools.")
    commands = parser.add_subparsers(dest="command", required=True)
    restoring = commands.add_parser(
        "restore", help="build a new data dir from an archive, at any archived point"
    )
    restoring.add_argument("--archive", required=True, help="a directory or rclone:REMOTE:PATH")
    restoring.add_argument("--data-dir", required=True, help="the new (empty) data dir")
    point = restoring.add_mutually_exclusive_group()
    point.add_argument("--to-sequence", type=_sequence, help="the state after this record")
    point.add_argument(
        "--to-time", type=_time_ms, help="the state after the last record at or before this time"
    )
    archive = commands.add_parser("archive", help="archive maintenance")
    actions = archive.add_subparsers(dest="action", required=True)
    checking = actions.add_parser("verify", help="check that an archive can be restored")
    checking.add_argument("--archive", required=True, help="a directory or rclone:REMOTE:PATH")
    return parser


def _progress(line: str) -> None:
    print(f"service: {line}", file=sys.stderr, flush=True)


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    try:
        target = open_target(args.archive)
        if args.command == "restore":
            done = restore(
                target,
                args.data_dir,
                to_sequence=args.to_sequence,
                to_time_ms=args.to_time,
                progress=_progress,
            )
            print(
                f"restored record {done.sequence} into {args.data_dir} ({done.payloads} "
                f"payloads); start it with SERVICE_DATA_DIR={args.data_dir} python -m service"
            )
            return 0
        report = verify(target, progress=_progress)
    except (ArchiveError, OSError) as exc:
        print(f"service: {str(exc).splitlines()[0] if str(exc) else exc!r}", file=sys.stderr)
        return 1
    if not report.ok:
        print(f"service: archive verify failed: {report.problem}", file=sys.stderr)
        return 1
    print(
        f"archive ok: records {report.first_sequence}..{report.last_sequence}, "
        f"{report.payloads} payloads verified"
    )
    return 0
