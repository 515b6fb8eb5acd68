"""The frozen dataclasses whose ``__init__`` is written out (``init=False``: compiled, the
dataclass's own runs interpreted, about five times the cost) take exactly the arguments the
dataclass's own would (names, keyword-only or not, defaults) and store each as given, in both
builds."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from rules.cards import parse_cards
from rules.dealing import DealPlan, DealSlot
from rules.events import Event, Share
from rules.hands import HighValue, LowValue, best_high, best_low
from rules.phh.format import PhhAction
from rules.phh.verdict import Rejection, ReplayResult, Verdict
from rules.settlement import Settlement, SettlementSeat
from rules.side_pots import Award, Contribution, Pot, ShowdownHand
from rules.streets import Street

CARDS = parse_cards("Ah Kh Qh Jh Th 2c 3d")
HIGH = best_high(CARDS)
LOW = best_low(parse_cards("Ah 2c 3d 4s 5h Kd Qc"))

NO_EVENTS: tuple[Event, ...] = ()

# Every field a value of its type, none equal to its default.
VALUES: dict[type, dict[str, Any]] = {
    DealSlot: {"seat": 3, "up": True},
    DealPlan: {"street": Street.FIFTH, "slots": (DealSlot(seat=1, up=False),), "burn": True,
               "reshuffle_burns": True},
    Pot: {"amount": 90, "level": 30, "eligible": (1, 4)},
    Contribution: {"seat": 2, "total": 70, "in_hand": True, "all_in": True},
    ShowdownHand: {"seat": 5, "high": HIGH, "low": LOW, "own_cards": CARDS[:3]},
    Award: {"seat": 6, "amount": 45, "share": Share.LOW, "hand": "5-4-3-2-A"},
    SettlementSeat: {"seat": 7, "player_id": "ann", "amount_in": 30, "amount_won": 80},
    Settlement: {"hand_number": 9, "seats": (SettlementSeat(seat=1, player_id="b", amount_in=1,
                                                           amount_won=0),),
                 "rake": 2, "ended_on": Street.SEVENTH, "voided": True},
    HighValue: {"key": 12345, "source": CARDS[:5]},
    LowValue: {"key": 678, "source": CARDS[2:]},
    PhhAction: {"text": "p1 cbr 20", "player": 1, "verb": "cbr", "target": 2,
                "cards": (CARDS[0], None), "amount": 20, "muck": True},
    Rejection: {"number": 4, "action": "p2 cc", "reason": "not_your_turn", "detail": "seat 1"},
    ReplayResult: {"name": "h1", "verdict": Verdict.REJECTED,
                   "rejection": Rejection(number=1, action="a", reason="r", detail="d"),
                   "our_stacks": (1, 2), "file_stacks": (2, 1), "problem": "p",
                   "notes": ("n",), "events": NO_EVENTS, "seats": (1, 3)},
}


def _shadow(cls: type) -> type:
    """The dataclass's own ``__init__``: the same fields, init=True."""
    specs = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            specs.append((f.name, Any, dataclasses.field(default=f.default, kw_only=f.kw_only)))
        else:
            specs.append((f.name, Any, dataclasses.field(kw_only=f.kw_only)))
    return dataclasses.make_dataclass("Shadow", specs, frozen=True)


def _parameters(signature: inspect.Signature) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize("cls", list(VALUES), ids=lambda c: c.__name__)
def test_written_out_init_is_the_dataclass_one(cls: type) -> None:
    assert "__init__" in vars(cls) or cls in (HighValue, LowValue)
    values = VALUES[cls]
    fields = dataclasses.fields(cls)
    assert set(values) == {f.name for f in fields}
    try:
        signature = inspect.signature(cls)
    except ValueError:  # compiled: no signature to read; the calls below still check it
        signature = None
    if signature is not None:
        assert _parameters(signature) == _parameters(inspect.signature(_shadow(cls)))
    kw_only = all(f.kw_only for f in fields)
    made = cls(**values)
    for name, value in values.items():  # compiled, an int field is stored unboxed
        stored = getattr(made, name)
        assert stored == value and type(stored) is type(value)
    if not kw_only:
        assert [getattr(cls(*values.values()), f.name) for f in fields] == list(values.values())
    else:
        with pytest.raises(TypeError):
            cls(*values.values())
    required = {f.name: values[f.name] for f in fields if f.default is dataclasses.MISSING}
    bare = cls(**required)
    for f in fields:
        if f.default is not dataclasses.MISSING:
            assert getattr(bare, f.name) == f.default
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, fields[0].name, values[fields[0].name])
    if len(required) > 0:
        with pytest.raises(TypeError):
            cls(**dict(list(required.items())[1:]))
