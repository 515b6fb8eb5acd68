"""Rake (RULES 2.4), void (9.8) and ``rules.settlement`` over random legal play, and the
money contract with the wallet: the settlements of folded hands, applied by the wallet's
pure ledger, leave every seat's escrow equal to its folded stack (DESIGN §5)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from rules import fold
from rules.commands import RevealHands, Showdown, StartHand, VoidHand
from rules.config import Rake
from rules.events import HandEnded, HandStarted, HandVoided, PotAwarded, RakeTaken
from rules.rake import rake_due
from rules.settlement import Settlement, settlement
from rules.showdown import hand_pots
from rules.state import Phase
from rules.streets import Street
from rules.testing import StackedDeck, TableDriver, revealed_hands
from wallet import ledger
from wallet.model import (
    HOUSE,
    BuyIn,
    Deposit,
    RakePolicy,
    SeatResult,
    SettleHand,
    seat_account,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: shared helpers
from invariants import bought_in
from strategies import TableSetup, action_command, decks, tables

MAX_HANDS = 4
pytestmark = pytest.mark.timeout(900)

rakes = st.one_of(
    st.none(),
    st.just(Rake(0, 0)),
    st.builds(Rake, st.integers(1, 10_000), st.integers(1, 10**6)),
    st.builds(Rake, st.sampled_from((500, 1000)), st.integers(1, 50)),
)
"""No rake, a zero rake, any rake, a usual one with a small cap."""


class Play:
    """Random legal hands at one table with a rake; some voided part way."""

    def __init__(self, setup: TableSetup, rake: Rake | None) -> None:
        self.config = replace(setup.config, rake=rake)
        self.table = TableDriver(self.config, stacks=setup.stacks)
        self.raked = 0

    def hand(self, data: st.DataObject) -> Settlement | None:
        """Play one hand (None if it cannot start) and return its settlement."""
        t = self.table
        deck = StackedDeck(data.draw(decks, label="deck"))
        void_after = data.draw(st.none() | st.integers(0, 30), label="void after")
        try:
            t.apply(StartHand(hand_number=t.state.hands_started + 1))
        except Exception:
            return None
        steps = 0
        while not t.hand.is_over:
            if void_after is not None and steps >= void_after:
                t.apply(VoidHand(reason="test"))
                break
            steps += 1
            phase = t.hand.phase
            if phase == Phase.DEALING:
                t.apply(deck.deal_command(t.plan()))
            elif phase == Phase.BETTING:
                choice = data.draw(st.integers(0, 99), label="action")
                t.apply(action_command(t.legal(), choice))
            elif phase == Phase.REVEAL:
                t.apply(RevealHands(hands=revealed_hands(t.state)))
            else:
                hands = revealed_hands(t.state)
                mucks = data.draw(st.frozensets(st.sampled_from([h.seat for h in hands])),
                                  label="mucks")
                t.apply(Showdown(hands=hands, muck_requests=mucks))
        result = settlement(t.state)
        assert result is not None
        self.raked += result.rake
        return result

    @property
    def hand_start(self) -> int:
        """Index of the latest HandStarted in the log."""
        return max(i for i, e in enumerate(self.table.events) if isinstance(e, HandStarted))

    def hand_events(self) -> list[object]:
        return list(self.table.events[self.hand_start:])


@given(setup=tables(), rake=rakes, data=st.data())
def test_rake_conserves_chips_and_skips_third_street(
        setup: TableSetup, rake: Rake | None, data: st.DataObject) -> None:
    """Chips are conserved counting the rake; the rake is RULES 2.4's, taken before the
    awards, none on a hand that ends on 3rd street or is voided; a void restores every stack;
    every settlement balances."""
    play = Play(setup, rake)
    for _ in range(MAX_HANDS):
        before = {n: play.table.state.stack(n) for n in setup.stacks}
        result = play.hand(data)
        if result is None:
            break
        state = play.table.state
        events = play.hand_events()
        hand = state.hand
        assert hand is not None
        assert sum(s.stack for s in state.seats if s) + play.raked == bought_in(
            play.table.events)
        assert sum(s.amount_won for s in result.seats) + result.rake == result.amount_in
        assert all(state.stack(s.seat) == before[s.seat] + s.net for s in result.seats)
        taken = [e for e in events if isinstance(e, RakeTaken)]
        if result.voided:
            event("voided")
            assert any(isinstance(e, HandVoided) for e in events)
            assert not taken and result.rake == 0
            assert all(state.stack(n) == before[n] for n in before)
            continue
        settling = next(i for i, e in enumerate(play.table.events)
                        if i >= play.hand_start and isinstance(e, RakeTaken | PotAwarded
                                                               | HandEnded))
        at_settling = fold(play.table.events[:settling]).hand
        assert at_settling is not None
        pots = hand_pots(at_settling)
        due = rake_due(sum(p.amount for p in pots), rake, hand.street)
        assert result.rake == due == sum(t.amount for t in taken)
        if hand.street == Street.THIRD:
            event("ended on 3rd street")
            assert not taken
        if taken:
            event("raked")
            assert len(taken) == 1
            first_award = next(i for i, e in enumerate(events) if isinstance(e, PotAwarded)
                               ) if any(isinstance(e, PotAwarded) for e in events) else None
            at = events.index(taken[0])
            assert first_award is None or at < first_award
            assert taken[0].pots == tuple(
                min(p.amount, max(0, due - sum(q.amount for q in pots[:i])))
                for i, p in enumerate(pots))
        assert fold(play.table.events) == state


@given(setup=tables(), rake=rakes, data=st.data())
def test_wallet_escrows_equal_folded_stacks(
        setup: TableSetup, rake: Rake | None, data: st.DataObject) -> None:
    """Each hand's ``settlement``, sent through the wallet's pure ledger (with the table's
    rake policy), leaves every seat's escrow equal to the stack folded from the events, and
    the house holding the rake."""
    play = Play(setup, rake)
    policy = RakePolicy() if rake is None else RakePolicy(percent_bps=rake.percent_bps,
                                                          cap=rake.cap)
    balances: dict[str, int] = {}

    def apply(command: object) -> None:
        nonlocal balances
        tx = ledger.decide(command)  # type: ignore[arg-type]
        ledger.check_guards(balances, tx)
        balances = ledger.evolve(balances, tx.postings)

    for seat, stack in setup.stacks.items():
        apply(Deposit(player_id=f"p{seat}", amount=stack, idempotency_key="d"))
        apply(BuyIn(player_id=f"p{seat}", table_id="t1", seat=seat, amount=stack,
                    idempotency_key="b"))
    for _ in range(MAX_HANDS):
        result = play.hand(data)
        if result is None:
            break
        apply(SettleHand(
            table_id="t1", hand_id=f"h{result.hand_number}", rake=result.rake,
            rake_policy=policy, ended_on=result.ended_on,
            results=tuple(SeatResult(seat=s.seat, player_id=s.player_id,
                                     amount_in=s.amount_in, amount_won=s.amount_won)
                          for s in result.seats)))
        state = fold(play.table.events)
        for seat in setup.stacks:
            assert balances.get(seat_account("t1", seat).key, 0) == state.stack(seat)
        assert balances.get(HOUSE.key, 0) == play.raked
