"""One source of legality (STYLE §10): over random legal play, every action kind is offered by
``legal_actions`` exactly when ``decide`` accepts it (with the offered amounts), and a refused
one is refused with the reason ``judge_action`` gives; ``can_start_hand`` and
``seats_to_deal`` agree with ``decide(StartHand)``."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rules
from rules import ActionKind, LegalAction, RuleViolation, decide
from rules.betting import ACTION_ORDER, judge_action
from rules.commands import RevealHands, Showdown, StartHand
from rules.events import AntePosted, HandStarted
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
            if phase == Phase.DEALING:
                t.apply(deck.deal_command(t.plan()))
            elif phase == Phase.BETTING:
                _check_actions(t.state)
                t.apply(action_command(t.legal(), data.draw(st.integers(0, 99), label="act")))
            elif phase == Phase.REVEAL:
                t.apply(RevealHands(hands=revealed_hands(t.state)))
            else:
                t.apply(Showdown(hands=revealed_hands(t.state)))
