"""Fuzz target: arbitrary bytes as a journal segment must never crash the reader.

``check_segment_bytes(data)`` puts ``data`` in a simulated journal directory as its first
segment and opens it (without and with ``repair``), then replays every record. It may raise
only the journal's own errors (``JournalError`` and subclasses); anything else (IndexError,
struct.error, a msgpack exception, MemoryError from trusting a length) is a bug. It also
checks what it gets: consecutive sequences from 1 and events that are maps with a "type".

Run with atheris (``make fuzz`` installs it)::

    python fuzz/fuzz_journal_reader.py -max_total_time=60

``tests/journal/test_fuzz_reader.py`` runs the same function on Hypothesis inputs in the
normal test run, so the module must import without atheris.

Thread-safety: each call builds its own simulated file system.
"""

from __future__ import annotations

import logging
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from fsseam.simfs import SimFileSystem  # noqa: E402
from journal import Journal, JournalError, JournalOptions  # noqa: E402
from journal.framing import salvage, scan  # noqa: E402
from journal.segment import segment_name  # noqa: E402

try:
    import atheris
except ImportError:  # the Hypothesis twin of this target runs without it
    atheris = None

DIRECTORY = "/journal"
MAX_RECORD_BYTES = 1 << 16


def check_segment_bytes(data: bytes) -> None:
    """Feed ``data`` to the reader as a segment file; raise only on a reader bug."""
    scan(data, 0, 1, MAX_RECORD_BYTES)
    salvage(data, 0, MAX_RECORD_BYTES)
    for repair in (False, True):
        fs = SimFileSystem()
        fs.write_bytes(f"{DIRECTORY}/{segment_name(1)}", data)
        options = JournalOptions(max_record_bytes=MAX_RECORD_BYTES, repair=repair)
        try:
            journal = Journal.open(DIRECTORY, options, fs)
            expected = 1
            for record in journal.replay():
                assert record.sequence == expected, (record.sequence, expected)
                assert isinstance(record.event, dict) and "type" in record.event
                expected += 1
        except JournalError:
            continue


def test_one_input(data: bytes) -> None:
    """The libFuzzer entry point."""
    check_segment_bytes(data)


def main() -> None:
    if atheris is None:
        sys.exit("atheris is not installed: pip install atheris")
    logging.getLogger("journal").disabled = True  # a torn tail per input is expected noise
    atheris.instrument_all()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
