"""Rules pinned by section where the worked examples do not reach: 7.7, 7.9, 9.7 at 7th
street, 10.4 dealing after a reshuffle, 11.4 with side pots, 6.12 time-outs."""

from __future__ import annotations

from rules import Reason, RuleViolation, parse_cards
from rules.betting import ActionKind
from rules.commands import Bet, Call, Check, Complete, Fold, PostBringIn, TimeOut
from rules.config import TableConfig
from rules.events import (
    ActionTimedOut,
    BringInPosted,
    BurnsReshuffled,
    CardBurned,
    Checked,
    CommunityCardDealt,
    Folded,
    HandMucked,
    HandShown,
    PotAwarded,
    UpCardDealt,
)
from rules.state import Phase
from rules.streets import Street
from rules.testing import TableDriver

BIG = 100_000


def started(stacks: dict[int, int], config: TableConfig | None = None) -> TableDriver:
    t = TableDriver(config or TableConfig(), stacks=stacks)
    t.start()
    return t


def call_down(t: TableDriver) -> None:
    while t.hand.phase == Phase.BETTING:
        seat = t.hand.to_act
        assert seat is not None
        t.apply(Check(seat=seat) if ActionKind.CHECK in t.legal().kinds else Call(seat=seat))


class TestSection7:
    def test_7_7_bring_in_completes_all_in_for_less(self) -> None:
        """7.7: with 120 behind (more than the bring-in, less than the small bet) the
        bring-in player may complete all-in to 120, which counts as the completion (6.5)."""
        t = started({1: 160, 2: BIG, 3: BIG})
        t.deal_street(up={1: "2c", 2: "Kd", 3: "Qd"})
        legal = t.legal()
        assert legal.get(ActionKind.BRING_IN).amount == 50  # type: ignore[union-attr]
        complete = legal.get(ActionKind.COMPLETE)
        assert complete is not None and complete.to == 120 and complete.all_in
        t.apply(Complete(seat=1, to=120))
        assert (t.hand.target, t.hand.level, t.hand.full_wagers) == (120, 120, 1)
        assert t.legal().get(ActionKind.RAISE).to == 320  # type: ignore[union-attr]

    def test_7_7_short_bring_in_may_only_post(self) -> None:
        """7.7: with no more than the bring-in behind, only posting it (all-in) is legal."""
        t = started({1: 90, 2: BIG, 3: BIG})
        t.deal_street(up={1: "2c", 2: "Kd", 3: "Qd"})
        assert t.legal().kinds == {ActionKind.BRING_IN}
        before = t.state
        try:
            t.apply(Complete(seat=1))
        except RuleViolation as exc:
            assert exc.reason == Reason.ILLEGAL_ACTION
        assert t.state == before

    def test_7_9_nobody_brings_in_when_one_player_has_chips(self) -> None:
        """7.9: fewer than two players with chips after the antes: no bring-in, no betting;
        the hands are turned up and the rest is dealt (9.7)."""
        t = started({1: 40, 2: 30, 3: BIG})
        t.deal_street(up={1: "2c", 2: "Kd", 3: "Qd"})
        assert t.hand.phase == Phase.REVEAL and t.hand.bring_in_seat is None
        assert not any(isinstance(e, BringInPosted) for e in t.events)


class TestSection9:
    def test_9_7_everyone_shown_when_seventh_ends_with_one_able(self) -> None:
        """9.7/11.6: 7th street betting ends with one player able to act (the others all-in):
        every hand still in is shown and muck requests are ignored."""
        t = started({1: 90, 2: BIG, 3: BIG})
        t.deal_street(up={1: "2c", 2: "Kd", 3: "Qd"})
        t.apply(PostBringIn(seat=1))  # all-in: 40 ante + 50
        t.apply(Call(seat=2))
        t.apply(Call(seat=3))
        for _ in range(3):
            t.deal_street()
            call_down(t)
        t.deal_street()
        first = t.hand.to_act
        assert first is not None
        t.apply(Bet(seat=first))
        other = t.hand.to_act
        assert other is not None
        t.apply(Fold(seat=other))
        assert t.hand.phase == Phase.SHOWDOWN
        events = t.showdown(mucks={1, 2, 3})
        shown = {e.seat for e in events if isinstance(e, HandShown)}
        assert shown == {1, first}
        assert not any(isinstance(e, HandMucked) for e in events)


