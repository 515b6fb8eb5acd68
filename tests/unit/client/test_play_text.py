"""What ``stud play`` says (studclient.tui.text), pure: the dealer log of whole hands played
by the rules' driver and delivered as a seat's public records, the award sentences, the
action labels and keys."""

from __future__ import annotations

import random

from rules import DECK, TableConfig
from rules.betting import ActionKind, LegalActions
from rules.commands import (
    Bet,
    Call,
    Check,
    Command,
    Complete,
    PostBringIn,
    Raise,
)
from rules.events import PotAwarded, Share
from rules.testing import StackedDeck, TableDriver
from rules.views import public_event
from stud.v1 import common_pb2 as A
from stud.v1 import table_pb2 as pb
from studclient.tui import text as t
from studkit.mapping import event_to_proto


def aggressive_seat_two(legal: LegalActions) -> Command:
    """Seat 2 bets and raises whenever it can; the others call or check."""
    kinds = {a.kind: a for a in legal.actions}
    seat = legal.seat
    if seat == 2:
        for kind, command in ((ActionKind.RAISE, Raise), (ActionKind.BET, Bet),
                              (ActionKind.COMPLETE, Complete)):
            if kind in kinds:
                return command(seat=seat)
    if ActionKind.CALL in kinds:
        return Call(seat=seat)
    if ActionKind.CHECK in kinds:
        return Check(seat=seat)
    if ActionKind.COMPLETE in kinds and ActionKind.BRING_IN not in kinds:
        return Complete(seat=seat)
    return PostBringIn(seat=seat)


def records(driver: TableDriver, start: int) -> list[pb.TableEventRecord]:
    """The driver's events from ``start`` as an observer's records (down cards hidden)."""
    return [pb.TableEventRecord(sequence=i, event=event_to_proto(public_event(e)))
            for i, e in enumerate(driver.events[start:], start=start + 1)]


def play(stacks: dict[int, int], seed: int) -> tuple[TableDriver, list[str]]:
    driver = TableDriver(TableConfig(), stacks=stacks)
    start = len(driver.events)
    cards = list(DECK)
    random.Random(seed).shuffle(cards)
    driver.play_hand(StackedDeck(cards), aggressive_seat_two)
    log = t.DealerLog()
    lines = [line for record in records(driver, start) for line in log.feed(record)]
    return driver, lines


def test_the_dealer_log_reads_like_the_history_with_side_pots_and_halves() -> None:
    for seed in range(40):
        driver, lines = play({1: 300, 2: 20_000, 3: 20_000}, seed)
        awards = [e for e in driver.events if isinstance(e, PotAwarded)]
        if max(a.pot for a in awards) >= 1 and any(a.share != Share.WHOLE for a in awards):
            break
    else:
        raise AssertionError("no hand with a side pot and a split in 40 seeds")
    text = "\n".join(lines)
    assert lines[0] == "Hand #1: seats 1, 2, 3 dealt in"
    assert lines[-1] == "*** Hand #1 is over ***"
    assert "is dealt a down card" not in text
    assert "*** 3rd street ***" in lines and "*** Showdown ***" in lines
    shown = [line for line in lines if " shows [" in line]
    assert shown and all(("; low " in line or "; no low" in line) for line in shown)
    summary = [line for line in lines if " wins " in line]
    assert any("the main pot" in line for line in summary)
    assert any("side pot 1" in line for line in summary)
    assert any(" half of " in line for line in summary)
    # No award is said twice, and every award is said.
    assert len(summary) == len({a.pot for a in awards})
    for award in awards:
        assert f"{award.amount:,}" in "\n".join(summary)


