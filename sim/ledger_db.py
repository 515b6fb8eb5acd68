"""PostgreSQL's ledger schema in the simulator (issue 31; ``sim.ledger_archive`` archives into
it): ``ledger.segments``, ``ledger.postings`` and ``ledger.transactions`` in memory with their
keys (:class:`SimLedgerDb`), answering through :class:`SimConn` the very statements
``studhistory.ledger_archive`` and the wallet's statement read send. Two sabotage knobs for
the invariant tests: :attr:`SimLedgerDb.drop_row` (a copy loses one posting row) and
:attr:`SimLedgerDb.twice` (a copy is stored twice)."""

from __future__ import annotations

import bisect
import random
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg

from sim.archiver_part import Crash, Rows, SimPgConn, norm

Row = dict[str, Any]


class SimLedgerDb:
    """PostgreSQL's ``ledger.segments`` and ``ledger.postings`` in memory, with their keys:
    a segment's first and last ids once, a posting's (transaction, posting) once."""

    def __init__(self) -> None:
        self.segments: list[Row] = []
        self.rows: dict[tuple[str, int], Row] = {}
        self.by_tx: dict[str, list[Row]] = {}
        self.txs: dict[str, Row] = {}
        """``ledger.transactions``: one row a transaction, by its id."""
        self.by_account: dict[str, list[Row]] = {}
        """Each account's rows in its statement's order (line_ms, line_seq)."""
        self.lines: set[tuple[str, str]] = set()
        """(account, line id) of every archived row."""
        self.crash_after_commit = False
        self.drop_row = 0
        """The sabotage: the n-th row a copy writes is lost (once; 0: never)."""
        self.twice = 0
        """The sabotage: the n-th copy committed is stored twice, its rows under a second
        key (once; 0: never)."""
        self._written = self._commits = 0

    def watermark(self) -> str | None:
        if not self.segments:
            return None
        return str(max(self.segments, key=lambda s: (s["last_ms"], s["last_seq"]))["last_id"])

    def commit(self, segments: list[Row], rows: list[Row], txs: Sequence[Row] = ()) -> None:
        """A transaction's writes, all or none (a key taken: UniqueViolation, nothing)."""
        firsts = {s["first_id"] for s in self.segments}
        lasts = {s["last_id"] for s in self.segments}
        keys_ = [(r["transaction_id"], r["posting"]) for r in rows]
        ids = [t["transaction_id"] for t in txs]
        if len(set(keys_)) != len(keys_) or any(k in self.rows for k in keys_) or any(
                s["first_id"] in firsts or s["last_id"] in lasts for s in segments) or len(
                set(ids)) != len(ids) or any(i in self.txs for i in ids):
            raise psycopg.errors.UniqueViolation("simulated: duplicate key")
        self.segments += segments
        for t in txs:
            self.txs[t["transaction_id"]] = dict(t, seen=list(t["seen"]))
        self._commits += bool(rows)
        if rows and self._commits == self.twice:
            rows = rows + [dict(r, posting=r["posting"] + 1000) for r in rows]
            keys_ = keys_ + [(r["transaction_id"], r["posting"]) for r in rows[len(keys_):]]
        for key, row in zip(keys_, rows, strict=True):
            self.rows[key] = row
            self.by_tx.setdefault(row["transaction_id"], []).append(row)
            held = self.by_account.setdefault(row["account"], [])
            bisect.insort(held, row, key=lambda r: (r["line_ms"], r["line_seq"]))
            self.lines.add((row["account"], row["line_id"]))

    def account(self, account: str) -> list[Row]:
        return self.by_account.get(account, [])


_SELECT = re.compile(r"SELECT (?P<cols>[a-z_, ]+) FROM ledger\.postings WHERE (?P<where>.+)")
_INSERT = re.compile(r"INSERT INTO ledger\.segments \((?P<cols>[a-z_, ]+)\) VALUES "
                     r"\((?:%s, )*%s\) ON CONFLICT DO NOTHING RETURNING 1")
_COPY = re.compile(r"COPY ledger\.(?P<table>postings|transactions) \((?P<cols>[a-z_, ]+)\) "
                   r"FROM STDIN")
_TX_SELECT = ("SELECT transaction_id, kind, postings, at_ms, seen, table_id, hand_id FROM "
              "ledger.transactions WHERE occurred_at BETWEEN %s AND %s AND "
              "transaction_id = ANY(%s)")
_FILL_IN = ("UPDATE ledger.transactions SET table_id = %s, hand_id = %s WHERE "
            "transaction_id = %s AND occurred_at = %s AND table_id = '' AND hand_id = ''")
_LEGACY = ("SELECT first_id, last_id FROM ledger.segments WHERE NOT sessions "
           "AND (last_ms, last_seq) >= (%s, %s)")


def _line(row: Row) -> tuple[int, int]:
    return row["line_ms"], row["line_seq"]


