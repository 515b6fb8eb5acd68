"""The wallet's functional core: a double-entry ledger as pure functions (no I/O, no clock).

``decide(command, view)`` turns a command into a :class:`Transaction`: balanced postings (they
sum to zero) plus the guards the store must check atomically before applying them (a balance
at least / exactly some amount, seat holders, accounts that must exist). ``evolve`` applies
postings to balances and ``replay`` folds a ledger back into balances. The sum over all
accounts, the external (bank) and house accounts included, is always zero.

Rake: the rules' own (RULES 2.4, :func:`rules.rake.rake_due`): one rule, one place.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum, unique
from typing import Final, assert_never

from rules.config import BASIS_POINTS as RULES_BASIS_POINTS
from rules.config import Rake
from rules.errors import RuleViolation
from rules.rake import rake_due
from rules.streets import Street
from wallet.model import (
    EXTERNAL,
    HOUSE,
    MAX_AMOUNT,
    MAX_SEAT,
    AccountId,
    BuyIn,
    CashOut,
    Command,
    Deposit,
    RakePolicy,
    SettleHand,
    TxKind,
    Withdraw,
    player_account,
    seat_account,
)

BASIS_POINTS: Final = RULES_BASIS_POINTS


# --- errors ---------------------------------------------------------------------------------


class LedgerError(Exception):
    """Base of the ledger's refusals: a stable ``reason`` and a readable ``detail``."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class InvalidTransaction(LedgerError):
    """Raised when a command can never be applied as given (non-positive amount, unbalanced
    settlement, wrong rake, duplicate seat); ``field`` names the offending field."""

    def __init__(self, field: str, reason: str, detail: str) -> None:
        super().__init__(reason, f"{field}: {detail}")
        self.field = field


class InsufficientFunds(LedgerError):
    """Raised when an account (or a seat's escrow) does not hold what a movement needs."""

    def __init__(self, account: str) -> None:
        super().__init__("insufficient_funds", f"{account} does not hold enough")
        self.account = account


class SeatUnavailable(LedgerError):
    """Raised when a seat is held for another player (``seat_taken``) or not held for the
    named player (``seat_not_held``)."""

# --- transactions ---------------------------------------------------------------------------


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
    """Take the seat for the player unless another player holds it."""
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
    """What ``decide`` may know of the current state: balances read by the shell."""

    balances: Mapping[str, int] = field(default_factory=dict)

    def balance(self, account: AccountId) -> int:
        """The balance of ``account`` (zero if never touched)."""
        return self.balances.get(account.key, 0)


EMPTY_VIEW: Final = LedgerView()

# --- decide ---------------------------------------------------------------------------------


def fingerprint(command: Command) -> str:
    """A digest of every field of ``command`` (the idempotency check)."""
    payload = {"type": type(command).__name__, **asdict(command)}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _amount(value: int, name: str, *, positive: bool) -> int:
    if positive and value <= 0:
        raise InvalidTransaction(name, "non_positive_amount", f"must be > 0, got {value}")
    if value < 0:
        raise InvalidTransaction(name, "negative_amount", f"must be >= 0, got {value}")
    if value > MAX_AMOUNT:
        raise InvalidTransaction(name, "amount_too_large", f"must be <= {MAX_AMOUNT}")
    return value


def _seat(value: int, name: str = "seat") -> int:
    if not 1 <= value <= MAX_SEAT:
        raise InvalidTransaction(name, "seat_out_of_range", f"must be 1..{MAX_SEAT}")
    return value


def compute_rake(pot: int, policy: RakePolicy, ended_on: Street | None) -> int:
    """The rake of a hand whose pots hold ``pot``, by the rules (RULES 2.4): none when the
    hand ended on 3rd street or on no street (voided), else
    ``min(cap, pot * percent_bps // 10000)``.

    >>> compute_rake(1_000, RakePolicy(percent_bps=500, cap=30), Street.FIFTH)
    30
    >>> compute_rake(399, RakePolicy(percent_bps=500, cap=30), Street.SEVENTH)
    19
    >>> compute_rake(1_000, RakePolicy(percent_bps=500, cap=30), Street.THIRD)
    0
    """
    return rake_due(pot, rules_rake(policy), ended_on)


