"""Table and hand state, folded from events. Frozen values; ``evolve`` returns new ones."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum, unique

from rules.cards import Card
from rules.config import TableConfig
from rules.events import PotAwarded
from rules.streets import Street


@unique
class Phase(StrEnum):
    """Where a hand is. Between commands a hand is in one of the waiting phases."""

    DEALING = "dealing"
    """Waiting for the cards of the next street (see ``pending_deal``)."""
    BETTING = "betting"
    """Waiting for the player ``to_act``."""
    REVEAL = "reveal"
    """All-in runout: waiting for the hands still in to be turned face up (RULES 9.7)."""
    SHOWDOWN = "showdown"
    """Waiting for the down cards of the hands still in."""
    SETTLING = "settling"
    """Transient, inside one command: pots are being awarded."""
    COMPLETE = "complete"
    """The hand is over."""


_COMPLETE = Phase.COMPLETE
"""``Phase.COMPLETE`` as a module constant (an enum member is looked up through its
metaclass: ten times a global's cost, in ``is_over`` on the hot paths)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Seat:
    """An occupied seat. ``stack`` is the stack between hands; during a hand the seat's
    player in :class:`HandState` carries the live stack."""

    player_id: str
    stack: int
    sitting_out: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Player:
    """One player dealt into the current hand."""

    seat: int
    stack: int
    """Chips behind."""
    player_id: str = ""
    """Who was dealt in at this seat (kept for the hand's settlement)."""
    down: tuple[Card | None, ...] = ()
    """Down cards; None where the value is not known to this state (the public record)."""
    up: tuple[Card, ...] = ()
    folded: bool = False
    street_total: int = 0
    """Contribution this street (c[p]); antes never count."""
    hand_total: int = 0
    """Contribution this hand, antes included."""
    acted: bool = False
    reference: int = 0
    """B[p]: the target right after this player's latest action this street."""
    exposed: bool = False
    mucked: bool = False
    shown: bool = False

    @property
    def in_hand(self) -> bool:
        """Dealt in and not folded."""
        return not self.folded

    @property
    def all_in(self) -> bool:
        """In the hand with no chips behind."""
        return not self.folded and self.stack == 0

    @property
    def able(self) -> bool:
        """In the hand and not all-in: able to act."""
        return not self.folded and self.stack > 0

    @property
    def board(self) -> tuple[Card, ...]:
        """The up cards that form the board (never more than four, RULES 8.4)."""
        return self.up[:4]

    def own_cards(self) -> tuple[Card | None, ...]:
        """Down and up cards (the community card is not one of them)."""
        return self.down + self.up


@dataclass(frozen=True, slots=True, kw_only=True)
class HandState:
    """A hand in progress (or just complete)."""

    hand_number: int
    players: tuple[Player, ...]
    """The players dealt in, in seat order."""
    phase: Phase = Phase.DEALING
    street: Street | None = None
    """The latest street dealt; None before 3rd street's cards."""
    to_act: int | None = None
    target: int = 0
    """T: what each player must have in this street to stay in."""
    level: int = 0
    """L: the last full wager's amount this street."""
    full_wagers: int = 0
    """K: full bets or raises this street."""
    bring_in_seat: int | None = None
    bring_in_pending: bool = False
    cap_lifted: bool = False
    """The raise cap does not apply for the rest of this round (RULES 6.8 options)."""
    last_wager: tuple[Street, int] | None = None
    """(street, seat) of the latest wager of the hand: bet, completion or raise."""
    exposed: bool = False
    """All hands still in are face up (all-in runout)."""
    dealt: int = 0
    """Cards taken from the deck for players and the community card."""
    burned: int = 0
    community: Card | None = None
    deck_commitment: str = ""
    card_commitment: str = ""
    """The per-card commitment published with the hand (docs/fairness.md), if any."""
    awards: tuple[PotAwarded, ...] = ()
    rake: int = 0
    """Chips the house took from the pots (RULES 2.4)."""
    rake_pots: tuple[int, ...] = ()
    """The rake taken from each pot, main first; empty until the rake is taken (or when
    none is due)."""
    voided: bool = False
    """The hand was voided: every chip went back to its owner (RULES 9.8)."""

    def player(self, seat: int) -> Player:
        """The player at ``seat`` (KeyError if not dealt in)."""
        for p in self.players:
            if p.seat == seat:
                return p
        raise KeyError(seat)

    def has_player(self, seat: int) -> bool:
        """Whether ``seat`` is dealt into this hand."""
        return any(p.seat == seat for p in self.players)

    @property
    def in_hand(self) -> tuple[Player, ...]:
        """Players still in the hand."""
        return tuple(p for p in self.players if not p.folded)

    @property
    def able(self) -> tuple[Player, ...]:
        """Players able to act."""
        return tuple(p for p in self.players if p.able)

    @property
    def pot_total(self) -> int:
        """All chips committed this hand and not yet awarded, raked or returned."""
        if self.voided:
            return 0
        return (sum(p.hand_total for p in self.players) - sum(a.amount for a in self.awards)
                - self.rake)

    @property
    def is_over(self) -> bool:
        """Whether the hand is complete."""
        return self.phase == _COMPLETE


@dataclass(frozen=True, slots=True, kw_only=True)
class TableState:
    """A table: its configuration, seats and the current (or last) hand."""

    table_id: str = ""
    config: TableConfig | None = None
    seats: tuple[Seat | None, ...] = ()
    """Index ``seat - 1``."""
    hand: HandState | None = None
    hands_started: int = 0

    @property
    def opened(self) -> bool:
        """Whether the table has been opened."""
        return self.config is not None

    @property
    def hand_in_progress(self) -> bool:
        """Whether a hand is being played."""
        return self.hand is not None and not self.hand.is_over

    def seat(self, number: int) -> Seat | None:
        """The seat ``number`` (1-based), None if empty."""
        return self.seats[number - 1]

    def stack(self, number: int) -> int:
        """The live stack of a seat (the hand's figure while it is dealt in)."""
        if self.hand is not None and self.hand_in_progress and self.hand.has_player(number):
            return self.hand.player(number).stack
        seat = self.seats[number - 1]
        return 0 if seat is None else seat.stack


def initial_state() -> TableState:
    """The state before any event: no table."""
    return TableState()
