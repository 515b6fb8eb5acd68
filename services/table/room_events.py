"""The room's own events (DESIGN §5b), past tense and frozen, beside the rules' events in a
table's stream: the money saga's steps, leaves, muck preferences, the settings, closing,
settlement, dealing stopped or paused, the tournament's mode and stakes. Plain values, no
protobuf: :mod:`table.codec` maps them to ``room.proto``'s messages at the edge (each event
is stored as the message of its own name, so the storage format is ``room.proto``'s)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeAlias, TypeGuard, get_args

from rules.events import Event
from table.model import TableSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingsSet:
    """The room settings in force (recorded when the table opens)."""

    settings: TableSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class BuyInRequested:
    """A seat reserved for a buy-in, before the wallet moves."""

    seat: int
    player_id: str
    amount: int
    wallet_key: str
    command_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class BuyInFailed:
    """The wallet refused the buy-in: nothing moved, the seat is free."""

    seat: int
    player_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class BuyInRefundDue:
    """The seat could not be recorded after the money moved: it is to be paid back."""

    seat: int
    player_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class BuyInRefunded:
    seat: int
    player_id: str
    amount: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TopUpQueued:
    seat: int
    player_id: str
    amount: int
    wallet_key: str
    command_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopUpDropped:
    seat: int
    player_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CashOutRequested:
    """A stood-up seat's escrow is to be paid back (recorded with its ``PlayerLeft``)."""

    seat: int
    player_id: str
    amount: int = 0
    wallet_key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CashOutPaid:
    seat: int
    player_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveRequested:
    """A seat leaves once it can (after the hand, its settlement or its top-up)."""

    seat: int
    player_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MuckPreferenceSet:
    seat: int
    player_id: str
    muck: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class TableClosed:
    by: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class HandSettled:
    hand_number: int
    rake: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class DealingStopped:
    """A reconciliation failed: no hand is dealt until one passes."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DealingResumed:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class OrphanEscrowRefunded:
    """An escrow the log knew nothing of, recorded before it is paid back."""

    seat: int
    player_id: str
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TournamentModeSet:
    tournament_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StakesQueued:
    """Stakes asked for during a hand, in force from the next one (RULES 2.5)."""

    small_bet: int
    big_bet: int
    ante: int
    bring_in: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DealingPaused:
    paused: bool
    reason: str = ""
    one_hand: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStarted:
    """A seat's turn and its clock (absolute times, seconds): the action time runs to
    ``action_deadline``, then the seat's bank to ``deadline``. Stored on the envelope of the
    event that gave the seat the turn (``EventEnvelope.turn_clock``), not as an envelope of
    its own: it takes no sequence of the stream."""

    seat: int
    started_at: float
    action_deadline: float
    deadline: float
    bank_ms: int


RoomEvent: TypeAlias = (
    SettingsSet | BuyInRequested | BuyInFailed | BuyInRefundDue | BuyInRefunded
    | TopUpQueued | TopUpDropped | CashOutRequested | CashOutPaid | LeaveRequested
    | MuckPreferenceSet | TableClosed | HandSettled | DealingStopped | DealingResumed
    | OrphanEscrowRefunded | TournamentModeSet | StakesQueued | DealingPaused)

ROOM_EVENT_CLASSES: tuple[type[RoomEvent], ...] = (
    SettingsSet, BuyInRequested, BuyInFailed, BuyInRefundDue, BuyInRefunded, TopUpQueued,
    TopUpDropped, CashOutRequested, CashOutPaid, LeaveRequested, MuckPreferenceSet,
    TableClosed, HandSettled, DealingStopped, DealingResumed, OrphanEscrowRefunded,
    TournamentModeSet, StakesQueued, DealingPaused)
"""Every room event's class (an ``isinstance`` tuple)."""
_ROOM_KINDS: Final = frozenset(ROOM_EVENT_CLASSES)
_OTHER_KINDS: Final = frozenset(
    kind for kind in (*get_args(Event), TurnStarted)
    if not issubclass(kind, ROOM_EVENT_CLASSES))
"""The rules' events and a turn's clock: never a room event."""


def is_room(event: object) -> TypeGuard[RoomEvent]:
    """``isinstance(event, ROOM_EVENT_CLASSES)``, known by the event's class first (issue
    35: the tuple of 19 classes was scanned for every rules event, twice a command)."""
    kind = event.__class__
    if kind in _ROOM_KINDS:
        return True
    if kind in _OTHER_KINDS:
        return False
    return isinstance(event, ROOM_EVENT_CLASSES)
