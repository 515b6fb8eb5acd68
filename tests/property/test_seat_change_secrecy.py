"""Views are for a player in a hand, never for a seat (issue 17, F4): whoever sits in a seat
after a hand, or watches, sees no down card of that hand unless it was shown or exposed;
the players dealt in see their own cards and, by RULES 11.7 only, the hands mucked into
the history. Random hands with random leaves, newcomers in the seats just left and players
moving seat between hands; every projection checked after every command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from rules import Card, LegalActions, TableConfig, TableState, seat_in_hand, table_for
from rules.commands import Command, LeaveSeat, RevealedHand, SitDown
from rules.events import DownCardDealt, Event, HandExposed, HandMucked, HandShown
from rules.queries import seats_to_deal
from rules.state import HandState, Player
from rules.testing import StackedDeck, TableDriver
from rules.views import event_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: shared helpers
from invariants import cards_in
from strategies import TableSetup, action_command, decks, stacks, tables

HANDS = 3
pytestmark = pytest.mark.timeout(900)


def may_see(viewer: str | None, p: Player, hand: HandState, config: TableConfig) -> bool:
    """Whether ``viewer`` may see the down cards of ``p``: anyone once shown or exposed;
    otherwise only a player dealt into this hand, their own cards, and a hand mucked at the
    showdown when the history reveals mucked hands (RULES 11.7, never a folded one)."""
    if p.shown or p.exposed:
        return True
    if seat_in_hand(hand, viewer) is None:
        return False
    if p.player_id == viewer:
        return True
    return p.mucked and not p.folded and config.history_reveals_mucked


class Play:
    """One table played by hypothesis' choices, every viewer's projections checked."""

    def __init__(self, data: st.DataObject, setup: TableSetup) -> None:
        self.data = data
        self.table = TableDriver(setup.config, stacks=setup.stacks)
        self.config = setup.config
        self.everyone: set[str] = {f"p{seat}" for seat in setup.stacks}
        self.hand_start = 0
        self.calm = False

    def viewers(self) -> tuple[str | None, ...]:
        """An observer, someone never seated, and every player ever seated."""
        return (None, "stranger", *sorted(self.everyone))

    # --- playing ---------------------------------------------------------------------

    def play(self) -> None:
        for number in range(HANDS):
            if number:
                for command in self.seat_changes():
                    self.apply(command)
            if len(seats_to_deal(self.table.state)) < self.config.min_players:
                break
            self.hand_start = len(self.table.events)
            # mostly calm tables: hands that reach the showdown, where hands are mucked
            self.calm = self.data.draw(st.sampled_from((True, True, False)), label="calm")
            self.table.play_hand(StackedDeck(self.data.draw(decks, label="deck")), self.act,
                                 mucks=self.mucks,
                                 observe=lambda before, command, events: self.check())
            names = {type(e).__name__ for e in self.table.events[self.hand_start:]}
            event("a hand mucked at the showdown" if "HandMucked" in names
                  else "no hand mucked")

    def act(self, legal: LegalActions) -> Command:
        return action_command(legal, self.data.draw(st.integers(0, 99), label="action"),
                              self.calm)

    def mucks(self, hands: tuple[RevealedHand, ...]) -> frozenset[int]:
        seats = frozenset(h.seat for h in hands)
        return self.data.draw(st.just(seats) | st.frozensets(st.sampled_from(sorted(seats))),
                              label="mucks")

    def seat_changes(self) -> list[Command]:
        """Between hands, for each seat: stay, leave, leave with a newcomer sitting down
        in that seat, or leave and sit down again in another empty seat."""
        state = self.table.state
        free = [n for n, s in enumerate(state.seats, start=1) if s is None]
        commands: list[Command] = []
        for number, seat in enumerate(state.seats, start=1):
            if seat is None:
                continue
            move = self.data.draw(st.sampled_from(("stay", "leave", "newcomer", "move")),
                                  label=f"seat {number}")
            if move == "stay" or (move == "move" and not free):
                continue
            commands.append(LeaveSeat(seat=number))
            if move == "newcomer":
                player = f"new{state.hands_started}s{number}"
                self.everyone.add(player)
                commands.append(SitDown(seat=number, player_id=player,
                                        stack=self.data.draw(stacks(self.config))))
            elif move == "move":
                commands.append(SitDown(seat=free.pop(0), player_id=seat.player_id,
                                        stack=self.data.draw(stacks(self.config))))
            event(f"between hands: {move}")
        return commands

    def apply(self, command: Command) -> tuple[Event, ...]:
        events = self.table.apply(command)
        self.check()
        return events

    # --- checks ----------------------------------------------------------------------

    def check(self) -> None:
        state: TableState = self.table.state
        hand = state.hand
        if hand is None:
            return
        hand_events = self.table.events[self.hand_start:]
        for viewer in self.viewers():
            self.check_state(viewer, hand, table_for(state, viewer).hand)
            self.check_events(viewer, hand, hand_events)

    def check_state(self, viewer: str | None, hand: HandState, seen: HandState | None
                    ) -> None:
        """The viewer's projection of the hand holds only down cards they may see, each
        the true card; a player dealt in sees all of their own."""
        assert seen is not None
        for p, q in zip(hand.players, seen.players, strict=True):
            assert (p.seat, p.up) == (q.seat, q.up)
            visible = [c for c in q.down if c is not None]
            if visible:
                assert may_see(viewer, p, hand, self.config), (viewer, p.seat, visible)
                assert all(c in (None, d) for c, d in zip(q.down, p.down, strict=True))
            if viewer is not None and p.player_id == viewer:
                assert q.down == p.down

    def check_events(self, viewer: str | None, hand: HandState,
                     hand_events: list[Event]) -> None:
        """The hand's events, as to the seat the viewer held in that hand (None when not
        dealt in), hold no down card they may not see."""
        seat = seat_in_hand(hand, viewer)
        secret: set[Card] = set()
        for e in hand_events:
            if isinstance(e, DownCardDealt) and e.card is not None and e.seat != seat:
                secret.add(e.card)
            if isinstance(e, HandShown | HandExposed) or (
                    isinstance(e, HandMucked) and seat is not None):
                secret.difference_update(e.down)
            seen = event_for(e, seat, seat is not None)
            assert not set(cards_in(seen)) & secret, (viewer, seen)


@given(data=st.data(), setup=tables())
def test_no_viewer_sees_a_down_card_of_a_hand_they_were_not_dealt_into(
    data: st.DataObject, setup: TableSetup
) -> None:
    """Whoever sits in a seat after a hand (a newcomer, or a player who moved there), an
    observer or a stranger sees no down card of that hand unless it was shown or exposed;
    the players dealt in see their own cards, and others' only as RULES 11.7 allows."""
    Play(data, setup).play()
