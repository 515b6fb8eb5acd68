"""RULES.md §16 worked examples, E1-E28 (hand values E22-E24 are in test_hands.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import pytest

from rules import Reason, RuleViolation, parse_cards
from rules.betting import ActionKind
from rules.commands import (
    Bet,
    Call,
    Check,
    Complete,
    Fold,
    PostBringIn,
    Raise,
)
from rules.config import HeadsUpRaises, ShowdownOpener, TableConfig
from rules.dealing import deal_plan
from rules.events import (
    CommunityCardDealt,
    DownCardDealt,
    HandMucked,
    HandShown,
    PotAwarded,
    Share,
    UncalledBetReturned,
    UpCardDealt,
)
from rules.state import Phase
from rules.streets import Street
from rules.testing import TableDriver, action_command

BIG = 100_000
CONFIG = TableConfig()


def table(seats: Mapping[int, int] | list[int], config: TableConfig = CONFIG) -> TableDriver:
    stacks = seats if isinstance(seats, Mapping) else {s: BIG for s in seats}
    t = TableDriver(config, stacks=stacks)
    t.start()
    return t


def kinds(t: TableDriver) -> set[ActionKind]:
    return set(t.legal().kinds)


def to_of(t: TableDriver, kind: ActionKind) -> int:
    action = t.legal().get(kind)
    assert action is not None, f"{kind} not legal: {t.legal()}"
    return action.to


def fail_reason(t: TableDriver, command: object) -> Reason:
    before = t.state
    with pytest.raises(RuleViolation) as info:
        t.apply(command)  # type: ignore[arg-type]
    assert t.state == before
    return info.value.reason


def third_street(t: TableDriver, up: Mapping[int, str]) -> None:
    t.deal_street(up=up)


def checked_through(t: TableDriver) -> None:
    """Everyone checks (or calls) until the round ends."""
    while t.hand.phase == Phase.BETTING:
        seat = t.hand.to_act
        assert seat is not None
        t.apply(Check(seat=seat) if ActionKind.CHECK in kinds(t) else Call(seat=seat))


def bring_in_and_call(t: TableDriver) -> None:
    assert t.hand.to_act is not None
    t.apply(PostBringIn(seat=t.hand.to_act))
    checked_through(t)


# --- a scripted player for whole hands ----------------------------------------------------

def play(t: TableDriver, hands: Mapping[int, str],
         wants: Mapping[Street, Mapping[int, int | str]], mucks: frozenset[int] = frozenset(),
         ) -> dict[int, int]:
    """Deal every street from each seat's seven cards (down, down, up, up, up, up, down) and
    act by ``wants``: a street total to reach ("fold" folds when facing a wager). Returns
    the chips each seat received from pots."""
    cards = {s: parse_cards(h) for s, h in hands.items()}
    t.reserve(" ".join(hands.values()))
    community: str | None = None
    while not t.hand.is_over:
        phase = t.hand.phase
        if phase == Phase.DEALING:
            plan = t.plan()
            n = int(plan.street)
            if plan.street == Street.THIRD:
                t.deal_street(up={s: str(c[2]) for s, c in cards.items() if len(c) > 2},
                              down={s: f"{c[0]} {c[1]}" for s, c in cards.items() if len(c) > 2})
            elif plan.community:
                t.deal_street(community=community)
            else:
                key = "up" if plan.slots[0].up else "down"
                t.deal_street(**{key: {s: str(c[n - 1]) for s, c in cards.items()
                                       if len(c) >= n}})
        elif phase == Phase.BETTING:
            seat = t.hand.to_act
            assert seat is not None and t.hand.street is not None
            want = wants.get(t.hand.street, {}).get(seat, 0)
            legal = t.legal()
            wager = next((a for a in legal.actions if a.kind in (
                ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE)), None)
            if legal.get(ActionKind.BRING_IN):
                kind = (ActionKind.COMPLETE if wager and isinstance(want, int)
                        and want >= wager.to else ActionKind.BRING_IN)
            elif want == "fold" and legal.get(ActionKind.FOLD):
                kind = ActionKind.FOLD
            elif wager and isinstance(want, int) and wager.to <= want:
                kind = wager.kind
            elif legal.get(ActionKind.CALL):
                kind = ActionKind.CALL
            else:
                kind = ActionKind.CHECK
            t.apply(action_command(seat, kind))
        elif phase == Phase.REVEAL:
            t.reveal()
        elif phase == Phase.SHOWDOWN:
            t.showdown(mucks=mucks)
        else:  # pragma: no cover
            raise AssertionError(phase)
    received: dict[int, int] = defaultdict(int)
    for e in t.events:
        if isinstance(e, PotAwarded):
            received[e.seat] += e.amount
    return dict(received)


def net(t: TableDriver, start: Mapping[int, int]) -> dict[int, int]:
    return {s: t.state.stack(s) - v for s, v in start.items()}


# --- examples --------------------------------------------------------------------------

class TestE1BringInSuitTie:
    def test_lowest_suit_among_deuces_brings_in(self) -> None:
        """E1: the 2d brings in over the 2h and 2s."""
        t = table([1, 3, 5, 6])
        third_street(t, {1: "2s", 3: "2h", 5: "2d", 6: "9c"})
        assert t.hand.to_act == 5 and t.hand.bring_in_pending


class TestE2AceIsHighForTheBringIn:
    @pytest.mark.parametrize(("up", "expected"), [
        ({2: "Ac", 5: "2s"}, 5),
        ({2: "Ac", 4: "Ks"}, 4),
        ({2: "Ac", 4: "3d", 7: "3c"}, 7),
        ({2: "As", 4: "2c"}, 4),
    ])
    def test_ace_counts_high(self, up: dict[int, str], expected: int) -> None:
        """E2: a deuce or king brings in against an ace; suits break rank ties."""
        t = table(list(up))
        third_street(t, up)
        assert t.hand.to_act == expected


class TestE3BringInGetsNoOption:
    def test_round_ends_without_asking_bring_in_again(self) -> None:
        """E3: after four calls of the bring-in the round ends; pot 450; 4th is dealt next."""
        t = table([1, 2, 3, 4, 5])
        third_street(t, {1: "Kc", 2: "Qc", 3: "2c", 4: "Jc", 5: "Tc"})
        t.apply(PostBringIn(seat=3))
        for s in (4, 5, 1, 2):
            t.apply(Call(seat=s))
        assert t.hand.phase == Phase.DEALING and t.hand.pot_total == 450
        assert t.plan().street == Street.FOURTH


class TestE4EveryoneFoldsToTheBringIn:
    def test_bring_in_returned_and_antes_won(self) -> None:
        """E4: S3's 50 comes back uncalled; S3 nets +160, the others -40."""
        start = {s: 10_000 for s in (1, 2, 3, 4, 5)}
        t = table(start)
        third_street(t, {1: "Kc", 2: "Qc", 3: "2c", 4: "Jc", 5: "Tc"})
        t.apply(PostBringIn(seat=3))
        for s in (4, 5, 1):
            t.apply(Fold(seat=s))
        events = t.apply(Fold(seat=2))
        assert UncalledBetReturned(seat=3, amount=50) in events
        assert t.hand.is_over
        assert net(t, start) == {1: -40, 2: -40, 3: 160, 4: -40, 5: -40}
        assert not any(isinstance(e, (UpCardDealt, DownCardDealt)) and e.street > Street.THIRD
                       for e in t.events)


