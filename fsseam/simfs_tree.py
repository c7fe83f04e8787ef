"""The simulated file system's tree: files and directories with their cached and durable
state, and the crash image a power loss leaves of them.

A ``SimFile`` holds its cached bytes, its durable bytes and the changes since its last
fsync; a ``SimDir`` holds its cached entries, its durable entries and the entry changes
since its last fsync_dir. ``crash_tree`` builds, from such a tree, the tree a disk would
hold after losing power now, by ``CrashMode`` (see ``fsseam.simfs`` for the modes).

Pure data and pure functions: no lock, no counting; ``SimFileSystem`` owns both.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

CrashMode = Literal["lose_unsynced", "keep_unsynced", "random_subset", "torn_tail"]
CRASH_MODES: tuple[CrashMode, ...] = (
    "lose_unsynced",
    "keep_unsynced",
    "random_subset",
    "torn_tail",
)

Change = tuple[str, int, bytes]
"""A file change: ("write", offset, bytes) or ("truncate", size, b"")."""


@dataclass(eq=False)
class SimFile:
    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""
    # Changes since the last fsync, in order.
    pending: list[Change] = field(default_factory=list)
    mtime: float = 0.0
    links: int = 0


@dataclass(eq=False)
class SimDir:
    entries: dict[str, SimFile | SimDir] = field(default_factory=dict)
    durable: dict[str, SimFile | SimDir] = field(default_factory=dict)
    # Entry changes since the last fsync_dir, in order: (name, node or None for removal).
    pending: list[tuple[str, SimFile | SimDir | None]] = field(default_factory=list)
    mtime: float = 0.0


def apply_change(content: bytearray, change: Change) -> None:
    """Apply one write or truncate to ``content``; a gap reads as zeros."""
    kind, position, data = change
    if kind == "truncate":
        if position < len(content):
            del content[position:]
        else:
            content.extend(bytes(position - len(content)))
        return
    end = position + len(data)
    if position > len(content):
        content.extend(bytes(position - len(content)))
    content[position:end] = data


def sync_tree(root: SimDir) -> None:
    """Make every file's changes and every directory's entries under ``root`` durable
    (``syncfs``)."""
    stack = [root]
    while stack:
        directory = stack.pop()
        directory.durable = dict(directory.entries)
        directory.pending.clear()
        for node in directory.entries.values():
            if isinstance(node, SimDir):
                stack.append(node)
            elif node.pending:
                content = bytearray(node.durable)
                for change in node.pending:
                    apply_change(content, change)
                node.durable = bytes(content)
                node.pending.clear()


def crash_tree(root: SimDir, mode: CrashMode, seed: int) -> tuple[SimDir, int]:
    """The tree that survives a power loss now, and the bytes its files use."""
    if mode not in CRASH_MODES:
        raise ValueError(f"unknown crash mode {mode!r}")
    files: dict[int, SimFile] = {}
    image = _image_dir(root, mode, random.Random(seed), files)
    return image, sum(len(node.data) for node in files.values())


def _image_dir(
    directory: SimDir, mode: CrashMode, rng: random.Random, files: dict[int, SimFile]
) -> SimDir:
    if mode == "lose_unsynced":
        entries = dict(directory.durable)
    elif mode == "random_subset":
        entries = dict(directory.durable)
        for name, node in directory.pending:
            if rng.random() < 0.5:
                if node is None:
                    entries.pop(name, None)
                else:
                    entries[name] = node
    else:
        entries = dict(directory.entries)
    result = SimDir(mtime=directory.mtime)
    for name in sorted(entries):
        node = entries[name]
        if isinstance(node, SimDir):
            copy: SimFile | SimDir = _image_dir(node, mode, rng, files)
        else:
            if id(node) not in files:
                files[id(node)] = _image_file(node, mode, rng)
            copy = files[id(node)]
            copy.links += 1
        result.entries[name] = copy
        result.durable[name] = copy
    return result


def _image_file(node: SimFile, mode: CrashMode, rng: random.Random) -> SimFile:
    content = bytearray(node.durable)
    changes = node.pending
    if mode == "keep_unsynced":
        for change in changes:
            apply_change(content, change)
    elif mode == "random_subset":
        for change in changes:
            if rng.random() < 0.5:
                apply_change(content, change)
    elif mode == "torn_tail":
        last_write = max(
            (i for i, change in enumerate(changes) if change[0] == "write"), default=-1
        )
        for i, change in enumerate(changes):
            if i == last_write:
                kind, position, data = change
                keep = rng.randrange(len(data)) if len(data) > 1 else 0
                apply_change(content, (kind, position, data[:keep]))
            else:
                apply_change(content, change)
    return SimFile(data=content, durable=bytes(content), mtime=node.mtime)
