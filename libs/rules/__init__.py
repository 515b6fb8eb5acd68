"""Seven Card Stud Hi/Lo, eight-or-better: the game as pure functions (no I/O, no clock, no
randomness)."""

from rules.cards import DECK, Card, Suit, card_from_index, format_cards, parse_cards
from rules.errors import Reason, RuleViolation

__all__ = [
    "DECK",
    "Card",
    "Reason",
    "RuleViolation",
    "Suit",
    "card_from_index",
    "format_cards",
    "parse_cards",
]
