"""Playing cards: ranks, suits, the 52-card deck and parsing to and from text."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum, unique
from typing import Final

from rules.errors import Reason, RuleViolation

RANK_CHARS: Final = "23456789TJQKA"
"""Rank characters in increasing order; rank value = index + 2 (ace = 14)."""


@unique
class Suit(StrEnum):
    """A suit. Ordered clubs < diamonds < hearts < spades where a rule says so."""

    CLUBS = "c"
    DIAMONDS = "d"
    HEARTS = "h"
    SPADES = "s"

    @property
    def order(self) -> int:
        """0 for clubs up to 3 for spades."""
        return _SUIT_ORDER[self]


_SUIT_ORDER: Final = {Suit.CLUBS: 0, Suit.DIAMONDS: 1, Suit.HEARTS: 2, Suit.SPADES: 3}


@dataclass(frozen=True, slots=True)
class Card:
    """One card. ``rank`` is 2..14 (ace high); cards are interned, one object per card.

    >>> Card.parse("Ah").rank, Card.parse("Ah").suit
    (14, <Suit.HEARTS: 'h'>)
    >>> str(Card.parse("td"))
    'Td'
    """

    rank: int
    suit: Suit

    # Written out (the dataclass keeps a class's own): compiled (tools/compile_core.py), the
    # dataclass's __eq__ and __hash__ run interpreted, and decide hashes every known card at
    # every street. The same equality (another class: NotImplemented); equal cards hash alike.
    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.rank == other.rank and self.suit == other.suit

    def __hash__(self) -> int:
        return self.rank * 4 + _SUIT_ORDER[self.suit]

    @property
    def index(self) -> int:
        """0..51, ordered by rank then suit: ``2c`` is 0 and ``As`` is 51."""
        return (self.rank - 2) * 4 + _SUIT_ORDER[self.suit]

    @property
    def key(self) -> tuple[int, int]:
        """(rank, suit order): the order used for the bring-in and odd chips."""
        return (self.rank, _SUIT_ORDER[self.suit])

    @staticmethod
    def parse(text: str) -> Card:
        """Parse one card such as ``"Ah"`` or ``"10d"`` (case-insensitive rank).

        >>> Card.parse("Xx")
        Traceback (most recent call last):
        ...
        rules.errors.RuleViolation: malformed_card: not a card: 'Xx'
        """
        card = _BY_TEXT.get(text.strip().upper().replace("10", "T", 1))
        if card is None:
            raise RuleViolation(Reason.MALFORMED_CARD, f"not a card: {text!r}")
        return card

    def __str__(self) -> str:
        return RANK_CHARS[self.rank - 2] + self.suit.value

    def __repr__(self) -> str:
        return f"Card({str(self)!r})"

    # Pickled and copied as its index, and read back as the deck's own card (one object per
    # card): compiled, the frozen dataclass's default state could not be set back.
    def __reduce__(self) -> tuple[object, tuple[int]]:
        return (card_from_index, (self.index,))

    def __copy__(self) -> Card:
        return self

    def __deepcopy__(self, memo: object) -> Card:
        return self


DECK: Final[tuple[Card, ...]] = tuple(
    Card(rank, suit) for rank in range(2, 15) for suit in Suit
)
"""The 52 cards in ``index`` order."""

DECK_SIZE: Final = 52
"""The cards of one deck: the one definition (the dealer's proofs and shuffle import it)."""

_BY_TEXT: Final = {str(c).upper(): c for c in DECK}


def card_from_index(index: int) -> Card:
    """The card with the given ``index`` (0..51)."""
    if not 0 <= index < DECK_SIZE:
        raise RuleViolation(Reason.MALFORMED_CARD, f"card index out of range: {index}")
    return DECK[index]


def parse_cards(text: str) -> tuple[Card, ...]:
    """Parse space- or comma-separated cards; concatenated pairs (``"AhKd"``) work too.

    >>> parse_cards("Ah Kd 2c")
    (Card('Ah'), Card('Kd'), Card('2c'))
    >>> format_cards(parse_cards("AhKd"))
    'Ah Kd'
    >>> parse_cards("Ah Zz")
    Traceback (most recent call last):
    ...
    rules.errors.RuleViolation: malformed_card: not a card: 'Zz'
    """
    tokens = text.replace(",", " ").split()
    cards: list[Card] = []
    for token in tokens:
        if len(token) in (2, 3) and not (len(token) == 3 and not token.startswith("10")):
            cards.append(Card.parse(token))
        elif len(token) % 2 == 0 and len(token) > 2:
            cards.extend(Card.parse(token[i : i + 2]) for i in range(0, len(token), 2))
        else:
            cards.append(Card.parse(token))
    return tuple(cards)


def format_cards(cards: Iterable[Card]) -> str:
    """Cards as space-separated text, the inverse of :func:`parse_cards`."""
    return " ".join(str(c) for c in cards)
