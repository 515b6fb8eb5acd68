"""The check with a money move (issue 34): which transactions a player's protection checks
and counts (:func:`rule_for`), how each limit stands (:func:`standings`) and the refusal
(:func:`check`), the same rule ``apply.lua`` applies in the script that moves the money."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, assert_never

from wallet.model import AccountKind, TxKind
from wallet.protection.exclusion import Excluded
from wallet.protection.limits import (
    USAGE_KEPT_MS,
    LimitExceeded,
    LimitKind,
    Standing,
    Usage,
    Window,
    used,
)
from wallet.protection.state import Protection
from wallet.transaction import Posting


@dataclass(frozen=True, slots=True)
class ProtectRule:
    """What ``apply.lua`` checks and records for one transaction: the limits of ``checks``
    (and the exclusion when ``blocked``) against the player's usage, then ``usage``; with
    ``session`` (a buy-in), the session time limit too, and the player's session goes on or
    starts (:func:`seen`), in the same script."""

    player_id: str
    checks: tuple[LimitKind, ...]
    blocked: bool
    usage: Usage
    session: bool = False


class Moves(Protocol):
    """A transaction, or its ledger entry, as the rule reads it: its kind and postings."""

    @property
    def kind(self) -> TxKind: ...

    @property
    def postings(self) -> tuple[Posting, ...]: ...


def rule_for(transaction: Moves, now_ms: int) -> ProtectRule | None:
    """The protection rule of a transaction: deposits, buy-ins (top-ups too) and tournament
    entries are checked and counted (a buy-in against the session time limit too, which
    tournament entries are not); cash-outs, refunds and prizes are counted (they lower
    the net loss, a refund the wager too); withdrawals and settlements are neither."""
    players = [p for p in transaction.postings if p.account.kind is AccountKind.PLAYER]
    if len(players) != 1:
        return None
    posting = players[0]
    player, moved = posting.account.player_id, abs(posting.amount)
    match transaction.kind:
        case TxKind.DEPOSIT:
            return ProtectRule(player, (LimitKind.DEPOSIT,), True, Usage(now_ms, deposit=moved))
        case TxKind.BUY_IN:
            return ProtectRule(player, (LimitKind.WAGER, LimitKind.LOSS), True,
                               Usage(now_ms, wager=moved, loss=moved), session=True)
        case TxKind.TOURNAMENT_ENTRY:
            return ProtectRule(player, (LimitKind.WAGER, LimitKind.LOSS), True,
                               Usage(now_ms, wager=moved, loss=moved))
        case TxKind.CASH_OUT | TxKind.PRIZE:
            return ProtectRule(player, (), False, Usage(now_ms, loss=-moved))
        case TxKind.ENTRY_REFUND:
            return ProtectRule(player, (), False, Usage(now_ms, wager=-moved, loss=-moved))
        case TxKind.WITHDRAWAL | TxKind.SETTLEMENT:
            return None
        case _:
            assert_never(transaction.kind)


class Stamped(Moves, Protocol):
    """A ledger entry: its kind, postings and the wallet's time when it was applied."""

    @property
    def at_ms(self) -> int: ...


def replay_usage(entries: Iterable[Stamped], kept_ms: int = USAGE_KEPT_MS
                 ) -> dict[str, list[Usage]]:
    """Every player's usage list, newest first, rebuilt from the ledger alone (oldest entry
    first): each counted move at its entry's time, the moves ``kept_ms`` older than the
    latest dropped as each is added, as ``apply.lua`` keeps the list."""
    lists: dict[str, list[Usage]] = {}
    for entry in entries:
        rule = rule_for(entry, entry.at_ms)
        if rule is None:
            continue
        kept = lists.setdefault(rule.player_id, [])
        kept.insert(0, rule.usage)
        while kept and kept[-1].at_ms <= entry.at_ms - kept_ms:
            kept.pop()
    return lists


def standings(state: Protection, usage: Sequence[Usage], now_ms: int) -> tuple[Standing, ...]:
    """Every limit of ``state`` at ``now_ms``, in kind and window order."""
    rows = []
    for kind in LimitKind:
        for window in Window:
            limit = state.limits.get((kind, window))
            if limit is None:
                continue
            amount = limit.in_force(now_ms)
            total, resets = used(usage, kind, window, now_ms)
            left = None if amount is None else max(0, amount - total)
            rows.append(Standing(kind, window, limit, amount, total, left, resets))
    return tuple(rows)


def check(state: Protection, usage: Sequence[Usage], rule: ProtectRule, now_ms: int) -> None:
    """The refusal ``apply.lua`` gives (the same rule in Python): an active exclusion first,
    then, among the limits a move would pass, the one with the least left (the first in
    ``rule.checks`` order, then day, week, month, on a tie)."""
    if rule.blocked and state.exclusion is not None and state.exclusion.active(now_ms):
        raise Excluded(state.exclusion.refusal, state.exclusion.until_ms)
    worst: LimitExceeded | None = None
    rows = [row for row in standings(state, usage, now_ms) if row.kind in rule.checks]
    for row in sorted(rows, key=lambda row: rule.checks.index(row.kind)):  # the script's order
        if row.in_force is None or row.remaining is None:
            continue
        if row.used + rule.usage.of(row.kind) > row.in_force and (
                worst is None or row.remaining < worst.remaining):
            worst = LimitExceeded(row.kind, row.window, row.in_force, row.remaining,
                                  row.resets_at_ms)
    if worst is not None:
        raise worst
