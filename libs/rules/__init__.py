"""Seven Card Stud Hi/Lo, eight-or-better: the game as pure functions (no I/O, no clock, no
randomness). ``decide(state, command) -> events``, ``evolve(state, event) -> state``,
``fold(events) -> state``; cards and time come in as data."""

from rules.betting import ActionKind, LegalAction, LegalActions
from rules.cards import DECK, Card, Suit, card_from_index, format_cards, parse_cards
from rules.commands import Command
from rules.config import HeadsUpRaises, ShowdownOpener, TableConfig
from rules.dealing import DealPlan, DealSlot
from rules.decide import decide
from rules.errors import Reason, RuleViolation
from rules.events import Event
from rules.evolve import evolve, fold
from rules.hands import HighCategory, HighValue, LowValue, best_high, best_low, board_value
from rules.pots import Pot
from rules.queries import legal_actions, pending_deal, pots, showdown_order
from rules.state import HandState, Phase, TableState, initial_state
from rules.streets import Street

__all__ = [
    "DECK",
    "ActionKind",
    "Card",
    "Command",
    "DealPlan",
    "DealSlot",
    "Event",
    "HandState",
    "HeadsUpRaises",
    "HighCategory",
    "HighValue",
    "LegalAction",
    "LegalActions",
    "LowValue",
    "Phase",
    "Pot",
    "Reason",
    "RuleViolation",
    "ShowdownOpener",
    "Street",
    "Suit",
    "TableConfig",
    "TableState",
    "best_high",
    "best_low",
    "board_value",
    "card_from_index",
    "decide",
    "evolve",
    "fold",
    "format_cards",
    "initial_state",
    "legal_actions",
    "parse_cards",
    "pending_deal",
    "pots",
    "showdown_order",
]
