"""``fold`` (which applies a run of hand events to a private mutable twin of the hand) gives
exactly the states that ``evolve`` gives one event at a time, and that the driver recorded
command by command, over a few hundred random hands of random legal play."""

from __future__ import annotations

import inspect
import random
from dataclasses import dataclass, fields
from functools import reduce

import pytest

from rules import DECK, TableConfig, evolve, fold
from rules._mutable import NATIVE, MutableHand, MutablePlayer
from rules.betting import WAGERS, ActionKind, LegalActions
from rules.commands import (
    AddChips,
    Command,
    Fold,
    TimeOut,
)
from rules.config import HeadsUpRaises
from rules.events import BurnsReshuffled, CommunityCardDealt, Event, HandExposed
from rules.state import HandState, Player, TableState
from rules.testing import StackedDeck, TableDriver, action_command

TABLES = 150
HANDS_PER_TABLE = 3


@dataclass(frozen=True, slots=True)
class Step:
    """One command: the state it met, its events and the state the driver reached."""

    before: TableState
    events: tuple[Event, ...]
    after: TableState


@dataclass(frozen=True, slots=True)
class Table:
    """A table's recording: the state after it was opened and seated, then every step."""

    start: TableState
    steps: tuple[Step, ...]
    hands: tuple[tuple[int, int], ...]
    """Each hand's steps, as ``steps[first:last]``."""

    @property
    def events(self) -> tuple[Event, ...]:
        return tuple(e for step in self.steps for e in step.events)


def _action(rng: random.Random, legal: LegalActions) -> Command:
    """Mostly check or call, sometimes a wager, a fold or a time-out."""
    seat, roll = legal.seat, rng.random()
    wager = next((a for a in legal.actions if a.kind in WAGERS), None)
    if roll < 0.02:
        return TimeOut(seat=seat)
    if roll < 0.3 and wager is not None:
        return action_command(seat, wager.kind)
    if roll < 0.4 and legal.get(ActionKind.FOLD) is not None:
        return Fold(seat=seat)
    passive = next(a for a in legal.actions
                   if a.kind in (ActionKind.CHECK, ActionKind.CALL, ActionKind.BRING_IN))
    return action_command(seat, passive.kind)


def _record_table(rng: random.Random) -> Table:
    """A few hands at a random table (all heads-up options, some burning cards, some short
    stacks), topping up empty stacks between hands."""
    config = TableConfig.for_stakes(
        rng.choice((2, 10, 100)), burn_cards=rng.random() < 0.3,
        heads_up_raises=rng.choice(list(HeadsUpRaises)), max_raises=rng.choice((1, 3)))
    big = config.big_bet
    stacks = {seat: (rng.randint(1, config.ante + config.small_bet) if rng.random() < 0.15
                     else rng.randint(5 * big, 40 * big))
              for seat in rng.sample(range(1, 9), rng.randint(2, 8))}
    table = TableDriver(config, stacks=stacks)
    start = table.state
    steps: list[Step] = []
    spans: list[tuple[int, int]] = []

    def record(before: TableState, command: Command, events: tuple[Event, ...]) -> None:
        steps.append(Step(before=before, events=events, after=table.state))

    for number in range(1, HANDS_PER_TABLE + 1):
        for seat in stacks:
            if table.state.stack(seat) == 0:
                record(table.state, AddChips(seat=seat, amount=10 * big),
                       table.apply(AddChips(seat=seat, amount=10 * big)))
        deck = list(DECK)
        rng.shuffle(deck)
        first = len(steps)
        table.play_hand(
            StackedDeck(deck), act=lambda legal: _action(rng, legal),
            mucks=lambda hands: [h.seat for h in hands if rng.random() < 0.5], observe=record)
        assert table.hand.hand_number == number
        spans.append((first, len(steps)))
    return Table(start=start, steps=tuple(steps), hands=tuple(spans))


@pytest.fixture(scope="module")
def tables() -> tuple[Table, ...]:
    rng = random.Random(20240613)
    return tuple(_record_table(rng) for _ in range(TABLES))


def _assert_frozen(state: TableState) -> None:
    """The state holds frozen values only (no mutable twin leaked out)."""
    assert type(state) is TableState
    if state.hand is not None:
        assert type(state.hand) is HandState
        assert type(state.hand.players) is tuple
        assert all(type(p) is Player for p in state.hand.players)


