"""The twin ``freeze`` keeps for the next ``thaw`` of the hand it froze (compiled:
:class:`rules._mutable._Kept`) never changes a state: it is exactly the twin a fresh thaw
would make, nobody but the keeper holds it (so nothing can change it after freeze), it is
handed out once (a second command tried on the same state never sees the first's changes),
and every command of random hands gives, with it, the state a fresh copy gives."""

from __future__ import annotations

import random
import sys
from dataclasses import fields

import pytest

from rules import TableConfig, evolve, fold
from rules._mutable import _KEPT, NATIVE, MutableHand, forget
from rules.betting import ActionKind, LegalActions, legal_actions_for
from rules.commands import Command
from rules.decide import decide_and_fold
from rules.errors import RuleViolation
from rules.events import Event
from rules.state import HandState, Phase, TableState
from rules.testing import TableDriver, action_command
from studtest.random_tables import Observe, play_random_tables

_HAND_FIELDS = tuple(f.name for f in fields(HandState) if f.name != "players")


def _assert_kept_is_a_fresh_thaw() -> bool:
    """The kept twin, if any, holds exactly its hand's fields and its players (the same
    objects), and the keeper's is the only reference to it (``getrefcount``'s argument is the
    other); whether one is kept."""
    hand, twin = _KEPT.hand, _KEPT.twin
    assert (hand is None) == (twin is None)
    if hand is None or twin is None:
        return False
    assert NATIVE  # pure, the twin became the value: nothing is kept
    for name in _HAND_FIELDS:
        assert getattr(twin, name) is getattr(hand, name), name
    assert type(twin.players) is list
    assert len(twin.players) == len(hand.players)
    assert all(a is b for a, b in zip(twin.players, hand.players, strict=True))
    del hand, twin
    references = sys.getrefcount(_KEPT.twin)  # the keeper's and the argument's
    assert references == 2
    return True


def _fresh(state: TableState, command: Command) -> tuple[tuple[Event, ...], TableState]:
    """``decide_and_fold`` with nothing kept (every thaw copies the hand)."""
    forget()
    return decide_and_fold(state, command)


def _other(rng: random.Random, legal: LegalActions) -> Command:
    """Another command for the player to act: any legal action, or an illegal one."""
    if rng.random() < 0.2:
        return action_command(legal.seat % 8 + 1, ActionKind.CHECK)  # maybe not their turn
    return action_command(legal.seat, rng.choice(legal.actions).kind)


def _outcome(state: TableState, command: Command, fresh: bool = False) -> object:
    try:
        return _fresh(state, command) if fresh else decide_and_fold(state, command)
    except RuleViolation as refused:
        return refused.reason, refused.detail


def test_every_command_with_the_kept_twin_gives_what_a_fresh_copy_gives() -> None:
    rng = random.Random(35)
    commands = branches = kept = 0

    def observer(table: TableDriver) -> Observe:
        def observe(before: TableState, command: Command, events: tuple[Event, ...]) -> None:
            nonlocal commands, branches, kept
            commands += 1
            after = table.state
            _assert_kept_is_a_fresh_thaw()
            # The command again from a fresh copy: the same events and state as the driver's
            # (which met the twin kept by the command before it, unless a branch took it).
            assert _fresh(before, command) == (events, after)
            # Once more, so that the driver's next command meets the kept twin again.
            again = decide_and_fold(before, command)
            assert again == (events, after)
            table.state = after = again[1]
            kept += _assert_kept_is_a_fresh_thaw()
            # Half the time, other commands tried on the state reached (the first takes the
            # kept twin and changes it; the second finds none): each gives what a fresh
            # copy gives, and the driver's next command then meets the state as it was.
            hand = after.hand
            if hand is not None and hand.phase == Phase.BETTING and rng.random() < 0.5:
                assert after.config is not None
                legal = legal_actions_for(hand, after.config)
                assert legal is not None
                for _ in range(2):
                    other = _other(rng, legal)
                    assert _outcome(after, other) == _outcome(after, other, fresh=True)
                    _assert_kept_is_a_fresh_thaw()
                    branches += 1

        return observe

    play_random_tables(rng, 40, observer)
    assert commands > 1000 and branches > 300
    assert kept > 1000 if NATIVE else kept == 0


@pytest.mark.skipif(not NATIVE, reason="compiled only: pure, the twin becomes the value")
def test_a_kept_twin_is_handed_out_once() -> None:
    table = TableDriver(TableConfig(), stacks={1: 1000, 2: 1000, 3: 1000})
    table.start()
    table.deal_from("2c 3c 4c 5c 6c 7c 8c 9c Tc")
    hand = table.state.hand
    assert hand is not None and _KEPT.hand is hand
    first = MutableHand.thaw(hand)  # takes the kept twin
    assert _KEPT.hand is None and _KEPT.twin is None
    first.target = 999
    first.mutable_at(0).stack = -1  # a change after the take, never frozen
    second = MutableHand.thaw(hand)  # a fresh copy: the change is not seen
    assert second is not first
    assert second.target == hand.target and second.players[0] is hand.players[0]
    assert second.freeze() == hand


def test_fold_and_evolve_leave_the_kept_twin_a_fresh_thaw() -> None:
    table = TableDriver(TableConfig(), stacks={1: 1000, 2: 1000, 3: 1000})
    start = table.state
    table.start()
    table.deal_from("2c 3c 4c 5c 6c 7c 8c 9c Tc")
    while table.hand.phase == Phase.BETTING:
        table.apply(action_command(table.legal().seat, ActionKind.CALL)
                    if table.legal().get(ActionKind.CALL) else
                    action_command(table.legal().seat, table.legal().actions[0].kind))
    events = tuple(table.events)
    folded = fold(events, start)
    _assert_kept_is_a_fresh_thaw()
    state = start
    for event in events:
        state = evolve(state, event)
        _assert_kept_is_a_fresh_thaw()
    assert state == folded == table.state
