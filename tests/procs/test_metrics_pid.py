"""The process id prometheus-client's multiprocess files are named by is kept, not asked
for at every metric update (a system call), and a fork renews it."""

from __future__ import annotations

import os

from service.procs.shared_metrics import process_identifier


def test_the_kept_id_is_this_process_and_a_forked_child_gets_its_own() -> None:
    assert process_identifier() == os.getpid()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child reports what it sees and leaves at once
        os.write(write, f"{process_identifier()} {os.getpid()}".encode())
        os._exit(0)
    os.close(write)
    seen, actual = os.read(read, 64).decode().split()
    os.close(read)
    os.waitpid(child, 0)
    assert int(seen) == int(actual) == child
    assert process_identifier() == os.getpid() != child