class TestE5CappedThirdStreet:
    def test_cap_after_completion_and_three_raises(self) -> None:
        """E5: the fourth full wager caps the round; raising is refused; pot 4,200."""
        t = table([1, 2, 3, 4, 5])
        third_street(t, {1: "Kc", 2: "Qc", 3: "2c", 4: "Jc", 5: "Tc"})
        t.apply(PostBringIn(seat=3))
        t.apply(Call(seat=4))
        t.apply(Complete(seat=5, to=200))
        t.apply(Raise(seat=1, to=400))
        t.apply(Raise(seat=2, to=600))
        t.apply(Raise(seat=3, to=800))
        assert (t.hand.target, t.hand.level, t.hand.full_wagers) == (800, 800, 4)
        assert kinds(t) == {ActionKind.FOLD, ActionKind.CALL}
        assert t.legal().get(ActionKind.CALL).amount == 750  # type: ignore[union-attr]
        assert fail_reason(t, Raise(seat=4)) == Reason.CAP_REACHED
        for s in (4, 5, 1, 2):
            t.apply(Call(seat=s))
        assert t.hand.phase == Phase.DEALING and t.hand.pot_total == 4_200


class TestE6BringInCompletes:
    def test_capped_after_completion_by_bring_in(self) -> None:
        """E6: S3 completes, three raises cap it; S2 and S3 may only fold or call."""
        t = table([1, 2, 3, 4, 5])
        third_street(t, {1: "Kc", 2: "Qc", 3: "2c", 4: "Jc", 5: "Tc"})
        t.apply(Complete(seat=3))
        t.apply(Raise(seat=4, to=400))
        t.apply(Raise(seat=5, to=600))
        t.apply(Raise(seat=1, to=800))
        assert kinds(t) == {ActionKind.FOLD, ActionKind.CALL} and to_of(t, ActionKind.CALL) == 800
        t.apply(Call(seat=2))
        assert t.hand.to_act == 3 and kinds(t) == {ActionKind.FOLD, ActionKind.CALL}
        assert t.legal().get(ActionKind.CALL).amount == 600  # type: ignore[union-attr]


