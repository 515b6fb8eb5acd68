"""The SDK's pure parts, no server: the bots' strategies pick legal actions, the tight bot's
hand score, merging own cards into a view, retry delays and reading a token's subject."""

from __future__ import annotations

import base64
import json
import random

from stud.v1 import common_pb2 as c
from stud.v1 import dealer_pb2
from stud.v1 import table_pb2 as pb
from studclient import RetryPolicy, merge_cards, my_cards, my_turn, token_subject
from studclient.strategies import STRATEGY, strategy_for, strength


def card(rank: int, suit: int = c.SUIT_CLUBS) -> c.Card:
    return c.Card(rank=rank, suit=suit)  # type: ignore[arg-type]


def betting_view(actions: list[c.LegalAction], down: int = 2) -> pb.TableView:
    view = pb.TableView(version=9, viewer_seat=2)
    view.hand.hand_number = 4
    view.hand.phase = pb.HAND_PHASE_BETTING
    view.hand.to_act = 2
    view.hand.legal_actions.seat = 2
    view.hand.legal_actions.actions.extend(actions)
    for seat in (1, 2):
        player = view.hand.players.add(seat=seat)
        for _ in range(down):
            player.down.add()
        player.up.append(card(9 + seat, c.SUIT_HEARTS))
    return view


ALL = [c.LegalAction(kind=c.ACTION_KIND_FOLD), c.LegalAction(kind=c.ACTION_KIND_CALL, amount=50,
                                                              to=50),
       c.LegalAction(kind=c.ACTION_KIND_RAISE, amount=250, to=250)]


def test_every_strategy_picks_a_legal_action() -> None:
    rng = random.Random(1)
    for name in STRATEGY:
        for actions in (ALL, ALL[:2], [ALL[1]]):
            view = merge_cards(betting_view(actions), dealer_pb2.MyCards(
                hand_number=4, seat=2, down=[card(2), card(14, c.SUIT_SPADES)]))
            for _ in range(20):
                assert STRATEGY[name](view, rng) in list(view.hand.legal_actions.actions)


def test_station_never_folds_nor_raises_and_mixed_takes_turns() -> None:
    view = betting_view(ALL)
    assert STRATEGY["station"](view, random.Random()).kind == c.ACTION_KIND_CALL
    assert [strategy_for("mixed", i)[0] for i in range(4)] == [
        "random", "tight", "station", "random"]


def test_tight_scores_pairs_and_low_draws() -> None:
    assert strength([card(5), card(5, c.SUIT_HEARTS), card(13)]) == 2
    assert strength([card(5), card(5, c.SUIT_HEARTS), card(5, c.SUIT_SPADES)]) == 3
    assert strength([card(14), card(2, c.SUIT_HEARTS), card(7, c.SUIT_SPADES)]) == 1
    assert strength([card(13), card(12, c.SUIT_HEARTS), card(9, c.SUIT_SPADES)]) == 0
    view = betting_view(ALL)
    # Without its down cards (not merged), the tight bot folds K-Q-9 offsuit to a bet.
    assert STRATEGY["tight"](view, random.Random(0)).kind == c.ACTION_KIND_FOLD


def test_merge_cards_fills_only_the_owners_seat_of_the_same_hand() -> None:
    view = betting_view(ALL)
    cards = dealer_pb2.MyCards(hand_number=4, seat=2, down=[card(3), card(4)])
    merged = merge_cards(view, cards)
    assert my_turn(merged)
    down, up = my_cards(merged)
    assert [d.rank for d in down] == [3, 4] and len(up) == 1
    assert not any(d.HasField("card") for d in merged.hand.players[0].down)
    assert not any(d.HasField("card") for d in view.hand.players[1].down)  # unchanged
    other_hand = dealer_pb2.MyCards(hand_number=3, seat=2, down=[card(3), card(4)])
    assert my_cards(merge_cards(view, other_hand))[0] == []


def test_retry_delays_back_off_to_a_ceiling() -> None:
    policy = RetryPolicy(attempts=6, initial_backoff_s=0.1, max_backoff_s=0.5)
    assert policy.delays() == [0.1, 0.2, 0.4, 0.5, 0.5]


def test_retries_outlast_their_attempts_for_the_patience() -> None:
    """Once the backoff's delays are spent, a retried call waits ``max_backoff_s`` again
    until the patience has passed since its first attempt, then gives up."""
    policy = RetryPolicy(attempts=3, initial_backoff_s=0.1, max_backoff_s=0.5, patience_s=4)
    delays = policy.delays()
    assert [policy.pause(delays, 100.0, 100.0 + t) for t in (0, 0.1, 0.3, 3.9, 4.0)] == [
        0.1, 0.2, 0.5, 0.5, None]
    assert RetryPolicy(attempts=2, patience_s=0).pause([], 0.0, 0.0) is None
    assert RetryPolicy().patience_s > 3.0 + 1.0  # a default lease and an ownership round


def test_token_subject_reads_the_claims() -> None:
    claims = base64.urlsafe_b64encode(json.dumps({"sub": "player:ann"}).encode()).rstrip(b"=")
    assert token_subject(f"e30.{claims.decode()}.sig") == ("player", "ann")
    assert token_subject("garbage") == ("", "")
