"""PostgreSQL's ``tournaments`` schema in the simulator (issue 31; ``sim.tournament_archive``
archives into it): ``tournaments.events`` and the facts tables in memory with their primary
keys (:class:`SimTournamentDb`), answering through :class:`SimConn` exactly the statements
``studhistory.tournament_archive`` and the tournament service's archive reader send. Two
sabotage knobs for the invariant tests: :attr:`SimTournamentDb.drop_row` (a write loses one
event row) and :attr:`SimTournamentDb.twice` (a write is stored twice)."""

from __future__ import annotations

import random
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg

from sim.archiver_part import Crash, Rows, SimPgConn, norm

FACTS = ("tournaments", "entries", "busts", "places", "prizes", "refunds", "endings")
PRIMARY_KEYS = {"tournaments": 1, "entries": 2, "busts": 2, "places": 2, "prizes": 2,
                "refunds": 2, "endings": 1}
"""Each facts table's primary key: its first columns (migration 0003)."""

Row = tuple[Any, ...]


def plain(value: Any) -> Any:
    """A parameter as stored (a ``Jsonb``'s object)."""
    return getattr(value, "obj", value)


@dataclass
class SimTournamentDb:
    """PostgreSQL's ``tournaments.events`` and the facts tables in memory, with their
    primary keys (a key taken: ``ON CONFLICT DO NOTHING`` skips the row, a plain insert
    fails the transaction). Rows are kept in lists, so a sabotage that stores one twice
    shows."""

    events: dict[str, list[Row]] = field(default_factory=dict)
    """Tournament -> its event rows (tournament_id, sequence, occurred_at, event_type,
    command_id, envelope, digest), in insertion order."""
    tables: dict[str, list[Row]] = field(default_factory=lambda: {t: [] for t in FACTS})
    crash: Callable[[], bool] = lambda: False
    """Whether the archiver dies right after this commit (drawn at each one)."""
    drop_row: int = 0
    """The sabotage: the first committed write of at least n event rows loses its n-th
    (once; 0: never). Taken at the commit, so a write rolled back by a failing statement
    does not use it up."""
    twice: int = 0
    """The sabotage: the n-th write committed with facts is stored twice (once; 0: never)."""
    commits: int = 0
    _dropped: bool = False

    def taken(self, table: str, row: Row) -> bool:
        n = PRIMARY_KEYS[table]
        return any(r[:n] == row[:n] for r in self.tables[table])

    def event_taken(self, row: Row) -> bool:
        return any(r[1] == row[1] for r in self.events.get(row[0], ()))

    def commit(self, events: list[Row], facts_: dict[str, list[Row]]) -> None:
        """A transaction's writes, all or none (its statements checked the keys)."""
        if self.drop_row and not self._dropped and len(events) >= self.drop_row:
            self._dropped = True
            events = events[:self.drop_row - 1] + events[self.drop_row:]
        if facts_.get("endings"):
            self.commits += 1
            if self.commits == self.twice:
                events = events + [r for r in events]
                facts_ = {t: rows + rows for t, rows in facts_.items()}
        for row in events:
            self.events.setdefault(row[0], []).append(row)
        for table, rows in facts_.items():
            self.tables[table] += rows

    def facts_of(self, tid: str) -> dict[str, list[Row]]:
        return {t: [r for r in self.tables[t] if r[0] == tid] for t in FACTS}


_INSERT = re.compile(r"INSERT INTO tournaments\.(?P<table>[a-z]+) \((?P<cols>[a-z_, ]+)\) "
                     r"VALUES \((?:%s, )*%s\)(?P<tail>.*)")
_LOCK = re.compile(r"SELECT pg_(try_advisory_lock|advisory_unlock)\(hashtextextended\("
                   r"'stud-archiver-tournament:' \|\| %s, 0\)\)")
_STREAMS = ("SELECT v.tournament_id, count(*) FROM tournaments.events v JOIN "
            "tournaments.endings e USING (tournament_id) WHERE v.tournament_id = ANY(%s) "
            "GROUP BY 1")
_VERIFY = ("SELECT sequence, envelope, digest FROM tournaments.events WHERE tournament_id = "
           "%s ORDER BY sequence")