def fourth_street_first(boards: Mapping[int, str]) -> int:
    t = table(list(boards))
    ups3 = {s: b.split()[0] for s, b in boards.items()}
    ups4 = {s: b.split()[1] for s, b in boards.items()}
    t.reserve(" ".join(ups4.values()))
    third_street(t, ups3)
    bring_in_and_call(t)
    t.deal_street(up=ups4)
    assert t.hand.to_act is not None
    return t.hand.to_act


class TestE7FirstToActTies:
    def test_tie_goes_to_lowest_seat(self) -> None:
        """E7a: equal ace-deuce boards; S2 acts first."""
        assert fourth_street_first({2: "Ah 2c", 4: "Ks Qs", 6: "As 2d"}) == 2

    def test_higher_board_wins(self) -> None:
        """E7b: A-3 beats A-2."""
        assert fourth_street_first({2: "Ah 2c", 4: "Ks Qs", 6: "As 3d"}) == 6

    def test_equal_pairs_lowest_seat(self) -> None:
        """E7c: sevens against sevens; S3 first."""
        assert fourth_street_first({3: "7h 7s", 5: "7c 7d"}) == 3


class TestE8RankingBoards:
    def test_pair_beats_no_pair_on_fourth(self) -> None:
        """E8a: 7-7 acts before A-K."""
        assert fourth_street_first({3: "7c 7d", 5: "As Ks"}) == 3


class TestE9OpenPairOnFourth:
    def test_bet_is_the_small_bet(self) -> None:
        """E9: with an open pair the only bet is 200; 400 is refused."""
        t = table([2, 4, 6])
        t.reserve("5h 9d Qs")
        third_street(t, {2: "3c", 4: "9c", 6: "Kd"})
        bring_in_and_call(t)
        t.deal_street(up={2: "5h", 4: "9d", 6: "Qs"})
        assert t.hand.to_act == 4 and to_of(t, ActionKind.BET) == 200
        assert fail_reason(t, Bet(seat=4, to=400)) == Reason.WRONG_AMOUNT
        t.apply(Bet(seat=4, to=200))


def to_fifth(seats: list[int], config: TableConfig = CONFIG,
             stacks: Mapping[int, int] | None = None, first: int | None = None) -> TableDriver:
    """Players reach 5th street; the lowest seat (or ``first``) has the highest board."""
    t = table(stacks or seats, config)
    lead = first or seats[0]
    t.reserve("Ad Ah 3h 4h 5h 6h 7h 8h 9h 3s 4s 5s 6s 7s 8s 9s")
    up3 = {s: ("Ac" if s == lead else f"{'3456789'[i]}d") for i, s in enumerate(seats)}
    third_street(t, up3)
    bring_in_and_call(t)
    t.deal_street(up={s: ("Ad" if s == lead else f"{'3456789'[i]}h")
                      for i, s in enumerate(seats)})
    checked_through(t)
    t.deal_street(up={s: ("Ah" if s == lead else f"{'3456789'[i]}s")
                      for i, s in enumerate(seats)})
    assert t.hand.street == Street.FIFTH and t.hand.to_act == lead
    return t


class TestE10HeadsUpAndTheCap:
    def test_capped_by_default(self) -> None:
        """E10a: heads-up, four full wagers cap the round."""
        t = to_fifth([2, 6])
        t.apply(Bet(seat=2, to=400))
        t.apply(Raise(seat=6, to=800))
        t.apply(Raise(seat=2, to=1200))
        t.apply(Raise(seat=6, to=1600))
        assert t.hand.full_wagers == 4 and kinds(t) == {ActionKind.CALL, ActionKind.FOLD}

    def test_round_starting_heads_up_is_uncapped(self) -> None:
        """E10b: ``round_starts_heads_up``: S2 may raise to 2,000."""
        t = to_fifth([2, 6], TableConfig(heads_up_raises=HeadsUpRaises.ROUND_STARTS_HEADS_UP))
        for seat, to in ((2, 400), (6, 800), (2, 1200), (6, 1600)):
            t.apply(Bet(seat=seat, to=to) if to == 400 else Raise(seat=seat, to=to))
        assert to_of(t, ActionKind.RAISE) == 2000
        t.apply(Raise(seat=2, to=2000))
        assert to_of(t, ActionKind.RAISE) == 2400

    def test_round_starting_three_handed_stays_capped(self) -> None:
        """E10c: ``round_starts_heads_up`` with three at the start keeps the cap."""
        t = to_fifth([2, 4, 6], TableConfig(heads_up_raises=HeadsUpRaises.ROUND_STARTS_HEADS_UP))
        t.apply(Bet(seat=2, to=400))
        t.apply(Raise(seat=4, to=800))
        t.apply(Fold(seat=6))
        t.apply(Raise(seat=2, to=1200))
        t.apply(Raise(seat=4, to=1600))
        assert kinds(t) == {ActionKind.CALL, ActionKind.FOLD}

    def test_heads_up_before_cap_lifts_it(self) -> None:
        """E10d: ``heads_up_before_cap``: after S6 folds, S2 may raise to 2,000."""
        t = to_fifth([2, 4, 6], TableConfig(heads_up_raises=HeadsUpRaises.HEADS_UP_BEFORE_CAP))
        t.apply(Bet(seat=2, to=400))
        t.apply(Raise(seat=4, to=800))
        t.apply(Fold(seat=6))
        t.apply(Raise(seat=2, to=1200))
        t.apply(Raise(seat=4, to=1600))
        assert to_of(t, ActionKind.RAISE) == 2000


