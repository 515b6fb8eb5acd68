"""The table's parts talk through ports, not through each other's internals (DESIGN §5b,
issue 30): read from the source's syntax tree, no module of services/table reaches a private
attribute of anything but itself (``other._x``) or imports another module's private name,
the driver and money see the table through :mod:`table.port` (never the actor), and the
actor imports neither of them."""

from __future__ import annotations

import ast
from pathlib import Path

import table

TABLE = Path(table.__file__).resolve().parent


def private_reaches(source: str) -> list[str]:
    """Every ``x._name`` whose ``x`` is not ``self`` or ``cls``, and every private name
    imported from a ``table`` module, in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("table"):
            found += [f"{node.lineno}: import {a.name}" for a in node.names
                      if a.name.startswith("_")]
    return found


def imported_modules(source: str) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_the_check_finds_a_reach_into_another_part() -> None:
    """The check itself can fail: a reach into money's private set, or a private import, is
    found; the object's own attributes are not."""
    assert private_reaches("driver.money._busy.add(1)") == ["1: driver.money._busy"]
    assert private_reaches("from table.room_state import _Fold") == ["1: import _Fold"]
    assert private_reaches("self._busy.add(1)\ncls._x") == []


def test_no_module_of_the_table_reaches_into_another_ones_private_attributes() -> None:
    """Across services/table, private attributes are reached only through ``self``."""
    modules = sorted(TABLE.glob("*.py"))
    assert len(modules) > 20
    reaches = {path.name: found for path in modules
               if (found := private_reaches(path.read_text()))}
    assert reaches == {}


def test_the_driver_and_money_see_the_table_through_its_port() -> None:
    """The driver and money import the port, not the actor; the actor imports neither."""
    for name in ("driver.py", "money.py"):
        imports = imported_modules((TABLE / name).read_text())
        assert "table.port" in imports and "table.actor" not in imports, name
    actor = imported_modules((TABLE / "actor.py").read_text())
    assert not actor & {"table.driver", "table.money", "table.app"}
