"""``studkit.plain.plain`` is ``dataclasses.asdict`` without the deep copy: the same value
for nested dataclasses, tuples, lists, dicts, enums and None, and the leaves not copied."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field

import pytest

from studkit.plain import plain


class Face(enum.Enum):
    UP = "up"


@dataclass(frozen=True)
class Card:
    rank: int
    face: Face = Face.UP


@dataclass
class Seat:
    player: str | None
    cards: tuple[Card, ...] = ()
    history: list[Card] = field(default_factory=list)
    notes: dict[str, Card] = field(default_factory=dict)
    flags: frozenset[int] = frozenset()


@pytest.mark.parametrize("value", [
    Seat(None),
    Seat("ann", (Card(3), Card(14)), [Card(2)], {"last": Card(5)}, frozenset({1, 2})),
    Card(7),
])
def test_plain_is_asdict(value: Seat | Card) -> None:
    assert plain(value) == asdict(value)


def test_tuples_stay_tuples_and_lists_lists() -> None:
    out = plain(Seat("ann", (Card(3),), [Card(2)]))
    assert type(out["cards"]) is tuple and type(out["history"]) is list
    assert out["cards"] == ({"rank": 3, "face": Face.UP},)


def test_plain_copies_no_leaf() -> None:
    flags = frozenset({1})
    out = plain(Seat("ann", flags=flags))
    assert out["flags"] is flags and out["player"] == "ann"
    assert plain([1, (2, "x")]) == [1, (2, "x")] and plain(None) is None