def fifth_with_stacks(stacks: Mapping[int, int]) -> TableDriver:
    """Players on 5th street with ``stacks`` behind, having put in 90 (ante and bring-in)."""
    seats = sorted(stacks)
    return to_fifth(seats, stacks={s: v + 90 for s, v in stacks.items()})


class TestE11HalfBetRule:
    def test_incomplete_all_in_does_not_reopen(self) -> None:
        """E11a: an all-in for 550 over a 400 bet is incomplete; S1, S2 may only call."""
        t = fifth_with_stacks({1: BIG, 2: BIG, 3: 550, 4: BIG})
        t.apply(Bet(seat=1, to=400))
        t.apply(Call(seat=2))
        t.apply(Raise(seat=3, to=550))
        assert (t.hand.target, t.hand.level, t.hand.full_wagers) == (550, 400, 1)
        assert kinds(t) == {ActionKind.FOLD, ActionKind.CALL, ActionKind.RAISE}
        assert to_of(t, ActionKind.RAISE) == 800
        t.apply(Call(seat=4))
        assert t.hand.to_act == 1 and kinds(t) == {ActionKind.FOLD, ActionKind.CALL}
        assert fail_reason(t, Raise(seat=1)) == Reason.RAISE_NOT_REOPENED
        t.apply(Call(seat=1))
        assert kinds(t) == {ActionKind.FOLD, ActionKind.CALL}
        t.apply(Call(seat=2))
        assert t.hand.phase == Phase.DEALING
        assert all(p.street_total == 550 for p in t.hand.players)

    def test_all_in_of_half_a_bet_is_a_full_raise(self) -> None:
        """E11b: an all-in for 600 counts as a raise; S1 may raise to 1,000."""
        t = fifth_with_stacks({1: BIG, 2: BIG, 3: 600, 4: BIG})
        t.apply(Bet(seat=1, to=400))
        t.apply(Call(seat=2))
        t.apply(Raise(seat=3, to=600))
        assert (t.hand.level, t.hand.full_wagers) == (600, 2)
        t.apply(Call(seat=4))
        assert to_of(t, ActionKind.RAISE) == 1000

    def test_small_all_ins_add_up(self) -> None:
        """E11c: all-ins of 500 then 620 add up to a full raise; S4 and S1 may raise to 1,020."""
        t = fifth_with_stacks({1: BIG, 2: 500, 3: 620, 4: BIG})
        t.apply(Bet(seat=1, to=400))
        t.apply(Raise(seat=2, to=500))
        assert (t.hand.level, t.hand.full_wagers) == (400, 1)
        t.apply(Raise(seat=3, to=620))
        assert (t.hand.level, t.hand.full_wagers) == (620, 2)
        assert to_of(t, ActionKind.RAISE) == 1020
        t.apply(Call(seat=4))
        assert t.hand.to_act == 1 and to_of(t, ActionKind.RAISE) == 1020

    def test_caller_of_incomplete_raise(self) -> None:
        """E11d: S1 (reference 400) may raise to 1,020; S3 (reference 550) may only call."""
        t = fifth_with_stacks({1: BIG, 2: 550, 3: BIG, 4: 620})
        t.apply(Bet(seat=1, to=400))
        t.apply(Raise(seat=2, to=550))
        t.apply(Call(seat=3))
        t.apply(Raise(seat=4, to=620))
        assert t.hand.to_act == 1 and to_of(t, ActionKind.RAISE) == 1020
        t.apply(Call(seat=1))
        assert t.hand.to_act == 3 and kinds(t) == {ActionKind.FOLD, ActionKind.CALL}
        assert t.legal().get(ActionKind.CALL).amount == 70  # type: ignore[union-attr]


