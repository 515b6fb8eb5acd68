"""The tournament's events and its configuration (frozen values; the fold is ``state``).

Every change of a tournament is one of these on its stream. The ones the process manager acts
on are intents (``EntryRequested``: charge the buy-in; ``SeatAssigned``: seat the entry;
``MoveStarted``: unseat then seat; ``TableHeld``/``TableReleased``: pause or resume dealing;
``LevelStarted``: set the stakes; ``RefundDue``/``PrizeDue``: pay), each followed by the
event that records its outcome, so a crash between two steps is found by folding the log.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import TypeAlias

from studkit.errors import BadRequest
from tournament.structure import Structure

SIT_AND_GO = "sit_and_go"
MULTI_TABLE = "multi_table"

Stacks: TypeAlias = tuple[tuple[int, int], ...]
"""(seat, chips) pairs of a table report."""

MAX_AMOUNT = 2**53 - 1
"""The wallet's largest amount or balance: a buy-in and its fee together, and a pool."""
CHIPS_MAX = 10**15
"""The table's largest stack or stake (``SeatEntrant``, ``SetStakes``)."""
MAX_FIELD = 100_000
"""The entries an uncapped tournament's money and chips are sized for."""


@dataclass(frozen=True, slots=True)
class Pace:
    """The table settings of the tables a tournament opens; 0: the service's (its
    ``table_settings``, else the table service's defaults)."""

    action_time_s: int = 0
    time_bank_s: int = 0
    next_hand_delay_ms: int = 0

    def check(self) -> None:
        """``BadRequest`` past what a table takes (the table's ``settings_from_proto``)."""
        for name, most in (("action_time_s", 3600), ("time_bank_s", 3600),
                           ("next_hand_delay_ms", 600_000)):
            if not 0 <= getattr(self, name) <= most:
                raise BadRequest(f"config.pace.{name}", f"0 to {most:,}")


@dataclass(frozen=True, slots=True)
class Config:
    name: str
    format: str
    buy_in: int
    fee: int
    structure: Structure
    seats: int = 8
    """Seats per table; a sit & go starts when they are all taken."""
    start_at: float = 0.0
    min_entrants: int = 2
    max_entrants: int = 0
    """0: as many as tables can be opened for (multi-table), the seats (sit & go)."""
    late_through_level: int = 0
    """Late registration stays open through this level (0: it closes at the start)."""
    re_entries: int = 0
    """How many times a busted player may enter again while registration is open."""
    pace: Pace = Pace()
    """The pace of its tables (a stream from before it has none: the service's)."""

    def __post_init__(self) -> None:
        def need(ok: bool, field: str, detail: str) -> None:
            if not ok:
                raise BadRequest(field, detail)
        self.pace.check()
        need(bool(self.name) and len(self.name) <= 80, "name", "1 to 80 characters")
        need(self.format in (SIT_AND_GO, MULTI_TABLE), "format", "sit_and_go or multi_table")
        need(self.buy_in > 0 and self.fee >= 0, "buy_in", "a positive buy-in, a fee >= 0")
        need(2 <= self.seats <= 8, "seats", "2 to 8 seats a table")
        if self.format == SIT_AND_GO:
            need(self.late_through_level == 0 and self.re_entries == 0, "late_through_level",
                 "a sit & go has neither late registration nor re-entry")
            need(self.max_entrants in (0, self.seats), "max_entrants", "a sit & go fills its table")
        else:
            need(self.min_entrants >= 2, "min_entrants", "at least two")
            need(self.max_entrants == 0 or self.max_entrants >= self.min_entrants,
                 "max_entrants", "0 or at least min_entrants")
            need(self.late_through_level >= 0 and self.re_entries >= 0, "re_entries",
                 "cannot be negative")
            need(self.start_at > 0, "start_at", "a multi-table tournament has a start time")

    def playable(self, now: float) -> None:
        """Raise ``BadRequest`` (naming the request's field) unless a new tournament of this
        configuration can be played and paid from ``now``: a buy-in and fee the wallet can
        charge and a pool it can hold for the most entries there can be, stacks and stakes
        a table takes for the whole field's chips, late registration within the levels, a
        name of printable characters, a multi-table start still to come (one in the past was
        cancelled ``below_minimum`` in the same reply, its id burnt). Checked on a create
        only: a stream written before these checks still folds."""
        def need(ok: bool, field: str, detail: str) -> None:
            if not ok:
                raise BadRequest(f"config.{field}", detail)
        most = self.capacity or MAX_FIELD
        need(self.buy_in <= MAX_AMOUNT // most, "buy_in",
             f"at most {MAX_AMOUNT // most:,}: the pool of {most:,} entries must stay within "
             f"the wallet's {MAX_AMOUNT:,}")
        need(self.fee <= MAX_AMOUNT, "fee", f"at most {MAX_AMOUNT:,}")
        need(self.buy_in + self.fee <= MAX_AMOUNT, "fee",
             f"the buy-in and the fee together at most {MAX_AMOUNT:,}")
        s = self.structure
        need(s.starting_stack <= CHIPS_MAX // most, "structure.starting_stack",
             f"at most {CHIPS_MAX // most:,}: {most:,} stacks must stay within a table's "
             f"{CHIPS_MAX:,}")
        for i, lv in enumerate(s.levels):
            need(max(lv.ante, lv.bring_in, lv.small_bet, lv.big_bet) <= CHIPS_MAX,
                 f"structure.levels[{i}]", f"each stake at most {CHIPS_MAX:,}")
        need(self.late_through_level <= len(s.levels), "late_through_level",
             f"at most the {len(s.levels)} levels of the structure")
        need(all(unicodedata.category(ch)[0] != "C" for ch in self.name), "name",
             "printable characters only (no control or format characters)")
        if self.format == MULTI_TABLE:
            need(self.start_at > now, "start_at", "a multi-table tournament starts later "
                 "than now (the server's clock)")

    @property
    def capacity(self) -> int:
        """Entries at most (0: no limit)."""
        return self.seats if self.format == SIT_AND_GO else self.max_entrants

    @property
    def minimum(self) -> int:
        return self.seats if self.format == SIT_AND_GO else self.min_entrants


