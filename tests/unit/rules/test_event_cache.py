"""The events ``decide`` keeps by their fields (:mod:`rules.decide`: the dealt cards, the
betting actions, the antes) and the legal actions :func:`rules.betting.judge_action` keeps
are, key for key, the values a fresh build makes: every command of random hands decided with
nothing kept gives the same events, field for field and type for type, as with everything
kept; every entry kept equals the value its key's fields make; and each keeper is bounded."""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from dataclasses import fields

from rules import DECK, TableConfig
from rules.betting import ActionKind, LegalAction
from rules.commands import Command
from rules.decide import decide_and_fold
from rules.events import (
    AntePosted,
    BetMade,
    BringInPosted,
    Called,
    Checked,
    Completed,
    DownCardDealt,
    Event,
    Folded,
    Raised,
    UpCardDealt,
)
from rules.legal import legal_action
from rules.state import TableState
from rules.streets import Street
from rules.testing import TableDriver
from studtest.random_tables import Observe, play_random_tables

_decide = importlib.import_module("rules.decide")  # the module (rules.decide is the function)
_betting = importlib.import_module("rules.betting")

_ACTION_EVENTS: dict[ActionKind, Callable[[int, LegalAction], Event]] = {
    ActionKind.CALL: lambda seat, a: Called(seat=seat, amount=a.amount),
    ActionKind.CHECK: lambda seat, a: Checked(seat=seat),
    ActionKind.FOLD: lambda seat, a: Folded(seat=seat),
    ActionKind.BRING_IN: lambda seat, a: BringInPosted(seat=seat, amount=a.amount),
    ActionKind.COMPLETE: lambda seat, a: Completed(seat=seat, amount=a.amount, to=a.to),
    ActionKind.BET: lambda seat, a: BetMade(seat=seat, amount=a.amount, to=a.to),
    ActionKind.RAISE: lambda seat, a: Raised(seat=seat, amount=a.amount, to=a.to),
}


def _forget() -> None:
    _decide._DEALT.clear()
    _decide._ACTED.clear()
    _decide._ANTES.clear()
    _betting._JUDGED.clear()


def _same(a: object, b: object) -> bool:
    """Equal, of the same class, and every field of the same class."""
    if type(a) is not type(b) or a != b:
        return False
    return all(type(getattr(a, f.name)) is type(getattr(b, f.name))
               for f in fields(a))  # type: ignore[arg-type]


def _fresh(state: TableState, command: Command) -> tuple[Event, ...]:
    _forget()
    return decide_and_fold(state, command)[0]


def _assert_kept_are_fresh_builds() -> int:
    """Every entry kept equals (field for field, type for type) what its key makes anew."""
    for (seat, up, street, card), event in _decide._DEALT.items():
        made = (UpCardDealt(seat=seat, street=street, card=card) if up
                else DownCardDealt(seat=seat, street=street, card=card))
        assert _same(event, made), (seat, up, street, card, event)
    for (kind, seat, amount, to), event in _decide._ACTED.items():
        action = LegalAction(kind=kind, amount=amount, to=to)
        assert _same(event, _ACTION_EVENTS[kind](seat, action)), (kind, seat, amount, to)
    for (seat, amount), event in _decide._ANTES.items():
        assert _same(event, AntePosted(seat=seat, amount=amount)), (seat, amount)
    for (kind, amount, to, all_in), judged in _betting._JUDGED.items():
        anew = LegalAction(kind=kind, amount=amount, to=to, all_in=all_in)
        assert _same(judged, anew), (kind, amount, to, all_in)
    return (len(_decide._DEALT) + len(_decide._ACTED) + len(_decide._ANTES)
            + len(_betting._JUDGED))


def test_every_command_gives_with_the_kept_events_what_a_fresh_build_gives() -> None:
    rng = random.Random(35)
    commands = checked = 0
    _forget()

    def observer(table: TableDriver) -> Observe:
        def observe(before: TableState, command: Command, events: tuple[Event, ...]) -> None:
            nonlocal commands, checked
            commands += 1
            fresh = _fresh(before, command)  # nothing kept: every event made anew
            again = decide_and_fold(before, command)[0]  # found kept
            assert len(fresh) == len(events) == len(again)
            for made, kept, driven in zip(fresh, again, events, strict=True):
                assert _same(made, kept) and _same(made, driven), (command, made, kept)
            checked += _assert_kept_are_fresh_builds()

        return observe

    play_random_tables(rng, 30, observer)
    assert commands > 1000 and checked > 1000


def test_a_dealt_card_of_another_class_is_made_anew_and_not_kept() -> None:
    _forget()
    event = _decide._dealt_event(3, True, Street.FOURTH, "Ah")
    assert type(event) is UpCardDealt and event.card == "Ah" and event.seat == 3
    assert not _decide._DEALT
    card = DECK[7]
    kept = _decide._dealt_event(3, False, Street.FOURTH, card)
    assert _decide._dealt_event(3, False, Street.FOURTH, card) is kept
    assert _same(kept, DownCardDealt(seat=3, street=Street.FOURTH, card=card))
    hidden = _decide._dealt_event(3, False, Street.FOURTH, None)
    assert _same(hidden, DownCardDealt(seat=3, street=Street.FOURTH, card=None))
    assert _decide._dealt_event(4, False, Street.FOURTH, card) != kept


def test_the_keepers_are_bounded() -> None:
    _forget()
    bound = _decide._EVENTS_KEPT
    for street in Street:
        for seat in range(1, 9):
            for card in (*DECK, None):
                for up in (True, False):
                    if up and card is None:
                        continue
                    event = _decide._dealt_event(seat, up, street, card)
                    assert event.seat == seat and event.card is card
                    assert len(_decide._DEALT) <= bound
    for amount in range(1, bound + 10):
        assert _decide._ante_event(2, amount) == AntePosted(seat=2, amount=amount)
        assert len(_decide._ANTES) <= bound
    assert bound == _betting._JUDGED_KEPT
    for amount in range(1, bound + 10):
        judged = _betting._judged(ActionKind.CALL, amount, amount + 5, False)
        assert judged == legal_action(ActionKind.CALL, amount, amount + 5, False)
        assert len(_betting._JUDGED) <= bound
    table = TableDriver(TableConfig(), stacks={1: 1000, 2: 1000})
    table.start()
    table.deal_from("2c 3c 4c 5c 6c 7c")
    hand = table.hand
    assert hand.to_act is not None
    for amount in range(1, bound + 10):
        action = legal_action(ActionKind.RAISE, amount, amount + 1, False)
        event = _decide._action_event(hand, action)
        assert event == Raised(seat=hand.to_act, amount=amount, to=amount + 1)
        assert len(_decide._ACTED) <= bound
    assert _assert_kept_are_fresh_builds() > 0
    _forget()

