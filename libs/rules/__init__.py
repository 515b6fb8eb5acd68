"""Seven Card Stud Hi/Lo, eight-or-better: the game as pure functions (no I/O, no clock, no
randomness). ``decide(state, command) -> events``, ``evolve(state, event) -> state``,
``fold(events) -> state``; cards and time come in as data.

A table service needs only ``import rules``: the values, ``decide``/``evolve``/``fold``, one
query per question about a state (``can_start_hand``, ``seats_to_deal``, ``legal_actions``,
``pending_deal``, ``pots``, ``showdown_order``, ``settlement``) and what each viewer may see
(``event_for``, ``public_event``, ``table_for``, ``hand_for``, ``seat_in_hand``,
``revealable_seats``)."""

# The compiled build (tools/compile_core.py, ``make compiled``) holds extension modules of
# this package in a directory ahead of libs/ on sys.path (unless STUD_PURE=1): those come
# first, and a module the build leaves pure is found here.
import pkgutil as _pkgutil

_everywhere: list[str] = _pkgutil.extend_path([], __name__)
# In sys.path's order: the build first, then the first libs/ on the path (a checkout's own
# sources before another's, when a clone runs with another checkout's venv).
__path__ = _everywhere or __path__

from rules.betting import ActionKind, LegalAction, LegalActions
from rules.cards import DECK, DECK_SIZE, Card, Suit, card_from_index, format_cards, parse_cards
from rules.commands import Command, VoidHand
from rules.config import HeadsUpRaises, Rake, ShowdownOpener, TableConfig
from rules.dealing import DealPlan, DealSlot, streets_dealt
from rules.decide import decide
from rules.errors import Reason, RuleViolation
from rules.events import Event
from rules.evolve import evolve, fold
from rules.hands import HighCategory, HighValue, LowValue, best_high, best_low, board_value
from rules.queries import (
    can_start_hand,
    legal_actions,
    pending_deal,
    pots,
    seats_to_deal,
    showdown_order,
    sit_refusal,
)
from rules.settlement import Settlement, SettlementSeat, settlement
from rules.side_pots import Pot
from rules.state import HandState, Phase, TableState, initial_state
from rules.streets import Street
from rules.views import (
    PlayerId,
    Viewer,
    event_for,
    hand_for,
    public_event,
    revealable_seats,
    seat_in_hand,
    table_for,
)

__all__ = [
    "DECK",
    "DECK_SIZE",
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
    "PlayerId",
    "Pot",
    "Rake",
    "Reason",
    "RuleViolation",
    "Settlement",
    "SettlementSeat",
    "ShowdownOpener",
    "Street",
    "Suit",
    "TableConfig",
    "TableState",
    "Viewer",
    "VoidHand",
    "best_high",
    "best_low",
    "board_value",
    "can_start_hand",
    "card_from_index",
    "decide",
    "event_for",
    "evolve",
    "fold",
    "format_cards",
    "hand_for",
    "initial_state",
    "legal_actions",
    "parse_cards",
    "pending_deal",
    "pots",
    "public_event",
    "revealable_seats",
    "seat_in_hand",
    "seats_to_deal",
    "settlement",
    "showdown_order",
    "sit_refusal",
    "streets_dealt",
    "table_for",
]
