"""Every file operation of the server goes through fsseam/fs.py.

The check walks the source of ``journal/`` and ``service/`` with ``ast`` and fails on: a
call of the builtin ``open``; any use of ``os`` or ``os.path`` beyond an allow-list of calls
that touch no file (path arithmetic, constants, the environment, the process: ``getpid``,
``cpu_count``, ``kill``, ``_exit``, ``pidfd_open``, ``register_at_fork``); importing a module
whose job is file access (``shutil``, ``pathlib``, ``tempfile``, ``io``, ``fcntl``, ``mmap``).
Aliases (``import os as o``, ``from os import fsync``) are followed.

Exempt, each for a reason:

- ``fsseam/fs.py`` and ``fsseam/simfs.py``: the seam and its simulated twin;
- ``fsseam/flocks.py``: the seam's real cross-process locks (``flock``), which
  ``fsseam/fs.py`` hands out (``FileSystem.open_lock``) and ``simfs`` simulates;
- ``service/http/file_body.py``: ``os.write``/``os.dup``/``os.close`` work on socket
  descriptors only (the payload is read through the seam's file object);
- ``service/media/images.py``: imports ``io`` for ``io.BytesIO`` only, to hand Pillow an
  in-memory buffer to decode from and encode into; it opens no file (a payload arrives as a
  file object the seam opened, and the image cache does its I/O through the seam);
- ``service/procs/supervisor.py``: the parent of the serving processes works on processes
  and descriptors (``fork``, ``waitpid``, the writer's readiness pipe, ``_exit``) before any
  engine exists; the only directories it makes hold the writer's sockets (``run/``), never
  data;
- ``service/procs/shared_metrics.py``: empties and creates ``run/metrics/``, where
  prometheus-client's multiprocess mode keeps its own files (outside the seam by nature):
  metric values, never data;
- ``service/storage/region_locks.py``: OFD locks (``fcntl``) on an upload's file are claims
  between serving processes, never data; it only opens the file to hold a lock, and it is
  used only with several processes, which the simulated disk (one engine) never runs;
- ``service/client/``: the Python client runs in the user's process, reads and writes the
  user's own files (upload sources, download targets), and must not import the server's
  journal.
- ``service/media/worker.py``, ``fleet_task.py``, ``fleet_client.py``: a media fleet worker
  runs on its own machine, in no server process, with no data dir: it works in a scratch
  directory of its own (the downloaded source, the packager's outputs it sends) and reaches
  the server's data through the HTTP API only.
- ``service/cli/``: ``svc``, the command line, likewise runs in the user's process on the
  user's own files (the trees it copies, its config file), on top of the client.
- ``service/archive/targets.py``, ``shipper.py``, ``verify.py``: they touch the archive, not
  the data dir, outside the seam only for scratch files (the file lists ``rclone`` reads, the
  records a prune or a verify fetches from a remote into a temporary directory, the batch of
  payloads a restore fetches from a remote before checking each into the data dir); the data
  dir's files they read go through the seam.
- ``service/archive/restore.py``: ``python -m service restore`` runs with no server, writing a
  new data dir with its own fsyncs and renames before it reports success. Moving it onto the
  seam (and into the crash matrix) is left for the next round (docs/replication.md).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PROJECT = pathlib.Path(__file__).resolve().parent.parent
CHECKED_TREES = ("fsseam", "journal", "service")
EXEMPT = {
    "fsseam/fs.py",
    "fsseam/simfs.py",
    "fsseam/flocks.py",
    "service/http/file_body.py",
    "service/media/images.py",
    "service/procs/supervisor.py",
    "service/procs/shared_metrics.py",
    "service/storage/region_locks.py",
    "service/media/worker.py",
    "service/media/fleet_task.py",
    "service/media/fleet_client.py",
    "service/archive/targets.py",
    "service/archive/shipper.py",
    "service/archive/verify.py",
    "service/archive/restore.py",
}
EXEMPT_TREES = ("service/client/", "service/cli/")

FORBIDDEN_MODULES = {"shutil", "pathlib", "tempfile", "io", "fcntl", "mmap", "glob"}
ALLOWED_OS = {
    "path", "fspath", "fsencode", "fsdecode", "sep", "altsep", "extsep", "pathsep", "linesep",
    "curdir", "pardir", "name", "environ", "getenv", "getpid", "cpu_count", "urandom",
    "strerror", "error", "kill", "_exit", "pidfd_open", "register_at_fork",
}  # fmt: skip
ALLOWED_OS_PATH = {
    "join", "dirname", "basename", "split", "splitext", "normpath", "isabs", "relpath",
    "commonpath", "sep",
}  # fmt: skip


def violations(source: str, filename: str = "<source>") -> list[str]:
    """Direct file-system uses in ``source``, as ``file:line: what`` strings."""
    tree = ast.parse(source, filename)
    os_names: set[str] = set()
    os_path_names: set[str] = set()
    found: list[str] = []

    def report(node: ast.AST, what: str) -> None:
        found.append(f"{filename}:{getattr(node, 'lineno', 0)}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in FORBIDDEN_MODULES:
                    report(node, f"import {alias.name}")
                elif alias.name == "os.path":
                    if alias.asname:
                        os_path_names.add(alias.asname)
                    else:
                        os_names.add("os")
                elif alias.name == "os":
                    os_names.add(alias.asname or "os")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[0] in FORBIDDEN_MODULES:
                report(node, f"from {module} import ...")
            elif module == "os":
                for alias in node.names:
                    if alias.name == "path":
                        os_path_names.add(alias.asname or "path")
                    elif alias.name not in ALLOWED_OS:
                        report(node, f"from os import {alias.name}")
            elif module == "os.path":
                for alias in node.names:
                    if alias.name not in ALLOWED_OS_PATH:
                        report(node, f"from os.path import {alias.name}")
            elif module == "builtins":
                for alias in node.names:
                    if alias.name == "open":
                        report(node, "from builtins import open")

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "open":
                report(node, "open(...)")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            base = node.value.id
            os_call = base in os_names and node.attr not in ALLOWED_OS and not node.attr.isupper()
            path_call = base in os_path_names and node.attr not in ALLOWED_OS_PATH
            if os_call or path_call:
                report(node, f"{base}.{node.attr}")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id in os_names
            and node.value.attr == "path"
            and node.attr not in ALLOWED_OS_PATH
        ):
            report(node, f"{node.value.value.id}.path.{node.attr}")
    return found


def checked_files() -> list[pathlib.Path]:
    files = []
    for tree in CHECKED_TREES:
        for path in sorted((PROJECT / tree).rglob("*.py")):
            relative = path.relative_to(PROJECT).as_posix()
            if relative not in EXEMPT and not relative.startswith(EXEMPT_TREES):
                files.append(path)
    return files


def test_the_checked_trees_hold_source_files() -> None:
    relative = {path.relative_to(PROJECT).as_posix() for path in checked_files()}
    assert {
        "service/storage/payloads.py",
        "service/engine/core.py",
        "service/auth/private_file.py",
        "service/http/object_handlers.py",
    } <= relative
    assert "fsseam/fs.py" not in relative
    assert "service/http/file_body.py" not in relative
    assert not any(path.startswith("service/client/") for path in relative)


@pytest.mark.parametrize(
    "path", checked_files(), ids=lambda path: path.relative_to(PROJECT).as_posix()
)
def test_module_does_its_file_operations_through_the_seam(path: pathlib.Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert violations(source, path.relative_to(PROJECT).as_posix()) == []


@pytest.mark.parametrize(
    "snippet",
    [
        "open('x', 'wb')",
        "import os\nos.fsync(3)",
        "import os\nos.replace('a', 'b')",
        "import os as o\no.unlink('a')",
        "import os\nos.path.exists('a')",
        "import os.path\nos.path.getsize('a')",
        "from os import path as p\np.isdir('a')",
        "from os.path import getmtime",
        "from os import rename",
        "import shutil",
        "from pathlib import Path",
        "import tempfile",
        "from builtins import open",
        "import os\nos.fchmod(3, 0o600)",
        "import os\nos.sendfile(1, 2, 0, 10)",
    ],
)
def test_the_checker_catches_direct_file_operations(snippet: str) -> None:
    assert violations(snippet) != []


def test_the_checker_allows_path_arithmetic_and_constants() -> None:
    source = (
        "import os\n"
        "x = os.path.join('a', os.path.basename('b/c'))\n"
        "y = os.path.dirname(x), os.SEEK_SET, os.sep, os.getpid()\n"
        "z = os.cpu_count(), os.environ.get('HOME'), os.kill(os.getpid(), 0)\n"
    )
    assert violations(source) == []
