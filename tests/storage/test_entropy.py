"""Names from pooled OS random bytes (``service.storage.entropy``): unique, hex, and never
shared with a forked child (the supervisor forks the serving processes)."""

from __future__ import annotations

import os

from service.storage.entropy import DRAW_BYTES, random_hex


def test_names_are_hex_of_the_asked_length_and_never_repeat() -> None:
    names = [random_hex(14) for _ in range(3 * DRAW_BYTES // 14)]  # several draws
    assert all(len(name) == 28 and int(name, 16) >= 0 for name in names)
    assert len(set(names)) == len(names)
    assert len(random_hex(DRAW_BYTES + 5)) == 2 * (DRAW_BYTES + 5)


def test_a_forked_child_draws_other_bytes_than_its_parent() -> None:
    random_hex(1)  # the parent now holds a pool the child would inherit
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next names and leave at once
        os.close(read_end)
        os.write(write_end, "".join(random_hex(16) for _ in range(4)).encode())
        os._exit(0)
    os.close(write_end)
    parent = "".join(random_hex(16) for _ in range(4))
    with os.fdopen(read_end, "rb") as pipe:
        child = pipe.read().decode()
    os.waitpid(pid, 0)
    assert len(child) == len(parent) == 128
    assert child != parent
