"""A card survives pickle, copy and deepcopy as the deck's own card (cards are interned, one
object per card), compiled (tools/compile_core.py) and pure alike (the review found the
compiled build's frozen dataclass refusing them)."""

from __future__ import annotations

import copy
import pickle

from rules.cards import DECK, Card, parse_cards


def test_every_card_pickles_to_itself() -> None:
    for card in DECK:
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            assert pickle.loads(pickle.dumps(card, protocol)) is card


def test_copies_are_the_card_itself() -> None:
    hand = parse_cards("Ah Kd 7c")
    assert copy.copy(hand[0]) is hand[0]
    assert copy.deepcopy(hand) == hand
    assert all(a is b for a, b in zip(copy.deepcopy(list(hand)), hand, strict=True))


def test_a_pickled_structure_of_cards_reads_back_equal() -> None:
    value = {"seat": 3, "cards": [Card.parse("Ts"), Card.parse("2c")]}
    assert pickle.loads(pickle.dumps(value)) == value
