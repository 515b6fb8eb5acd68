"""The ledger's values: a :class:`Transaction` is balanced postings plus the conditions the
store checks atomically before applying them (balance guards, seat holders, a tournament
pool's entries); a :class:`LedgerView` is what ``ledger.decide`` may read. Pure, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum, unique
from typing import Final

from wallet.model import AccountId, PoolEntry, TxKind


@dataclass(frozen=True, slots=True)
class Posting:
    """A signed change of one account: positive adds to it, negative takes from it."""

    account: AccountId
    amount: int


@unique
class GuardOp(StrEnum):
    """How a guard compares an account's balance before the transaction."""

    AT_LEAST = "at_least"
    EXACTLY = "exactly"


@dataclass(frozen=True, slots=True)
class Guard:
    """A condition on an account's balance before the transaction. ``AT_LEAST`` failing is
    :class:`InsufficientFunds`; ``EXACTLY`` failing means the balance moved since it was read
    (the caller re-reads and decides again)."""

    account: AccountId
    op: GuardOp
    value: int


@unique
class SeatAction(StrEnum):
    """What a transaction does to a seat's holder."""

    CLAIM = "claim"
    """Take the seat for the player unless another player holds it (a top-up: the player's
    own seat, added to)."""
    CLAIM_FREE = "claim_free"
    """Take the seat for the player only if nobody holds it (a sit-down's buy-in: an escrow
    of the same player's there, an orphan to be refunded, refuses it too)."""
    CHECK = "check"
    """The player must hold the seat."""
    RELEASE = "release"
    """The player must hold the seat; free it."""


@dataclass(frozen=True, slots=True)
class SeatRule:
    """A seat-holder condition (and effect) of a transaction."""

    action: SeatAction
    seat: int
    player_id: str


@unique
class PoolAction(StrEnum):
    """What a transaction does to a tournament pool's record of entries and prizes."""

    ENTER = "enter"
    """Record a new entry (the entry id unused in the tournament; the tournament's first
    entry fixes its buy-in and fee, and every later one must match them)."""
    REFUND = "refund"
    """The entry must stand, made by the player for the buy-in and fee given; mark it
    refunded."""
    PRIZE = "prize"
    """The player must hold a standing entry; record the prize."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolRule:
    """A tournament-pool condition (and effect) of a transaction; ``ref`` is the entry id
    (enter, refund) or the prize's idempotency key (prize)."""

    action: PoolAction
    tournament_id: str
    ref: str
    player_id: str
    buy_in: int = 0
    fee: int = 0
    amount: int = 0
    place: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Transaction:
    """A balanced set of postings plus what the store checks before applying them."""

    kind: TxKind
    scope: str
    """Idempotency scope: one transaction per scope, ever."""
    fingerprint: str
    """Digest of the command; a retry under the same scope must match it."""
    postings: tuple[Posting, ...]
    guards: tuple[Guard, ...] = ()
    players: tuple[str, ...] = ()
    """Player accounts that must exist."""
    seats: tuple[SeatRule, ...] = ()
    pool: PoolRule | None = None
    table_id: str = ""
    hand_id: str = ""
    report: tuple[AccountId, ...] = ()
    """Accounts whose balances after the transaction make up its outcome."""
    amount: int = 0
    """The amount moved, recorded in the outcome (what a cash-out paid back)."""

    def __post_init__(self) -> None:
        if sum(p.amount for p in self.postings) != 0:
            raise AssertionError(f"unbalanced postings {self.postings}")


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerView:
    """What ``decide`` may know of the current state: balances read by the shell, and the
    tournament entry a refund names (None if the tournament has no such entry)."""

    balances: Mapping[str, int] = field(default_factory=dict)
    entry: PoolEntry | None = None

    def balance(self, account: AccountId) -> int:
        """The balance of ``account`` (zero if never touched)."""
        return self.balances.get(account.key, 0)


EMPTY_VIEW: Final = LedgerView()

