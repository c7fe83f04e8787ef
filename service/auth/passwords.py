"""User passwords: the policy check, and Argon2id hashing run off the event loop.

Hashes are Argon2id in the PHC string format with argon2-cffi's recommended parameters
(RFC 9106 "low memory" profile: 64 MiB, 3 passes, 4 lanes; ~0.1 s per call). That cost is
the point, it makes an offline guess expensive, and also the reason every call goes to an
executor: on the event loop thread it would stall every other request for that long.

``verify_password`` answers False (never raises) for a wrong password and for a stored
value that is not a hash at all, and with ``password_hash=None`` spends the same time
against a dummy hash, so a login for an unknown username costs what a wrong password costs
and the response time does not reveal which usernames exist.

Thread-safety: ``PasswordHasher`` is immutable; everything here may run on any thread.
"""

from __future__ import annotations

import asyncio
import secrets
from concurrent.futures import Executor
from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import VerificationError

MIN_PASSWORD_CHARS = 8
MAX_PASSWORD_CHARS = 1024
"""Bounds the work one login can demand; long passphrases still fit."""

DEFAULT_HASHER = PasswordHasher()
"""argon2-cffi's recommended Argon2id parameters; tests may pass a cheaper hasher."""


def validate_password(password: str) -> str | None:
    """Why ``password`` is not acceptable as a new password, or None.

    >>> validate_password("correct horse") is None
    True
    >>> validate_password("short")
    'password must be 8 to 1024 characters'
    """
    if not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
        return f"password must be {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters"
    if password.isspace():
        return "password must not be only whitespace"
    if not _is_encodable(password):
        return "password must be valid Unicode text"
    return None


async def hash_password(
    password: str, executor: Executor | None, *, hasher: PasswordHasher = DEFAULT_HASHER
) -> str:
    """The Argon2id hash (PHC string, salt included) of ``password``, computed on ``executor``."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, hasher.hash, password)


async def verify_password(
    password_hash: str | None,
    password: str,
    executor: Executor | None,
    *,
    hasher: PasswordHasher = DEFAULT_HASHER,
) -> bool:
    """Whether ``password`` matches ``password_hash``; None means "no such user": always False.

    Runs on ``executor``. The parameters are read from the hash itself, so hashes made with
    older parameters keep verifying (see ``needs_rehash``).
    """
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, _verify_blocking, hasher, password_hash, password)


def needs_rehash(password_hash: str, *, hasher: PasswordHasher = DEFAULT_HASHER) -> bool:
    """Whether the hash was made with other parameters than ``hasher``'s (cheap, no hashing).

    After a successful login the caller may store a fresh hash of the password it now knows.
    """
    try:
        return bool(hasher.check_needs_rehash(password_hash))
    except ValueError:
        # InvalidHashError or undecodable text: whatever it is, it should be replaced.
        return True


def _is_encodable(text: str) -> bool:
    """False for strings with lone surrogates, which JSON can carry but UTF-8 cannot."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _verify_blocking(hasher: PasswordHasher, password_hash: str | None, password: str) -> bool:
    if password_hash is None:
        _verify_quietly(hasher, _dummy_hash(hasher), password)
        return False
    return _verify_quietly(hasher, password_hash, password)


def _verify_quietly(hasher: PasswordHasher, password_hash: str, password: str) -> bool:
    try:
        return bool(hasher.verify(password_hash, password))
    except (VerificationError, ValueError):
        # ValueError: InvalidHashError, or text that cannot be encoded (lone surrogates).
        return False


@cache
def _dummy_hash(hasher: PasswordHasher) -> str:
    """A hash with ``hasher``'s parameters of a password nobody knows (made once per hasher)."""
    return str(hasher.hash(secrets.token_urlsafe(16)))
