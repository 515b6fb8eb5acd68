"""Invariants of the rules library over random legal play: several hands at one table with
2-8 players at random seats, short and deep stacks, every table option, shuffled decks,
random legal actions, time-outs and muck requests (STYLE.md §6; RULES.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from rules import Card, RuleViolation, decide, evolve, fold, initial_state, queries
from rules.commands import Command, RevealHands, Showdown, StartHand
from rules.events import (
    EVENT_TYPES,
    DownCardDealt,
    HandEnded,
    HandExposed,
    HandMucked,
    HandShown,
    HandStarted,
    PlayerSeated,
    PotAwarded,
)
from rules.queries import seats_to_deal
from rules.showdown import showing_order
from rules.state import Phase, TableState
from rules.testing import TableDriver
from rules.views import event_for, hand_for, public_event, table_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: shared helpers
from invariants import (
    bought_in,
    cards_in,
    check_settlement,
    check_table,
    chips_by_seat,
    chips_on_table,
)
from strategies import (
    Dealer,
    TableSetup,
    action_command,
    any_commands,
    between_hands,
    deal_command,
    decks,
    illegal_commands,
    legal_of,
    revealed_hands,
    tables,
)

MAX_HANDS = 3

# A failing run may shrink for up to five minutes (hypothesis' own limit) before it reports.
pytestmark = pytest.mark.timeout(900)


class Run:
    """Plays hands at one table with hypothesis' choices, checking after every command.

    Always checked: chips are conserved and never negative, no card is dealt twice, the
    hand waits in a proper phase, every pot is awarded exactly (with the hi and lo shares
    summing to it) to the best hands. Options add: ``replay`` (fold of the log), ``views``
    (secrecy per viewer), ``hidden`` (a second table fed the public record), ``mucks``
    (settling with other muck requests), ``illegal`` (refused commands) and ``fuzz`` (any
    command)."""

    def __init__(self, data: st.DataObject, setup: TableSetup, *, replay: bool = False,
                 views: bool = False, hidden: bool = False, mucks: bool = False,
                 illegal: bool = False, fuzz: bool = False) -> None:
        self.data = data
        self.config = setup.config
        self.table = TableDriver(setup.config, stacks=setup.stacks)
        self.public = TableDriver(setup.config, stacks=setup.stacks) if hidden else None
        self.replay, self.views, self.mucks = replay, views, mucks
        self.illegal, self.fuzz = illegal, fuzz
        self.dealer: Dealer | None = None
        self.calm = False
        self.hand_start = 0
        """Index in the log of the current hand's HandStarted."""
        self.before_hand: TableState = self.table.state
        self.hands_played = 0

    # --- playing ---------------------------------------------------------------------

    def play(self, hands: int = MAX_HANDS) -> None:
        """Play up to ``hands`` hands, with table moves between them."""
        for number in range(hands):
            state = self.table.state
            if number:
                for command in self.data.draw(between_hands(state), label="table moves"):
                    self.apply(command)
            if len(seats_to_deal(self.table.state)) < self.config.min_players:
                break
            self.before_hand = self.table.state
            self.hand_start = len(self.table.events)
            self.dealer = Dealer(self.data.draw(decks, label="deck"))
            self.calm = self.data.draw(st.booleans(), label="calm table")
            self.apply(StartHand(hand_number=self.table.state.hands_started + 1,
                                 deck_commitment="sha256:..."))
            for _ in range(200):
                if self.table.hand.is_over:
                    break
                self.step()
            else:  # pragma: no cover
                raise AssertionError("the hand does not end")
            self.end_of_hand()
        event(f"hands played: {self.hands_played}")
        if self.views:
            self.check_viewer_logs()
        if self.replay:
            assert fold(self.table.events) == self.table.state
        if self.public is not None:
            assert fold(self.public.events) == self.public.state

    def step(self) -> None:
        """One command of the hand, chosen by hypothesis among the legal ones."""
        hand = self.table.hand
        assert self.dealer is not None
        if self.illegal:
            self.check_illegal()
        if self.fuzz:
            self.check_any_command()
        match hand.phase:
            case Phase.DEALING:
                plan = self.table.plan()
                cards = self.dealer.cards_for(plan)
                self.apply(deal_command(plan, cards), deal_command(plan, cards, hide_down=True))
            case Phase.BETTING:
                legal = self.table.legal()
                choice = self.data.draw(st.integers(0, 99), label="action")
                if hand.full_wagers >= self.config.cap:
                    event("lifted cap" if hand.cap_lifted else "capped")
                self.apply(action_command(legal, choice, self.calm))
            case Phase.REVEAL:
                self.apply(RevealHands(hands=revealed_hands(self.table.state)))
            case Phase.SHOWDOWN:
                seats = sorted(h.seat for h in revealed_hands(self.table.state))
                wanted = self.data.draw(st.frozensets(st.sampled_from(seats)), label="mucks")
                command = Showdown(hands=revealed_hands(self.table.state), muck_requests=wanted)
                if self.mucks:
                    self.check_mucks(command)
                self.apply(command)
            case _:  # pragma: no cover
                raise AssertionError(hand.phase)

    def apply(self, command: Command, public_command: Command | None = None) -> None:
        """Apply to the table (and the public table), then check."""
        before = self.table.state
        events = self.table.apply(command)
        assert events, f"{command} gave no events"
        assert all(type(e) in EVENT_TYPES for e in events)
        check_table(self.table.state, self.table.events, self.hand_start,
                    self.dealer.dealt if self.dealer else None)
        if any(isinstance(e, PotAwarded) for e in events):
            check_settlement(before, events)
        if any(isinstance(e, HandEnded) for e in events):
            assert sum(s.stack for s in self.table.state.seats if s) == bought_in(
                self.table.events)
        if self.replay:
            hand_log = self.table.events[self.hand_start:]
            assert fold(hand_log, self.before_hand) == self.table.state
        if self.views and self.table.state.hand is not None:
            self.check_state_views()
        if self.public is not None:
            public_events = self.public.apply(public_command or command)
            assert public_events == tuple(public_event(e) for e in events)
            self.check_public_state()

    # --- checks ----------------------------------------------------------------------

    def check_illegal(self) -> None:
        """A command that must be refused raises RuleViolation and changes nothing."""
        candidates = illegal_commands(self.table.state, self.dealer)
        for _ in range(2):
            command, reason = self.data.draw(st.sampled_from(candidates), label="illegal")
            before, logged = self.table.state, len(self.table.events)
            with pytest.raises(RuleViolation) as refused:
                self.table.apply(command)
            assert self.table.state is before and len(self.table.events) == logged
            if reason is not None:
                assert refused.value.reason == reason, (command, refused.value)

    def check_any_command(self) -> None:
        """Any command gives events (that fold without error) or a RuleViolation."""
        command = self.data.draw(any_commands, label="any command")
        state = self.table.state
        try:
            events = decide(state, command)
        except RuleViolation:
            return
        assert isinstance(events, tuple) and events
        assert all(type(e) in EVENT_TYPES for e in events)
        after = fold(events, state)
        logged = [*self.table.events, *events]
        assert chips_on_table(after) == bought_in(logged)

    def check_mucks(self, command: Showdown) -> None:
        """The awards are the same whoever asks to muck (RULES 11.5)."""
        state = self.table.state
        hand = state.hand
        assert hand is not None and state.config is not None
        seats = frozenset(h.seat for h in command.hands)
        order = showing_order(hand, state.config)
        results = []
        for mucks in (frozenset(), seats, command.muck_requests, seats - {order[-1]}):
            events = decide(state, Showdown(hands=command.hands, muck_requests=mucks))
            mucked = {e.seat for e in events if isinstance(e, HandMucked)}
            assert mucked <= mucks and order[0] not in mucked
            awards = [e for e in events if isinstance(e, PotAwarded)]
            results.append({pot: chips_by_seat([a for a in awards if a.pot == pot])
                            for pot in {a.pot for a in awards}})
        assert all(r == results[0] for r in results)

    def check_state_views(self) -> None:
        """No viewer's projection of the state holds another player's down card unless it
        was shown or exposed."""
        hand = self.table.hand
        seated = [s.player_id for s in self.table.state.seats if s is not None]
        for viewer in (None, "newcomer", *seated, *(p.player_id for p in hand.players)):
            seen = hand_for(hand, viewer)
            for p, q in zip(hand.players, seen.players, strict=True):
                if p.player_id == viewer or p.exposed or p.shown:
                    assert q.down == p.down
                else:
                    assert all(c is None for c in q.down)
                assert q.up == p.up

    def check_public_state(self) -> None:
        """The table fed the public record answers like the full one."""
        assert self.public is not None
        full, public = self.table.state, self.public.state
        assert table_for(public, None) == table_for(full, None)
        assert legal_of(public) == legal_of(full)
        assert queries.pots(public) == queries.pots(full)
        assert queries.pending_deal(public) == queries.pending_deal(full)
        assert queries.showdown_order(public) == queries.showdown_order(full)
        if full.hand is not None:
            assert public.hand is not None
            assert (public.hand.phase, public.hand.to_act) == (full.hand.phase,
                                                                full.hand.to_act)

    def end_of_hand(self) -> None:
        self.hands_played += 1
        hand = self.table.hand
        names = {type(e).__name__ for e in self.table.events[self.hand_start:]}
        event(f"players dealt in: {len(hand.players)}")
        event("ended at showdown" if "HandShown" in names or "HandExposed" in names
              else "ended by folds")
        for name in ("HandExposed", "HandMucked", "CommunityCardDealt", "BurnsReshuffled",
                     "ActionTimedOut", "UncalledBetReturned"):
            if name in names:
                event(name)
        if any(p.all_in for p in hand.players):
            event("someone all-in")
        if self.views:
            self.check_event_views()

    def viewers(self) -> tuple[int | None, ...]:
        """An observer, every seat dealt into the current hand, and one seat that is not."""
        hand = self.table.hand
        dealt = [p.seat for p in hand.players]
        others = [n for n in range(1, self.config.seats + 1) if n not in dealt]
        return (None, *dealt, *others[:1])

    def check_event_views(self) -> None:
        """No viewer's events show another player's down card before it is shown, exposed,
        or (for players dealt in, with the option) mucked into the history."""
        hand_events = self.table.events[self.hand_start:]
        started = hand_events[0]
        assert isinstance(started, HandStarted)
        for viewer in self.viewers():
            dealt_in = viewer in started.seats
            secret: set[Card] = set()
            for e in hand_events:
                if isinstance(e, DownCardDealt) and e.seat != viewer and e.card is not None:
                    secret.add(e.card)
                if isinstance(e, HandShown | HandExposed) or (
                        isinstance(e, HandMucked) and dealt_in):
                    secret.difference_update(e.down)
                seen = event_for(e, viewer, dealt_in)
                assert not set(cards_in(seen)) & secret, (viewer, seen)
        # the public stream is the history of the players dealt in: no down card is dealt
        # with its value there
        public = [public_event(e) for e in hand_events]
        assert not any(isinstance(e, DownCardDealt) and e.card for e in public)

    def check_viewer_logs(self) -> None:
        """Each player's own log (every event as that player may see it: a hand's events
        as to the seat they held in it) folds to what the player may see of the table."""
        seatings: list[dict[str, int]] = []
        """Per event: the seat of each player dealt into the event's hand."""
        state, current = initial_state(), dict[str, int]()
        for e in self.table.events:
            state = evolve(state, e)
            if isinstance(e, HandStarted):
                assert state.hand is not None
                current = {p.player_id: p.seat for p in state.hand.players}
            seatings.append(current)
        players = {e.player_id for e in self.table.events if isinstance(e, PlayerSeated)}
        for viewer in (None, "newcomer", *sorted(players)):
            own_log = []
            for e, seating in zip(self.table.events, seatings, strict=True):
                seat = seating.get(viewer) if viewer is not None else None
                own_log.append(event_for(e, seat, seat is not None))
            assert table_for(fold(own_log), viewer) == table_for(self.table.state, viewer)


