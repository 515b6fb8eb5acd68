"""A stateful machine over one table (STYLE.md §6): its rules are legal table moves and
hand commands, illegal commands and arbitrary ones; its invariants are that chips are
conserved, no card is dealt twice, ``fold`` of the log equals the state, and every pot is
settled exactly."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from rules import Card, RuleViolation, decide, fold
from rules.commands import (
    AddChips,
    Command,
    LeaveSeat,
    RevealHands,
    Showdown,
    SitDown,
    SitIn,
    SitOut,
    StartHand,
)
from rules.events import EVENT_TYPES, Event, HandEnded, HandStarted, PotAwarded
from rules.queries import seats_to_deal
from rules.state import Phase, TableState
from rules.testing import TableDriver

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: shared helpers
from invariants import bought_in, check_settlement, check_table, chips_on_table
from strategies import (
    Dealer,
    TableSetup,
    action_command,
    any_commands,
    deal_command,
    decks,
    illegal_commands,
    revealed_hands,
    tables,
)

# A failing run may shrink for up to five minutes (hypothesis' own limit) before it reports.
pytestmark = pytest.mark.timeout(900)

_seats = st.integers(0, 9)
table_moves = st.one_of(
    st.builds(SitOut, seat=_seats),
    st.builds(SitIn, seat=_seats),
    st.builds(LeaveSeat, seat=_seats),
    st.builds(AddChips, seat=_seats, amount=st.integers(1, 5000)),
    st.builds(SitDown, seat=_seats, player_id=st.sampled_from(("ann", "bob", "cy", "p1")),
              stack=st.integers(1, 5000)),
)
"""Seat moves, legal or not, at any time."""


def _phase(machine: TableMachine) -> Phase | None:
    state = machine.table.state
    if state.hand is None or state.hand.is_over:
        return None
    return state.hand.phase


class TableMachine(RuleBasedStateMachine):
    """One table across hands, driven through ``decide``/``evolve`` by a TableDriver."""

    table: TableDriver

    @initialize(setup=tables())
    def open_table(self, setup: TableSetup) -> None:
        # Two players start a hand here, so that seat moves rarely stop the play.
        self.table = TableDriver(replace(setup.config, min_players=2), stacks=setup.stacks)
        self.dealer: Dealer | None = None
        self.hand_start = 0
        self.before_hand: TableState = self.table.state

    def apply(self, command: Command) -> tuple[Event, ...]:
        before = self.table.state
        events = self.table.apply(command)
        assert events and all(type(e) in EVENT_TYPES for e in events)
        if any(isinstance(e, PotAwarded) for e in events):
            check_settlement(before, events)
        if any(isinstance(e, HandEnded) for e in events):
            event("hand ended")
        return events

    # --- hands -----------------------------------------------------------------------

    @precondition(lambda m: _phase(m) is None and len(seats_to_deal(m.table.state))
                  >= m.table.config.min_players)
    @rule(deck=decks)
    def start_hand(self, deck: tuple[Card, ...]) -> None:
        self.before_hand = self.table.state
        self.hand_start = len(self.table.events)
        self.dealer = Dealer(deck)
        self.apply(StartHand(hand_number=self.table.state.hands_started + 1))
        event("hand started")

    @precondition(lambda m: _phase(m) is not None)
    @rule(choices=st.lists(st.integers(0, 99), min_size=8, max_size=40))
    def play(self, choices: list[int]) -> None:
        """The next commands of the hand: deals, actions chosen by ``choices`` (see
        ``action_command``), reveals, and showdowns with muck requests read from them."""
        for choice in choices:
            match _phase(self):
                case Phase.DEALING:
                    assert self.dealer is not None
                    plan = self.table.plan()
                    self.apply(deal_command(plan, self.dealer.cards_for(plan)))
                case Phase.BETTING:
                    self.apply(action_command(self.table.legal(), choice))
                case Phase.REVEAL:
                    self.apply(RevealHands(hands=revealed_hands(self.table.state)))
                case Phase.SHOWDOWN:
                    hands = revealed_hands(self.table.state)
                    mucks = frozenset(h.seat for h in hands if choice >> (h.seat % 7) & 1)
                    self.apply(Showdown(hands=hands, muck_requests=mucks))
                case _:
                    return

    # --- anything else ---------------------------------------------------------------

    @rule(command=table_moves)
    def table_move(self, command: Command) -> None:
        """A seat move is applied when legal; refused, it changes nothing."""
        before, logged = self.table.state, len(self.table.events)
        try:
            self.apply(command)
        except RuleViolation:
            assert self.table.state is before and len(self.table.events) == logged

    @rule(data=st.data(), command=any_commands)
    def misbehave(self, data: st.DataObject, command: Command) -> None:
        """A command that must be refused is, with the expected reason, changing nothing;
        and any command gives events that fold, or a RuleViolation, never another error."""
        candidates = illegal_commands(self.table.state, self.dealer)
        refused, reason = data.draw(st.sampled_from(candidates), label="illegal")
        before, logged = self.table.state, len(self.table.events)
        try:
            self.table.apply(refused)
        except RuleViolation as refusal:
            assert reason is None or refusal.reason == reason, (refused, refusal)
        else:
            raise AssertionError(f"{refused} was accepted")
        assert self.table.state is before and len(self.table.events) == logged
        try:
            events = decide(before, command)
        except RuleViolation:
            return
        assert events and all(type(e) in EVENT_TYPES for e in events)
        assert chips_on_table(fold(events, before)) == bought_in([*self.table.events, *events])

    # --- invariants ------------------------------------------------------------------

    @invariant()
    def table_is_consistent(self) -> None:
        """Chips conserved and never negative; no card twice; a proper waiting phase."""
        in_hand = _phase(self) is not None
        check_table(self.table.state, self.table.events, self.hand_start,
                    self.dealer.dealt if self.dealer and in_hand else None)

    @invariant()
    def fold_equals_state(self) -> None:
        """The current hand's events folded from the table before it give the state."""
        log = self.table.events
        if self.hand_start and isinstance(log[self.hand_start], HandStarted):
            assert fold(log[self.hand_start:], self.before_hand) == self.table.state
        if self.table.state.hands_started == 0 or _phase(self) is None:
            assert fold(log) == self.table.state


TestTableMachine = TableMachine.TestCase
TestTableMachine.settings = settings(stateful_step_count=50)