def rules_rake(policy: RakePolicy) -> Rake:
    """``policy`` as the rules' :class:`~rules.config.Rake` (which validates it), or
    :class:`InvalidTransaction`."""
    try:
        return Rake(policy.percent_bps, policy.cap)
    except RuleViolation as exc:
        field = "rake_policy.cap" if "cap" in exc.detail else "rake_policy.percent_bps"
        raise InvalidTransaction(field, "invalid_rake_policy", exc.detail) from None


def check_rake_policy(policy: RakePolicy) -> RakePolicy:
    """``policy`` if the rules accept it: 0..10000 basis points, a positive cap when raking."""
    rules_rake(policy)
    return policy


def decide(command: Command, view: LedgerView = EMPTY_VIEW) -> Transaction:
    """The transaction for ``command``, or :class:`InvalidTransaction`. ``view`` matters only
    for :class:`CashOut`, which moves the seat's escrow as read (guarded to be unchanged)."""
    match command:
        case Deposit():
            return _decide_deposit(command)
        case Withdraw():
            return _decide_withdraw(command)
        case BuyIn():
            return _decide_buy_in(command)
        case SettleHand():
            return _decide_settle_hand(command)
        case CashOut():
            return _decide_cash_out(command, view)
        case _:
            assert_never(command)


def _decide_deposit(command: Deposit) -> Transaction:
    amount = _amount(command.amount, "amount", positive=True)
    player = player_account(command.player_id)
    return Transaction(
        kind=TxKind.DEPOSIT,
        scope=f"deposit:{command.player_id}:{command.idempotency_key}",
        fingerprint=fingerprint(command),
        postings=(Posting(EXTERNAL, -amount), Posting(player, amount)),
        players=(command.player_id,),
        report=(player,),
        amount=amount,
    )


def _decide_withdraw(command: Withdraw) -> Transaction:
    amount = _amount(command.amount, "amount", positive=True)
    player = player_account(command.player_id)
    return Transaction(
        kind=TxKind.WITHDRAWAL,
        scope=f"withdraw:{command.player_id}:{command.idempotency_key}",
        fingerprint=fingerprint(command),
        postings=(Posting(player, -amount), Posting(EXTERNAL, amount)),
        guards=(Guard(player, GuardOp.AT_LEAST, amount),),
        players=(command.player_id,),
        report=(player,),
        amount=amount,
    )


def _decide_buy_in(command: BuyIn) -> Transaction:
    amount = _amount(command.amount, "amount", positive=True)
    player = player_account(command.player_id)
    seat = seat_account(command.table_id, _seat(command.seat))
    return Transaction(
        kind=TxKind.BUY_IN,
        scope=f"buy_in:{command.player_id}:{command.idempotency_key}",
        fingerprint=fingerprint(command),
        postings=(Posting(player, -amount), Posting(seat, amount)),
        guards=(Guard(player, GuardOp.AT_LEAST, amount),),
        players=(command.player_id,),
        seats=(SeatRule(SeatAction.CLAIM, command.seat, command.player_id),),
        table_id=command.table_id,
        report=(player, seat),
        amount=amount,
    )


