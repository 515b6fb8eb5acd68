"""The wallet's functional core: a double-entry ledger as pure functions (no I/O, no clock).

``decide(command, view)`` turns a command into a :class:`Transaction`: balanced postings (they
sum to zero) plus the guards the store must check atomically before applying them (a balance
at least / exactly some amount, seat holders, a tournament pool's record, accounts that must
exist); the values are :mod:`wallet.transaction`'s. ``evolve`` applies postings to balances
and ``replay`` folds a ledger back into balances. The sum over all accounts, the external
(bank), house and tournament pool accounts included, is always zero.

Tournaments: an entry pays its buy-in into the tournament's own pool account and its fee to
the house; a refund gives back what the entry paid (read from the pool); a prize is paid from
the pool. The pool's record is checked by :mod:`wallet.pools` (and ``apply.lua``).

Rake: the rules' own (RULES 2.4, :func:`rules.rake.rake_due`): one rule, one place.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, assert_never

from rules.config import Rake
from rules.errors import RuleViolation
from rules.rake import rake_due
from rules.streets import Street
from studkit.plain import plain
from wallet.model import (
    EXTERNAL,
    HOUSE,
    MAX_AMOUNT,
    MAX_SEAT,
    BuyIn,
    CashOut,
    Command,
    Deposit,
    EnterTournament,
    PayPrize,
    RakePolicy,
    RefundEntry,
    SettleHand,
    TxKind,
    Withdraw,
    player_account,
    pool_account,
    seat_account,
)
from wallet.transaction import EMPTY_VIEW as EMPTY_VIEW
from wallet.transaction import Guard as Guard
from wallet.transaction import GuardOp as GuardOp
from wallet.transaction import LedgerView as LedgerView
from wallet.transaction import PoolAction as PoolAction
from wallet.transaction import PoolRule as PoolRule
from wallet.transaction import Posting as Posting
from wallet.transaction import SeatAction as SeatAction
from wallet.transaction import SeatRule as SeatRule
from wallet.transaction import Transaction as Transaction

MAX_PLACE: Final = 100_000
"""The last place a prize may name."""
SHARE: Final = 0
"""The "place" of a cancelled tournament's share of its pool by chips: paid to an entry still
in when the tournament was cancelled after its first bust, which holds no place (issue 29,
G3: refused as out of range, the pool stayed full and the payment due for ever)."""


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
    """Raised when a seat is held for another player, or for anyone at a sit-down's buy-in
    (``seat_taken``), or not held for the named player (``seat_not_held``)."""


class UnknownEntry(LedgerError):
    """Raised when a refund names an entry the tournament never had."""

    def __init__(self, tournament_id: str, entry_id: str) -> None:
        super().__init__("unknown_entry", f"tournament {tournament_id} has no entry {entry_id}")


class PoolUnavailable(LedgerError):
    """Raised when a tournament pool's record forbids the movement: ``entry_exists`` (the
    entry id is taken), ``terms_mismatch`` (not the tournament's buy-in and fee),
    ``entry_refunded``, ``entry_of_another_player``, ``not_entered`` (a prize for a player
    without a standing entry)."""

# --- decide ---------------------------------------------------------------------------------


def fingerprint(command: Command) -> str:
    """A digest of every field of ``command`` (the idempotency check) but a buy-in's
    ``sit_down``: the canonical JSON of ``{"type": ..., **dataclasses.asdict(command)}``
    (:func:`studkit.plain.plain`, the same values without the deep copy: a wallet call makes
    one per command)."""
    payload = {"type": type(command).__name__, **plain(command)}
    if isinstance(command, BuyIn):
        # A condition on the seat, not the move: a retry is answered by its key whatever it
        # says, and a buy-in recorded before the flag keeps its fingerprint.
        del payload["sit_down"]
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
    for :class:`CashOut`, which moves the seat's escrow as read (guarded to be unchanged),
    and :class:`RefundEntry`, which gives back what ``view.entry`` paid."""
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
        case EnterTournament():
            return _decide_enter(command)
        case RefundEntry():
            return _decide_refund(command, view)
        case PayPrize():
            return _decide_prize(command)
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
        seats=(SeatRule(SeatAction.CLAIM_FREE if command.sit_down else SeatAction.CLAIM,
                        command.seat, command.player_id),),
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

def _decide_enter(command: EnterTournament) -> Transaction:
    buy_in = _amount(command.buy_in, "buy_in", positive=True)
    fee = _amount(command.fee, "fee", positive=False)
    total = _amount(buy_in + fee, "buy_in + fee", positive=True)
    player, pool = player_account(command.player_id), pool_account(command.tournament_id)
    postings = [Posting(player, -total), Posting(pool, buy_in)]
    if fee:
        postings.append(Posting(HOUSE, fee))
    return Transaction(
        kind=TxKind.TOURNAMENT_ENTRY,
        scope=f"entry:{command.tournament_id}:{command.idempotency_key}",
        fingerprint=fingerprint(command),
        postings=tuple(postings),
        guards=(Guard(player, GuardOp.AT_LEAST, total),),
        players=(command.player_id,),
        pool=PoolRule(action=PoolAction.ENTER, tournament_id=command.tournament_id,
                      ref=command.entry_id, player_id=command.player_id, buy_in=buy_in,
                      fee=fee),
        report=(player, pool),
        amount=total,
    )


def _decide_refund(command: RefundEntry, view: LedgerView) -> Transaction:
    """Gives back the entry's buy-in and fee as the pool records them (``view.entry``). An
    entry already refunded still decides (the store answers a retry with its outcome, or
    refuses)."""
    entry = view.entry
    if entry is None or entry.entry_id != command.entry_id:
        raise UnknownEntry(command.tournament_id, command.entry_id)
    if entry.player_id != command.player_id:
        raise PoolUnavailable("entry_of_another_player",
                              f"entry {entry.entry_id} is not {command.player_id}'s")
    player, pool = player_account(command.player_id), pool_account(command.tournament_id)
    postings = [Posting(pool, -entry.buy_in), Posting(player, entry.buy_in + entry.fee)]
    guards = [Guard(pool, GuardOp.AT_LEAST, entry.buy_in)]
    if entry.fee:
        postings.append(Posting(HOUSE, -entry.fee))
        guards.append(Guard(HOUSE, GuardOp.AT_LEAST, entry.fee))
    return Transaction(
        kind=TxKind.ENTRY_REFUND,
        scope=f"refund:{command.tournament_id}:{command.idempotency_key}",
        fingerprint=fingerprint(command),
        postings=tuple(postings),
        guards=tuple(guards),
        players=(command.player_id,),
        pool=PoolRule(action=PoolAction.REFUND, tournament_id=command.tournament_id,
                      ref=entry.entry_id, player_id=command.player_id, buy_in=entry.buy_in,
                      fee=entry.fee),
        report=(player, pool),
        amount=entry.buy_in + entry.fee,
    )


def _decide_prize(command: PayPrize) -> Transaction:
    amount = _amount(command.amount, "amount", positive=True)
    if command.place != SHARE and not 1 <= command.place <= MAX_PLACE:
        raise InvalidTransaction("place", "place_out_of_range",
                                 f"must be 1..{MAX_PLACE}, or {SHARE} for a cancel's share")
    player, pool = player_account(command.player_id), pool_account(command.tournament_id)
    return Transaction(
        kind=TxKind.PRIZE,
        scope=f"prize:{command.tournament_id}:{command.idempotency_key}",
        fingerprint=fingerprint(command),
        postings=(Posting(pool, -amount), Posting(player, amount)),
        guards=(Guard(pool, GuardOp.AT_LEAST, amount),),
        players=(command.player_id,),
        pool=PoolRule(action=PoolAction.PRIZE, tournament_id=command.tournament_id,
                      ref=command.idempotency_key, player_id=command.player_id,
                      amount=amount, place=command.place),
        report=(player, pool),
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
    pool: PoolRule | None = None
    at_ms: int = 0
    """The wallet's clock when it was applied."""
    players_seen: tuple[str, ...] = ()
    """The players whose sessions it went on with, or started (a buy-in's, a settlement's)."""


def replay(entries: Iterable[LedgerEntry]) -> dict[str, int]:
    """Balances rebuilt from the ledger alone (accounts whose balance is zero dropped)."""
    balances: dict[str, int] = {}
    for entry in entries:
        balances = evolve(balances, entry.postings)
    return {key: value for key, value in balances.items() if value != 0}

