"""The one clever seam of the rules (issue 30): ``rules._mutable``'s twin, which becomes a
frozen value by swapping its ``__class__``, gives exactly what plain code gives. Over random
hands (hypothesis: the tables, decks and choices of tests/property/test_rules_properties.py),
the state ``fold`` reaches over the whole log, the state ``evolve`` reaches one event at a
time, and a plain reference (each hand event applied to a thawed hand, the result built by
the frozen classes' own ``__init__`` and ``dataclasses.replace``, no class swapped) agree
after every event, and every value is an ordinary instance of its class. Under ``make test``
this runs on the compiled build, under ``make test-pure`` on the sources."""

from __future__ import annotations

from dataclasses import fields, replace

from hypothesis import given
from hypothesis import strategies as st

from rules import evolve, fold
from rules._mutable import MutableHand, MutablePlayer
from rules.events import Event
from rules.evolve import HAND_EVENTS
from rules.state import HandState, Player, Seat, TableState
from tests.property.test_rules_properties import Run
from tests.strategies import TableSetup, tables

_PLAYER = tuple(f.name for f in fields(Player))
_HAND = tuple(f.name for f in fields(HandState))


def _plain_player(p: Player | MutablePlayer) -> Player:
    return Player(**{name: getattr(p, name) for name in _PLAYER})


def _plain_hand(twin: MutableHand) -> HandState:
    values = {name: getattr(twin, name) for name in _HAND}
    values["players"] = tuple(_plain_player(p) for p in twin.players)
    return HandState(**values)


def plain_evolve(state: TableState, event: Event) -> TableState:
    """``evolve`` with the twin only as a scratch copy: frozen values made by ``__init__``."""
    handler = HAND_EVENTS.get(type(event))
    if handler is None:
        return evolve(state, event)
    assert state.hand is not None and state.config is not None
    twin = MutableHand.thaw(state.hand)
    handler(twin, state.config, event)
    return replace(state, hand=_plain_hand(twin))


def _ordinary(state: TableState) -> None:
    assert type(state) is TableState
    assert all(s is None or type(s) is Seat for s in state.seats)
    if state.hand is not None:
        assert type(state.hand) is HandState
        assert all(type(p) is Player for p in state.hand.players)


@given(data=st.data(), setup=tables())
def test_the_twin_the_build_and_plain_evolve_agree(data: st.DataObject,
                                                   setup: TableSetup) -> None:
    run = Run(data, setup)
    run.play(hands=2)
    events = run.table.events
    plain = stepped = fold(())
    for event in events:
        plain, stepped = plain_evolve(plain, event), evolve(stepped, event)
        _ordinary(stepped)
        assert stepped == plain, type(event).__name__
    folded = fold(events)
    _ordinary(folded)
    assert folded == plain == run.table.state
