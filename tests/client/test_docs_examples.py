"""docs/client.md: every ```python block runs, in order, against a real server.

The blocks share one namespace, like a reader's session, with ``CONNECTION`` set to the
server's connection string. A static check also makes sure every public operation of the
client has an example on the page.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import service.client

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_blocks() -> list[tuple[int, str]]:
    """(line number, source) of every ```python block."""
    text = DOC.read_text()
    return [
        (text[: match.start()].count("\n") + 1, match.group(1)) for match in BLOCK.finditer(text)
    ]


def test_the_page_has_examples_to_run() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 20
    for line, source in blocks:
        compile(source, f"{DOC.name}:{line}", "exec")


@pytest.mark.parametrize(
    "class_name",
    [
        "ServiceClient",
        "BucketClient",
        "Buckets",
        "Users",
        "AccessKeys",
        "Videos",
        "MultipartUpload",
    ],
)
def test_every_public_operation_has_an_example(class_name: str) -> None:
    code = "\n".join(source for _, source in python_blocks())
    cls = getattr(service.client, class_name)
    operations = [
        name
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, property))
    ]
    missing = [name for name in operations if not re.search(rf"\.{name}\b", code)]
    assert missing == [], f"{class_name} operations without an example: {missing}"


@pytest.mark.e2e
def test_the_examples_run_in_order_against_a_server(server: Any) -> None:
    namespace: dict[str, Any] = {"CONNECTION": server.connection_string, "__name__": "docs"}
    for line, source in python_blocks():
        try:
            exec(compile(source, f"{DOC.name}:{line}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"the example at {DOC.name}:{line} failed: {exc!r}") from exc
