"""The rules package builds some frozen values without their ``__init__`` on its hot paths
(:func:`rules._mutable.maker`, :func:`rules._mutable.copier` + :func:`become`): what it builds
is an ordinary value of the frozen class, equal to what ``__init__`` makes, with the same hash
and as immutable."""

from __future__ import annotations

import dataclasses

import pytest

from rules._mutable import become, copier, maker, twin_class
from rules.betting import ActionKind, LegalAction, LegalActions
from rules.cards import DECK
from rules.events import (
    AntePosted,
    BetMade,
    BringInPosted,
    Called,
    Checked,
    Completed,
    DownCardDealt,
    Folded,
    Raised,
    UpCardDealt,
)
from rules.state import HandState, Player, Seat, TableState
from rules.streets import Street


@pytest.mark.parametrize("value", [
    LegalAction(kind=ActionKind.RAISE, amount=20, to=40, all_in=True),
    LegalAction(kind=ActionKind.CHECK),
    LegalActions(seat=3, actions=(LegalAction(kind=ActionKind.FOLD),)),
    Called(seat=2, amount=10),
    BetMade(seat=4, amount=10, to=10),
    # the events decide builds by maker
    AntePosted(seat=1, amount=5), Checked(seat=3), Folded(seat=6),
    BringInPosted(seat=2, amount=3), Completed(seat=2, amount=7, to=10),
    Raised(seat=8, amount=20, to=30),
    UpCardDealt(seat=3, street=Street.FOURTH, card=DECK[7]),
    DownCardDealt(seat=4, street=Street.SEVENTH, card=DECK[9]),
    DownCardDealt(seat=4, street=Street.THIRD),
    Player(seat=5, stack=100, player_id="ann", up=(), folded=True),
    Seat(player_id="bob", stack=7),
])
def test_made_values_equal_init_values(value: object) -> None:
    cls = type(value)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    made = maker(cls)(*(getattr(value, n) for n in names))
    assert type(made) is cls and made == value and hash(made) == hash(value)
    assert repr(made) == repr(value)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, names[0], None)
    copied = become(copier(cls, twin_class(cls))(value), cls)
    assert type(copied) is cls and copied == value and copied is not value


def test_a_twin_of_another_layout_cannot_become_the_value() -> None:
    twin = copier(Seat, twin_class(Seat))(Seat(player_id="x", stack=1))
    with pytest.raises(TypeError):
        become(twin, TableState)
    with pytest.raises(TypeError):
        become(copier(Player, twin_class(Player))(Player(seat=1, stack=1)), HandState)
