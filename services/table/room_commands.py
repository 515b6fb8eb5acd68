"""The room's commands (:mod:`table.room`'s ``decide`` takes one of them): frozen values,
no behaviour. The tournament's own (seating an entrant, the stakes, a pause) are
:mod:`table.tournament`'s; :data:`RoomCommand` is any of them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum, unique
from typing import TypeAlias

from rules import Command
from rules.config import TableConfig
from table.model import TableSettings
from table.room_events import RoomEvent
from table.tournament import PauseDealing, SeatEntrant, SetStakes, UnseatEntrant


@dataclass(frozen=True, slots=True)
class Open:
    table_id: str
    config: TableConfig
    settings: TableSettings
    tournament_id: str = ""
    """Non-empty: a tournament table (no wallet, no rake; :mod:`table.tournament`)."""


@dataclass(frozen=True, slots=True)
class Play:
    """A rules command (an action, a deal, a time-out, a sit-out, ...)."""

    command: Command


@dataclass(frozen=True, slots=True)
class RequestBuyIn:
    seat: int
    player_id: str
    amount: int
    wallet_key: str
    command_id: str


@dataclass(frozen=True, slots=True)
class ConfirmBuyIn:
    seat: int
    wallet_key: str


@unique
class BuyInEnd(StrEnum):
    """How a buy-in ends without a seat (its value is in the step's command id)."""

    FAILED = "failed"
    REFUND_DUE = "refund_due"
    REFUNDED = "refunded"


@dataclass(frozen=True, slots=True)
class EndBuyIn:
    """The buy-in ends without a seat: failed (nothing moved), due for a refund, or
    refunded."""

    seat: int
    wallet_key: str
    stage: BuyInEnd
    reason: str = ""


@dataclass(frozen=True, slots=True)
class QueueTopUp:
    seat: int
    player_id: str
    amount: int
    wallet_key: str
    command_id: str


@dataclass(frozen=True, slots=True)
class ApplyTopUp:
    seat: int
    wallet_key: str


@dataclass(frozen=True, slots=True)
class DropTopUp:
    seat: int
    wallet_key: str
    reason: str


@dataclass(frozen=True, slots=True)
class Leave:
    """Stand the seat up now (with its cash-out), or once it can go (``LeaveRequested``)."""

    seat: int
    player_id: str
    wallet_key: str


@dataclass(frozen=True, slots=True)
class PayCashOut:
    seat: int
    wallet_key: str


@dataclass(frozen=True, slots=True)
class SetMuck:
    seat: int
    player_id: str
    muck: bool


@dataclass(frozen=True, slots=True)
class Close:
    by: str


@dataclass(frozen=True, slots=True)
class Settle:
    hand_number: int
    rake: int


@dataclass(frozen=True, slots=True)
class Reconciled:
    """A reconciliation's finding: ``problem`` ("" when every escrow equals its stack)."""

    problem: str


@dataclass(frozen=True, slots=True)
class RefundOrphan:
    """Pay back an escrow the log has neither a seat nor a saga for (recorded before the
    wallet moves); refused if, by the time it is decided, the seat has a saga or is the
    player's."""

    seat: int
    player_id: str
    amount: int


@dataclass(frozen=True, slots=True)
class Record:
    """Room events as they are (a migration of old side keys, an orphan's refund)."""

    events: tuple[RoomEvent, ...]


RoomCommand: TypeAlias = (Open | Play | RequestBuyIn | ConfirmBuyIn | EndBuyIn | QueueTopUp
                          | ApplyTopUp | DropTopUp | Leave | PayCashOut | SetMuck | Close
                          | Settle | Reconciled | RefundOrphan | Record | SeatEntrant
                          | UnseatEntrant
                          | SetStakes | PauseDealing)
