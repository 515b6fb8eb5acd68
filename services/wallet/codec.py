"""The wallet's one codec at the edge of Redis: a transaction as ``apply.lua``'s arguments
(its plan, its ledger record, its protection rule, a settlement's report), the script's reply
of held seats, and the stored records read back (ledger entries, pool entries). Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from wallet.ledger import LedgerEntry, Posting, Transaction
from wallet.model import AccountId, EscrowBalance, PoolEntry, TxKind
from wallet.protection import SESSION_GAP_MS, USAGE_KEPT_MS, ProtectRule, sessions_seen
from wallet.transaction import PoolAction, PoolRule


def text(value: str | bytes) -> str:
    """A reply as text, whether the client decodes or not."""
    return value.decode() if isinstance(value, bytes) else value


def _pool_rule(rule: PoolRule) -> dict[str, str]:
    return {"action": rule.action.value, "tournament": rule.tournament_id, "ref": rule.ref,
            "player": rule.player_id, "buy_in": str(rule.buy_in), "fee": str(rule.fee),
            "amount": str(rule.amount), "place": str(rule.place)}


def _parse_pool_rule(record: Mapping[str, str]) -> PoolRule:
    return PoolRule(action=PoolAction(record["action"]), tournament_id=record["tournament"],
                    ref=record["ref"], player_id=record["player"], buy_in=int(record["buy_in"]),
                    fee=int(record["fee"]), amount=int(record["amount"]),
                    place=int(record["place"]))


def plan(transaction: Transaction) -> str:
    """``apply.lua``'s ARGV[3]: what to check and write (amounts as decimal strings)."""
    pool = {"pool": _pool_rule(transaction.pool)} if transaction.pool is not None else {}
    return json.dumps(
        {
            **pool,
            "kind": transaction.kind.value,
            "table_id": transaction.table_id,
            "hand_id": transaction.hand_id,
            "players": list(transaction.players),
            "postings": [
                {"account": p.account.key, "amount": str(p.amount)}
                for p in transaction.postings
            ],
            "guards": [
                {"account": g.account.key, "op": g.op.value, "value": str(g.value)}
                for g in transaction.guards
            ],
            "seats": [
                {"action": s.action.value, "seat": str(s.seat), "player": s.player_id}
                for s in transaction.seats
            ],
            "report": [a.key for a in transaction.report],
            "amount": str(transaction.amount),
        }
    )


def report(transaction: Transaction, now_ms: int) -> str:
    """``apply.lua``'s ARGV[6]: a settlement's players, its time and its table ('' for
    any other transaction)."""
    if transaction.kind is not TxKind.SETTLEMENT:
        return ""
    return json.dumps({"now": str(now_ms), "players": list(sessions_seen(transaction)),
                       "table": transaction.table_id, "session_gap_ms": str(SESSION_GAP_MS)},
                      separators=(",", ":"))


def escrows(flat: list[Any]) -> tuple[EscrowBalance, ...]:
    """``apply.lua``'s held seats (seat, player, escrow, flat), by seat."""
    rows = [EscrowBalance(seat=int(flat[i]), player_id=str(flat[i + 1]),
                          balance=int(flat[i + 2])) for i in range(0, len(flat), 3)]
    return tuple(sorted(rows, key=lambda row: row.seat))


def protect_plan(rule: ProtectRule | None) -> str:
    """``apply.lua``'s ARGV[5]: the protection rule as JSON ('' for none)."""
    if rule is None:
        return ""
    u = rule.usage
    session = {"session_gap_ms": str(SESSION_GAP_MS)} if rule.session else {}
    return json.dumps({"player": rule.player_id, "now": str(u.at_ms),
                       "checks": [k.value for k in rule.checks], "blocked": rule.blocked,
                       "usage": [str(u.deposit), str(u.wager), str(u.loss)],
                       "kept_ms": str(USAGE_KEPT_MS), **session})


def record(transaction: Transaction, now_ms: int) -> str:
    """``apply.lua``'s ARGV[4], the ledger record stored verbatim: the postings, the table and
    hand, the wallet's time, the players whose sessions it saw and a pool rule."""
    pool = {"pool": _pool_rule(transaction.pool)} if transaction.pool is not None else {}
    players = sessions_seen(transaction)
    seen = {"seen": list(players)} if players else {}
    return json.dumps(
        {
            "kind": transaction.kind.value,
            "postings": [[p.account.key, p.amount] for p in transaction.postings],
            "table_id": transaction.table_id,
            "hand_id": transaction.hand_id,
            "at_ms": now_ms,
            **seen,
            **pool,
        },
        separators=(",", ":"),
    )


class MalformedLedgerEntry(ValueError):
    """A ledger entry that is not what :func:`record` writes (not JSON, or a ``seen`` that is
    not a list of player ids): read back, it would be folded wrong (a string's letters as
    players)."""


def entry(entry_id: str, fields: Mapping[str, str]) -> LedgerEntry:
    """A ledger stream entry read back (the inverse of :func:`record`);
    :class:`MalformedLedgerEntry` for one :func:`record` never writes."""
    try:
        record = json.loads(fields["tx"])
    except json.JSONDecodeError as exc:
        raise MalformedLedgerEntry(f"ledger entry {entry_id} is not JSON: {exc}") from exc
    seen = record.get("seen", [])
    if not (isinstance(seen, list) and all(isinstance(p, str) and p for p in seen)):
        raise MalformedLedgerEntry(f"ledger entry {entry_id} has seen={seen!r}, not a list "
                                   "of player ids")
    return LedgerEntry(
        transaction_id=entry_id,
        kind=TxKind(record["kind"]),
        postings=tuple(Posting(AccountId.parse(k), int(v)) for k, v in record["postings"]),
        table_id=record["table_id"],
        hand_id=record["hand_id"],
        pool=_parse_pool_rule(record["pool"]) if "pool" in record else None,
        # Entries from before the wallet recorded its clock: the stream id's time.
        at_ms=int(record.get("at_ms", entry_id.split("-", 1)[0])),
        players_seen=tuple(seen),
    )


def pool_entry(entry_id: str, value: str) -> PoolEntry:
    """One entry of a tournament pool's record, as ``apply.lua`` writes it."""
    e = json.loads(value)
    return PoolEntry(entry_id=entry_id, player_id=e["player"], buy_in=int(e["buy_in"]),
                     fee=int(e["fee"]), refunded=e["refunded"] == 1)


