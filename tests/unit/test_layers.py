"""The libraries' layers import one way: ``rules`` (the game), then ``studkit`` (the shell the
services are built on), then ``studclient`` (the SDK), then ``studhistory`` (PostgreSQL, the
archive of record, and the archiver's step), then ``studtools`` (the ``stud`` CLI, replay,
archive, ``make run``, the issuer). A module imports nothing from a layer above its own
and nothing from a service.

Two checks, because each misses what the other sees:

- the source: every ``import`` and ``from ... import`` of every ``libs/<layer>/**/*.py``,
  nested ones (inside a function) included, plus ``importlib.import_module``, ``__import__`` and
  ``runpy.run_module`` calls with a literal name, read from the AST;
- the running code: a fresh interpreter imports every module of the layer and then lists what
  is in ``sys.modules`` (an import the AST cannot see, such as a name built at run time, shows
  up there).

The one exception is ``studkit/auth/__main__.py``: ``python -m studkit.auth`` is the documented
command of the issuer tool, which lives in ``studtools.issuer``. It is a script that no module
imports (``import studkit.auth`` does not run it), so it may import that one module and must
stay a shim that only calls it.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBS = ROOT / "libs"
LAYERS = ("rules", "studkit", "studclient", "studhistory", "studtools")
SERVICES = tuple(sorted(p.name for p in (ROOT / "services").iterdir()
                        if (p / "__init__.py").is_file()))
SHIMS = {"studkit/auth/__main__.py": {"studtools.issuer"}}
"""Files allowed to import from above, and the only modules each may import from there."""
DYNAMIC_IMPORTS = {"import_module", "__import__", "run_module"}


def above(layer: str) -> tuple[str, ...]:
    """The packages a module of ``layer`` must not import."""
    return (*LAYERS[LAYERS.index(layer) + 1:], *SERVICES)


def top(name: str) -> str:
    return name.partition(".")[0]


def imported(path: Path, text: str | None = None) -> Iterator[tuple[int, str]]:
    """(line, module) of every import in the file (or in ``text``, read as that file),
    relative ones made absolute."""
    source = path.read_text(encoding="utf-8") if text is None else text
    tree = ast.parse(source, filename=str(path))
    parts = list(path.relative_to(LIBS).with_suffix("").parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[:len(parts) - node.level]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:  # ``from studkit import x`` may name a module
                yield node.lineno, f"{module}.{alias.name}"
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if name in DYNAMIC_IMPORTS and isinstance(first, ast.Constant) \
                    and isinstance(first.value, str):
                yield node.lineno, first.value


def importable(path: Path) -> bool:
    """Whether the file is a module of its package (every folder up to libs has an
    ``__init__.py``; ``studclient/examples`` holds scripts)."""
    return all((d / "__init__.py").is_file() for d in path.parents
               if d != LIBS and LIBS in d.parents)


def files(layer: str) -> list[Path]:
    found = sorted((LIBS / layer).rglob("*.py"))
    assert found, f"no module in libs/{layer}"
    return found


@pytest.mark.parametrize("layer", LAYERS[:-1])
def test_no_module_imports_a_layer_above_its_own(layer: str) -> None:
    forbidden = above(layer)
    wrong = []
    for path in files(layer):
        relative = str(path.relative_to(LIBS))
        allowed = SHIMS.get(relative, set())
        for line, module in imported(path):
            if top(module) in forbidden and not any(
                    module == a or module.startswith(f"{a}.") for a in allowed):
                wrong.append(f"libs/{relative}:{line} imports {module}")
    assert wrong == [], f"{layer} may not import {', '.join(forbidden)}"


def test_the_check_sees_every_kind_of_import() -> None:
    """The AST walk finds plain, from, nested, relative and dynamic imports (a check that
    found nothing would pass whatever the code did)."""
    text = ("import studclient.bots\n"
            "from studtools import cli\n"
            "def f():\n"
            "    from table import app\n"
            "    importlib.import_module('studtools.archive')\n"
            "from . import tokens\n"
            "from ..mapping import events\n")
    found = {m for _, m in imported(LIBS / "studkit" / "auth" / "example.py", text)}
    assert {"studclient.bots", "studtools", "studtools.cli", "table", "table.app",
            "studtools.archive", "studkit.auth.tokens", "studkit.mapping",
            "studkit.mapping.events"} <= found
    assert {top(m) for m in found} & set(above("studkit")) == {"studclient", "studtools",
                                                               "table"}


def test_the_shim_only_runs_the_issuer() -> None:
    """``studkit/auth/__main__.py`` imports ``sys`` and the issuer's ``main`` and calls it;
    nothing in libs imports the shim."""
    path = LIBS / "studkit" / "auth" / "__main__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = [node for node in tree.body
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    assert [type(node) for node in body] == [ast.Import, ast.ImportFrom, ast.If]
    assert ast.unparse(body[1]) == "from studtools.issuer import main"
    guard = body[2]
    assert isinstance(guard, ast.If) and ast.unparse(guard.test) == "__name__ == '__main__'"
    assert [ast.unparse(node) for node in guard.body] == ["sys.exit(main())"]
    users = [str(p.relative_to(LIBS)) for layer in LAYERS for p in files(layer)
             if any(m.startswith("studkit.auth.__main__") for _, m in imported(p))]
    assert users == []


IMPORT_ALL = """
import json, pkgutil, importlib, sys
layer, forbidden = sys.argv[1], sys.argv[2].split(",")
package = importlib.import_module(layer)
names = [layer] + [m.name for m in pkgutil.walk_packages(package.__path__, layer + ".")
                   if not m.name.endswith(".__main__")]