def _where(db: SimLedgerDb, where: str, p: Sequence[Any]) -> list[Row]:
    """The rows of ``ledger.postings`` a WHERE (with its ORDER and LIMIT) of
    ``studhistory.ledger_archive`` or ``wallet.history`` selects."""
    if where == "account = %s ORDER BY line_ms DESC, line_seq DESC LIMIT 1":
        return db.account(p[0])[-1:]
    if where == "occurred_at BETWEEN %s AND %s AND transaction_id = ANY(%s)":
        return [r for t in p[2] for r in db.by_tx.get(t, [])
                if p[0] <= r["occurred_at"] <= p[1]]
    if where == ("account = %s AND (line_ms, line_seq) >= (%s, %s) AND (line_ms, line_seq) "
                 "<= (%s, %s)"):
        return [r for r in db.account(p[0]) if (p[1], p[2]) <= _line(r) <= (p[3], p[4])]
    if where == ("account = %s AND (line_ms, line_seq) > (%s, %s) AND (line_ms, line_seq) "
                 "< (%s, %s) ORDER BY line_ms, line_seq LIMIT %s"):
        return [r for r in db.account(p[0]) if (p[1], p[2]) < _line(r) < (p[3], p[4])][:p[5]]
    raise NotImplementedError(f"the simulated archive has no answer for WHERE {where}")


class _Copy:
    def __init__(self, conn: SimConn, cols: list[str], table: str = "postings") -> None:
        self.conn = conn
        self.cols = cols
        self.table = table

    async def write_row(self, values: Sequence[Any]) -> None:
        db = self.conn.db
        if self.table == "transactions":
            self.conn._stage([], [], [dict(zip(self.cols, values, strict=True))])
            return
        db._written += 1
        if db._written == db.drop_row:
            return  # the sabotage: the row never reaches the table
        self.conn._stage([], [dict(zip(self.cols, values, strict=True))])


class _CopyCursor:
    def __init__(self, conn: SimConn) -> None:
        self.conn = conn

    @asynccontextmanager
    async def copy(self, sql: str) -> AsyncIterator[_Copy]:
        match = _COPY.fullmatch(norm(sql))
        if match is None:
            raise NotImplementedError(f"the simulated archive has no answer for {sql!r}")
        self.conn._fault()
        yield _Copy(self.conn, [c.strip() for c in match["cols"].split(",")], match["table"])


_Staged = tuple[list[Row], list[Row], list[Row]]
"""A transaction's segments, posting rows and transaction rows."""


class SimConn(SimPgConn[_Staged]):
    """An autocommit connection to :class:`SimLedgerDb`, as ``psycopg.AsyncConnection``
    for the statements the ledger's archiver and the wallet's statement read send (any
    other raises: the simulation names what it cannot answer)."""

    def __init__(self, db: SimLedgerDb, rng: random.Random | None = None,
                 fail: float = 0.0) -> None:
        super().__init__(rng, fail)
        self.db = db

    def _stage(self, segments: list[Row], rows: list[Row], txs: Sequence[Row] = ()) -> None:
        if self._pending is None:
            self.db.commit(segments, rows, txs)
        else:
            self._pending[0].extend(segments)
            self._pending[1].extend(rows)
            self._pending[2].extend(txs)

    def _begin(self) -> _Staged:
        return [], [], []

    def _commit(self, pending: _Staged) -> None:
        segments, rows, txs = pending
        self.db.commit(segments, rows, txs)
        if self.db.crash_after_commit and segments:  # committed; the archiver dies
            raise Crash("after the ledger's copy")

    @asynccontextmanager
    async def cursor(self) -> AsyncIterator[_CopyCursor]:
        yield _CopyCursor(self)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        self._fault()
        db, text = self.db, norm(sql)
        if text.startswith(("SELECT pg_try_advisory_lock(", "SELECT pg_advisory_unlock(")):
            return Rows([(True,)])  # one archiver in a run
        if text == "SELECT history.ensure_month(%s)":
            return Rows([(None,)])
        if text == "SELECT last_id FROM ledger.segments ORDER BY last_ms DESC, last_seq " \
                   "DESC LIMIT 1":
            mark = db.watermark()
            return Rows([] if mark is None else [(mark,)])
        if text == "SELECT coalesce(sum(transactions), 0) FROM ledger.segments":
            return Rows([(sum(s["transactions"] for s in db.segments),)])
        if (insert := _INSERT.fullmatch(text)) is not None:
            row = dict(zip([c.strip() for c in insert["cols"].split(",")], params,
                           strict=True))
            taken = {s["first_id"] for s in db.segments} | {s["last_id"] for s in db.segments}
            if self._pending is not None:
                taken |= {s["first_id"] for s in self._pending[0]}
            if row["first_id"] in taken or row["last_id"] in taken:
                return Rows([])
            self._stage([row], [])
            return Rows([(1,)])
        if text == _TX_SELECT:
            return Rows([(t["transaction_id"], t["kind"], t["postings"], t["at_ms"],
                             list(t["seen"]), t.get("table_id", ""), t.get("hand_id", ""))
                            for i in params[2]
                            if (t := db.txs.get(i)) is not None
                            and params[0] <= t["occurred_at"] <= params[1]])
        if text == _FILL_IN:  # migration 0013: a row's table and hand, where both are ''
            t = db.txs.get(params[2])
            if (t is not None and t["occurred_at"] == params[3]
                    and not (t.get("table_id", "") or t.get("hand_id", ""))):
                t["table_id"], t["hand_id"] = params[0], params[1]
            return Rows([])
        if text == _LEGACY:
            return Rows([(s["first_id"], s["last_id"]) for s in db.segments
                            if not s.get("sessions", False)
                            and (s["last_ms"], s["last_seq"]) >= tuple(params)])
        if (select := _SELECT.fullmatch(text)) is not None:
            cols = [c.strip() for c in select["cols"].split(",")]
            return Rows([tuple(r[c] for c in cols)
                            for r in _where(db, select["where"], params)])
        raise NotImplementedError(f"the simulated archive has no answer for {sql!r}")