@dataclass(frozen=True, slots=True)
class Created:
    tournament_id: str
    config: Config
    at: float


@dataclass(frozen=True, slots=True)
class EntryRequested:
    """An entry (a registration or a re-entry) whose buy-in and fee are to be charged."""

    entry_id: str
    player_id: str
    at: float


@dataclass(frozen=True, slots=True)
class EntryPaid:
    entry_id: str


@dataclass(frozen=True, slots=True)
class EntryDropped:
    """The wallet refused the charge: nothing moved, the entry is gone."""

    entry_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class EntryWithdrawn:
    """Unregistered before the start (its ``RefundDue`` follows): by the player (``reason``
    empty), or by the process manager for a player excluded since entering (the wallet's
    reason, ``self_excluded`` or ``operator_excluded``)."""

    entry_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Started:
    at: float
    seed: int


@dataclass(frozen=True, slots=True)
class RegistrationClosed:
    at: float


@dataclass(frozen=True, slots=True)
class LevelStarted:
    level: int
    at: float


@dataclass(frozen=True, slots=True)
class BreakStarted:
    after_level: int
    at: float


@dataclass(frozen=True, slots=True)
class TableOpened:
    table_id: str


@dataclass(frozen=True, slots=True)
class TableClosed:
    table_id: str


@dataclass(frozen=True, slots=True)
class SeatAssigned:
    """Seat ``entry_id`` with ``stack`` (the first draw or a late entry)."""

    entry_id: str
    table_id: str
    seat: int
    stack: int


@dataclass(frozen=True, slots=True)
class SeatConfirmed:
    entry_id: str


@dataclass(frozen=True, slots=True)
class TableHeld:
    """No new hand at the table until every reason is released (``break``, ``balance``,
    ``breaking``, ``hand_for_hand``)."""

    table_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class TableReleased:
    table_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class HandStarted:
    table_id: str
    hand_no: int
    stacks: Stacks


@dataclass(frozen=True, slots=True)
class HandEnded:
    table_id: str
    hand_no: int
    stacks: Stacks


@dataclass(frozen=True, slots=True)
class Busted:
    """Out with no chips at the end of hand ``hand_no``; ``round`` groups the busts that
    share a finish (one hand, or one round of hand for hand)."""

    entry_id: str
    table_id: str
    seat: int
    hand_no: int
    start_stack: int
    round: int


@dataclass(frozen=True, slots=True)
class SeatFreed:
    """A busted entry's seat is empty again (unseated with 0 chips)."""

    table_id: str
    seat: int


@dataclass(frozen=True, slots=True)
class MoveStarted:
    move_id: str
    entry_id: str
    from_table: str
    from_seat: int
    to_table: str
    to_seat: int


@dataclass(frozen=True, slots=True)
class MoveUnseated:
    move_id: str
    stack: int


@dataclass(frozen=True, slots=True)
class MoveSeated:
    move_id: str


@dataclass(frozen=True, slots=True)
class MoveCancelled:
    """The moving player busted in the hand their table was finishing: nobody moves."""

    move_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class TableBreaking:
    table_id: str


@dataclass(frozen=True, slots=True)
class TableKept:
    """A table that was breaking stays: late entries made the field too big for one fewer."""

    table_id: str


@dataclass(frozen=True, slots=True)
class HandForHand:
    on: bool


@dataclass(frozen=True, slots=True)
class HandForHandRound:
    number: int
    tables: tuple[str, ...]
    """The tables that must each play one hand before the next round."""


@dataclass(frozen=True, slots=True)
class Cancelled:
    reason: str
    at: float


@dataclass(frozen=True, slots=True)
class Finished:
    winner: str
    at: float


@dataclass(frozen=True, slots=True)
class RefundDue:
    payment_id: str
    entry_id: str
    player_id: str
    buy_in: int
    fee: int


@dataclass(frozen=True, slots=True)
class PrizeDue:
    """``amount`` from the pool; ``place..place_to`` (0: a share of a cancelled pool)."""

    payment_id: str
    entry_id: str
    player_id: str
    amount: int
    place: int
    place_to: int


@dataclass(frozen=True, slots=True)
class PaymentMade:
    payment_id: str


Event: TypeAlias = (
    Created | EntryRequested | EntryPaid | EntryDropped | EntryWithdrawn | Started
    | RegistrationClosed | LevelStarted | BreakStarted | TableOpened | TableClosed
    | SeatAssigned | SeatConfirmed | TableHeld | TableReleased | HandStarted | HandEnded
    | Busted | SeatFreed | MoveStarted | MoveUnseated | MoveSeated | MoveCancelled | TableBreaking
    | TableKept    | HandForHand | HandForHandRound | Cancelled | Finished | RefundDue | PrizeDue
    | PaymentMade
)
