"""Events: what happened at a table (past tense). The public record of a table is a sequence
of these; a down card appears in it only as "a down card" (``card=None``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum, unique

from rules.cards import Card
from rules.config import TableConfig
from rules.streets import Street


@unique
class Share(StrEnum):
    """Which part of a pot an award is."""

    WHOLE = "whole"
    HIGH = "high"
    LOW = "low"


@dataclass(frozen=True, slots=True, kw_only=True)
class TableOpened:
    """The table exists with this configuration."""

    table_id: str
    config: TableConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class PlayerSeated:
    """A player sat down with ``stack`` chips."""

    seat: int
    player_id: str
    stack: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PlayerLeft:
    """A player left the seat, taking ``stack`` chips."""

    seat: int
    player_id: str
    stack: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PlayerSatOut:
    """The player is not dealt in from the next hand on."""

    seat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PlayerSatIn:
    """The player is dealt in again from the next hand on."""

    seat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ChipsAdded:
    """Chips were added to a stack between hands."""

    seat: int
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HandStarted:
    """A hand started; ``seats`` are the players dealt in, in seat order."""

    hand_number: int
    seats: tuple[int, ...]
    deck_commitment: str = ""
    card_commitment: str = ""
    """The dealer's per-card commitment (docs/fairness.md); empty for hands dealt before it
    existed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AntePosted:
    """A player posted the ante (all their chips if short)."""

    seat: int
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CardBurned:
    """The top card was burned before a street (option ``burn_cards``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BurnsReshuffled:
    """The burned cards were shuffled into the stub (RULES 10.4)."""

    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DownCardDealt:
    """A face-down card was dealt; ``card`` is None in the public record."""

    seat: int
    street: Street
    card: Card | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UpCardDealt:
    """A face-up card was dealt."""

    seat: int
    street: Street
    card: Card


@dataclass(frozen=True, slots=True, kw_only=True)
class CommunityCardDealt:
    """The deck ran short: one community card face up for everyone (RULES 10.2)."""

    card: Card


@dataclass(frozen=True, slots=True, kw_only=True)
class BringInPosted:
    """The forced bring-in was posted; ``amount`` is less than the bring-in only all-in."""

    seat: int
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Completed:
    """The bet was completed on 3rd street to ``to`` (this street's total)."""

    seat: int
    amount: int
    to: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BetMade:
    """A bet to ``to`` when nothing was to be called."""

    seat: int
    amount: int
    to: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Raised:
    """A raise to ``to`` (this street's total)."""

    seat: int
    amount: int
    to: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Called:
    """A call of ``amount`` chips (all-in for less when short)."""

    seat: int
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Checked:
    """A check."""

    seat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Folded:
    """A fold."""

    seat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionTimedOut:
    """The player's clock ran out; the next event is the action taken for them."""

    seat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UncalledBetReturned:
    """The uncalled part of a wager went back to its owner (RULES 9.2)."""

    seat: int
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HandExposed:
    """A hand still in was turned face up for an all-in runout (RULES 9.7)."""

    seat: int
    down: tuple[Card, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class HandShown:
    """A hand was shown at the showdown."""

    seat: int
    down: tuple[Card, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class HandMucked:
    """A hand was mucked at the showdown; ``down`` is kept for the hand history only when
    ``history_reveals_mucked`` is on (RULES 11.7), else empty."""

    seat: int
    down: tuple[Card, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class RakeTaken:
    """The house took ``amount`` as rake (RULES 2.4): ``pots[i]`` from pot ``i`` (0 = main),
    before any pot was awarded; the awards that follow split what is left."""

    amount: int
    pots: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class HandVoided:
    """The hand could not go on and is void (RULES 9.8): every ante and wager went back to
    the player who put it in; nobody won anything, no rake was taken."""

    hand_number: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PotAwarded:
    """``amount`` of pot ``pot`` (0 = main) went to ``seat`` as its ``share``."""

    pot: int
    seat: int
    amount: int
    share: Share
    hand: str = ""
    """Description of the winning hand, empty when won without a showdown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StakesChanged:
    """The table's stakes changed between hands (RULES 2.5): every hand started after this
    is dealt with these amounts; the rest of the config stays as it was."""

    small_bet: int
    big_bet: int
    ante: int
    bring_in: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HandEnded:
    """The hand is over; every chip is back in a stack."""

    hand_number: int


Event = (
    TableOpened | PlayerSeated | PlayerLeft | PlayerSatOut | PlayerSatIn | ChipsAdded
    | HandStarted | AntePosted | CardBurned | BurnsReshuffled | DownCardDealt | UpCardDealt
    | CommunityCardDealt | BringInPosted | Completed | BetMade | Raised | Called | Checked
    | Folded | ActionTimedOut | UncalledBetReturned | HandExposed | HandShown | HandMucked
    | PotAwarded | HandEnded | RakeTaken | HandVoided | StakesChanged
)

EVENT_TYPES: tuple[type[Event], ...] = (
    TableOpened, PlayerSeated, PlayerLeft, PlayerSatOut, PlayerSatIn, ChipsAdded,
    HandStarted, AntePosted, CardBurned, BurnsReshuffled, DownCardDealt, UpCardDealt,
    CommunityCardDealt, BringInPosted, Completed, BetMade, Raised, Called, Checked,
    Folded, ActionTimedOut, UncalledBetReturned, HandExposed, HandShown, HandMucked,
    PotAwarded, HandEnded, RakeTaken, HandVoided, StakesChanged,
)
