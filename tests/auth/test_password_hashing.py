"""Argon2id password hashing off the event loop, and the password policy."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from argon2 import PasswordHasher, profiles
from hypothesis import given, settings
from hypothesis import strategies as st

from service.auth.passwords import (
    DEFAULT_HASHER,
    hash_password,
    needs_rehash,
    validate_password,
    verify_password,
)

CHEAP = PasswordHasher.from_parameters(profiles.CHEAPEST)
"""Test-only: a hasher that costs microseconds, so property tests can hash freely."""


class CountingExecutor(ThreadPoolExecutor):
    """A real thread pool that counts the jobs it was given and the threads that ran them."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.jobs = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.jobs += 1
        return super().submit(fn, *args, **kwargs)


def test_default_hash_is_argon2id_with_recommended_parameters() -> None:
    async def scenario() -> tuple[str, bool, bool]:
        with ThreadPoolExecutor(1) as executor:
            stored = await hash_password("correct horse battery", executor)
            right = await verify_password(stored, "correct horse battery", executor)
            wrong = await verify_password(stored, "correct horse battery!", executor)
            return stored, right, wrong

    stored, right, wrong = asyncio.run(scenario())
    assert stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    assert (right, wrong) == (True, False)
    assert not needs_rehash(stored)
    assert (DEFAULT_HASHER.time_cost, DEFAULT_HASHER.memory_cost) == (3, 65536)


def test_hashing_and_verifying_run_on_the_given_executor() -> None:
    executor = CountingExecutor()

    async def scenario() -> None:
        stored = await hash_password("password-1", executor, hasher=CHEAP)
        assert await verify_password(stored, "password-1", executor, hasher=CHEAP)
        assert not await verify_password(None, "password-1", executor, hasher=CHEAP)

    with executor:
        asyncio.run(scenario())
    assert executor.jobs == 3


def test_same_password_hashes_differently_each_time() -> None:
    async def scenario() -> tuple[str, str]:
        return (
            await hash_password("same password", None, hasher=CHEAP),
            await hash_password("same password", None, hasher=CHEAP),
        )

    first, second = asyncio.run(scenario())
    assert first != second


@pytest.mark.parametrize(
    "stored",
    ["", "not a hash", "$argon2id$v=19$m=65536,t=3,p=4$xx$yy", "é\x00", "$2b$12$abcdefghijk"],
)
def test_verify_answers_false_for_a_stored_value_that_is_not_a_hash(stored: str) -> None:
    assert asyncio.run(verify_password(stored, "whatever password", None, hasher=CHEAP)) is False


def test_unknown_user_verification_is_false_and_costs_a_real_verification() -> None:
    executor = CountingExecutor()
    with executor:
        result = asyncio.run(verify_password(None, "guess", executor, hasher=CHEAP))
    assert result is False
    assert executor.jobs == 1


@settings(max_examples=40, deadline=None)
@given(password=st.text(max_size=40), attempt=st.text(max_size=40), same=st.booleans())
def test_verify_matches_only_the_same_password(password: str, attempt: str, same: bool) -> None:
    stored = CHEAP.hash(password)
    attempt = password if same else attempt
    outcome = asyncio.run(verify_password(stored, attempt, None, hasher=CHEAP))
    assert outcome is (attempt == password)


def test_verify_answers_false_for_text_that_cannot_be_encoded() -> None:
    stored = CHEAP.hash("password")
    assert asyncio.run(verify_password(stored, "password\ud800", None, hasher=CHEAP)) is False


def test_hash_made_with_other_parameters_needs_rehash() -> None:
    assert needs_rehash(CHEAP.hash("old parameters"))
    assert needs_rehash("garbage")
    assert not needs_rehash(CHEAP.hash("same parameters"), hasher=CHEAP)


@pytest.mark.parametrize(
    ("password", "acceptable"),
    [
        ("", False),
        ("1234567", False),
        ("12345678", True),
        ("x" * 1024, True),
        ("x" * 1025, False),
        (" " * 8, False),
        ("\t\n \u3000\t\n  ", False),
        ("  pass  word  ", True),
        ("pässwörd", True),
        ("password\ud800", False),
    ],
)
def test_password_policy(password: str, acceptable: bool) -> None:
    assert (validate_password(password) is None) is acceptable


def test_policy_messages_are_human_readable() -> None:
    assert validate_password("short") == "password must be 8 to 1024 characters"
    assert validate_password(" " * 9) == "password must not be only whitespace"
