"""Property: at a tournament table (services/table/tournament.py), for any interleaving of
the tournament's commands (seat, unseat, stakes, pause) with hands played by time-outs and
random legal actions, no chip is created or lost (the chips seated are the chips at the
table plus the chips unseated), every hand is dealt with the stakes in force when it
started and never changes them, each finished hand's recorded stacks agree with its events,
and folding the log from nothing, one event at a time as a restarted replica does, gives
the very same room (and so does its snapshot)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

import rules
from rules import TableConfig
from rules.cards import RANK_CHARS, Card, Suit
from rules.commands import RevealedHand, RevealHands, Showdown, StartHand, TimeOut
from rules.errors import RuleViolation
from rules.events import AntePosted, HandStarted
from rules.testing import action_command, deal_command
from studkit.errors import BadRequest, FailedPrecondition
from table.model import TableSettings
from table.room import Open, Play, Room, RoomCommand, apply, decide, due_between_hands
from table.room_state import AnyEvent, Stakes
from table.snapshot import from_extra, to_extra
from table.tournament import PauseDealing, SeatEntrant, SetStakes, UnseatEntrant

PLAYERS = ("ann", "bob", "cat", "dan", "eve")
LEVELS = (Stakes(200, 400, 40, 50), Stakes(400, 800, 100, 100), Stakes(600, 1_200, 150, 200),
          Stakes(400, 400, 0, 100))  # the last is invalid (RULES 2.3): always refused
DECK = [Card.parse(rank + suit.value) for rank in RANK_CHARS for suit in Suit]


@dataclass
class Run:
    room: Room = field(default_factory=Room)
    log: list[AnyEvent] = field(default_factory=list)
    seated: int = 0
    unseated: int = 0
    now: float = 1_000.0
    ante_at_start: dict[int, int] = field(default_factory=dict)
    stacks_at_start: dict[int, dict[int, int]] = field(default_factory=dict)

    def do(self, command: RoomCommand) -> bool:
        self.now += 1
        try:
            decision = decide(self.room, command, self.now)
        except (RuleViolation, FailedPrecondition, BadRequest):
            return False
        for event in decision.events:
            if isinstance(event, HandStarted):
                assert self.room.table.config is not None
                self.ante_at_start[event.hand_number] = self.room.table.config.ante
                self.stacks_at_start[event.hand_number] = {
                    n: seat.stack for n in event.seats
                    if (seat := self.room.table.seat(n)) is not None}
        self.room = apply(self.room, decision.events, at=self.now,
                          first_sequence=self.room.version + 1, table=decision.table)
        self.log.extend(decision.events)
        return True

    def chips(self) -> int:
        table = self.room.table
        on_seats = sum(s.stack for s in table.seats if s is not None)
        hand = table.hand
        if hand is None or hand.is_over:
            return on_seats
        in_hand = sum(table.stack(p.seat) for p in hand.players)
        not_dealt = sum(s.stack for n, s in enumerate(table.seats, start=1)
                        if s is not None and not hand.has_player(n))
        return in_hand + not_dealt + hand.pot_total


def step(run: Run, rng: random.Random, op: int) -> None:
    room = run.room
    table = room.table
    if op == 0:
        seat, player = rng.randint(1, 8), rng.choice(PLAYERS)
        stack = rng.choice((1, 500, 5_000, 20_000))
        if run.do(SeatEntrant(seat, player, stack)):
            run.seated += stack
    elif op == 1:
        taken = [(n, s) for n, s in enumerate(table.seats, start=1) if s is not None]
        if taken:
            seat, holder = rng.choice(taken)
            if run.do(UnseatEntrant(seat, holder.player_id)):
                left = run.log[-1]
                run.unseated += left.stack  # type: ignore[attr-defined]
    elif op == 2:
        run.do(SetStakes(rng.choice(LEVELS)))
    elif op == 3:
        run.do(PauseDealing(rng.random() < 0.5, "break"))
    else:  # the driver's part: what is due, a hand to start, cards, an action
        due = due_between_hands(room, run.now)
        if due is not None:
            assert run.do(due)
        elif not table.hand_in_progress:
            if not room.paused:
                run.do(Play(StartHand(hand_number=table.hands_started + 1)))
        else:
            hand = table.hand
            assert hand is not None
            plan = rules.pending_deal(table)
            if plan is not None:
                known = {c for p in hand.players for c in (*p.down, *p.up) if c is not None}
                cards = [c for c in DECK if c not in known]
                rng.shuffle(cards)
                assert run.do(Play(deal_command(plan, cards[:len(plan.slots)])))
            elif hand.to_act:
                legal = rules.legal_actions(table)
                if legal is not None and rng.random() < 0.7:
                    action = rng.choice(legal.actions)
                    assert run.do(Play(action_command(hand.to_act, action.kind)))
                else:
                    assert run.do(Play(TimeOut(seat=hand.to_act)))
            else:
                hands = tuple(RevealedHand(seat=p.seat, down=tuple(
                    c for c in p.down if c is not None)) for p in hand.in_hand)
                command = (RevealHands(hands=hands) if hand.phase == rules.Phase.REVEAL
                           else Showdown(hands=hands))
                assert run.do(Play(command))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), ops=st.lists(st.integers(0, 9), min_size=20,
                                                max_size=250))
def test_a_tournament_table_conserves_chips_and_folds_back(seed: int, ops: list[int]) -> None:
    rng = random.Random(seed)
    run = Run()
    assert run.do(Open("t1", TableConfig.for_stakes(200), TableSettings(), "mtt-1"))
    for op in ops:
        step(run, rng, op)
        assert run.chips() == run.seated - run.unseated
        assert not any(s.sitting_out for s in run.room.table.seats if s is not None)
    # Every hand's antes are the stakes in force when it started (never a later change).
    hand = 0
    for event in run.log:
        if isinstance(event, HandStarted):
            hand = event.hand_number
        elif isinstance(event, AntePosted):
            assert event.amount <= run.ante_at_start[hand]
    # Each finished hand's recorded stacks: nothing created or lost within the hand.
    for number, seats in run.room.results.items():
        assert sum(s.stack_start for s in seats) == sum(s.stack_end for s in seats), number
        assert {s.seat: s.stack_start for s in seats} == run.stacks_at_start[number]
        assert all(s.stack_end >= 0 and s.stack_start > 0 for s in seats)
    # A restarted replica folds the log one event at a time: the same room.
    again = Room()
    for offset, event in enumerate(run.log):
        again = apply(again, [event], at=again.version, first_sequence=offset + 1)
    live, folded = run.room, again
    assert folded.table == live.table
    assert (folded.tournament_id, folded.paused, folded.pause_reason,
            folded.pending_stakes, folded.results) == (
        live.tournament_id, live.paused, live.pause_reason, live.pending_stakes, live.results)
    # And a snapshot of it (JSON, as the repository stores it) loads the same room.
    snapshot = json.loads(json.dumps(to_extra(live)))
    assert from_extra(live.table, live.version, snapshot) == live
