"""Exit codes and how a failure is told: one line, ``svc: SUBJECT: Cause``, never a traceback.

Exit codes (documented in docs/cli.md; scripts may rely on them):

====  =====================================================================
0     success
1     any other error (a server error, a local I/O error, a bug)
2     usage: unknown command or flag, bad argument (also the server's 400 for one, e.g.
      InvalidBucketName, InvalidKey, InvalidArgument; not BadDigest: damaged data)
3     not found: no such bucket, key, upload, alias or local file
4     authentication or permission: 401, 403
5     conflict or precondition: 409, 412, 423 (bucket exists or not empty, a locked version)
6     could not reach the server: connection refused, timeout, reset
7     partial: ``cp``/``mirror``/``rm`` finished but some items failed
130   interrupted (Ctrl-C)
141   stdout closed early (``svc cat ... | head``): nothing is printed
====  =====================================================================
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from service.client import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    ObjectLockedError,
    PermissionDeniedError,
    PreconditionFailedError,
    ServiceError,
    TransportError,
)

__all__ = [
    "EXIT_AUTH",
    "EXIT_BROKEN_PIPE",
    "EXIT_CONFLICT",
    "EXIT_CONNECTION",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_PARTIAL",
    "EXIT_USAGE",
    "CliError",
    "about",
    "describe",
    "error_code",
    "exit_code_for",
    "message",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_AUTH = 4
EXIT_CONFLICT = 5
EXIT_CONNECTION = 6
EXIT_PARTIAL = 7
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class CliError(Exception):
    """A failure about ``subject`` (a path, an alias, a flag), told as ``svc: subject: cause``."""

    def __init__(self, subject: str, cause: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(f"{subject}: {cause}" if subject else cause)
        self.subject = subject
        self.cause = cause
        self.exit_code = exit_code


def exit_code_for(error: BaseException) -> int:
    """The exit code for an exception (see the module docstring)."""
    if isinstance(error, CliError):
        return error.exit_code
    if isinstance(error, TransportError):
        return EXIT_CONNECTION
    if isinstance(error, NotFoundError | FileNotFoundError | NotADirectoryError):
        return EXIT_NOT_FOUND
    if isinstance(error, AuthenticationError | PermissionDeniedError | PermissionError):
        return EXIT_AUTH
    if isinstance(error, ConflictError | PreconditionFailedError | ObjectLockedError):
        return EXIT_CONFLICT
    if isinstance(error, FileExistsError):
        return EXIT_CONFLICT
    if isinstance(error, BadRequestError) and error.code != "BadDigest":
        return EXIT_USAGE  # the server refused an argument we passed on (a bucket name, ...)
    return EXIT_ERROR


def describe(error: BaseException) -> str:
    """The cause part of the error line: the contract's code first, then the words."""
    if isinstance(error, CliError):
        return error.cause
    if isinstance(error, ServiceError):
        message = error.message.strip()
        cause = error.__cause__
        if isinstance(error, TransportError) and cause is not None and str(cause):
            message = str(cause)
        return f"{error.code}: {message}" if message and message != error.code else error.code
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def error_code(error: BaseException) -> str:
    """A short machine-readable name for ``--json``: the contract's code where there is one."""
    if isinstance(error, CliError) and isinstance(error.__cause__, ServiceError):
        error = error.__cause__
    if isinstance(error, ServiceError):
        return error.code
    if isinstance(error, CliError):
        head = error.cause.split(":", 1)[0]
        return head if head.isidentifier() else "Error"
    return type(error).__name__


@contextlib.contextmanager
def about(subject: str) -> Iterator[None]:
    """Name ``subject`` in any client or file error raised inside the block."""
    try:
        yield
    except (CliError, BrokenPipeError):
        raise
    except (ServiceError, OSError) as error:
        raise CliError(subject, describe(error), exit_code_for(error)) from error


def message(error: BaseException) -> str:
    """The human part alone (``--json`` carries the code in its own field)."""
    if isinstance(error, CliError) and isinstance(error.__cause__, ServiceError):
        error = error.__cause__
    if isinstance(error, ServiceError) and error.message.strip():
        return error.message.strip()
    return describe(error)
