"""Migration 0010 (``ledger.postings (table_id)``, postings_by_table) on a real PostgreSQL:
it applies once, after the nine before it, indexes every partition (those there and a month
made later), and the planner reads a table's archived settlements through it (``stud replay
verify``'s read, ``studtools.replay_source``) where it scanned every posting before."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from studhistory.migrate import migrate, migrations
from studhistory.pg import ledger_time
from studtest.postgres import TestPostgres
from studtools.pg_server import ADMIN_USER

pytestmark = pytest.mark.integration

SETTLEMENTS = ("SELECT transaction_id, table_id, hand_id, account, amount FROM "
               "ledger.postings WHERE kind = 'settlement' AND table_id = ANY(%s) "
               "ORDER BY transaction_id, posting")
"""``ReplaySource._archived_settlements``'s read of the tables it checks."""
TABLES = 400
HANDS = 25
"""Settlements a table (two postings each), beside as many deposits with no table."""


def _postings() -> list[tuple[Any, ...]]:
    """Two months of a room's ledger: each table's settlements, and deposits with none."""
    rows = []
    ms = int(datetime(2025, 12, 1, tzinfo=UTC).timestamp() * 1000)
    for n in range(TABLES * HANDS):
        table, hand = f"t{n % TABLES}", n // TABLES + 1
        ms += 500_000  # about half of them in January
        for kind, tx, postings in (
                ("settlement", f"{ms}-0", [("player:a", 10, table), ("player:b", -10, table)]),
                ("deposit", f"{ms}-1", [("player:a", 5, ""), ("external", -5, "")])):
            for i, (account, amount, table_id) in enumerate(postings):
                rows.append((tx, i, ledger_time(tx), kind, "", account, amount, table_id,
                             f"{table}#{hand}" if table_id else ""))
    return rows


def _scans(conn: psycopg.Connection[Any], table_id: str) -> dict[str, tuple[str, str]]:
    """The plan of the read of ``table_id``'s settlements: partition -> how it is read (the
    node's type and its index, if any)."""
    row = conn.execute("EXPLAIN (FORMAT JSON) " + SETTLEMENTS, ([table_id],)).fetchone()
    assert row is not None
    out: dict[str, tuple[str, str]] = {}

    def walk(node: dict[str, Any]) -> None:
        if "Relation Name" in node or "Index Name" in node:
            index = node.get("Index Name", "")
            name = node.get("Relation Name") or next(
                t for t, i in _indexes(conn).items() if i.split(".")[-1] == index)
            out[name.split(".")[-1]] = (node["Node Type"], index)
        for child in node.get("Plans", ()):
            walk(child)
    walk(row[0][0]["Plan"])
    return out


def _indexes(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """Partition -> its index attached to postings_by_table."""
    return {str(table): str(index) for table, index in conn.execute(
        "SELECT c.indrelid::regclass::text, c.indexrelid::regclass::text FROM pg_inherits i "
        "JOIN pg_index c ON c.indexrelid = i.inhrelid "
        "WHERE i.inhparent = 'ledger.postings_by_table'::regclass").fetchall()}


def test_the_per_table_settlement_read_uses_the_index(postgres: TestPostgres) -> None:
    postgres.server.create_database("postings_by_table")
    dsn = postgres.server.dsn(ADMIN_USER, "postings_by_table")
    every = migrations()
    added = [m for m in every if m.name == "postings_by_table"]
    assert [m.version for m in added] == [10]
    assert migrate(dsn, every[:9]) == every[:9]
    with psycopg.connect(dsn, autocommit=True) as conn:
        for month in (datetime(2025, 12, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC)):
            conn.execute("SELECT history.ensure_month(%s)", (month,))
        with conn.cursor() as cur, cur.copy(
                "COPY ledger.postings (transaction_id, posting, occurred_at, kind, scope, "
                "account, amount, table_id, hand_id) FROM STDIN") as copy:
            for row in _postings():
                copy.write_row(row)
        conn.execute("ANALYZE ledger.postings")
        before = _scans(conn, "t7")
        assert before["postings_2025_12"][0] == "Seq Scan", before
        assert before["postings_2026_01"][0] == "Seq Scan", before
        wanted = sorted(conn.execute(SETTLEMENTS, (["t7"],)).fetchall())
        assert len(wanted) == 2 * HANDS

    assert migrate(dsn, every[:10]) == added  # once, after the nine before it
    assert migrate(dsn, every[:10]) == []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT history.ensure_month(%s)", (datetime(2026, 2, 1, tzinfo=UTC),))
        held = _indexes(conn)
        assert sorted(held) == ["ledger.postings_2025_12", "ledger.postings_2026_01",
                                "ledger.postings_2026_02", "ledger.postings_default"]
        conn.execute("ANALYZE ledger.postings")
        after = _scans(conn, "t7")
        for part in ("postings_2025_12", "postings_2026_01"):  # the ones with rows
            assert after[part][1] == held[f"ledger.{part}"].split(".")[-1], after
        assert sorted(conn.execute(SETTLEMENTS, (["t7"],)).fetchall()) == wanted
