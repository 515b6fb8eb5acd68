"""The wallet's vocabulary, pure values: accounts, commands and read models (statement
lines, escrows, transaction outcomes). Money is ``int`` in the smallest unit, never float."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum, unique
from typing import Final, assert_never

from rules.streets import Street

MAX_AMOUNT: Final = 2**53 - 1
"""Largest amount or balance (exact in the store's Lua numbers)."""
MAX_SEAT: Final = 8


# --- accounts -------------------------------------------------------------------------------


@unique
class AccountKind(StrEnum):
    """The five kinds of account."""

    PLAYER = "player"
    SEAT = "seat"
    POOL = "pool"
    """A tournament's prize pool: its buy-ins, paid out as its prizes."""
    HOUSE = "house"
    EXTERNAL = "external"


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountId:
    """One account of the ledger; ``key`` is its stable name in the ledger and the store."""

    kind: AccountKind
    player_id: str = ""
    table_id: str = ""
    seat: int = 0
    tournament_id: str = ""

    @property
    def key(self) -> str:
        """``player:<id>``, ``seat:<table>:<seat>``, ``pool:<tournament>``, ``house`` or
        ``external``."""
        match self.kind:
            case AccountKind.PLAYER:
                return f"player:{self.player_id}"
            case AccountKind.SEAT:
                return f"seat:{self.table_id}:{self.seat}"
            case AccountKind.POOL:
                return f"pool:{self.tournament_id}"
            case AccountKind.HOUSE | AccountKind.EXTERNAL:
                return self.kind.value
            case _:
                assert_never(self.kind)

    @property
    def may_go_negative(self) -> bool:
        """Only the external account (the outside world) goes below zero."""
        return self.kind is AccountKind.EXTERNAL

    @staticmethod
    def parse(key: str) -> AccountId:
        """The account named by ``key`` (inverse of :attr:`key`).

        >>> AccountId.parse("seat:t1:3") == seat_account("t1", 3)
        True
        """
        kind, _, rest = key.partition(":")
        match AccountKind(kind):
            case AccountKind.PLAYER:
                return player_account(rest)
            case AccountKind.SEAT:
                table_id, _, seat = rest.rpartition(":")
                return seat_account(table_id, int(seat))
            case AccountKind.POOL:
                return pool_account(rest)
            case AccountKind.HOUSE:
                return HOUSE
            case AccountKind.EXTERNAL:
                return EXTERNAL


def player_account(player_id: str) -> AccountId:
    """A player's account."""
    return AccountId(kind=AccountKind.PLAYER, player_id=player_id)


def seat_account(table_id: str, seat: int) -> AccountId:
    """The escrow account of a table seat."""
    return AccountId(kind=AccountKind.SEAT, table_id=table_id, seat=seat)


def pool_account(tournament_id: str) -> AccountId:
    """The prize-pool account of a tournament."""
    return AccountId(kind=AccountKind.POOL, tournament_id=tournament_id)


HOUSE: Final = AccountId(kind=AccountKind.HOUSE)
EXTERNAL: Final = AccountId(kind=AccountKind.EXTERNAL)

# --- commands -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Deposit:
    """Money in from outside to a player's account."""

    player_id: str
    amount: int
    idempotency_key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Withdraw:
    """Money out of a player's account to outside."""

    player_id: str
    amount: int
    idempotency_key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BuyIn:
    """Move money from a player's account to their seat's escrow."""

    player_id: str
    table_id: str
    seat: int
    amount: int
    idempotency_key: str
    sit_down: bool = False
    """A sit-down's buy-in: the seat must hold no escrow at all (``seat_taken`` otherwise,
    the player's own too: an orphan a table's crash left there is refunded, never added to).
    False for a top-up, which adds to the player's own escrow (and for a table that sends no
    flag: what every buy-in did before). Not part of the fingerprint (a retry is answered by
    its key, and fingerprints recorded before it stay the same)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SeatResult:
    """What one seat put into a hand (antes, bring-in, bets) and won from it."""

    seat: int
    player_id: str
    amount_in: int
    amount_won: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RakePolicy:
    """A table's rake: basis points of the pot, capped; ``percent_bps == 0`` is no rake."""

    percent_bps: int = 0
    cap: int = 0


NO_RAKE: Final = RakePolicy()


@dataclass(frozen=True, slots=True, kw_only=True)
class SettleHand:
    """Apply one hand's money result to the seats' escrows (idempotent per hand id)."""

    table_id: str
    hand_id: str
    results: tuple[SeatResult, ...]
    rake: int = 0
    rake_policy: RakePolicy = NO_RAKE
    ended_on: Street | None = Street.SEVENTH
    """The latest street dealt; None for a hand voided or ended before any card (no rake)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CashOut:
    """Move a seat's whole escrow back to the player's account and free the seat."""

    table_id: str
    seat: int
    player_id: str
    idempotency_key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EnterTournament:
    """A player's entry into a tournament: ``buy_in`` from their account to the tournament's
    pool, ``fee`` to the house. ``entry_id`` names the entry (a re-entry is a new one)."""

    player_id: str
    tournament_id: str
    entry_id: str
    buy_in: int
    fee: int
    idempotency_key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RefundEntry:
    """Give back what one entry paid: its buy-in from the pool, its fee from the house."""

    player_id: str
    tournament_id: str
    entry_id: str
    idempotency_key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PayPrize:
    """Pay ``amount`` of a tournament's pool to a player who entered it, for ``place``
    (1..``MAX_PLACE``), or as the player's share by chips of a cancelled tournament's pool
    (``place`` 0, ``ledger.SHARE``)."""

    player_id: str
    tournament_id: str
    amount: int
    place: int
    idempotency_key: str


Command = (Deposit | Withdraw | BuyIn | SettleHand | CashOut | EnterTournament | RefundEntry
           | PayPrize)

# --- read models ----------------------------------------------------------------------------


@unique
class TxKind(StrEnum):
    """The kind of a ledger transaction."""

    DEPOSIT = "deposit"
    WITHDRAWAL = "withdrawal"
    BUY_IN = "buy_in"
    SETTLEMENT = "settlement"
    CASH_OUT = "cash_out"
    TOURNAMENT_ENTRY = "tournament_entry"
    ENTRY_REFUND = "entry_refund"
    PRIZE = "prize"


@dataclass(frozen=True, slots=True, kw_only=True)
class StatementLine:
    """One posting of an account's statement."""

    posting_id: str
    transaction_id: str
    kind: TxKind
    amount: int
    balance_after: int
    recorded_at_ms: int
    table_id: str = ""
    hand_id: str = ""
    tournament_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class StatementPage:
    """A page of a statement and the token of the next one (empty if none)."""

    lines: tuple[StatementLine, ...]
    next_page_token: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class EscrowBalance:
    """A seat's escrow and who it is held for."""

    seat: int
    player_id: str
    balance: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconciliation:
    """A table's seats as the wallet sees them."""

    table_id: str
    seats: tuple[EscrowBalance, ...]
    last_hand_id: str = ""

    @property
    def total(self) -> int:
        """Sum of the seats' escrows."""
        return sum(s.balance for s in self.seats)


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolEntry:
    """One entry of a tournament as its pool records it: who paid what, and whether it was
    refunded."""

    entry_id: str
    player_id: str
    buy_in: int
    fee: int
    refunded: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolPrize:
    """One prize paid from a tournament's pool (``key``: the payment's idempotency key)."""

    key: str
    player_id: str
    amount: int
    place: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Pool:
    """A tournament's prize pool: its balance, its entries (in the order made) and prizes.
    Always ``balance == buy_ins - refunded - prizes_paid``."""

    tournament_id: str
    balance: int = 0
    entries: tuple[PoolEntry, ...] = ()
    prizes: tuple[PoolPrize, ...] = ()

    def entry(self, entry_id: str) -> PoolEntry | None:
        """The entry ``entry_id``, or None if it was never made."""
        return next((e for e in self.entries if e.entry_id == entry_id), None)

    def entered(self, player_id: str) -> int:
        """How many of ``player_id``'s entries stand (are not refunded)."""
        return sum(1 for e in self.entries if e.player_id == player_id and not e.refunded)

    @property
    def buy_ins(self) -> int:
        """Every buy-in ever paid in."""
        return sum(e.buy_in for e in self.entries)

    @property
    def fees(self) -> int:
        """The fees of the entries that stand (refunded fees went back)."""
        return sum(e.fee for e in self.entries if not e.refunded)

    @property
    def refunded(self) -> int:
        """The buy-ins given back."""
        return sum(e.buy_in for e in self.entries if e.refunded)

    @property
    def prizes_paid(self) -> int:
        """Every prize paid out."""
        return sum(p.amount for p in self.prizes)


@dataclass(frozen=True, slots=True, kw_only=True)
class Applied:
    """The outcome of a transaction: its id, balances after it, whether this answers a
    retry of an already applied one, and which of a settlement's players are excluded now
    (issue 34; read as the transaction is applied or answered again)."""

    transaction_id: str
    balances: Mapping[str, int]
    amount: int = 0
    replayed: bool = False
    excluded: frozenset[str] = frozenset()
    escrows: tuple[EscrowBalance, ...] = ()
    """A settlement's: every seat held at its table right after it, with its escrow (what
    Reconcile reads; issue 35: the table checks its stacks against these)."""
    stood_up: Mapping[str, str] = field(default_factory=dict)
    """A settlement's players to stand up after the hand, with why: ``self_excluded``,
    ``operator_excluded`` or ``session_limit`` (their session, seen at the settlement, has
    lasted the limit in force; issue 34)."""

    def balance(self, account: AccountId) -> int:
        """The balance of ``account`` right after the transaction."""
        return self.balances[account.key]