class TestE12ShortBringIn:
    def test_others_must_call_the_full_bring_in(self) -> None:
        """E12: S5 posts 30 all-in; calls are 50; main pot 280, side pot 60."""
        t = table({5: 70, 6: BIG, 7: BIG, 1: BIG})
        third_street(t, {5: "2c", 6: "Kd", 7: "Qd", 1: "Jd"})
        assert kinds(t) == {ActionKind.BRING_IN}
        t.apply(PostBringIn(seat=5))
        assert t.hand.player(5).all_in and t.hand.target == 50
        assert kinds(t) == {ActionKind.FOLD, ActionKind.CALL, ActionKind.COMPLETE}
        assert to_of(t, ActionKind.CALL) == 50 and to_of(t, ActionKind.COMPLETE) == 200
        for s in (6, 7, 1):
            t.apply(Call(seat=s))
        from rules.showdown import hand_pots
        pots = hand_pots(t.hand)
        assert [(p.amount, p.eligible) for p in pots] == [(280, (1, 5, 6, 7)), (60, (1, 6, 7))]


class TestE13AllInCompletion:
    def test_all_in_of_half_the_completion_counts(self) -> None:
        """E13a: an all-in to 120 completes; S5 may raise to 320; S3 may raise later."""
        t = table({3: BIG, 4: 160, 5: BIG})
        third_street(t, {3: "2c", 4: "Kd", 5: "Qd"})
        t.apply(PostBringIn(seat=3))
        assert to_of(t, ActionKind.COMPLETE) == 120
        t.apply(Complete(seat=4, to=120))
        assert (t.hand.level, t.hand.full_wagers) == (120, 1)
        assert to_of(t, ActionKind.RAISE) == 320
        t.apply(Call(seat=5))
        assert t.hand.to_act == 3 and to_of(t, ActionKind.RAISE) == 320

    def test_short_all_in_is_incomplete(self) -> None:
        """E13b: an all-in to 90 is incomplete; S5 may complete to 200; S3 may only call."""
        t = table({3: BIG, 4: 130, 5: BIG})
        third_street(t, {3: "2c", 4: "Kd", 5: "Qd"})
        t.apply(PostBringIn(seat=3))
        t.apply(Complete(seat=4, to=90))
        assert (t.hand.target, t.hand.level, t.hand.full_wagers) == (90, 0, 0)
        assert kinds(t) == {ActionKind.FOLD, ActionKind.CALL, ActionKind.COMPLETE}
        assert to_of(t, ActionKind.COMPLETE) == 200
        t.apply(Call(seat=5))
        assert t.hand.to_act == 3 and kinds(t) == {ActionKind.FOLD, ActionKind.CALL}
        assert t.legal().get(ActionKind.CALL).amount == 40  # type: ignore[union-attr]


class TestE14LowCardAllInFromAnte:
    def test_next_player_with_chips_brings_in(self) -> None:
        """E14: S2 is all-in from the ante with 2c; S3 (Ks) must bring in or complete."""
        t = table({2: 40, 3: BIG, 6: BIG})
        third_street(t, {2: "2c", 3: "Ks", 6: "Jd"})
        assert t.hand.to_act == 3
        assert kinds(t) == {ActionKind.BRING_IN, ActionKind.COMPLETE}
        from rules.showdown import hand_pots
        assert hand_pots(t.hand)[0].amount == 120


class TestE15HighestBoardAllIn:
    def test_action_starts_left_of_all_in_high_board(self) -> None:
        """E15: S3 has the highest board but is all-in; S5 acts first, then S8."""
        t = table({3: 240, 5: BIG, 8: BIG})
        t.reserve("Qd Kd Th 7h 9c 4c")
        third_street(t, {3: "Qc", 5: "As", 8: "Jh"})
        assert t.hand.to_act == 8  # Jh is lowest
        t.apply(PostBringIn(seat=8))
        t.apply(Complete(seat=3))
        t.apply(Call(seat=5))
        t.apply(Call(seat=8))
        t.deal_street(up={3: "Qd", 5: "Kd", 8: "Th"})
        checked_through(t)
        t.deal_street(up={3: "7h", 5: "9c", 8: "4c"})
        assert t.hand.player(3).all_in
        assert t.hand.to_act == 5
        t.apply(Check(seat=5))
        assert t.hand.to_act == 8


class TestE16UncalledBetWithAllIn:
    def test_uncalled_returned_and_pots_split(self) -> None:
        """E16: S4's 400 returns; main 3,720 split S1/S4; side 1,600 to S4."""
        start = {1: 1240, 4: 10_000, 6: 10_000}
        t = table(start)
        hands = {1: "Ks Kh Kd 9c 9h 4s 2d", 4: "7s 6d 4c 3h Ac Qc Jd", 6: "Th Td 5s 5h Js 8h 6c"}
        wants = {Street.THIRD: {1: 200, 4: 200, 6: 200}, Street.FOURTH: {1: 200, 4: 200, 6: 200},
                 Street.FIFTH: {1: 800, 4: 800, 6: 800}, Street.SIXTH: {4: 800, 6: 800},
                 Street.SEVENTH: {4: 400, 6: "fold"}}
        received = play(t, hands, wants)
        assert UncalledBetReturned(seat=4, amount=400) in t.events
        awards = [(e.pot, e.seat, e.amount, e.share) for e in t.events
                  if isinstance(e, PotAwarded)]
        assert sorted(awards) == [(0, 1, 1860, Share.HIGH), (0, 4, 1860, Share.LOW),
                                  (1, 4, 1600, Share.WHOLE)]
        assert received == {1: 1860, 4: 3460}
        assert net(t, start) == {1: 620, 4: 1420, 6: -2040}


