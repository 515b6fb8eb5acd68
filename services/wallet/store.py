"""The wallet's Redis store, the only module of the wallet that imports redis: reads, and
writes through ``apply.lua`` (a transaction appended to the ledger and every projection
updated in one script, so they never disagree; its arguments and replies in ``codec``, the
key layout in ``keys``). Keys of the layout before the hash tag (``stud:wallet:<name>``) are
renamed at start by :meth:`WalletStore.adopt_legacy_keys`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources
from typing import Any, Final, cast

from studkit.errors import AlreadyExists, Conflict, FailedPrecondition, NotFound
from studkit.keys import legacy_wallet_key, wallet_key
from studkit.redis_client import Client, connect, is_cluster
from wallet import codec
from wallet.keys import (
    ACCOUNTS,
    BALANCES,
    IDEMPOTENCY,
    LAST_HAND,
    LEDGER,
    LEGACY_FIXED,
    NO_POOL,
    NO_TABLE_SEATS,
    NO_USAGE,
    PROTECTION,
    SESSIONS,
    pool_key,
    postings_key,
    seats_key,
    usage_key,
)
from wallet.ledger import (
    InsufficientFunds,
    LedgerEntry,
    PoolUnavailable,
    SeatUnavailable,
    Transaction,
    UnknownEntry,
)
from wallet.model import (
    MAX_SEAT,
    AccountId,
    AccountKind,
    Applied,
    EscrowBalance,
    Pool,
    PoolEntry,
    PoolPrize,
    Reconciliation,
    StatementLine,
    StatementPage,
    TxKind,
    pool_account,
    seat_account,
)
from wallet.protection import (
    Excluded,
    LimitExceeded,
    LimitKind,
    ProtectRule,
    Session,
    SessionLimitReached,
    Window,
    replay_sessions,
    session_to_text,
)
from wallet.protection.sessions import Seen

__all__ = [  # the key names too: the simulator, campaigns and tests read them here
    "ACCOUNTS", "BALANCES", "IDEMPOTENCY", "LAST_HAND", "LEDGER", "PROTECTION", "SESSIONS",
    "ArchivedSeen", "BalanceChanged", "BalanceLimit", "IdempotencyKeyReused", "LedgerTrimmed",
    "SettlementExpired", "StreamRows", "UnknownAccount", "WalletStore", "pool_key",
    "postings_key", "seats_key", "usage_key"]

StreamRows = list[tuple[str, dict[str, str]]]

_STREAM_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")
_SCRIPT: Final = resources.files("wallet").joinpath("apply.lua").read_text()

_ADOPT: Final = """
-- KEYS: pairs (legacy name, tagged name); the first two pairs are the accounts hash and the
-- ledger. Renames every legacy key that exists, unless the tagged layout already has data.
local legacy = redis.call('EXISTS', KEYS[1], KEYS[3])
if legacy == 0 then return 0 end
if redis.call('EXISTS', KEYS[2], KEYS[4]) > 0 then return -1 end
local moved = 0
for i = 1, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('RENAME', KEYS[i], KEYS[i + 1])
    moved = moved + 1
  end
