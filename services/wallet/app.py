"""The wallet's application layer: who may do what, then decide (``ledger``) and apply
(``store``). Knows a :class:`~wallet.store.WalletStore`, never redis or grpc.

Access: players act on their own account only (create, read); seats are the table's
business, so only the table service (role ``service``, a name in ``table_services``) buys in,
settles hands and cashes out, never a player for themself and never another service;
``service`` callers also read and reconcile; ``operator`` callers create accounts, deposit and
withdraw; ``auditor`` callers read. Tournament money (entries, refunds, prizes) is the
tournament service's alone (a name in ``tournament_services``): never a player, an operator
or the table service; it, operators and auditors read a tournament's pool.

Settlements are counted by outcome (``stud_wallet_settlements_total{outcome}``: applied,
duplicate, refused), and so are tournament transactions
(``stud_wallet_tournament_transactions_total{kind,outcome}``, kind entry, refund or prize);
no counter carries an id or an amount.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection
from typing import Final

import structlog

from studkit.auth import Forbidden, Principal, Role, require_role, require_service
from studkit.commit import Writer, write
from studkit.errors import BadRequest, ServiceError
from studkit.metrics import Metrics
from wallet.ledger import (
    LedgerError,
    LedgerView,
    Transaction,
    decide,
)
from wallet.model import (
    AccountId,
    AccountKind,
    Applied,
    BuyIn,
    CashOut,
    Command,
    Deposit,
    EnterTournament,
    PayPrize,
    Pool,
    Reconciliation,
    RefundEntry,
    SettleHand,
    StatementPage,
    Withdraw,
    seat_account,
)
from wallet.protection import rule_for
from wallet.store import BalanceChanged, WalletStore

log = structlog.get_logger("wallet")

READERS = (Role.SERVICE, Role.OPERATOR, Role.AUDITOR)
MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 100
SETTLEMENT_OUTCOMES: Final = ("applied", "duplicate", "refused")
TOURNAMENT_KINDS: Final = ("entry", "refund", "prize")


def _own_or(principal: Principal, player_id: str, *roles: Role) -> None:
    """Allow the player themself, or any of ``roles``; else :class:`Forbidden`."""
    if principal.is_player(player_id):
        return
    if principal.role is Role.PLAYER:
        raise Forbidden(f"a player may only act on their own account, not player:{player_id}")
    require_role(principal, *roles)


def _may_read(principal: Principal, account: AccountId) -> None:
    if account.kind is AccountKind.PLAYER:
        _own_or(principal, account.player_id, *READERS)
    else:
        require_role(principal, *READERS)


class LedgerWriter(Writer[Command, tuple[Transaction, Applied]]):
    """The ledger as one transaction is written to it (studkit.commit): the view ``decide``
    reads, read again when another transaction moved it first (:class:`BalanceChanged`)."""

    conflicts = (BalanceChanged,)

    def __init__(self, store: WalletStore, read: Callable[[Command], Awaitable[LedgerView]],
                 clock_ms: Callable[[], int], command: Command) -> None:
        self.view = LedgerView()
        self._store, self._read, self._clock_ms, self._command = store, read, clock_ms, command

    async def catch_up(self) -> None:
        self.view = await self._read(self._command)

    async def propose(self, command: Command) -> tuple[Transaction, Applied]:
        transaction = decide(command, self.view)
        # Player protection (issue 34): checked and counted in the same script, at the
        # wallet's clock (data, never a timer).
        now_ms = self._clock_ms()
        rule = rule_for(transaction, now_ms)
        # A settlement's players: which to stand up after it (excluded, or past their session
        # limit), read by the same script that records their sessions (issues 34, 35).
        return transaction, await self._store.apply(transaction, rule, now_ms)


class WalletApp:
    """Use cases of the wallet, one method per RPC."""

    def __init__(
        self,
        store: WalletStore,
        *,
        table_services: Collection[str] = ("table",),
        tournament_services: Collection[str] = ("tournament",),
        conflict_retries: int = 5,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._table_services = frozenset(table_services)
        self._tournament_services = frozenset(tournament_services)
        self._retries = conflict_retries
        self._clock_ms = clock_ms
        metrics = metrics if metrics is not None else Metrics()
        self._tournament_txs = metrics.counter(
            "stud_wallet_tournament_transactions",
            "Tournament money by kind (entry, refund, prize) and outcome: applied, duplicate "
            "(a replay of an applied one) or refused.",
            {"kind": TOURNAMENT_KINDS, "outcome": SETTLEMENT_OUTCOMES},
        )
        self._settlements = metrics.counter(
            "stud_wallet_settlements",
            "SettleHand commands by outcome: applied, duplicate (a replay of an applied "
            "settlement) or refused.",
            {"outcome": SETTLEMENT_OUTCOMES},
        )

    async def create_account(self, principal: Principal, player_id: str) -> int:
        """Open ``player_id``'s account; returns its balance (0)."""
        _own_or(principal, player_id, Role.OPERATOR)
        await self._store.create_account(player_id, self._clock_ms())
        log.info("account_created", account=f"player:{player_id}")
        return 0

    async def balance(self, principal: Principal, account: AccountId) -> int:
        """The balance of ``account``."""
        _may_read(principal, account)
        return await self._store.balance(account)

    async def statement(
        self, principal: Principal, account: AccountId, page_size: int, page_token: str
    ) -> StatementPage:
        """A page of ``account``'s postings."""
        _may_read(principal, account)
        if not 0 <= page_size <= MAX_PAGE_SIZE:
            raise BadRequest("page_size", f"must be 0..{MAX_PAGE_SIZE}")
        try:
            return await self._store.statement(
                account, page_size or DEFAULT_PAGE_SIZE, page_token
            )
        except ValueError as exc:
            raise BadRequest("page_token", str(exc)) from None

    async def deposit(self, principal: Principal, command: Deposit) -> Applied:
        """Operator: money in."""
        require_role(principal, Role.OPERATOR)
        return await self._apply(command)

    async def withdraw(self, principal: Principal, command: Withdraw) -> Applied:
        """Operator: money out."""
        require_role(principal, Role.OPERATOR)
        return await self._apply(command)

    async def buy_in(self, principal: Principal, command: BuyIn) -> Applied:
        """The table: account -> seat escrow."""
        self._require_table(principal)
        return await self._apply(command)

    async def settle_hand(self, principal: Principal, command: SettleHand) -> Applied:
        """The table: one hand's result, once."""
        try:
            self._require_table(principal)
            structlog.contextvars.bind_contextvars(hand_id=command.hand_id)
            applied = await self._apply(command)
        except (ServiceError, LedgerError):
            self._settlements.inc(outcome="refused")
            raise
        self._settlements.inc(outcome="duplicate" if applied.replayed else "applied")
        # applied.escrows: the table's seats after it, read by the settlement's script, for
        # the table to check its stacks without a Reconcile call of its own (issue 35).
        return applied

    async def cash_out(self, principal: Principal, command: CashOut) -> Applied:
        """The table: seat escrow -> account; the seat is freed."""
        self._require_table(principal)
        return await self._apply(command)

    async def reconcile(self, principal: Principal, table_id: str) -> Reconciliation:
        """Each occupied seat's escrow at a table."""
        require_role(principal, *READERS)
        return await self._store.reconcile(table_id)

    async def enter_tournament(self, principal: Principal, command: EnterTournament) -> Applied:
        """The tournament service: buy-in to the pool, fee to the house."""
        return await self._tournament("entry", principal, command)

    async def refund_entry(self, principal: Principal, command: RefundEntry) -> Applied:
        """The tournament service: an entry's buy-in and fee back to the player, once."""
        return await self._tournament("refund", principal, command)

    async def pay_prize(self, principal: Principal, command: PayPrize) -> Applied:
        """The tournament service: a prize from the pool, once per key."""
        return await self._tournament("prize", principal, command)

    async def pool(self, principal: Principal, tournament_id: str) -> Pool:
        """A tournament's pool: the tournament service, operators and auditors."""
        if principal.role is Role.SERVICE:
            require_service(principal, self._tournament_services, "tournament")
        else:
            require_role(principal, Role.OPERATOR, Role.AUDITOR)
        return await self._store.pool(tournament_id)

    async def _tournament(self, kind: str, principal: Principal,
                          command: EnterTournament | RefundEntry | PayPrize) -> Applied:
        try:
            require_service(principal, self._tournament_services, "tournament")
            structlog.contextvars.bind_contextvars(tournament_id=command.tournament_id)
            applied = await self._apply(command)
        except (ServiceError, LedgerError):
            self._tournament_txs.inc(kind=kind, outcome="refused")
            raise
        self._tournament_txs.inc(kind=kind, outcome="duplicate" if applied.replayed
                                 else "applied")
        return applied

    def _require_table(self, principal: Principal) -> None:
        """Seats and settlements are the table service's alone."""
        require_service(principal, self._table_services, "table")

    async def _apply(self, command: Command) -> Applied:
        table_id = getattr(command, "table_id", "")
        if table_id:
            structlog.contextvars.bind_contextvars(table_id=table_id)
        key = getattr(command, "idempotency_key", "")
        if key:
            structlog.contextvars.bind_contextvars(idempotency_key=key)
        def retried(attempt: int, _exc: BaseException) -> None:
            log.info("transaction_retried", command=type(command).__name__, attempt=attempt)

        writer = LedgerWriter(self._store, self._view, self._clock_ms, command)
        await writer.catch_up()
        transaction, applied = await write(writer, command, attempts=self._retries,
                                           on_conflict=retried)
        log.info("transaction_applied", kind=transaction.kind.value,
                 transaction_id=applied.transaction_id, replayed=applied.replayed,
                 postings=len(transaction.postings))
        return applied

    async def _view(self, command: Command) -> LedgerView:
        """What ``decide`` needs to read: a cash-out, the seat's balance; a refund, the
        entry's record in the tournament's pool (what it paid)."""
        if isinstance(command, CashOut):
            seat = seat_account(command.table_id, command.seat)
            return LedgerView(balances={seat.key: await self._store.balance(seat)})
        if isinstance(command, RefundEntry):
            return LedgerView(entry=await self._store.pool_entry(command.tournament_id,
                                                                 command.entry_id))
        return LedgerView()
