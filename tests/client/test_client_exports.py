"""The public surface of ``service.client``: what ``__all__`` promises, and the boundaries."""

from __future__ import annotations

import ast
import doctest
import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import service.client
from service.client import ServiceError

CLIENT_DIR = Path(service.client.__file__).parent
PRIVATE_MODULES = sorted(
    info.name for info in pkgutil.iter_modules([str(CLIENT_DIR)]) if info.name.startswith("_")
)

CONTRACT_NAMES = {
    "ServiceClient",
    "AsyncServiceClient",
    "ByteRange",
    "ServiceError",
    "NotFoundError",
    "AuthenticationError",
    "PermissionDeniedError",
    "ConflictError",
    "PreconditionFailedError",
    "QuotaExceededError",
    "InvalidRangeError",
    "BadRequestError",
    "ServiceUnavailableError",
    "IntegrityError",
    "TransportError",
    "Bucket",
    "Object",
    "Session",
    "Part",
    "User",
    "AccessKey",
    "Job",
    "Share",
    "PresignedUrl",
    "OptimizedImage",
    "ListPage",
}


def test_all_lists_exactly_the_public_names_of_the_package() -> None:
    # dir(): the asyncio names are imported on first use (the package's ``__getattr__``).
    public = {name for name in dir(service.client) if not name.startswith("_")}
    public -= {"annotations"}
    assert set(service.client.__all__) == public
    assert len(service.client.__all__) == len(set(service.client.__all__))


def test_every_name_the_issue_and_contract_promise_is_exported() -> None:
    assert set(service.client.__all__) >= CONTRACT_NAMES
    from service.client import AsyncServiceClient, ByteRange, ServiceClient

    assert inspect.isclass(ServiceClient) and inspect.isclass(AsyncServiceClient)
    assert ByteRange(0, 9).header == "bytes=0-9"


def test_every_exported_name_is_documented() -> None:
    undocumented = [
        name
        for name in service.client.__all__
        if name != "UNSET" and not inspect.getdoc(getattr(service.client, name))
    ]
    assert undocumented == []


def test_a_synchronous_program_never_imports_asyncio() -> None:
    """The asyncio flavour loads on first use: ``svc`` and other sync users skip asyncio."""
    code = (
        "import sys, service.client\n"
        "client = service.client.ServiceClient('http://bk_a:sk_b@127.0.0.1:9')\n"
        "assert 'asyncio' not in sys.modules, 'asyncio was imported'\n"
        "assert service.client.AsyncServiceClient.__name__ == 'AsyncServiceClient'\n"
        "assert 'asyncio' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_exception_belongs_to_the_one_tree() -> None:
    errors = [
        getattr(service.client, name)
        for name in service.client.__all__
        if name.endswith("Error") and inspect.isclass(getattr(service.client, name))
    ]
    assert len(errors) >= 20
    assert all(issubclass(error, ServiceError) for error in errors)


def test_the_exception_tree_docstring_names_every_exception() -> None:
    from service.client import _exceptions

    doc = _exceptions.__doc__ or ""
    classes = [name for name in _exceptions.__all__ if name.endswith("Error")]
    assert len(classes) >= 20
    for name in classes:
        assert f" {name} " in doc, name


@pytest.mark.parametrize("module_name", PRIVATE_MODULES)
def test_each_private_module_declares_its_exports_and_purpose(module_name: str) -> None:
    module = importlib.import_module(f"service.client.{module_name}")
    assert module.__doc__ and len(module.__doc__.strip()) > 40
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{module_name} has no __all__"
    for name in exported:
        assert hasattr(module, name), f"{module_name}.__all__ names missing {name}"


@pytest.mark.parametrize("module_name", PRIVATE_MODULES)
def test_the_client_imports_nothing_of_the_server(module_name: str) -> None:
    """Client and server share only wire constants (``service.client._wire``)."""
    tree = ast.parse((CLIENT_DIR / f"{module_name}.py").read_text())
    imported: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.append(node.module)
        elif isinstance(node, ast.Import):
            imported.extend(alias.name for alias in node.names)
    ours = [name for name in imported if name.split(".")[0] in ("service", "journal")]
    allowed = ("service.client", "service.common.wire")
    assert all(name.startswith(allowed) for name in ours), ours


def test_the_wire_module_is_pure_constants() -> None:
    """``service.common.wire`` (shared with the server) holds constants only; ``_wire`` only
    re-exports it."""
    shared = ast.parse((CLIENT_DIR.parent / "common" / "wire.py").read_text())
    imports = [node for node in ast.walk(shared) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert {getattr(node, "module", None) for node in imports} <= {"__future__", "typing"}
    assert not [node for node in shared.body if isinstance(node, ast.FunctionDef | ast.ClassDef)]
    tree = ast.parse((CLIENT_DIR / "_wire.py").read_text())
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert {getattr(node, "module", None) for node in imports} <= {
        "__future__",
        "service.common.wire",
    }
    assert not [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)]


def test_importing_the_client_loads_nothing_of_the_server_but_the_wire_constants() -> None:
    code = (
        "import sys, service.client; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('service', 'journal')))"
    )
    repo = CLIENT_DIR.parent.parent
    command = [sys.executable, "-c", code]
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=repo).stdout
    loaded = ast.literal_eval(out.strip())
    assert "service.common.wire" in loaded
    assert [m for m in loaded if m not in ("service", "service.common", "service.common.wire")] == [
        m for m in loaded if m.startswith("service.client")
    ]


