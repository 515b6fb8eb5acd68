"""Test support: the wallet as pure values, to check the real one against.

:class:`ModelWallet` applies transactions decided by ``wallet.ledger.decide`` the way
``apply.lua`` does, in the same order of checks: a scope already applied answers its recorded
outcome (or ``idempotency_key_reused``), then the players must exist, then the tournament pool's
record (``wallet.pools.check_pool``), then the guards and no account but the external one
below zero (``wallet.ledger.check_guards``). Each refusal changes nothing. The property tests
drive it with random commands; the integration tests compare the real wallet's answers to it,
call by call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from wallet.ledger import LedgerError, LedgerView, Transaction, check_guards, decide, evolve
from wallet.model import Command, Deposit, Pool, RefundEntry
from wallet.pools import check_pool, evolve_pool


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one call answered: ``reason`` empty when applied, ``replayed`` for a retry,
    ``balances`` the reported accounts' balances after it."""

    reason: str = ""
    replayed: bool = False
    balances: Mapping[str, int] = field(default_factory=dict)


@dataclass
class ModelWallet:
    """Balances, accounts, idempotency records and tournament pools, as plain values."""

    balances: dict[str, int] = field(default_factory=dict)
    accounts: set[str] = field(default_factory=set)
    scopes: dict[str, tuple[str, Outcome]] = field(default_factory=dict)
    pools: dict[str, Pool] = field(default_factory=dict)
    applied: list[Transaction] = field(default_factory=list)

    def pool(self, tournament_id: str) -> Pool:
        """The pool of ``tournament_id`` (empty if never entered)."""
        return self.pools.get(tournament_id, Pool(tournament_id=tournament_id))

    def open(self, player_id: str, amount: int = 0) -> None:
        """Open an account and deposit ``amount`` into it."""
        self.accounts.add(player_id)
        if amount:
            self.call(Deposit(player_id=player_id, amount=amount,
                              idempotency_key=f"open-{player_id}"))

    def view(self, command: Command) -> LedgerView:
        """What the app reads before deciding ``command``."""
        if isinstance(command, RefundEntry):
            return LedgerView(entry=self.pool(command.tournament_id).entry(command.entry_id))
        return LedgerView()

    def call(self, command: Command) -> Outcome:
        """Decide and apply ``command``; its outcome (a refusal's reason, or the balances)."""
        try:
            transaction = decide(command, self.view(command))
        except LedgerError as exc:
            return Outcome(reason=exc.reason)
        seen = self.scopes.get(transaction.scope)
        if seen is not None:
            fingerprint, outcome = seen
            if fingerprint != transaction.fingerprint:
                return Outcome(reason="idempotency_key_reused")
            return Outcome(replayed=True, balances=outcome.balances)
        try:
            self._check(transaction)
        except LedgerError as exc:
            return Outcome(reason=exc.reason)
        self.balances = evolve(self.balances, transaction.postings)
        if transaction.pool is not None:
            tournament_id = transaction.pool.tournament_id
            self.pools[tournament_id] = evolve_pool(self.pool(tournament_id), transaction)
        outcome = Outcome(balances={a.key: self.balances.get(a.key, 0)
                                    for a in transaction.report})
        self.scopes[transaction.scope] = (transaction.fingerprint, outcome)
        self.applied.append(transaction)
        return outcome

    def _check(self, transaction: Transaction) -> None:
        for player in transaction.players:
            if player not in self.accounts:
                raise LedgerError("unknown_account", f"player:{player}")
        if transaction.pool is not None:
            check_pool(self.pool(transaction.pool.tournament_id), transaction.pool)
        check_guards(self.balances, transaction)