class TestE17ThreeAllIns:
    def test_side_pots_splits_and_odd_cents(self) -> None:
        """E17: receipts S1 1,037, S2 4,360, S4 3,926, S6 604, S7 0."""
        start = {1: 1015, 2: 2538, 4: 3142, 6: 10_000, 7: 10_000}
        t = table(start)
        hands = {1: "7c 5d 4s 2h Ac Ks Kd", 2: "Js Jh Jd 9c 9d 3s Th",
                 4: "7h 5c 4d 2d Ah Qs Qc", 6: "8s 6h 3c 2s As 8d 8h", 7: "Tc Td 2c"}
        everything = {s: BIG for s in (1, 2, 4, 6)}
        wants = {st: {**everything, 7: "fold"} for st in Street}
        received = play(t, hands, wants)
        assert received == {1: 1037, 2: 4360, 4: 3926, 6: 604}
        assert net(t, start) == {1: 22, 2: 1822, 4: 784, 6: -2538, 7: -90}
        pots = defaultdict(int)
        for e in t.events:
            if isinstance(e, PotAwarded):
                pots[e.pot] += e.amount
        assert dict(pots) == {0: 4150, 1: 4569, 2: 1208}


def showdown_of(hands: Mapping[int, str]) -> dict[int, int]:
    """Everyone checks (or calls the bring-in) to the showdown."""
    t = table(list(hands))
    return play(t, hands, {})


class TestE18LowThatDoesNotQualify:
    def test_high_hand_scoops_without_low(self) -> None:
        """E18: no qualifying low; S1's kings take the whole pot."""
        got = showdown_of({1: "Ks Kh Qd Tc 7s 5d 2c", 6: "9d 6c 4h 3d Ah Js Jc"})
        assert got == {1: 2 * (40 + 50)}  # antes and the called bring-in, no low half
        assert split(2170, {1: "Ks Kh Qd Tc 7s 5d 2c", 6: "9d 6c 4h 3d Ah Js Jc"}) == {1: 2170}

    def test_paired_four_is_no_low(self) -> None:
        """E18: 9-7-5-4-4-A-K has no qualifying low (the fours count once)."""
        from rules.hands import best_low
        assert best_low(parse_cards("9s 7d 5c 4h 4d As Kh")) is None


class TestE19WheelScoops:
    def test_wheel_wins_both_halves(self) -> None:
        """E19: the wheel is the best high here and the best low."""
        got = showdown_of({2: "5s 4d 3c 2h As Kd Kc", 5: "8c 8h 7d 6s 4h 2d Qs"})
        assert got == {2: 2 * (40 + 50)}
        assert split(1850, {2: "5s 4d 3c 2h As Kd Kc", 5: "8c 8h 7d 6s 4h 2d Qs"}) == {2: 1850}


class TestE20Quartering:
    def test_shared_low_half_odd_cent_by_suit(self) -> None:
        """E20 (pot 3,250 scaled to this hand's pot): S1 high half plus a quarter; S5 the
        other quarter and the odd cent of the low half."""
        t = table([1, 5, 8])
        got = play(t, {1: "7h 5h 4h 2h Kh Ac 9s", 5: "7c 5d 4c 2d Ad Qc Qd",
                       8: "Js Jd Tc Td 9h 3c 3d"}, {})
        pot = sum(got.values())
        low_half = pot // 2
        high_half = pot - low_half
        assert got[1] == high_half + low_half // 2
        assert got[5] == low_half - low_half // 2
        assert 8 not in got
        # the 3,250 pot of the example
        from rules.hands import best_high, best_low
        from rules.side_pots import Pot, ShowdownHand, split_pot
        hands = {}
        for seat, text in ((1, "7h 5h 4h 2h Kh Ac 9s"), (5, "7c 5d 4c 2d Ad Qc Qd"),
                           (8, "Js Jd Tc Td 9h 3c 3d")):
            cards = parse_cards(text)
            hands[seat] = ShowdownHand(seat=seat, high=best_high(cards), low=best_low(cards),
                                       own_cards=cards)
        awards = split_pot(Pot(amount=3250, level=0, eligible=(1, 5, 8)), hands)
        totals: dict[int, int] = defaultdict(int)
        for a in awards:
            totals[a.seat] += a.amount
        assert dict(totals) == {1: 2437, 5: 813}