def _decide_settle_hand(command: SettleHand) -> Transaction:
    if not command.results:
        raise InvalidTransaction("seats", "no_seats", "a settlement names at least one seat")
    seen: set[int] = set()
    for i, result in enumerate(command.results):
        _seat(result.seat, f"seats[{i}].seat")
        if result.seat in seen:
            raise InvalidTransaction(f"seats[{i}].seat", "duplicate_seat", "seat listed twice")
        seen.add(result.seat)
        _amount(result.amount_in, f"seats[{i}].amount_in", positive=False)
        _amount(result.amount_won, f"seats[{i}].amount_won", positive=False)
    rake = _amount(command.rake, "rake", positive=False)
    policy = check_rake_policy(command.rake_policy)
    pot = sum(r.amount_in for r in command.results)
    won = sum(r.amount_won for r in command.results)
    if won + rake != pot:
        raise InvalidTransaction(
            "seats", "unbalanced", f"won {won} + rake {rake} != put in {pot}"
        )
    expected = compute_rake(pot, policy, command.ended_on)
    if rake != expected:
        raise InvalidTransaction("rake", "rake_mismatch", f"expected {expected}, got {rake}")
    accounts = [seat_account(command.table_id, r.seat) for r in command.results]
    postings = [
        Posting(account, r.amount_won - r.amount_in)
        for account, r in zip(accounts, command.results, strict=True)
        if r.amount_won != r.amount_in
    ]
    if rake:
        postings.append(Posting(HOUSE, rake))
    return Transaction(
        kind=TxKind.SETTLEMENT,
        scope=f"settle:{command.table_id}:{command.hand_id}",
        fingerprint=fingerprint(command),
        postings=tuple(postings),
        guards=tuple(
            Guard(account, GuardOp.AT_LEAST, r.amount_in)
            for account, r in zip(accounts, command.results, strict=True)
            if r.amount_in > 0
        ),
        seats=tuple(SeatRule(SeatAction.CHECK, r.seat, r.player_id) for r in command.results),
        table_id=command.table_id,
        hand_id=command.hand_id,
        report=tuple(accounts),
        amount=pot,
    )


def _decide_cash_out(command: CashOut, view: LedgerView) -> Transaction:
    seat = seat_account(command.table_id, _seat(command.seat))
    player = player_account(command.player_id)
    amount = view.balance(seat)
    postings = (Posting(seat, -amount), Posting(player, amount)) if amount else ()
    return Transaction(
        kind=TxKind.CASH_OUT,
        scope=f"cash_out:{command.table_id}:{command.seat}:{command.idempotency_key}",
        fingerprint=fingerprint(command),
        postings=postings,
        guards=(Guard(seat, GuardOp.EXACTLY, amount),),
        players=(command.player_id,),
        seats=(SeatRule(SeatAction.RELEASE, command.seat, command.player_id),),
        table_id=command.table_id,
        report=(player, seat),
        amount=amount,
    )

# --- evolve and replay ----------------------------------------------------------------------


def check_guards(balances: Mapping[str, int], transaction: Transaction) -> None:
    """Raise :class:`InsufficientFunds` if ``transaction`` may not apply to ``balances``
    (an ``AT_LEAST`` guard fails or a non-external account would go negative). The store's
    script enforces the same conditions atomically."""
    for guard in transaction.guards:
        balance = balances.get(guard.account.key, 0)
        if guard.op is GuardOp.AT_LEAST and balance < guard.value:
            raise InsufficientFunds(guard.account.key)
    after = evolve(balances, transaction.postings)
    for posting in transaction.postings:
        if not posting.account.may_go_negative and after[posting.account.key] < 0:
            raise InsufficientFunds(posting.account.key)


def evolve(balances: Mapping[str, int], postings: Iterable[Posting]) -> dict[str, int]:
    """Balances after applying ``postings`` (a new dict; zero balances are kept)."""
    result = dict(balances)
    for posting in postings:
        result[posting.account.key] = result.get(posting.account.key, 0) + posting.amount
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry:
    """One transaction as recorded in the ledger stream."""

    transaction_id: str
    kind: TxKind
    postings: tuple[Posting, ...]
    table_id: str = ""
    hand_id: str = ""


def replay(entries: Iterable[LedgerEntry]) -> dict[str, int]:
    """Balances rebuilt from the ledger alone (accounts whose balance is zero dropped)."""
    balances: dict[str, int] = {}
    for entry in entries:
        balances = evolve(balances, entry.postings)
    return {key: value for key, value in balances.items() if value != 0}
