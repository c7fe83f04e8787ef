"""Fuzz target: arbitrary bytes as a batch upload's tar stream must never crash the reader.

``check_tar_bytes(data)`` reads ``data[1:]`` with ``service.ops.tar_reader.TarReader``, fed in
pieces whose size the first byte chooses, skipping every other file member as the batch
does for a refused one, and checks every member as ``service.ops.batch.member_intent``
would. The reader may raise only ``TarFormatError`` (the batch's 400) and the member checks
only ``ApiError`` (that member's refusal); anything else (ValueError from a number,
RecursionError from a chain of headers, MemoryError from trusting a size) is a bug. It also
checks what it gets: a file member's data is exactly its declared size, a refused member
hands out no data, and the number of calls stays within a bound of the input's length (no
loop on a declared size).

Run with atheris (``make fuzz`` installs it)::

    python fuzz/fuzz_batch_reader.py WORKDIR fuzz/corpus/batch_reader -max_total_time=60

(new inputs are written to the first directory; the committed seeds, the attack shapes of
issue 23, are in the second). ``tests/http/test_fuzz_batch_reader.py`` runs the same
function on Hypothesis inputs and on the seeds in the normal test run, so the module must
import without atheris.

Thread-safety: each call builds its own reader.
"""

from __future__ import annotations

import contextlib
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

try:
    import atheris
except ImportError:  # the Hypothesis twin of this target runs without it
    atheris = None

# Only the reader and the member checks are instrumented: ``instrument_all`` would take
# minutes over everything ``service.ops.batch`` imports.
_instrumented = (
    atheris.instrument_imports(include=["service.ops.tar_reader", "service.ops.batch"])
    if atheris is not None
    else contextlib.nullcontext()
)
with _instrumented:
    from service.common.api_errors import ApiError
    from service.ops.batch import BatchLimits, member_intent
    from service.ops.tar_reader import (
        ARCHIVE_END,
        MEMBER_END,
        NEED_DATA,
        Data,
        Kind,
        Member,
        TarFormatError,
        TarReader,
    )

LIMITS = BatchLimits(max_member_bytes=1 << 20, max_members=64)
PIECES = (1, 7, 511, 512, 513, 4096, 1 << 16, 1 << 30)


def check_tar_bytes(data: bytes) -> None:
    """Read ``data[1:]`` as a tar stream; raise only on a reader bug."""
    if not data:
        return
    piece = PIECES[data[0] % len(PIECES)]
    body = data[1:]
    reader = TarReader(max_members=LIMITS.max_members)
    position = calls = 0
    bound = 8 * (len(body) // 512 + len(body) // piece + 4)
    current: Member | None = None
    got = 0
    try:
        while True:
            calls += 1
            assert calls <= bound, (calls, bound)
            event = reader.next_event()
            if event is NEED_DATA:
                if position < len(body):
                    reader.feed(body[position : position + piece])
                    position += piece
                else:
                    reader.end()
            elif isinstance(event, Member):
                current, got = event, 0
                assert event.size >= 0 and isinstance(event.name, str)
                with contextlib.suppress(ApiError):
                    member_intent("bucket", "p/", event, LIMITS)
                if event.kind is Kind.FILE and reader.members % 2:
                    reader.skip()
                    current = None
            elif isinstance(event, Data):
                assert current is not None and current.kind is Kind.FILE, current
                got += len(event.data)
                assert got <= current.size
            elif event is MEMBER_END:
                if current is not None and current.kind is Kind.FILE:
                    assert got == current.size, (current, got)
                current = None
            else:
                assert event is ARCHIVE_END
                return
    except TarFormatError:
        return


def test_one_input(data: bytes) -> None:
    """The libFuzzer entry point."""
    check_tar_bytes(data)


def main() -> None:
    if atheris is None:
        sys.exit("atheris is not installed: pip install atheris")
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