def test_the_recording_covers_the_rare_events(tables: tuple[Table, ...]) -> None:
    kinds = {type(e) for t in tables for e in t.events}
    assert {CommunityCardDealt, HandExposed, BurnsReshuffled} <= kinds


def test_fold_of_each_command_gives_the_recorded_state(tables: tuple[Table, ...]) -> None:
    for table in tables:
        for step in table.steps:
            folded = fold(step.events, step.before)
            _assert_frozen(folded)
            assert folded == step.after
            assert reduce(evolve, step.events, step.before) == step.after


def test_fold_of_whole_hands_equals_evolve_step_by_step(tables: tuple[Table, ...]) -> None:
    for table in tables:
        for first, last in table.hands:
            steps = table.steps[first:last]
            events = tuple(e for s in steps for e in s.events)
            before = steps[0].before
            stepwise = reduce(evolve, events, before)
            folded = fold(events, before)
            _assert_frozen(folded)
            assert folded == stepwise == steps[-1].after


def test_fold_of_a_whole_table_equals_evolve_step_by_step(tables: tuple[Table, ...]) -> None:
    for table in tables:
        events = table.events
        folded = fold(events, table.start)
        _assert_frozen(folded)
        assert folded == reduce(evolve, events, table.start) == table.steps[-1].after


def test_fold_leaves_its_input_state_alone(tables: tuple[Table, ...]) -> None:
    """The twin is a copy: folding from a state in the middle of a hand changes nothing in it
    (the frozen players it started from are shared, never written to)."""
    for table in tables[:40]:
        for step in table.steps:
            if step.before.hand is None:
                continue
            snapshot = [tuple(getattr(p, name) for name in Player.__slots__)
                        for p in step.before.hand.players]
            fold(step.events, step.before)
            assert snapshot == [tuple(getattr(p, name) for name in Player.__slots__)
                                for p in step.before.hand.players]


@pytest.mark.parametrize(("frozen", "twin"), [
    (Player, MutablePlayer),
    (HandState, MutableHand),
])
def test_the_twins_mirror_the_frozen_values(frozen: type, twin: type) -> None:
    """Same attributes (and annotations, for mypy) and every public property and method, so
    the helpers of rules.betting read a twin as they read the frozen value. Pure, exactly the
    frozen value's slots in the same order (the same layout), which freezing relies on;
    compiled, a native class with exactly the frozen value's attributes, in the same order
    (its constructor's, which freezing copies)."""
    names = tuple(f.name for f in fields(frozen))
    if NATIVE:
        assert vars(twin)["__mypyc_attrs__"] == names
        assert list(inspect.signature(twin).parameters) == list(names)
    else:
        assert vars(twin)["__slots__"] == vars(frozen)["__slots__"] == names
        assert set(twin.__annotations__) == set(names)
    public = {n for n in dir(frozen) if not n.startswith("_")}
    assert public <= set(dir(twin))


def test_a_frozen_twin_is_an_ordinary_frozen_value(tables: tuple[Table, ...]) -> None:
    """Freezing turns the twin into a value of the frozen class itself, equal to the hand it
    was thawed from and as immutable as one made by ``__init__``."""
    for table in tables[:20]:
        for step in table.steps:
            hand = step.after.hand
            if hand is None:
                continue
            frozen = MutableHand.thaw(hand).freeze()
            assert type(frozen) is HandState and frozen == hand and frozen is not hand
            assert frozen.players == hand.players and type(frozen.players) is tuple
            assert hash(frozen) == hash(hand)
            with pytest.raises(AttributeError):
                frozen.target = 1  # type: ignore[misc]
            twin = MutableHand.thaw(hand)
            changed = twin.mutable(hand.players[0].seat)
            changed.stack += 1
            after = twin.freeze()
            assert type(after.players[0]) is Player
            assert after.players[0].stack == hand.players[0].stack + 1
            assert after.players[1:] == hand.players[1:]
            assert all(a is b for a, b in zip(after.players[1:], hand.players[1:], strict=True))
            with pytest.raises(AttributeError):
                after.players[0].stack = 0  # type: ignore[misc]