def split(pot: int, hands: Mapping[int, str]) -> dict[int, int]:
    from rules.hands import best_high, best_low
    from rules.side_pots import Pot, ShowdownHand, split_pot
    values = {}
    for seat, text in hands.items():
        cards = parse_cards(text)
        values[seat] = ShowdownHand(seat=seat, high=best_high(cards), low=best_low(cards),
                                    own_cards=cards)
    totals: dict[int, int] = defaultdict(int)
    for a in split_pot(Pot(amount=pot, level=0, eligible=tuple(sorted(hands))), values):
        totals[a.seat] += a.amount
    return dict(totals)


class TestE21TiedHighHands:
    def test_two_way_tie_odd_cent_to_highest_card(self) -> None:
        """E21a: S3's Kd beats S8's Qs for the odd cent."""
        assert split(2435, {3: "Ts 9d 8c 7h 6d Kc Kd", 8: "Th 9c 8d 7s 6c Qs 3d"}) == {
            3: 1218, 8: 1217}

    def test_three_way_tie_two_odd_cents(self) -> None:
        """E21b: odd cents to S4 (Ks) and S7 (Kh)."""
        assert split(1001, {1: "Ts 9d 8c 7h 6d Kc 2d", 4: "Th 9c 8d 7s 6c Ks 2c",
                            7: "Tc 9h 8h 7c 6s Kh 2h"}) == {1: 333, 4: 334, 7: 334}

    def test_e17_side_pot_one_extra_cent_goes_high(self) -> None:
        """14.2: an odd cent between the halves goes to the high half."""
        got = split(4569, {2: "Js Jh Jd 9c 9d 3s Th", 4: "7h 5c 4d 2d Ah Qs Qc"})
        assert got == {2: 2285, 4: 2284}


class TestE25DeckRunsShort:
    def test_community_card_with_eight_players(self) -> None:
        """E25a: 48 cards dealt, stub 4 < 8: one community card; S3 still acts first."""
        boards = {1: "2c 3d 4h 6s", 2: "3c 4d 6h 7s", 3: "Qc Qd 9h 4s", 4: "4c 6d 7h 9s",
                  5: "6c 8d Th Js", 6: "5c 5h 8s 7d", 7: "7c 9c Jh Ks", 8: "8c Tc Jd Kh"}
        t = table(list(boards))
        t.reserve(" ".join(boards.values()) + " 5d")
        for i in range(4):
            t.deal_street(up={s: b.split()[i] for s, b in boards.items()})
            if i == 0:
                bring_in_and_call(t)
            else:
                checked_through(t)
        plan = t.plan()
        assert plan.community and t.hand.dealt == 48
        events = t.deal_street(community="5d")
        assert events == (CommunityCardDealt(card=parse_cards("5d")[0]),)
        assert t.hand.phase == Phase.BETTING and t.hand.to_act == 3

    @staticmethod
    def _round_with_folds(t: TableDriver, folders: set[int]) -> None:
        """The first player bets (or checks if folding), folders fold, the rest call."""
        while t.hand.phase == Phase.BETTING:
            s = t.hand.to_act
            assert s is not None
            legal = t.legal()
            if s in folders and legal.get(ActionKind.FOLD):
                t.apply(Fold(seat=s))
            elif legal.get(ActionKind.CALL):
                t.apply(Call(seat=s))
            elif legal.get(ActionKind.BET) and s not in folders and folders:
                t.apply(Bet(seat=s))
            else:
                t.apply(Check(seat=s))

    @pytest.mark.parametrize(("early_fold", "stub"), [
        (None, 4), (Street.FIFTH, 5), (Street.FOURTH, 6)])
    @pytest.mark.parametrize("sixth_street_folds", [0, 1, 2, 3, 4])
    def test_when_a_community_card_is_needed(
        self, early_fold: Street | None, stub: int, sixth_street_folds: int
    ) -> None:
        """E25b: a community card exactly when fewer cards remain than players at 7th."""
        t = table(list(range(1, 9)))
        t.deal_street()
        bring_in_and_call(t)
        for street in (Street.FOURTH, Street.FIFTH, Street.SIXTH):
            t.deal_street()
            folders = {8} if street == early_fold else set()
            if street == Street.SIXTH:
                alive = [p.seat for p in t.hand.in_hand]
                folders = set(alive[:sixth_street_folds])
            self._round_with_folds(t, folders)
        at_seventh = len(t.hand.in_hand)
        assert 52 - t.hand.dealt == stub
        assert t.plan().community == (stub < at_seventh)

    def test_burns_reshuffle_then_community(self) -> None:
        """E25c: burns on, eight to 7th: stub 1 + 3 burns < 9: reshuffle, burn, community."""
        t = table(list(range(1, 9)), TableConfig(burn_cards=True))
        t.deal_street()
        bring_in_and_call(t)
        for _ in range(3):
            assert t.plan().burn
            t.deal_street()
            checked_through(t)
        plan = t.plan()
        assert plan.burn and plan.reshuffle_burns and plan.community
        assert t.hand.dealt == 48 and t.hand.burned == 3

    def test_burns_reshuffle_then_normal_deal(self) -> None:
        """E25d: burns on, seven to 7th: stub 7 + 3 burns >= 8: reshuffle, burn, deal."""
        t = table(list(range(1, 8)), TableConfig(burn_cards=True))
        t.deal_street()
        bring_in_and_call(t)
        for _ in range(3):
            t.deal_street()
            checked_through(t)
        plan = t.plan()
        assert plan.reshuffle_burns and not plan.community and len(plan.slots) == 7