class TestSection10:
    def test_10_4_reshuffle_burn_and_community_card_are_dealt(self) -> None:
        """10.4 / E25c: burns on, eight to 7th street: the burns are reshuffled into the stub,
        one is burned and one community card is dealt; betting follows on 7th street."""
        t = started({s: BIG for s in range(1, 9)}, TableConfig(burn_cards=True))
        t.deal_street()
        t.apply(PostBringIn(seat=t.hand.to_act))  # type: ignore[arg-type]
        call_down(t)
        for _ in range(3):
            t.deal_street()
            call_down(t)
        events = t.deal_street()
        assert [type(e) for e in events] == [BurnsReshuffled, CardBurned, CommunityCardDealt]
        assert t.hand.burned == 1 and t.hand.community is not None
        assert t.hand.phase == Phase.BETTING and t.hand.street == Street.SEVENTH


class TestSection11:
    def test_11_4_side_pot_contender_is_shown(self) -> None:
        """11.4: a player beaten in the main pot is still shown when he wins or ties a side
        pot he is eligible for with other players."""
        hands = {
            1: "Ah Ad As Kh Kd 9c 9d",   # full house: best high, all-in for the main pot
            2: "Qh Qd 3c 4c 5d Jc 6s",   # pair of queens, no low... (has 6-5-4-3-? no A/2)
            3: "Js Jd 2h 7c 8h Ts 3s",   # pair of jacks, no low
        }
        t = started({1: 290, 2: BIG, 3: BIG})
        cards = {s: parse_cards(h) for s, h in hands.items()}
        t.reserve(" ".join(hands.values()))
        t.deal_street(up={s: str(c[2]) for s, c in cards.items()},
                      down={s: f"{c[0]} {c[1]}" for s, c in cards.items()})
        # 3rd street: everyone to 200; seat 1 goes all-in over the next streets
        while t.hand.street == Street.THIRD and t.hand.phase == Phase.BETTING:
            seat = t.hand.to_act
            assert seat is not None
            legal = t.legal()
            if legal.get(ActionKind.COMPLETE) and seat == 2:
                t.apply(Complete(seat=seat))
            elif legal.get(ActionKind.BRING_IN):
                t.apply(PostBringIn(seat=seat))
            else:
                t.apply(Call(seat=seat))
        for n in range(4, 8):
            t.deal_street(**{("up" if n < 7 else "down"): {
                s: str(c[n - 1]) for s, c in cards.items()}})
            while t.hand.phase == Phase.BETTING:
                seat = t.hand.to_act
                assert seat is not None
                legal = t.legal()
                wager = next((a for a in legal.actions if a.kind in (
                    ActionKind.BET, ActionKind.RAISE)), None)
                if wager and seat == 2 and t.hand.target == 0:
                    t.apply(Bet(seat=seat))
                elif legal.get(ActionKind.CALL):
                    t.apply(Call(seat=seat))
                else:
                    t.apply(Check(seat=seat))
        assert t.hand.phase == Phase.SHOWDOWN and t.hand.player(1).all_in
        events = t.showdown(mucks={1, 2, 3})
        shown = [e.seat for e in events if isinstance(e, HandShown)]
        # seat 2 bet last; seat 3's jacks lose the main pot to seat 1 and the side pot to
        # seat 2's queens, so seat 3 alone may muck
        assert shown[0] == 2 and 1 in shown and 3 not in shown
        side = [e for e in events if isinstance(e, PotAwarded) and e.pot == 1]
        assert {e.seat for e in side} == {2}


class TestSection6:
    def test_6_12_time_out_posts_checks_or_folds(self) -> None:
        """6.12: a bring-in player who times out posts; later a timed-out player checks when
        checking is legal, and folds when facing a wager."""
        t = started({1: BIG, 2: BIG, 3: BIG})
        t.reserve("3c Kh Qh")
        t.deal_street(up={1: "2c", 2: "Kd", 3: "Qd"})
        events = t.apply(TimeOut(seat=1))
        assert isinstance(events[0], ActionTimedOut) and isinstance(events[1], BringInPosted)
        t.apply(Call(seat=2))
        t.apply(Call(seat=3))
        t.deal_street(up={1: "3c", 2: "Kh", 3: "Qh"})
        assert t.hand.to_act == 2
        events = t.apply(TimeOut(seat=2))
        assert isinstance(events[1], Checked)
        t.apply(Bet(seat=3))
        events = t.apply(TimeOut(seat=1))
        assert isinstance(events[1], Folded)
        assert not any(isinstance(e, UpCardDealt) and e.street == Street.FIFTH
                       for e in t.events)
