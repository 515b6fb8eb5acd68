"""The protection core stays pure: its modules import no I/O (no Redis, no gRPC, no logging,
no clock, no randomness, no environment), and importing the package loads none of them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import wallet.protection

PACKAGE = Path(wallet.protection.__file__).parent
IMPURE = {"redis", "grpc", "structlog", "time", "random", "secrets", "os", "asyncio",
          "socket", "datetime", "studkit.redis_client", "studkit.grpc_server", "wallet.store",
          "wallet.protection_store", "wallet.protection_app", "wallet.protection_api"}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def impure(name: str) -> bool:
    return any(name == bad or name.startswith(f"{bad}.") for bad in IMPURE)


def test_no_module_of_the_core_imports_io() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 9
    found = {path.name: sorted(n for n in imported(path) if impure(n)) for path in modules}
    assert {name: bad for name, bad in found.items() if bad} == {}


def test_importing_the_core_loads_no_io() -> None:
    code = ("import sys; before = set(sys.modules); import wallet.protection; "
            "print('\\n'.join(sorted(set(sys.modules) - before)))")
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                            text=True, env=None).stdout.split()
    assert "wallet.protection.decide" in loaded
    assert [name for name in loaded if impure(name)] == []
