"""RULES 2.4 (rake) and 9.8 (void hand), and the ``settlement`` query over both."""

from __future__ import annotations

import pytest

from rules import Reason, RuleViolation
from rules.commands import Bet, Call, Check, Complete, Fold, PostBringIn, VoidHand
from rules.config import Rake, TableConfig
from rules.events import HandEnded, HandVoided, PotAwarded, RakeTaken, Share
from rules.history import render_history
from rules.rake import rake_due, take_rake
from rules.settlement import Settlement, SettlementSeat, settlement
from rules.state import Phase
from rules.streets import Street
from rules.testing import TableDriver

RAKE = Rake(500, 30)
CONFIG = TableConfig(rake=RAKE)


class TestRakeRule:
    def test_worked_example(self) -> None:
        """RULES 2.4: pots 1,000 and 150, 5% capped at 30: 30, all from the main pot."""
        amount = rake_due(1_000 + 150, RAKE, Street.FIFTH)
        assert amount == 30
        assert take_rake((1_000, 150), amount) == (30, 0)

    @pytest.mark.parametrize(("pots", "amount", "taken"), [
        ((1_000, 150), 30, (30, 0)),
        ((20, 150), 30, (20, 10)),
        ((5, 5, 100), 12, (5, 5, 2)),
        ((0,), 0, (0,)),
    ])
    def test_main_pot_first(self, pots: tuple[int, ...], amount: int,
                            taken: tuple[int, ...]) -> None:
        """The rake comes from the main pot, then the side pots in the order made."""
        assert take_rake(pots, amount) == taken

    @pytest.mark.parametrize(("pots", "rake", "street", "amount"), [
        (1_150, RAKE, Street.THIRD, 0),
        (1_150, RAKE, None, 0),
        (1_150, None, Street.SEVENTH, 0),
        (399, RAKE, Street.FOURTH, 19),
        (10_000, Rake(0, 0), Street.SEVENTH, 0),
        (10_000, Rake(10_000, 50_000), Street.SEVENTH, 10_000),
    ])
    def test_due(self, pots: int, rake: Rake | None, street: Street | None,
                 amount: int) -> None:
        """None on 3rd street or without a street; else min(cap, floor(P * bps / 10000))."""
        assert rake_due(pots, rake, street) == amount

    @pytest.mark.parametrize(("bps", "cap"), [(-1, 10), (10_001, 10), (500, 0), (0, -1),
                                              (True, 10)])
    def test_invalid_rake_refused(self, bps: int, cap: int) -> None:
        """0..10000 basis points; a positive cap when raking (RULES 2.4)."""
        with pytest.raises(RuleViolation) as caught:
            Rake(bps, cap)
        assert caught.value.reason == Reason.INVALID_CONFIG

    def test_config_refuses_a_non_rake(self) -> None:
        with pytest.raises(RuleViolation):
            TableConfig(rake=(500, 30))  # type: ignore[arg-type]


def _side_pot_hand(config: TableConfig = CONFIG) -> TableDriver:
    """Seat 1 all-in on 4th street for 440 (main pot 1,320, which it wins with aces full),
    seats 2 and 3 bet on into a side pot of 800 that seat 3 wins with queens up."""
    t = TableDriver(config, stacks={1: 440, 2: 5_000, 3: 5_000})
    t.start()
    t.deal_street(down={1: "As Ad", 2: "Ts 9s", 3: "2s 2h"}, up={1: "2c", 2: "Jh", 3: "Qh"})
    t.apply(PostBringIn(seat=1))
    t.apply(Complete(seat=2))
    t.apply(Call(seat=3))
    t.apply(Call(seat=1))
    t.deal_street(up={1: "Ah", 2: "Jd", 3: "Qc"})
    t.apply(Bet(seat=3))
    t.apply(Call(seat=1))  # all-in
    t.apply(Call(seat=2))
    t.deal_street(up={1: "Kc", 2: "3c", 3: "7d"})
    t.apply(Bet(seat=3))
    t.apply(Call(seat=2))
    t.deal_street(up={1: "Kd", 2: "9c", 3: "8h"})  # seat 1 (all-in) shows kings: seat 2 first
    t.apply(Check(seat=2))
    t.apply(Check(seat=3))
    t.deal_street(down={1: "Qs", 2: "Td", 3: "9h"})
    t.apply(Check(seat=2))
    t.apply(Check(seat=3))
    t.showdown()
    return t


