"""Fault injection for the simulated file system: which operation crashes or fails.

Every counted operation of ``SimFileSystem`` passes through ``FaultInjector.operation``,
which numbers it, traces it, and fires the first armed ``Fault`` that matches it. Kept apart
from the file tree so the rules of a fault (when it fires, once or persistently, performed
or not) read in one place.

Thread-safety: none of its own; ``SimFileSystem`` calls it under its lock.
"""

from __future__ import annotations

import errno
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

FaultKind = Literal["crash", "eio", "enospc"]

OPERATIONS = frozenset(
    {
        "create",
        "open_append",
        "open_read",
        "write",
        "fsync",
        "truncate",
        "read",
        "rename",
        "unlink",
        "link",
        "mkdir",
        "rmdir",
        "listdir",
        "stat",
        "exists",
        "fsync_dir",
        "syncfs",
        "copy_range",
        "disk_usage",
    }
)
"""The counted operation names (handle ``close``, ``seek``, ``tell`` and ``size`` are free)."""
_PERFORMABLE = frozenset({"fsync", "fsync_dir", "syncfs"})


class SimulatedCrash(Exception):
    """The simulated machine lost power; every later operation raises this too."""


@dataclass(frozen=True)
class Fault:
    """Make the first matching operation at or after count ``at`` crash or fail.

    ``operations`` limits the fault to those operation names (see ``OPERATIONS``); ``paths``
    to operations whose path starts with one of the prefixes. A ``persistent`` failure keeps
    firing on every later matching operation; a crash is always permanent. A ``performed``
    failure (only for ``fsync``, ``fsync_dir`` and ``syncfs``) makes the operation durable first.
    """

    at: int
    kind: FaultKind
    persistent: bool = False
    operations: frozenset[str] | None = None
    paths: tuple[str, ...] | None = None
    performed: bool = False

    def __post_init__(self) -> None:
        if self.performed and (
            self.kind == "crash" or self.operations is None or not self.operations <= _PERFORMABLE
        ):
            raise ValueError("only fsync, fsync_dir and syncfs failures can be performed")

    def matches(self, index: int, operation: str, path: str) -> bool:
        return (
            index >= self.at
            and (self.operations is None or operation in self.operations)
            and (self.paths is None or path.startswith(self.paths))
        )


def operation_names(operations: Iterable[str] | None) -> frozenset[str] | None:
    """``operations`` as a frozenset, checked against ``OPERATIONS`` (None stays None)."""
    if operations is None:
        return None
    names = frozenset(operations)
    unknown = names - OPERATIONS
    if unknown:
        raise ValueError(f"unknown operations {sorted(unknown)}")
    return names


def fault_for_error(
    at: int, error: int, *, persistent: bool, operations: Iterable[str] | None
) -> Fault:
    """The ``Fault`` that fails with ``OSError(error)``: only EIO and ENOSPC are simulated."""
    if error not in (errno.EIO, errno.ENOSPC):
        raise ValueError("only EIO and ENOSPC are simulated")
    kind: FaultKind = "eio" if error == errno.EIO else "enospc"
    return Fault(at, kind, persistent=persistent, operations=operation_names(operations))


class FaultInjector:
    """Counts operations and fires the armed faults; ``crashed`` once power is lost."""

    def __init__(self, trace: bool) -> None:
        self.operations = 0
        """Operations performed (or attempted) so far; the next one has this index."""
        self.trace: list[tuple[int, str, str]] | None = [] if trace else None
        """With ``trace=True``: (index, operation, path) of every counted operation."""
        self.counts: Counter[str] = Counter()
        """Operations by name."""
        self.crashed = False
        self.faults: list[Fault] = []

    def operation(self, name: str, path: str = "") -> OSError | None:
        """Count one operation and fire any fault armed for it.

        Returns the error of a ``performed`` fault, which the caller raises after doing the
        operation (only ``fsync`` and ``fsync_dir`` can get one).
        """
        index = self.operations
        self.operations += 1
        self.counts[name] += 1
        if self.trace is not None:
            self.trace.append((index, name, path))
        if self.crashed:
            raise SimulatedCrash(f"{name} {path} after the crash")
        for fault in self.faults:
            if fault.matches(index, name, path):
                if fault.kind == "crash":
                    self.crashed = True
                    raise SimulatedCrash(f"crash at operation {index} ({name} {path})")
                if not fault.persistent:
                    self.faults.remove(fault)
                code = errno.EIO if fault.kind == "eio" else errno.ENOSPC
                error = OSError(code, os.strerror(code), path)
                if fault.performed:
                    return error
                raise error
        return None
