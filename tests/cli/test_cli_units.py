"""Pure parts of ``svc``: doctests, the walk order the merge-join relies on, path parsing."""

from __future__ import annotations

import doctest
import os
import subprocess
import sys
from pathlib import Path

import pytest

from service.cli import paths, sizes
from service.cli.config import AliasStore
from service.cli.errors import CliError
from service.cli.transfer import batching, plan, walk
from service.cli.transfer.engine import check_relative
from service.cli.transfer.walk import walk_local


@pytest.mark.parametrize("module", [sizes, plan, paths, batching], ids=lambda m: m.__name__)
def test_doctests(module: object) -> None:
    failures, tried = doctest.testmod(module)  # type: ignore[arg-type]
    assert failures == 0 and (tried > 0 or module is paths)


def test_local_walk_yields_keys_in_code_point_order(tmp_path: Path) -> None:
    names = ["a-b", "a/x", "a/y/z", "a0", "a.txt", "B", "é/1", "日本", "a b/c", "🎉"]
    for name in names:
        path = tmp_path.joinpath(*name.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(name.encode())
    walked = [entry.rel for entry in walk_local(tmp_path)]
    assert walked == sorted(names)
    assert walked == sorted(names, key=lambda n: n.encode())  # UTF-8 byte order is the same


def test_a_symlinked_directory_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_bytes(b"x")
    os.symlink(tmp_path / "real", tmp_path / "loop")
    assert [e.rel for e in walk_local(tmp_path)] == ["real/f"]


def test_merge_pairs_each_key_once() -> None:
    left = [walk.Entry(k, 1) for k in ("a", "b", "d")]
    right = [walk.Entry(k, 1) for k in ("b", "c", "d", "e")]
    pairs = [(s and s.rel, t and t.rel) for s, t in plan.merge(left, right)]
    assert pairs == [("a", None), ("b", "b"), (None, "c"), ("d", "d"), (None, "e")]


@pytest.mark.parametrize("key", ["../x", "a/../../x", "/abs", "a//b", "./a"])
def test_keys_that_would_leave_the_target_directory_are_refused(key: str) -> None:
    with pytest.raises(CliError):
        check_relative(key)


def test_remote_paths_are_those_that_start_with_an_alias(tmp_path: Path) -> None:
    store = AliasStore(tmp_path)
    store._data = {"aliases": {"local": {"url": "http://h", "access_key": "a", "secret_key": "s"}}}
    assert paths.parse_location("local/b/k/x", store) == paths.RemotePath("local", "b", "k/x")
    assert paths.parse_location("local", store) == paths.RemotePath("local")
    assert paths.parse_location("./local/b", store) == Path("./local/b")
    assert paths.parse_location("elsewhere/b", store) == Path("elsewhere/b")


def test_the_command_table_names_every_command_of_every_module() -> None:
    import importlib
    import pkgutil

    import service.cli.commands as package

    defined = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for command in module.commands():
            defined[command.name] = info.name
    assert defined == package.COMMANDS


def test_a_command_imports_only_its_own_module(tmp_path: Path) -> None:
    """Start-up is paid by every run: ``svc alias ls`` must not import cp's or admin's code."""
    code = (
        "import sys\n"
        "from service.cli.main import cli\n"
        "cli.main(args=['alias', 'ls'], prog_name='svc', standalone_mode=False)\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('service.cli.commands.'))\n"
        "assert loaded == ['service.cli.commands.alias'], loaded\n"
        "assert 'rich' not in sys.modules and 'asyncio' not in sys.modules\n"
    )
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("SVC_URL", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