@pytest.mark.parametrize("module_name", PRIVATE_MODULES)
def test_docstring_examples_of_pure_helpers_hold(module_name: str) -> None:
    module = importlib.import_module(f"service.client.{module_name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_sync_and_async_clients_offer_the_same_operations() -> None:
    pairs = [
        ("ServiceClient", "AsyncServiceClient"),
        ("BucketClient", "AsyncBucketClient"),
        ("Buckets", "AsyncBuckets"),
        ("Users", "AsyncUsers"),
        ("AccessKeys", "AsyncAccessKeys"),
        ("Videos", "AsyncVideos"),
        ("MultipartUpload", "AsyncMultipartUpload"),
    ]
    for sync_name, async_name in pairs:
        sync_cls, async_cls = (
            getattr(service.client, sync_name),
            getattr(service.client, async_name),
        )
        sync_ops = {n for n in dir(sync_cls) if not n.startswith("_")}
        async_ops = {n for n in dir(async_cls) if not n.startswith("_")} - {"aclose"}
        assert sync_ops == async_ops, (sync_name, sync_ops ^ async_ops)
        for name in sync_ops:
            sync_attr, async_attr = getattr(sync_cls, name), getattr(async_cls, name)
            if inspect.isfunction(sync_attr):
                assert _parameters(sync_attr) == _parameters(async_attr), name


def _parameters(function: object) -> list[tuple[str, object, object]]:
    signature = inspect.signature(function)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize("module_name", ["_client", "_async_client"])
def test_client_classes_only_delegate_to_the_shared_flows(module_name: str) -> None:
    """Requests are built and answers parsed once, in the flows: the two client modules hold
    no paths, no httpx and no JSON handling of their own."""
    source = (CLIENT_DIR / f"{module_name}.py").read_text()
    tree = ast.parse(source)
    assert "/api" not in source and "httpx" not in source and "json" not in source
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = [n for n in node.body if not _is_docstring(n)]
            assert len(body) <= 7, f"{module_name}.{node.name} does more than delegate"


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def test_names_shared_between_private_modules_are_declared_in_all() -> None:
    """A private module's ``__all__`` is its contract with the rest of the package."""
    undeclared = []
    for module_name in PRIVATE_MODULES:
        tree = ast.parse((CLIENT_DIR / f"{module_name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "service.client._"
            ):
                source = importlib.import_module(node.module or "")
                declared = set(getattr(source, "__all__", ()))
                undeclared += [
                    f"{module_name} uses {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name not in declared
                ]
    assert undeclared == []