end
return moved
"""
_REBUILD_SESSIONS: Final = """
-- KEYS[1] the ledger  KEYS[2] the sessions hash
-- ARGV[1] the id of the last ledger entry folded ('' for none)  ARGV[2..] player, session pairs
-- Replaces the hash unless the ledger moved on since it was read (then -1: read again).
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
if (last and last[1] or '') ~= ARGV[1] then return -1 end
redis.call('DEL', KEYS[2])
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
return (#ARGV - 1) / 2
"""
class UnknownAccount(NotFound):
    """Raised when a request names a player account that was never created."""

    default_reason = "unknown_account"


class IdempotencyKeyReused(AlreadyExists):
    """Raised when an idempotency scope (key, or table and hand id) was already used for a
    different request."""

    default_reason = "idempotency_key_reused"


class LedgerTrimmed(FailedPrecondition):
    """Raised when the sessions are rebuilt from Redis alone but the archiver trimmed the
    ledger's head: the archive's part is needed (``python -m wallet.rebuild_sessions
    --history-dsn ...``)."""

    default_reason = "ledger_trimmed"


ArchivedSeen = Callable[[str | None], Awaitable[Sequence[Seen]]]
"""The archive's transactions that saw players, older than a ledger entry id (None: all),
oldest first (``wallet.history.archived_sessions_seen`` over PostgreSQL)."""


class BalanceChanged(Conflict):
    """Raised when a balance the transaction was decided on moved before it applied; the app
    re-reads and decides again (``ABORTED`` after bounded retries)."""

    default_reason = "balance_changed"


class SettlementExpired(FailedPrecondition):
    """Raised for a settlement of a hand whose record left with the table's older hands
    (``apply.lua`` keeps a table's latest 100): never applied twice."""

    default_reason = "settlement_expired"


class BalanceLimit(FailedPrecondition):
    """Raised when a balance would leave the exact integer range (±(2^53 - 1))."""

    default_reason = "balance_limit"


def _refusal(reason: str, detail: str) -> Exception:
    match reason:
        case "idempotency_key_reused":
            return IdempotencyKeyReused(f"{detail} was used for a different request")
        case "unknown_account":
            return UnknownAccount(f"no account {detail}")
        case "insufficient_funds":
            return InsufficientFunds(detail)
        case "seat_taken" | "seat_not_held":
            return SeatUnavailable(reason, detail)
        case "balance_changed":
            return BalanceChanged(f"{detail} moved while the request was decided")
        case "balance_limit":
            return BalanceLimit(f"{detail} would exceed the balance range")
        case "settlement_expired":
            return SettlementExpired(f"the settlement of {detail} is older than the "
                                     "wallet keeps its records")
        case "unknown_entry":
            tournament_id, _, entry_id = detail.partition(":")
            return UnknownEntry(tournament_id, entry_id)
        case ("entry_exists" | "terms_mismatch" | "entry_of_another_player" | "entry_refunded"
              | "not_entered"):
            return PoolUnavailable(reason, detail)
        case "deposit_limit" | "loss_limit" | "wager_limit":
            window, limit, remaining, resets = detail.split(":")
            return LimitExceeded(LimitKind(reason.removesuffix("_limit")), Window(window),
                                 int(limit), int(remaining), int(resets))
        case "self_excluded" | "operator_excluded":
            return Excluded(reason, int(detail))
        case "session_limit":
            started, ended = detail.split(":")
            return SessionLimitReached(int(started), int(ended))
        case _:
            return RuntimeError(f"unexpected refusal from apply.lua: {reason} {detail}")


class WalletStore:
    """Reads and atomic writes of the wallet's Redis keys."""

    def __init__(self, client: Client) -> None:
        self._redis = client
        self._apply = client.register_script(_SCRIPT)

    @property
    def client(self) -> Client:
        """The Redis connection pool (shared with the protection store)."""
        return self._redis

    @classmethod
    def from_url(cls, url: str) -> WalletStore:
        """A store on a new connection pool (``decode_responses`` on)."""
        return cls(connect(url, decode_responses=True))

    async def adopt_legacy_keys(self) -> int:
        """Rename the keys of the layout before the hash tag (``stud:wallet:<name>``, written
        by earlier versions on a single Redis) to their tagged names, atomically; returns how
        many were renamed (0 when there are none). Refuses (``RuntimeError``) when both
        layouts hold data. On a Redis Cluster there is nothing to adopt: the untagged layout
        could never settle there (its script spans slots)."""
        if is_cluster(self._redis):
            return 0
        balances = [codec.text(k) for k in await self._redis.hkeys(legacy_wallet_key("balances"))]
        last_hand = [codec.text(k) for k in await self._redis.hkeys(legacy_wallet_key("last_hand"))]
        accounts = [AccountId.parse(key) for key in balances]
        tables = {a.table_id for a in accounts if a.kind is AccountKind.SEAT} | set(last_hand)
        suffixes = [*LEGACY_FIXED, *(f"postings:{a.key}" for a in accounts),
                    *(f"seats:{table}" for table in sorted(tables))]
        names = [name for suffix in suffixes
                 for name in (legacy_wallet_key(suffix), wallet_key(suffix))]
        moved = int(await self._redis.eval(_ADOPT, len(names), *names))
        if moved < 0:
            raise RuntimeError("the wallet's keys exist in both the tagged and the legacy "
                               "layout; see docs/redis.md")
        return moved

    async def rebuild_sessions(self, archived: ArchivedSeen | None = None,
                               attempts: int = 5) -> dict[str, Session]:
        """Rebuild the sessions hash from the ledger alone (``protection.replay_sessions``):
        the archive's transactions older than Redis's first entry (``archived``), then
        Redis's entries, and replace it in one script, unless a transaction landed
        meanwhile (then read again, up to ``attempts`` times; :class:`BalanceChanged`
        after). Redis is read first, so an entry trimmed after that read is in it and one
        trimmed before is in the archive (the archiver trims only what it copied).
        :class:`LedgerTrimmed` without ``archived`` when the ledger's head was trimmed
        (known on Redis 7, which counts a stream's entries ever added). Returns the
        sessions written."""
        if archived is None and await self._ledger_trimmed():
            raise LedgerTrimmed("the archiver trimmed the wallet's ledger: rebuild the "
                                "sessions with its archive (python -m "
                                "wallet.rebuild_sessions --history-dsn <PostgreSQL as "
                                "stud_support>)")
        for _ in range(attempts):
            entries = await self.ledger()
            older: Sequence[Seen] = ()
            if archived is not None:
                older = await archived(entries[0].transaction_id if entries else None)
            sessions = replay_sessions([*older, *entries])
            last = entries[-1].transaction_id if entries else ""
            pairs = [x for player, session in sessions.items()
                     for x in (player, session_to_text(session))]
            if int(await self._redis.eval(_REBUILD_SESSIONS, 2, LEDGER, SESSIONS, last,
                                          *pairs)) >= 0:
                return sessions
        raise BalanceChanged("the ledger kept moving while the sessions were rebuilt")

    async def _ledger_trimmed(self) -> bool:
        """Whether entries left the ledger stream (False where Redis cannot say: 6.2)."""
        if not await self._redis.exists(LEDGER):
            return False
        info: dict[Any, Any] = await self._redis.xinfo_stream(LEDGER)
        added = info.get("entries-added", info.get(b"entries-added"))
        length = info.get("length", info.get(b"length", 0))
        return added is not None and int(added) > int(length)

    async def close(self) -> None:
        """Close the connection pool."""
        await self._redis.aclose()

    async def ping(self) -> bool:
        """True when Redis answers."""
        return bool(await self._redis.ping())

    # --- writes -----------------------------------------------------------------------------

    async def create_account(self, player_id: str, created_ms: int) -> None:
        """Open a player account; :class:`AlreadyExists` if open."""
        if not await self._redis.hsetnx(ACCOUNTS, player_id, str(created_ms)):
            raise AlreadyExists(f"account player:{player_id} exists")

    async def apply(self, transaction: Transaction, protect: ProtectRule | None,
                    now_ms: int) -> Applied:
        """Apply ``transaction`` at the wallet's clock ``now_ms`` once per scope, atomically;
        a retry of an applied scope returns the original outcome with ``replayed`` set.
        Raises the refusal otherwise. ``protect``: the player's exclusion and limits checked
        and the move counted in the same script (``protection.rule_for``). A buy-in's or a
        settlement's players are seen at ``now_ms`` (their sessions go on, or start), by the
        same script and on the ledger entry (``seen``, ``at_ms``). A settlement's outcome
        says which of its players to stand up after the hand and why (``Applied.stood_up``:
        excluded, or past their session limit; issue 34) and every seat held at its table
        after it (``Applied.escrows``), read by the same script (issue 35: no round trips of
        their own)."""
        table_seats = seats_key(transaction.table_id) if transaction.table_id else NO_TABLE_SEATS
        pool = pool_key(transaction.pool.tournament_id) if transaction.pool else NO_POOL
        usage = usage_key(protect.player_id) if protect is not None else NO_USAGE
        keys = [LEDGER, BALANCES, IDEMPOTENCY, ACCOUNTS, table_seats, LAST_HAND, pool,
                PROTECTION, usage, SESSIONS]
        keys += [postings_key(p.account) for p in transaction.postings]
        args = [
            transaction.scope,
            transaction.fingerprint,
            codec.plan(transaction),
            codec.record(transaction, now_ms),
            codec.protect_plan(protect),
            codec.report(transaction, now_ms),
        ]
        reply: list[Any] = await self._apply(keys=keys, args=args)
        status, payload, extra, *asked = reply
        if status != "ok":
            raise _refusal(str(payload), str(extra))
        outcome = json.loads(payload)
        excluded, timed_out, held, reasons = asked
        stood_up = {str(p): str(r) for p, r in zip(excluded, reasons, strict=True)}
        stood_up.update((str(p), "session_limit") for p in timed_out)
        return Applied(
            transaction_id=outcome["tx_id"],
            balances={k: int(v) for k, v in (outcome["balances"] or {}).items()},
            amount=int(outcome["amount"]),
            replayed=bool(extra),
            excluded=frozenset(str(p) for p in excluded),
            stood_up=stood_up,
            escrows=codec.escrows(held),
        )

    # --- reads ------------------------------------------------------------------------------

    async def account_exists(self, player_id: str) -> bool:
        """True when the player's account is open."""
        return bool(await self._redis.hexists(ACCOUNTS, player_id))

    async def balance(self, account: AccountId) -> int:
        """The balance of ``account``; :class:`UnknownAccount` for an unopened player."""
        if account.kind is AccountKind.PLAYER and not await self.account_exists(
            account.player_id
        ):
            raise UnknownAccount(f"no account {account.key}")
        value = await self._redis.hget(BALANCES, account.key)
        return int(value) if value is not None else 0

    async def statement(
        self, account: AccountId, page_size: int, page_token: str = ""
    ) -> StatementPage:
        """Up to ``page_size`` postings of ``account`` after ``page_token``, oldest first."""
        if account.kind is AccountKind.PLAYER and not await self.account_exists(
            account.player_id
        ):
            raise UnknownAccount(f"no account {account.key}")
        if page_token and _STREAM_ID.fullmatch(page_token) is None:
            raise ValueError("malformed page token")
        start = f"({page_token}" if page_token else "-"
        rows = cast(
            StreamRows,
            await self._redis.xrange(postings_key(account), start, "+", count=page_size + 1),
        )
        page = rows[:page_size]
        lines = tuple(
            StatementLine(
                posting_id=posting_id,
                transaction_id=f["tx_id"],
                kind=TxKind(f["kind"]),
                amount=int(f["amount"]),
                balance_after=int(f["balance_after"]),
                recorded_at_ms=int(posting_id.split("-", 1)[0]),
                table_id=f.get("table_id", ""),
                hand_id=f.get("hand_id", ""),
                tournament_id=f.get("tournament_id", ""),
            )
            for posting_id, f in page
        )
        next_token = page[-1][0] if len(rows) > page_size else ""
        return StatementPage(lines=lines, next_page_token=next_token)

    async def reconcile(self, table_id: str) -> Reconciliation:
        """Each occupied seat's escrow at ``table_id`` and its last settled hand, read in
        one MULTI so that no settlement lands between them."""
        accounts = [seat_account(table_id, seat) for seat in range(1, MAX_SEAT + 1)]
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(seats_key(table_id))
            pipe.hget(LAST_HAND, table_id)
            pipe.hmget(BALANCES, [a.key for a in accounts])
            holders, last_hand, values = await pipe.execute()
        balance_of = {a.seat: int(v or 0) for a, v in zip(accounts, values, strict=True)}
        return Reconciliation(
            table_id=table_id,
            seats=tuple(
                EscrowBalance(seat=int(seat), player_id=player, balance=balance_of[int(seat)])
                for seat, player in sorted(holders.items(), key=lambda item: int(item[0]))
            ),
            last_hand_id=last_hand or "",
        )

    async def pool_entry(self, tournament_id: str, entry_id: str) -> PoolEntry | None:
        """One entry of a tournament as its pool records it, or None (one field read: a
        refund costs the same in a field of ten thousand)."""
        value = await self._redis.hget(pool_key(tournament_id), f"entry:{entry_id}")
        return codec.pool_entry(entry_id, codec.text(value)) if value is not None else None

    async def pool(self, tournament_id: str) -> Pool:
        """A tournament pool's balance, entries and prizes, read in one MULTI."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(pool_key(tournament_id))
            pipe.hget(BALANCES, pool_account(tournament_id).key)
            raw, balance = await pipe.execute()
        entries: list[tuple[int, PoolEntry]] = []
        prizes: list[tuple[int, PoolPrize]] = []
        for name, value in cast(dict[str, str], raw).items():
            kind, _, ref = name.partition(":")
            if kind == "entry":
                entries.append((int(json.loads(value)["n"]), codec.pool_entry(ref, value)))
            elif kind == "prize":
                p = json.loads(value)
                prizes.append((int(p["n"]), PoolPrize(
                    key=ref, player_id=p["player"], amount=int(p["amount"]),
                    place=int(p["place"]))))
        return Pool(tournament_id=tournament_id, balance=int(balance or 0),
                    entries=tuple(e for _, e in sorted(entries, key=lambda item: item[0])),
                    prizes=tuple(p for _, p in sorted(prizes, key=lambda item: item[0])))

    async def balances(self) -> dict[str, int]:
        """Every account's balance (the projection), zero balances dropped."""
        raw = cast(dict[str, str], await self._redis.hgetall(BALANCES))
        return {k: int(v) for k, v in raw.items() if int(v) != 0}

    async def ledger(self, batch: int = 1000) -> list[LedgerEntry]:
        """The whole ledger, oldest first (for audits, replay and tests)."""
        entries: list[LedgerEntry] = []
        start = "-"
        while True:
            rows = cast(StreamRows, await self._redis.xrange(LEDGER, start, "+", count=batch))
            entries += [codec.entry(entry_id, fields) for entry_id, fields in rows]
            if len(rows) < batch:
                return entries
            start = f"({rows[-1][0]}"