class TestChips:
    @given(data=st.data(), setup=tables())
    def test_chips_are_conserved_and_every_pot_is_awarded(
        self, data: st.DataObject, setup: TableSetup
    ) -> None:
        """Stacks plus chips committed stay constant and never go negative; after each hand
        the stacks add up to the chips bought in; each pot's hi and lo shares add up to it
        and go to the best hands eligible (RULES 9, 14)."""
        Run(data, setup).play()


class TestReplay:
    @given(data=st.data(), setup=tables())
    def test_fold_of_the_log_equals_the_state(self, data: st.DataObject, setup: TableSetup
                                              ) -> None:
        """Folding a hand's events from the table before it (and the whole log from the
        start) gives the state built command by command."""
        Run(data, setup, replay=True).play()


class TestCommands:
    @given(data=st.data(), setup=tables())
    def test_illegal_commands_are_refused_and_change_nothing(
        self, data: st.DataObject, setup: TableSetup
    ) -> None:
        """Wrong seat, wrong amount, raise after the cap, fold when a check is possible,
        check facing a wager, commands in the wrong phase, malformed deals and reveals:
        RuleViolation with the expected reason, state and log unchanged (RULES 6.13)."""
        Run(data, setup, illegal=True).play()

    @given(data=st.data(), setup=tables())
    def test_any_command_gives_events_or_a_rule_violation(
        self, data: st.DataObject, setup: TableSetup
    ) -> None:
        """decide never raises anything but RuleViolation, and its events fold."""
        Run(data, setup, fuzz=True).play()


class TestSecrecy:
    @given(data=st.data(), setup=tables())
    def test_no_viewer_sees_another_players_down_card(
        self, data: st.DataObject, setup: TableSetup
    ) -> None:
        """Projected events and states hold no other player's down card until it is shown
        or exposed (RULES 4.6, 11.7)."""
        Run(data, setup, views=True).play()

    @given(data=st.data(), setup=tables())
    def test_the_public_record_plays_the_same_hand(
        self, data: st.DataObject, setup: TableSetup
    ) -> None:
        """A table fed down cards as unknown gives the public events and the same turn,
        legal actions, pots, deals and phases at every step."""
        Run(data, setup, hidden=True).play()


class TestShowdown:
    @given(data=st.data(), setup=tables(min_players=2))
    def test_muck_requests_do_not_change_the_awards(
        self, data: st.DataObject, setup: TableSetup
    ) -> None:
        """The same showdown settled with no, some or all muck requests awards the same
        chips to the same seats (RULES 11.4-11.5)."""
        Run(data, setup, mucks=True).play()
