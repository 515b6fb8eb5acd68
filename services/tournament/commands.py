"""The commands ``decide`` takes: an operator's, a player's (their own id comes from their
token, never from the request), and the process manager's reports of what the tables and the
wallet did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from tournament.events import Config, Stacks


@dataclass(frozen=True, slots=True)
class Create:
    tournament_id: str
    config: Config


@dataclass(frozen=True, slots=True)
class Cancel:
    reason: str


@dataclass(frozen=True, slots=True)
class Register:
    player_id: str


@dataclass(frozen=True, slots=True)
class ReEnter:
    player_id: str


@dataclass(frozen=True, slots=True)
class Unregister:
    player_id: str


@dataclass(frozen=True, slots=True)
class WithdrawExcluded:
    """The process manager's: the entry's player is excluded (the wallet's ``reason``), so
    before the start the entry is withdrawn and refunded (docs/player-protection.md)."""

    entry_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class SettleEntry:
    """The wallet's answer to an entry's charge: ``ok`` (moved) or refused (nothing moved)."""

    entry_id: str
    ok: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passes: the scheduled start, the level clock, the breaks."""


@dataclass(frozen=True, slots=True)
class ReportHandStarted:
    table_id: str
    hand_no: int
    stacks: Stacks


@dataclass(frozen=True, slots=True)
class ReportHandEnded:
    table_id: str
    hand_no: int
    stacks: Stacks
    start: Stacks = ()
    """The stacks at the hand's start as the table recorded them (its ``HandResult``), when
    the hand was reported started from a view taken during it (antes already posted); ()
    takes the reported start's."""


@dataclass(frozen=True, slots=True)
class ConfirmSeat:
    entry_id: str


@dataclass(frozen=True, slots=True)
class ConfirmSeatFreed:
    table_id: str
    seat: int


@dataclass(frozen=True, slots=True)
class ConfirmUnseated:
    move_id: str
    stack: int


@dataclass(frozen=True, slots=True)
class ConfirmReseated:
    move_id: str


@dataclass(frozen=True, slots=True)
class ConfirmPayment:
    payment_id: str


Command: TypeAlias = (
    Create | Cancel | Register | ReEnter | Unregister | WithdrawExcluded | SettleEntry | Tick
    | ReportHandStarted | ReportHandEnded | ConfirmSeat | ConfirmSeatFreed | ConfirmUnseated
    | ConfirmReseated | ConfirmPayment
)
