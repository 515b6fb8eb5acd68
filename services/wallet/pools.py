"""Tournament pools, pure: the checks the store's script makes on a pool's record of entries
and prizes before a tournament transaction applies (:func:`check_pool`), the pool after one
(:func:`evolve_pool`), and a pool rebuilt from the ledger alone (:func:`replay_pool`). The
transactions themselves are decided in :mod:`wallet.ledger`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import assert_never

from wallet.ledger import LedgerEntry, PoolUnavailable, UnknownEntry
from wallet.model import Pool, PoolEntry, PoolPrize, pool_account
from wallet.transaction import PoolAction, PoolRule, Transaction


def check_pool(pool: Pool, rule: PoolRule) -> None:
    """Raise the refusal the store's script gives when ``rule`` may not apply to ``pool``
    (:class:`PoolUnavailable`, :class:`UnknownEntry`); the script checks the same, atomically."""
    entry = pool.entry(rule.ref)
    match rule.action:
        case PoolAction.ENTER:
            if entry is not None:
                raise PoolUnavailable("entry_exists", f"entry {rule.ref} exists")
            first = pool.entries[0] if pool.entries else None
            if first is not None and (first.buy_in, first.fee) != (rule.buy_in, rule.fee):
                raise PoolUnavailable("terms_mismatch", f"the tournament's buy-in and fee are "
                                      f"{first.buy_in} and {first.fee}")
        case PoolAction.REFUND:
            if entry is None:
                raise UnknownEntry(rule.tournament_id, rule.ref)
            if entry.player_id != rule.player_id:
                raise PoolUnavailable("entry_of_another_player", f"entry {rule.ref}")
            if entry.refunded:
                raise PoolUnavailable("entry_refunded", f"entry {rule.ref} was refunded")
        case PoolAction.PRIZE:
            if not pool.entered(rule.player_id):
                raise PoolUnavailable("not_entered", f"{rule.player_id} has no standing entry")
        case _:
            assert_never(rule.action)


def evolve_pool(pool: Pool, transaction: Transaction) -> Pool:
    """``pool`` after ``transaction`` (its pool rule and its posting to the pool account)."""
    rule = transaction.pool
    if rule is None or rule.tournament_id != pool.tournament_id:
        return pool
    balance = pool.balance + sum(p.amount for p in transaction.postings
                                 if p.account == pool_account(pool.tournament_id))
    match rule.action:
        case PoolAction.ENTER:
            entry = PoolEntry(entry_id=rule.ref, player_id=rule.player_id, buy_in=rule.buy_in,
                              fee=rule.fee)
            return replace(pool, balance=balance, entries=(*pool.entries, entry))
        case PoolAction.REFUND:
            entries = tuple(replace(e, refunded=True) if e.entry_id == rule.ref else e
                            for e in pool.entries)
            return replace(pool, balance=balance, entries=entries)
        case PoolAction.PRIZE:
            prize = PoolPrize(key=rule.ref, player_id=rule.player_id, amount=rule.amount,
                              place=rule.place)
            return replace(pool, balance=balance, prizes=(*pool.prizes, prize))
        case _:
            assert_never(rule.action)


def replay_pool(entries: Iterable[LedgerEntry], tournament_id: str) -> Pool:
    """A tournament's pool rebuilt from the ledger alone."""
    pool = Pool(tournament_id=tournament_id)
    for entry in entries:
        if entry.pool is not None:
            pool = evolve_pool(pool, Transaction(
                kind=entry.kind, scope="", fingerprint="", postings=entry.postings,
                pool=entry.pool))
    return pool
