"""Commands: what players, the table service and its timers ask of a table (imperative)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rules.cards import Card
from rules.config import TableConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenTable:
    """Create the table with its configuration (first command of a table)."""

    table_id: str
    config: TableConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class SitDown:
    """Take an empty seat with chips already bought in."""

    seat: int
    player_id: str
    stack: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveSeat:
    """Leave the seat, taking the stack (not while still in a hand)."""

    seat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SitOut:
    """Stop being dealt in from the next hand on."""

    seat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SitIn:
    """Be dealt in again from the next hand on."""

    seat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AddChips:
    """Add bought-in chips to a stack between hands (table stakes: never during a hand)."""

    seat: int
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeStakes:
    """New stakes from the next hand on (RULES 2.5): only between hands, and the config they
    make must pass RULES 2.3."""

    small_bet: int
    big_bet: int
    ante: int
    bring_in: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StartHand:
    """Start the next hand; ``deck_commitment`` is the dealer's published hash of the deck,
    ``card_commitment`` its per-card commitment (the Merkle root and the seeds' commitments,
    docs/fairness.md)."""

    hand_number: int
    deck_commitment: str = ""
    card_commitment: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DealtCard:
    """One card of a deal. ``card`` is None for a down card in the public record."""

    seat: int
    """0 for the community card."""
    up: bool
    card: Card | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DealStreet:
    """Deliver the cards of the street that :func:`rules.pending_deal` asks for, in order."""

    cards: tuple[DealtCard, ...]
    burned: int = 0
    """Cards burned before this street (0 or 1)."""
    reshuffled_burns: bool = False
    """Whether the burned cards were shuffled into the stub first (RULES 10.4)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PostBringIn:
    """Post the forced bring-in (all of it, for a short stack)."""

    seat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Complete:
    """Complete to the small bet on 3rd street (``to`` checks the amount if given)."""

    seat: int
    to: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Bet:
    """Bet when nothing is to be called (``to`` checks the amount if given)."""

    seat: int
    to: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Raise:
    """Raise the current wager (``to`` checks the amount if given)."""

    seat: int
    to: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """Call the current wager (all-in for less if short)."""

    seat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """Check."""

    seat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Fold:
    """Fold (not allowed when checking is possible)."""

    seat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeOut:
    """The action clock of ``seat`` ran out: check if legal, else fold; post a bring-in."""

    seat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RevealedHand:
    """The down cards of one seat, as the dealer reveals them."""

    seat: int
    down: tuple[Card, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RevealHands:
    """Turn the hands still in face up for an all-in runout (RULES 9.7)."""

    hands: tuple[RevealedHand, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Showdown:
    """Settle the showdown: the down cards of every hand still in, and which seats would
    rather muck when allowed to (RULES 11.4)."""

    hands: tuple[RevealedHand, ...]
    muck_requests: frozenset[int] = field(default_factory=frozenset)


@dataclass(frozen=True, slots=True, kw_only=True)
class VoidHand:
    """Void the hand in progress (RULES 9.8): it cannot go on (the dealer is unreachable for
    longer than the table allows, for instance). ``reason`` is recorded."""

    reason: str


Command = (
    OpenTable | SitDown | LeaveSeat | SitOut | SitIn | AddChips | StartHand | DealStreet
    | PostBringIn | Complete | Bet | Raise | Call | Check | Fold | TimeOut | RevealHands
    | Showdown | VoidHand | ChangeStakes
)
PlayerCommand = PostBringIn | Complete | Bet | Raise | Call | Check | Fold