for name in names:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m.partition(".")[0] in forbidden)
print(json.dumps({"imported": len(names), "loaded": loaded}))
"""


@pytest.mark.parametrize("layer", LAYERS[:-1])
def test_importing_every_module_loads_nothing_above(layer: str) -> None:
    run = subprocess.run([sys.executable, "-c", IMPORT_ALL, layer, ",".join(above(layer))],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["imported"] == len([p for p in files(layer)
                                      if p.name != "__main__.py" and importable(p)])
    assert result["loaded"] == []


# --- the harnesses: ``bench/`` (the figures' scripts) builds on ``campaigns/`` (the runs, their
# bots and measuring harness), never the other way (issue 29: ``campaigns/load.py`` imported
# ``bench.bench_room`` and ``bench.ceilings`` while ``bench/bench_room.py`` imported
# ``campaigns.loadbots``, each needing the other).

HARNESS_BELOW, HARNESS_ABOVE = "campaigns", "bench"


def harness_imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every import of a file under the repository's root (relative ones
    made absolute from its package path)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = parts[:len(parts) - node.level] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield node.lineno, module
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if name in DYNAMIC_IMPORTS and isinstance(first, ast.Constant) \
                    and isinstance(first.value, str):
                yield node.lineno, first.value
        elif isinstance(node, ast.Constant) and node.value in (
                f"{HARNESS_ABOVE}.{p.stem}" for p in (ROOT / HARNESS_ABOVE).glob("*.py")):
            yield node.lineno, str(node.value)  # ``python -m bench.x`` started as a process


def test_campaigns_import_nothing_from_bench() -> None:
    wrong = [f"{p.relative_to(ROOT)}:{line} imports {module}"
             for p in sorted((ROOT / HARNESS_BELOW).rglob("*.py"))
             for line, module in harness_imports(p) if top(module) == HARNESS_ABOVE]
    assert wrong == [], f"{HARNESS_BELOW} may not import {HARNESS_ABOVE} (bench imports it)"


def test_bench_is_the_harness_above() -> None:
    """The direction is the one the check enforces: bench's scripts do use campaigns (were
    the two swapped, the check above would guard the wrong side)."""
    users = {str(p.relative_to(ROOT)) for p in (ROOT / HARNESS_ABOVE).rglob("*.py")
             if any(top(m) == HARNESS_BELOW for _, m in harness_imports(p))}
    assert users


def test_importing_every_campaign_loads_no_bench_module() -> None:
    run = subprocess.run([sys.executable, "-c", IMPORT_ALL, HARNESS_BELOW, HARNESS_ABOVE],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["imported"] >= len(list((ROOT / HARNESS_BELOW).glob("*.py")))
    assert result["loaded"] == []
