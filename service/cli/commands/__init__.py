"""The commands, one module per kind of thing they act on, imported only when needed.

``COMMANDS`` names every command and the module that defines it; the group asks ``load`` for
a command when it runs (or when help lists them), so ``svc ls`` never imports what ``cp`` or
``admin`` need: start-up is paid by every invocation. Each command gets ``--json`` as it is
loaded. ``tests/cli/test_cli_units.py`` checks the table against the modules.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import click

__all__ = ["COMMANDS", "load"]

Decorator = Callable[[Any], Any]

#: Command name -> module of ``service.cli.commands`` whose ``commands()`` returns it.
COMMANDS = {
    "admin": "admin",
    "alias": "alias",
    "cat": "objects",
    "cp": "transfer",
    "du": "listing",
    "legal-hold": "lock",
    "find": "listing",
    "ls": "listing",
    "mb": "buckets",
    "mirror": "transfer",
    "mv": "transfer",
    "pipe": "objects",
    "rb": "buckets",
    "retention": "lock",
    "rm": "objects",
    "share": "share",
    "stat": "listing",
    "video": "video",
    "watch": "watch",
}


def load(name: str, json_option: Decorator) -> click.Command | None:
    """The command ``name`` with ``--json`` added (call once per name), or None."""
    module_name = COMMANDS.get(name)
    if module_name is None:
        return None
    module = importlib.import_module(f"{__name__}.{module_name}")
    defined: list[click.Command] = module.commands()
    for command in defined:
        if command.name == name:
            _add_json(command, json_option)
            return command
    return None


def _add_json(command: click.Command, json_option: Decorator) -> None:
    json_option(command)
    if isinstance(command, click.Group):
        for child in command.commands.values():
            _add_json(child, json_option)
