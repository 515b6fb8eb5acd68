"""A card's written-out equality and hash (``rules.cards.Card``: compiled, the dataclass's own
would run interpreted) are the dataclass's: cards are equal when their rank and suit are,
whichever objects they are; equal cards hash alike; another class is never equal; and a card
stays frozen. In both builds (``make test`` compiled, ``make test-pure`` the sources)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from rules.cards import DECK, Card, Suit


def _fields(card: Card) -> tuple[int, Suit]:
    return (card.rank, card.suit)


def test_cards_are_equal_exactly_when_their_rank_and_suit_are() -> None:
    fresh = [Card(c.rank, c.suit) for c in DECK]  # equal to the deck's, other objects
    for a, b in itertools.product(DECK, [*DECK, *fresh]):
        same = _fields(a) == _fields(b)
        assert (a == b) is same and (a != b) is not same, (a, b)
        if same:
            assert hash(a) == hash(b)
    assert len(set(DECK)) == 52 and set(fresh) == set(DECK)
    assert {card: i for i, card in enumerate(DECK)}[Card(14, Suit.SPADES)] == 51


@pytest.mark.parametrize("other", ["2c", (2, Suit.CLUBS), 2, None, Suit.CLUBS])
def test_a_card_is_never_equal_to_another_kind_of_value(other: object) -> None:
    card = DECK[0]
    assert card != other and not card == other  # noqa: SIM201
    assert card.__eq__(other) is NotImplemented


def test_a_card_stays_frozen() -> None:
    card = Card(9, Suit.HEARTS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        card.rank = 10  # type: ignore[misc]
    assert [f.name for f in dataclasses.fields(Card)] == ["rank", "suit"]
    assert dataclasses.asdict(card) == {"rank": 9, "suit": Suit.HEARTS}
