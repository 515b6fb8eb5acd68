"""One source of legality (STYLE §10): over random legal play, every action kind is offered by
``legal_actions`` exactly when ``decide`` accepts it (with the offered amounts), and a refused
one is refused with the reason ``judge_action`` gives; ``can_start_hand`` and
``seats_to_deal`` agree with ``decide(StartHand)``; the PHH replay's command for a ``cc`` or
``cbr`` (:func:`rules.phh.table.command_for`, which reads the hand without judging) is the one
``judge_action`` picks."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rules
from rules import ActionKind, LegalAction, RuleViolation, decide
from rules.betting import ACTION_ORDER, WAGERS, judge_action, wager_kind
from rules.commands import (
    Bet,
    Call,
    Check,
    Command,
    Complete,
    Raise,
    RevealHands,
    Showdown,
    StartHand,
)
from rules.events import AntePosted, HandStarted
from rules.phh import parse_action
from rules.phh.table import command_for
from rules.state import Phase, TableState
from rules.testing import ACTION_COMMANDS, StackedDeck, TableDriver, revealed_hands

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: shared helpers
from strategies import TableSetup, action_command, between_hands, decks, tables

pytestmark = pytest.mark.timeout(900)


def _check_actions(state: TableState) -> None:
    legal = rules.legal_actions(state)
    assert legal is not None and state.hand is not None and state.config is not None
    # legal_actions_for is written out apart from judge_action: the very list judge_action
    # gives, kind by kind in ACTION_ORDER.
    judged = (judge_action(state.hand, state.config, kind) for kind in ACTION_ORDER)
    assert legal.actions == tuple(v for v in judged if isinstance(v, LegalAction))
    for kind, cls in ACTION_COMMANDS.items():
        verdict = judge_action(state.hand, state.config, kind)
        offered = legal.get(kind)
        try:
            events = decide(state, cls(seat=legal.seat))
        except RuleViolation as refused:
            assert offered is None, f"{kind} offered but refused: {refused}"
            assert isinstance(verdict, RuleViolation) and refused.reason == verdict.reason
            continue
        assert offered is not None and verdict == offered, f"{kind} accepted, not offered"
        assert isinstance(offered, LegalAction)
        first = events[0]
        assert getattr(first, "seat", None) == legal.seat
        if kind in (ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE):
            assert getattr(first, "to", None) == offered.to


def _judged_command(verb: str, seat: int, state: TableState, to: int) -> Command:
    """The command a PHH ``cc`` or ``cbr`` of ``seat`` stands for, by ``judge_action``: a
    check if it allows one, else a call; the wager kind it allows, else the one that fits."""
    hand, config = state.hand, state.config
    assert hand is not None and config is not None
    betting = hand.phase == Phase.BETTING and hand.to_act is not None
    if verb == "cc":
        can_check = (betting and hand.to_act == seat
                     and isinstance(judge_action(hand, config, ActionKind.CHECK), LegalAction))
        return Check(seat=seat) if can_check else Call(seat=seat)
    kind = ActionKind.BET
    if betting:
        wager = next((k for k in ACTION_ORDER if k in WAGERS
                      and isinstance(judge_action(hand, config, k), LegalAction)), None)
        kind = wager if wager is not None else wager_kind(hand)
        if hand.bring_in_pending:
            kind = ActionKind.COMPLETE
    if kind == ActionKind.COMPLETE:
        return Complete(seat=seat, to=to)
    return Bet(seat=seat, to=to) if kind == ActionKind.BET else Raise(seat=seat, to=to)


def _check_phh_commands(state: TableState) -> None:
    hand, config = state.hand, state.config
    assert hand is not None and config is not None
    for p in hand.players:
        for verb in ("cc", "cbr"):
            text = f"p{p.seat} {verb}" + (" 1234" if verb == "cbr" else "")
            got = command_for(parse_action(text, config.seats), p.seat, hand, config)
            assert got == _judged_command(verb, p.seat, state, 1234), (verb, p.seat, got)


def _check_start(state: TableState) -> None:
    try:
        events = decide(state, StartHand(hand_number=state.hands_started + 1))
    except RuleViolation:
        assert not rules.can_start_hand(state)
        return
    assert rules.can_start_hand(state)
    started = events[0]
    assert isinstance(started, HandStarted) and started.seats == rules.seats_to_deal(state)
    assert all(isinstance(e, AntePosted) for e in events[1:])


@given(setup=tables(), data=st.data())
def test_offered_exactly_when_accepted(setup: TableSetup, data: st.DataObject) -> None:
    t = TableDriver(setup.config, stacks=setup.stacks)
    for _ in range(3):
        for command in data.draw(between_hands(t.state), label="between hands"):
            with contextlib.suppress(RuleViolation):
                t.apply(command)
        _check_start(t.state)
        if not rules.can_start_hand(t.state):
            return
        deck = StackedDeck(data.draw(decks, label="deck"))
        t.start()
        assert not rules.can_start_hand(t.state)
        while not t.hand.is_over:
            phase = t.hand.phase
            _check_phh_commands(t.state)
            if phase == Phase.DEALING:
                t.apply(deck.deal_command(t.plan()))
            elif phase == Phase.BETTING:
                _check_actions(t.state)
                t.apply(action_command(t.legal(), data.draw(st.integers(0, 99), label="act")))
            elif phase == Phase.REVEAL:
                t.apply(RevealHands(hands=revealed_hands(t.state)))
            else:
                t.apply(Showdown(hands=revealed_hands(t.state)))
