"""The layer rules of docs/architecture.md ("Layers"), read from its table and checked against
every import of every module.

The table lists each package (a room of the house) and the packages of ours it may import,
from the ground up. The rules:

- every module belongs to a package the table names;
- every import from one package into another is one its row allows;
- a row allows only rows above it, so no import runs up a floor and no two packages import
  each other, directly or round a longer circle;
- every import a row allows is made somewhere (the table says what the code does);
- no modules import each other in a circle, inside a package or across (every import
  counts: at the top, in a function, or for type checking only).

Imports of the standard library and of third-party packages are not ours and are not
checked here (``journal`` and ``fsseam`` have their own test for those).
"""

from __future__ import annotations

import ast
import doctest
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOTS = ("fsseam", "journal", "service", "bench")
OURS = frozenset({*ROOTS, "tests"})
_ROW = re.compile(r"^\| `(?P<package>[\w.]+)` \| [^|]* \| (?P<allowed>[^|]*) \|$")


def layer_table(text: str) -> dict[str, list[str]]:
    """The packages of the "Layers" section, in order, each with what it may import.

    >>> layer_table("## Layers\\n| `a` | x | - |\\n| `b` | y | `a` |\\n## Next\\n")
    {'a': [], 'b': ['a']}
    """
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    table: dict[str, list[str]] = {}
    for line in section.splitlines():
        row = _ROW.match(line.strip())
        if row is not None:
            allowed = row["allowed"].strip()
            table[row["package"]] = [] if allowed == "-" else re.findall(r"`([\w.]+)`", allowed)
    return table


def package_of(module: str) -> str | None:
    """The table's package of a dotted module name, or None when it is not ours.

    >>> package_of("service.engine.core"), package_of("service.server"), package_of("service")
    ('service.engine', 'service.server', 'service')
    >>> package_of("journal.framing"), package_of("tests.serverproc"), package_of("tornado.web")
    ('journal', 'tests', None)
    """
    parts = module.split(".")
    if parts[0] not in OURS:
        return None
    if parts[0] != "service" or len(parts) == 1:
        return parts[0]
    return f"service.{parts[1]}"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[str]:
    """Every module name ``path`` imports (absolute; relative ones resolved), wherever the
    import statement stands."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.append(base)
            found.extend(f"{base}.{alias.name}" for alias in node.names)
    return found


def our_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            modules[module_name(path)] = path
    return modules


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """module -> the modules of ours it imports (an imported name that is not a module
    counts as its module). A module importing a package it belongs to (its ``__init__``
    re-exports) is not counted: that is how a package shows its names."""
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        for name in imports_of(path):
            target = name
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + "."):
                graph[module].add(target)
    return graph


def package_edges(modules: Mapping[str, Path]) -> list[tuple[str, str, str]]:
    """(module, its package, a package of ours it imports), for every import."""
    edges = []
    for module, path in modules.items():
        package = package_of(module)
        assert package is not None
        targets = {package_of(resolve(name, modules)) for name in imports_of(path)}
        targets -= {None, package}
        edges += [(module, package, target) for target in sorted(t for t in targets if t)]
    return edges


def resolve(name: str, modules: Mapping[str, Path]) -> str:
    """The module an imported name lives in (``service.__version__``: ``service``); a name
    outside the checked roots (``tests.serverproc``) stays as it is."""
    target = name
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or name


def violations(table: Mapping[str, list[str]], edges: Iterable[tuple[str, str, str]]) -> list[str]:
    """What breaks the table: ``edges`` are (module, its package, the package it imports).

    >>> table = {"low": [], "high": ["low"]}
    >>> violations(table, [("high.a", "high", "low"), ("low.b", "low", "high")])
    ['low.b imports high, which the row of low does not allow']
    """
    problems = []
    for module, package, target in edges:
        if package not in table:
            problems.append(f"{module} is in {package}, which the table does not name")
        elif target != package and target not in table[package]:
            problems.append(f"{module} imports {target}, which the row of {package} does not allow")
    return problems


def rows_above(table: Mapping[str, list[str]]) -> list[str]:
    """Rows that allow a row below them (an arrow up, or a circle between packages); a name
    that is no row (``tests``, which the benches import) stands outside the house.

    >>> rows_above({"low": ["high"], "high": ["low", "tests"]})
    ['low may import high, which is not above it']
    """
    seen: set[str] = set()
    problems = []
    for package, allowed in table.items():
        problems += [
            f"{package} may import {each}, which is not above it"
            for each in allowed
            if each in table and each not in seen
        ]
        seen.add(package)
    return problems


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other round a circle (Tarjan's algorithm).

    >>> circles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def the_table() -> dict[str, list[str]]:
    return layer_table((REPO / "docs" / "architecture.md").read_text())


def test_the_table_lists_every_package_of_ours() -> None:
    table = the_table()
    packages = {package_of(module) for module in our_modules()}
    assert packages - set(table) == set(), "packages missing from docs/architecture.md"
    assert set(table) - packages - {"tests"} == set(), "rows naming no package"


def test_no_row_allows_a_row_below_it() -> None:
    assert rows_above(the_table()) == []


def test_every_import_between_packages_is_one_the_table_allows() -> None:
    assert violations(the_table(), package_edges(our_modules())) == []


def test_every_import_the_table_allows_is_made() -> None:
    made: dict[str, set[str]] = defaultdict(set)
    for _, package, target in package_edges(our_modules()):
        made[package].add(target)
    unused = {
        package: sorted(set(allowed) - made[package])
        for package, allowed in the_table().items()
        if set(allowed) - made[package]
    }
    assert unused == {}, "rows of docs/architecture.md allowing what no module imports"


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert circles(import_graph(our_modules())) == []


def test_an_import_up_a_floor_or_round_a_circle_is_caught(tmp_path: Path) -> None:
    """The checks above would fail if someone added one: a module of ``service.meta``
    importing the engine, and two modules importing each other."""
    table = the_table()
    assert violations(table, [("service.meta.state", "service.meta", "service.engine")]) == [
        "service.meta.state imports service.engine, which the row of service.meta does not allow"
    ]
    assert rows_above({**table, "service.meta": ["service.engine"]}) != []
    graph = import_graph(our_modules())
    graph["service.engine.core"].add("service.engine.journaled")
    assert ["service.engine.core", "service.engine.journaled"] in circles(graph)


def test_the_examples_of_the_checks_hold() -> None:
    failures, tried = doctest.testmod(sys.modules[__name__])
    assert (failures, tried > 0) == (0, True)


def test_each_package_says_what_it_may_import_as_the_table_does() -> None:
    """A package's docstring repeats its row (the newcomer opening ``__init__.py`` reads the
    same rule as the one the table keeps)."""
    for package, allowed in the_table().items():
        init = REPO / package.replace(".", "/") / "__init__.py"
        if package == "service" or not init.exists():
            continue  # the package's face itself, and the single-module packages
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        said = [p for p in doc.split("\n\n") if p.startswith("May import")]
        assert len(said) == 1, f"{init} does not say (once) what it may import"
        assert re.findall(r"``([\w.]+)``", said[0]) == allowed, f"{init} and its row differ"
