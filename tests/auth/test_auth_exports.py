"""The package's public API: what ``__all__`` promises exists, and the doctests hold."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import service.auth

MODULES = sorted(info.name for info in pkgutil.iter_modules(service.auth.__path__, "service.auth."))


def test_every_exported_name_exists_and_is_public() -> None:
    for name in service.auth.__all__:
        assert hasattr(service.auth, name), name
        assert not name.startswith("_")
    assert len(set(service.auth.__all__)) == len(service.auth.__all__)


def test_public_names_of_the_package_are_all_exported() -> None:
    public = {
        name
        for name, value in vars(service.auth).items()
        if not name.startswith("_") and not isinstance(value, type(service.auth))
    }
    assert public == set(service.auth.__all__)


@pytest.mark.parametrize("module_name", MODULES)
def test_module_doctests_pass(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__doc__, f"{module_name} needs a module docstring"
    result = doctest.testmod(module)
    assert result.failed == 0
