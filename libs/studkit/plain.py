"""``dataclasses.asdict`` without its deep copy, for values written often (a table's
snapshot, a wallet command's fingerprint): the same dicts, tuples and lists, each leaf the
value itself rather than a copy of it."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

_NAMES: dict[type, tuple[str, ...]] = {}
"""A dataclass -> its fields' names, as ``dataclasses.fields`` gives them."""


def plain(value: Any) -> Any:
    """What ``dataclasses.asdict`` makes of ``value``: a dataclass instance a dict of its
    fields, a tuple or list one of the same type, a dict a dict, each made so in turn;
    anything else itself, not copied (ints, strings, enums, None and frozen values, which
    ``asdict``'s deep copy leaves equal).

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Seat:
    ...     n: int
    ...     tags: tuple[str, ...]
    >>> plain([Seat(1, ("a",)), {"x": Seat(2, ())}])
    [{'n': 1, 'tags': ('a',)}, {'x': {'n': 2, 'tags': ()}}]
    """
    kind = type(value)
    if kind is list or kind is tuple:
        return kind(plain(item) for item in value)
    if kind is dict:
        return {plain(key): plain(item) for key, item in value.items()}
    if is_dataclass(value) and not isinstance(value, type):
        names = _NAMES.get(kind)
        if names is None:
            names = _NAMES[kind] = tuple(f.name for f in fields(value))
        return {name: plain(getattr(value, name)) for name in names}
    return value