def test_award_sentences() -> None:
    whole = [PotAwarded(pot=0, seat=4, amount=80, share=Share.WHOLE)]
    assert t.award_summary(whole) == "Seat 4 wins the pot (80)"
    split = [PotAwarded(pot=0, seat=1, amount=150, share=Share.HIGH, hand="Two pair, kings "
                        "and fives"),
             PotAwarded(pot=0, seat=2, amount=75, share=Share.LOW, hand="7-5-3-2-A"),
             PotAwarded(pot=0, seat=3, amount=75, share=Share.LOW, hand="7-5-3-2-A")]
    assert t.award_summary(split) == (
        "Seat 1 wins the high half (150) with two pair, kings and fives; seat 2 wins 75 of "
        "the low half with 7-5-3-2-A; seat 3 wins 75 of the low half with 7-5-3-2-A")
    sides = [PotAwarded(pot=0, seat=1, amount=900, share=Share.WHOLE,
                        hand="Full house, aces full of twos"),
             PotAwarded(pot=1, seat=2, amount=200, share=Share.HIGH, hand="Straight, six high"),
             PotAwarded(pot=1, seat=3, amount=200, share=Share.LOW, hand="6-5-4-3-2")]
    assert t.award_summary(sides).splitlines() == [
        "Seat 1 wins the main pot (900) with a full house, aces full of twos",
        "Seat 2 wins the high half of side pot 1 (200) with a straight, six high; seat 3 wins "
        "the low half of side pot 1 (200) with 6-5-4-3-2"]


def test_keys_stand_for_the_legal_actions_of_the_seat_to_act_only() -> None:
    view = pb.TableView(viewer_seat=3)
    view.hand.to_act = 3
    view.hand.legal_actions.seat = 3
    view.hand.legal_actions.actions.extend([
        A.LegalAction(kind=A.ACTION_KIND_FOLD),
        A.LegalAction(kind=A.ACTION_KIND_CALL, amount=200, to=400),
        A.LegalAction(kind=A.ACTION_KIND_RAISE, amount=400, to=600, all_in=True)])
    labels = {key: t.action_label(a) for key in t.KEYS if (a := t.action_for(key, view))}
    assert labels == {"f": "Fold", "c": "Call 200", "b": "Raise to 600 (all-in)"}
    view.viewer_seat = 5
    assert all(t.action_for(key, view) is None for key in t.KEYS)
    assert t.action_for("c", None) is None


def test_down_cards_show_only_where_the_view_has_them() -> None:
    player = pb.PlayerView(seat=2)
    player.down.add()
    player.down.add().card.CopyFrom(A.Card(rank=A.RANK_TEN, suit=A.SUIT_SPADES))
    assert t.down_text(player.down) == [t.HIDDEN, "Ts"]


def test_the_turn_line_counts_down_to_the_deadline() -> None:
    from studclient.tui.app import PlayApp, PlayOptions

    now = [1_000.0]
    app = PlayApp(lambda: None, PlayOptions(), clock=lambda: now[0])  # type: ignore[arg-type,return-value]
    view = pb.TableView(viewer_seat=1)
    view.seats.add(seat=1, player_id="ann")
    view.seats.add(seat=2, player_id="bob")
    view.hand.phase = pb.HAND_PHASE_BETTING
    view.hand.to_act = 2
    view.hand.turn_deadline.seconds = 1_045
    view.hand.time_bank_ms = 30_000
    assert app.turn_text(view) == "Seat 2 (bob) to act · ⏱ 0:45 left (time bank 0:30)"
    now[0] = 1_044.2
    assert app.turn_text(view) == "Seat 2 (bob) to act · ⏱ 0:01 left (time bank 0:30)"
    now[0] = 1_050
    assert "⏱ 0:00 left" in app.turn_text(view)
    view.hand.to_act = 1
    view.hand.legal_actions.seat = 1
    view.hand.legal_actions.actions.add(kind=A.ACTION_KIND_CHECK)
    view.hand.legal_actions.actions.add(kind=A.ACTION_KIND_BET, amount=400, to=400)
    now[0] = 1_000
    assert app.turn_text(view) == ("Your turn · ⏱ 0:45 left (time bank 0:30) · c=Check, "
                                   "b=Bet 400")
    view.hand.phase = pb.HAND_PHASE_COMPLETE
    assert app.turn_text(view) == "Hand over: waiting for the next hand"