class TestRakeInAHand:
    def test_rake_before_the_awards_from_the_main_pot(self) -> None:
        """Pots 1,320 and 800: 5% is 106, capped at 30, all from the main pot, which is
        awarded as 1,290; the stacks fold to what the wallet holds."""
        t = _side_pot_hand()
        hand_events = t.events[t.events.index(next(
            e for e in t.events if isinstance(e, RakeTaken))):]
        assert hand_events[0] == RakeTaken(amount=30, pots=(30, 0))
        awards = [e for e in hand_events if isinstance(e, PotAwarded)]
        assert [(a.pot, a.seat, a.amount, a.share) for a in awards] == [
            (0, 1, 1_290, Share.WHOLE), (1, 3, 800, Share.WHOLE)]
        assert isinstance(hand_events[-1], HandEnded)
        assert [t.state.stack(s) for s in (1, 2, 3)] == [1_290, 4_160, 4_960]
        assert sum(t.state.stack(s) for s in (1, 2, 3)) + 30 == 440 + 5_000 + 5_000

    def test_settlement_with_rake(self) -> None:
        t = _side_pot_hand()
        assert settlement(t.state) == Settlement(
            hand_number=1, rake=30, ended_on=Street.SEVENTH, voided=False, seats=(
                SettlementSeat(seat=1, player_id="p1", amount_in=440, amount_won=1_290),
                SettlementSeat(seat=2, player_id="p2", amount_in=840, amount_won=0),
                SettlementSeat(seat=3, player_id="p3", amount_in=840, amount_won=800),
            ))

    def test_no_rake_without_a_rake(self) -> None:
        t = _side_pot_hand(TableConfig())
        assert not any(isinstance(e, RakeTaken) for e in t.events)
        assert [t.state.stack(s) for s in (1, 2, 3)] == [1_320, 4_160, 4_960]

    def test_no_rake_on_third_street(self) -> None:
        """Everyone folds on 3rd street: no rake, whatever the pot."""
        t = TableDriver(CONFIG, stacks={1: 1_000, 2: 1_000, 3: 1_000})
        t.start()
        t.deal_street(up={1: "2c", 2: "Kd", 3: "Ah"})
        t.apply(PostBringIn(seat=1))
        t.apply(Complete(seat=2))
        t.apply(Fold(seat=3))
        t.apply(Fold(seat=1))
        assert not any(isinstance(e, RakeTaken) for e in t.events)
        s = settlement(t.state)
        assert s is not None and s.rake == 0 and s.ended_on == Street.THIRD

    def test_rake_when_won_by_folds_on_fourth(self) -> None:
        """A hand won without a showdown after 4th street's cards pays rake too."""
        t = TableDriver(CONFIG, stacks={1: 1_000, 2: 1_000})
        t.start()
        t.deal_street(up={1: "2c", 2: "Kd"})
        t.apply(PostBringIn(seat=1))
        t.apply(Call(seat=2))
        t.deal_street(up={1: "3c", 2: "Kh"})
        t.apply(Bet(seat=2))
        t.apply(Fold(seat=1))
        taken = [e for e in t.events if isinstance(e, RakeTaken)]
        # pots: antes 80 + bring-in 50 + call 50 = 180 after the uncalled bet went back
        assert taken == [RakeTaken(amount=9, pots=(9,))]
        assert [e.amount for e in t.events if isinstance(e, PotAwarded)] == [171]
        assert t.state.stack(1) + t.state.stack(2) == 2_000 - 9
        s = settlement(t.state)
        assert s is not None
        assert sum(x.amount_won for x in s.seats) + s.rake == s.amount_in == 180

    def test_history_shows_the_rake(self) -> None:
        text = render_history(_side_pot_hand().events)
        assert "Rake 30 taken (30 from the main pot)" in text


class TestVoid:
    @pytest.mark.parametrize("phase", [Phase.DEALING, Phase.BETTING, Phase.SHOWDOWN])
    def test_void_returns_every_chip(self, phase: Phase) -> None:
        """RULES 9.8: every ante and wager back to its owner, no rake, nobody wins."""
        t = TableDriver(CONFIG, stacks={1: 1_000, 2: 700, 3: 2_000})
        t.start()
        if phase != Phase.DEALING:
            t.reserve("3c Kh Ac")
            t.deal_street(up={1: "2c", 2: "Kd", 3: "Ah"})
            t.apply(PostBringIn(seat=1))
            t.apply(Complete(seat=2))
            t.apply(Call(seat=3))
            t.apply(Call(seat=1))
            t.deal_street(up={1: "3c", 2: "Kh", 3: "Ac"})
            t.apply(Bet(seat=3))
            if phase == Phase.SHOWDOWN:
                t.apply(Call(seat=1))
                t.apply(Call(seat=2))
                for _ in range(3):
                    t.deal_street()
                    t.apply(Check(seat=t.legal().seat))
                    t.apply(Check(seat=t.legal().seat))
                    t.apply(Check(seat=t.legal().seat))
        assert t.hand.phase == phase
        events = t.apply(VoidHand(reason="dealer unreachable"))
        assert events == (HandVoided(hand_number=1, reason="dealer unreachable"),
                          HandEnded(hand_number=1))
        assert [t.state.stack(s) for s in (1, 2, 3)] == [1_000, 700, 2_000]
        assert t.hand.is_over and t.hand.pot_total == 0
        s = settlement(t.state)
        assert s is not None and s.voided and s.rake == 0 and s.ended_on is None
        assert all(x.amount_won == x.amount_in for x in s.seats)
        assert "Hand #1 is void: dealer unreachable" in render_history(t.events)

    def test_void_refused_without_a_hand(self) -> None:
        t = TableDriver(CONFIG, stacks={1: 1_000, 2: 1_000})
        with pytest.raises(RuleViolation) as caught:
            t.apply(VoidHand(reason="x"))
        assert caught.value.reason == Reason.NO_HAND_IN_PROGRESS
        t.start()
        with pytest.raises(RuleViolation) as caught:
            t.apply(VoidHand(reason=" "))
        assert caught.value.reason == Reason.INVALID_COMMAND
        t.apply(VoidHand(reason="x"))
        with pytest.raises(RuleViolation) as caught:
            t.apply(VoidHand(reason="x"))
        assert caught.value.reason == Reason.NO_HAND_IN_PROGRESS

    def test_next_hand_after_a_void(self) -> None:
        t = TableDriver(CONFIG, stacks={1: 1_000, 2: 1_000})
        t.start()
        t.apply(VoidHand(reason="x"))
        t.start()
        assert t.hand.hand_number == 2
