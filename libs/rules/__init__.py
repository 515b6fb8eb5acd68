"""Seven Card Stud Hi/Lo, eight-or-better: the game as pure functions (no I/O, no clock, no
randomness)."""

from rules.cards import DECK, Card, Suit, card_from_index, format_cards, parse_cards
from rules.errors import Reason, RuleViolation
from rules.hands import HighCategory, HighValue, LowValue, best_high, best_low, board_value

__all__ = [
    "DECK",
    "Card",
    "HighCategory",
    "HighValue",
    "LowValue",
    "Reason",
    "RuleViolation",
    "Suit",
    "best_high",
    "best_low",
    "board_value",
    "card_from_index",
    "format_cards",
    "parse_cards",
]