class TestE26ShowdownOrder:
    def _play(self, config: TableConfig) -> TableDriver:
        t = table([2, 5, 7], config)
        wants = {Street.SIXTH: {2: 400, 5: 800, 7: 800}}
        # RULES E26's cards in dealing order (down, down, four up, down)
        play(t, {2: "7d 6c Kd Kh 4h 2s 3c", 5: "8d 7s 8c 7h 5c 3d 2h",
                 7: "Ad Kc As Qh 9s 6d 4c"}, wants, mucks=frozenset({2, 5, 7}))
        return t

    def test_last_aggressor_shows_first_and_losers_may_muck(self) -> None:
        """E26: S5 shows first; S7 may muck; S2 is shown (his low is best); halves split."""
        t = self._play(CONFIG)
        shows = [e for e in t.events if isinstance(e, (HandShown, HandMucked))]
        assert [(type(e).__name__, e.seat) for e in shows] == [
            ("HandShown", 5), ("HandMucked", 7), ("HandShown", 2)]
        awards = {(e.seat, e.share, e.amount) for e in t.events if isinstance(e, PotAwarded)}
        # each of three put in 40 + 50 + 800; the halves of the 2,670 pot are equal
        assert awards == {(5, Share.HIGH, 1335), (2, Share.LOW, 1335)}

    def test_first_to_act_option(self) -> None:
        """E26 with ``first_to_act``: order S2, S5, S7; S5 shown automatically."""
        t = self._play(TableConfig(showdown_opener=ShowdownOpener.FIRST_TO_ACT))
        shows = [e for e in t.events if isinstance(e, (HandShown, HandMucked))]
        assert [(type(e).__name__, e.seat) for e in shows] == [
            ("HandShown", 2), ("HandShown", 5), ("HandMucked", 7)]


class TestE27AllInRunout:
    def test_hands_face_up_and_pot_split(self) -> None:
        """E27: S2 all-in on 4th; hands turned up; 640 each to S7 (high) and S2 (low)."""
        start = {2: 640, 7: 10_000}
        t = table(start)
        wants = {Street.THIRD: {2: 200, 7: 200}, Street.FOURTH: {2: BIG, 7: BIG}}
        got = play(t, {2: "Ac 2d 3h 6s 9c 7c Jd", 7: "Kc Kd 8s 6h 4d Qs Th"}, wants)
        assert got == {2: 640, 7: 640}
        phases = [type(e).__name__ for e in t.events]
        assert phases.count("HandExposed") == 2
        assert phases.index("HandExposed") < phases.index("UpCardDealt", phases.index(
            "HandExposed"))


class TestE28DealingOrder:
    def test_three_passes_then_one_card_each(self) -> None:
        """E28: S1 c1, S3 c2, S8 c3 down; c4-c6 down; c7-c9 up; then c10, c11 after S1 folds."""
        t = table([1, 3, 8])
        plan = deal_plan(t.hand, t.config)
        assert plan is not None
        assert [(s.seat, s.up) for s in plan.slots] == [
            (1, False), (3, False), (8, False), (1, False), (3, False), (8, False),
            (1, True), (3, True), (8, True)]
        deck = parse_cards("Kc Kd Kh Ks Qc Qd 2c 9h Th 5c 6c")
        t.deal(deck[:9])
        hand = t.hand
        assert hand.player(1).down == (deck[0], deck[3]) and hand.player(1).up == (deck[6],)
        assert hand.player(8).down == (deck[2], deck[5]) and hand.player(8).up == (deck[8],)
        t.apply(PostBringIn(seat=1))
        t.apply(Complete(seat=3))
        t.apply(Call(seat=8))
        t.apply(Fold(seat=1))
        t.deal(deck[9:11])
        assert t.hand.player(3).up[-1] == deck[9] and t.hand.player(8).up[-1] == deck[10]
