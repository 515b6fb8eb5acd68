"""The PHH actions kept by :func:`rules.phh.format.parse_action` are the actions
:func:`rules.phh.format.read_action` parses from the same text for as many players, whatever
was parsed before; a text that is not an action is refused every time. The same for the
table configurations :func:`rules.phh.table.replay_config` keeps."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rules.config import TableConfig
from rules.errors import RuleViolation
from rules.phh import VARIANT, PhhHand, table
from rules.phh import format as phh_format
from rules.phh.format import PhhError, parse_action, read_action
from rules.phh.table import replay_config

TEXTS = ("p1 cc", "p3 cc", "p2 f", "p8 pb", "p3 cbr 200", "p2 cbr 2.5", "d dh p3 ????Kd",
         "d dh p1 AhKd7c", "d db 9s", "p3 sm", "p3 sm -", "p2 sm AcKd", "# a comment",
         "p1 cc # calls", "p9 cc", "p1 xx", "d dh p2 Zz", "p1 cbr lots")


def _outcome(parse: object, text: str, players: int) -> object:
    try:
        return parse(text, players)  # type: ignore[operator]
    except PhhError as error:
        return ("refused", str(error))


@pytest.mark.parametrize("order", [1, -1])
def test_kept_actions_are_the_actions_read(order: int) -> None:
    phh_format._ACTIONS.clear()
    for _ in range(2):  # first read, then found
        for players in range(2, 9)[::order]:
            for text in TEXTS:
                assert (_outcome(parse_action, text, players)
                        == _outcome(read_action, text, players)), (text, players)


def test_the_actions_kept_are_bounded() -> None:
    phh_format._ACTIONS.clear()
    for amount in range(1, phh_format._ACTIONS_KEPT + 10):
        assert parse_action(f"p1 cbr {amount}", 2).amount == amount
        assert len(phh_format._ACTIONS) <= phh_format._ACTIONS_KEPT


def _config_outcome(hand: PhhHand) -> object:
    try:
        return replay_config(hand)
    except PhhError as error:
        return ("refused", str(error))


def _fresh_config(hand: PhhHand) -> object:
    """replay_config's configuration made anew (TableConfig's own checks)."""
    count = len(hand.starting_stacks)
    highest = max(hand.seats) if hand.seats else count
    seats = hand.seat_count if hand.seat_count and highest <= hand.seat_count <= 8 else 8
    try:
        return TableConfig(seats=seats, small_bet=hand.small_bet, big_bet=hand.big_bet,
                           ante=hand.antes[0] if hand.antes else 0, bring_in=hand.bring_in)
    except RuleViolation as error:
        return ("refused", str(error))


def test_kept_configurations_are_the_ones_made() -> None:
    table._CONFIGS.clear()
    base = PhhHand(variant=VARIANT, antes=(40, 40), bring_in=50, small_bet=200, big_bet=400,
                   starting_stacks=(1000, 1000), actions=())
    changes: list[dict[str, object]] = [
        {}, {"seat_count": 4}, {"seats": (2, 7), "seat_count": 6}, {"small_bet": 200.0},
        {"small_bet": True}, {"antes": (0, 0)}, {"bring_in": 300},
        {"big_bet": -1}]
    hands = []
    for change in changes:
        try:
            hands.append(replace(base, **change))
        except TypeError:  # compiled, PhhHand itself refuses a float for an int
            continue
    for _ in range(2):  # first made, then found
        for hand in hands:
            assert _config_outcome(hand) == _fresh_config(hand), hand


# --- the commands the replay keeps (rules.phh.table, rules.phh.replay) -------------------------

def test_kept_commands_are_the_commands_made() -> None:
    """Each seat-only command and each wager command_for returns is the command made anew
    with its fields, whatever was made before: first made, then found (fails with the type,
    the seat or the amount out of a key)."""
    from rules.commands import Bet, Call, Check, Complete, Fold, PostBringIn, Raise

    table._BY_SEAT.clear()
    table._TO.clear()
    for _ in range(2):
        for kind in (PostBringIn, Fold, Call, Check):
            for seat in range(1, 9):
                made = table._seat_command(kind, seat)
                assert type(made) is kind and made == kind(seat=seat)
        for wager in (Complete, Bet, Raise):
            for seat in range(1, 9):
                for to in (None, 50, 200, 400):
                    made = table._wager(wager, seat, to)
                    assert type(made) is wager and made == wager(seat=seat, to=to)
    assert table._seat_command(Call, 3) is table._seat_command(Call, 3)


def test_the_wagers_kept_are_bounded() -> None:
    from rules.commands import Bet

    table._TO.clear()
    for to in range(1, table._KEPT + 10):
        assert table._wager(Bet, 1, to) == Bet(seat=1, to=to)
        assert len(table._TO) <= table._KEPT


def test_kept_dealt_cards_are_the_dealt_cards_made() -> None:
    """A dealt card kept by the replay is the one made anew: by seat, face and card (one
    equal to a deck card but another object is kept apart, never taken for another card)."""
    from rules.cards import DECK, Card, Suit
    from rules.commands import DealtCard
    from rules.phh import replay

    replay._DEALT.clear()
    fresh = Card(14, Suit.HEARTS)
    for _ in range(2):
        for seat in range(0, 9):
            for up in (True, False):
                for card in (*DECK[:8], DECK[-1], None, fresh):
                    made = replay._dealt_card(seat, up, card)
                    assert made == DealtCard(seat=seat, up=up, card=card)
                    assert made.card is card
    for i in range(replay._DEALT_KEPT + 10):
        replay._dealt_card(1 + i % 8, True, DECK[i % 52])
        assert len(replay._DEALT) <= replay._DEALT_KEPT
