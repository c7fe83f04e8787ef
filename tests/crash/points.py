"""Every named crash point in the server's source, found by walking it with ``ast``.

A name counts when it is a string literal passed to ``crashpoints.hit``. The crash tests
compare the points they reached with this list, so a point added to the code without a test
that reaches it fails the suite.

Thread-safety: pure functions over files read once.
"""

from __future__ import annotations

import ast
import pathlib

PROJECT = pathlib.Path(__file__).resolve().parent.parent.parent
SOURCE_TREES = ("journal", "service")
HTTP_TREE = "service/http/"
STANDBY_TREE = "service/replication/"
"""A standby's points: the in-process standby matrix (``test_standby_matrix.py``) cuts the
power at each of them, and ``test_standby_crash.py`` kills a real standby at each."""


def _hits(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "hit"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "crashpoints"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def crash_points_by_file() -> dict[str, set[str]]:
    """Relative path -> the crash point names that file passes."""
    found = {}
    for tree in SOURCE_TREES:
        for path in sorted((PROJECT / tree).rglob("*.py")):
            names = _hits(path)
            if names:
                found[path.relative_to(PROJECT).as_posix()] = names
    return found


def all_crash_points() -> set[str]:
    return set().union(*crash_points_by_file().values())


def http_only_crash_points() -> set[str]:
    """Points in the HTTP layer: reachable only through a real server."""
    by_file = crash_points_by_file()
    http = set().union(*(names for path, names in by_file.items() if path.startswith(HTTP_TREE)))
    elsewhere = set().union(
        *(names for path, names in by_file.items() if not path.startswith(HTTP_TREE))
    )
    return http - elsewhere


def standby_only_crash_points() -> set[str]:
    """Points only a standby passes (its bootstrap and its copies of payloads): both
    standby suites must arm every one of them."""
    by_file = crash_points_by_file()
    return set().union(*(names for path, names in by_file.items() if path.startswith(STANDBY_TREE)))