_READ = ("SELECT sequence, envelope FROM tournaments.events WHERE tournament_id = %s AND "
         "sequence > %s ORDER BY sequence")
_APPLIED = ("SELECT 1 FROM tournaments.events WHERE tournament_id = %s AND command_id = %s "
            "LIMIT 1")


class _Cursor:
    """A cursor of :class:`SimConn` (the write's statements run through one)."""

    def __init__(self, conn: SimConn) -> None:
        self.conn = conn
        self._last = Rows([])

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._last = await self.conn.execute(sql, params)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement, its rows in one pipeline (it fails whole, before any row)."""
        self.conn._fault()
        for row in rows:
            await self.conn.execute(sql, row, fault=False)

    async def fetchone(self) -> Row | None:
        return await self._last.fetchone()


_Staged = tuple[list[Row], dict[str, list[Row]]]
"""A transaction's event rows, and its fact rows by table."""


class SimConn(SimPgConn[_Staged]):
    """An autocommit connection to :class:`SimTournamentDb`, as ``psycopg.AsyncConnection``
    for the statements the tournament archiver and the tournament service's archive reader
    send (any other raises: the simulation names what it cannot answer)."""

    def __init__(self, db: SimTournamentDb, rng: random.Random | None = None,
                 fail: float = 0.0) -> None:
        super().__init__(rng, fail)
        self.db = db

    def _begin(self) -> _Staged:
        return [], {}

    def _commit(self, pending: _Staged) -> None:
        events, facts_ = pending
        self.db.commit(events, facts_)
        if facts_ and self.db.crash():  # committed; the archiver dies
            raise Crash("after the write's commit")

    @asynccontextmanager
    async def cursor(self) -> AsyncIterator[_Cursor]:
        yield _Cursor(self)

    async def execute(self, sql: str, params: Sequence[Any] = (), *,
                      fault: bool = True) -> Rows:
        text = norm(sql)
        if _LOCK.fullmatch(text):
            return Rows([(True,)])  # one archiver in a run; a lock never waits
        if fault:
            self._fault()
        db = self.db
        if text == _STREAMS:
            ended = {r[0] for r in db.tables["endings"]}
            return Rows([(t, len(db.events[t])) for t in params[0]
                            if t in ended and db.events.get(t)])
        if text == _VERIFY:
            return Rows([(r[1], r[5], r[6]) for r in sorted(
                db.events.get(params[0], []), key=lambda r: int(r[1]))])
        if text == _READ:
            return Rows([(r[1], r[5]) for r in sorted(
                db.events.get(params[0], []), key=lambda r: int(r[1])) if r[1] > params[1]])
        if text == _APPLIED:
            return Rows([(1,)][:any(r[4] == params[1] for r in
                                       db.events.get(params[0], []))])
        insert = _INSERT.fullmatch(text)
        if insert is not None and self._pending is not None:
            return self._insert(insert["table"], insert["tail"], tuple(map(plain, params)))
        raise NotImplementedError(f"the simulated archive has no answer for {sql!r}")

    def _insert(self, table: str, tail: str, row: Row) -> Rows:
        assert self._pending is not None
        events, facts_ = self._pending
        if table == "events" and tail == " ON CONFLICT DO NOTHING":
            db = self.db
            if db.event_taken(row) or any(r[:2] == row[:2] for r in events):
                return Rows([])  # there already
            events.append(row)
            return Rows([])
        if table not in PRIMARY_KEYS:
            raise NotImplementedError(f"the simulated archive has no table {table}")
        n = PRIMARY_KEYS[table]
        taken = self.db.taken(table, row) or any(r[:n] == row[:n]
                                                for r in facts_.get(table, []))
        if tail == " ON CONFLICT DO NOTHING RETURNING 1":
            if taken:
                return Rows([])
            facts_.setdefault(table, []).append(row)
            return Rows([(1,)])
        if tail:
            raise NotImplementedError(f"the simulated archive has no answer for ...{tail}")
        if taken:
            raise psycopg.errors.UniqueViolation(f"simulated: duplicate key in {table}")
        facts_.setdefault(table, []).append(row)
        return Rows([])
