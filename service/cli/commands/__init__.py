"""The commands, one module per kind of thing they act on; ``register`` adds them all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from service.cli.commands import (
    admin,
    alias,
    buckets,
    listing,
    objects,
    share,
    transfer,
    video,
    watch,
)

__all__ = ["register"]

Decorator = Callable[[Any], Any]


def register(group: click.Group, json_option: Decorator) -> None:
    """Add every command to ``group``; each gets ``--json``."""
    for module in (alias, buckets, listing, objects, transfer, share, watch, admin, video):
        for command in module.commands():
            _add_json(command, json_option)
            group.add_command(command)


def _add_json(command: click.Command, json_option: Decorator) -> None:
    json_option(command)
    if isinstance(command, click.Group):
        for child in command.commands.values():
            _add_json(child, json_option)
