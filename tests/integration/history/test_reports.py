"""Operator reports on a real PostgreSQL (migration 0004, ``stud report``): the views' figures
are what the archived rows add up to, by UTC day whatever the session's time zone; a player's
days add up to their net; support and the auditor read the views and the archiver cannot make
views of its own; ``stud report`` prints the views (text and JSON) and exits 2 without a
PostgreSQL URL, 1 when PostgreSQL fails; over hands really dealt and archived, the totals
are those of the hands' own rows and every day's nets and rake balance."""

from __future__ import annotations

import asyncio
import io
import json
import random
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from studhistory.archiver import archive_table
from studhistory.pgarchive import PgHistory
from studhistory.tournament_archive import Facts, write
from studkit.redis_client import connect
from studkit.store import EventStore
from studtest.postgres import HistoryDsns, TestPostgres
from studtest.redis import TestRedis
from studtest.table import running_room
from studtools.cli import main as cli_main
from studtools.devkeys import DevKeys
from tests.integration.history.test_archiver import HOT, NAMES, room_with_hands

pytestmark = pytest.mark.integration

DAY = datetime(2026, 12, 5, tzinfo=UTC)


@dataclass(frozen=True)
class Hand:
    table_id: str
    hand: int
    ended_at: datetime
    small_bet: int
    big_bet: int
    pot: int
    rake: int
    seats: dict[int, str]
    nets: dict[int, int]


def hands() -> list[Hand]:
    """Hands over three UTC days, two stakes and three tables, some at a day's edges; each
    hand's nets sum to minus its rake."""
    rng = random.Random(4)
    found = []
    edges = [timedelta(0), timedelta(hours=23, minutes=59, seconds=59, microseconds=999_999)]
    for n in range(60):
        table_id = ("t1", "t2", "t3")[n % 3]
        small, big = (10, 20) if table_id != "t3" else (50, 100)
        day = DAY + timedelta(days=n % 3)
        ended = day + (edges[n % 2] if n < 12 else timedelta(minutes=rng.randrange(1, 1439)))
        names = rng.sample(["ann", "bob", "cat", "dan", "eve"], rng.randrange(2, 5))
        seats = {seat: name for seat, name in enumerate(names, start=1)}
        pot = rng.randrange(20, 2000) // 2 * 2
        rake = min(pot // 20, 30)
        winner = rng.choice(list(seats))
        nets = {seat: -pot // len(seats) for seat in seats}
        nets[winner] = 0
        nets[winner] = -sum(nets.values()) - rake
        found.append(Hand(table_id, n + 1, ended, small, big, pot, rake, seats, nets))
    return found


def insert(dsn: str, rows: list[Hand]) -> None:
    """Archived rows written as the archiver writes them (its role, INSERT only)."""
    with psycopg.connect(dsn) as conn:
        for h in rows:
            conn.execute(
                "INSERT INTO history.hands (table_id, hand, started_at, ended_at, "
                "first_sequence, last_sequence, ante, small_bet, big_bet, bring_in, pot, rake, "
                "players, seats, winners, nets) VALUES (%s, %s, %s, %s, 1, 1, 1, %s, %s, 5, "
                "%s, %s, %s, %s, '{}', %s)",
                (h.table_id, h.hand, h.ended_at - timedelta(seconds=30), h.ended_at,
                 h.small_bet, h.big_bet, h.pot, h.rake, list(h.seats.values()),
                 json.dumps({str(s): p for s, p in h.seats.items()}),
                 json.dumps({str(s): v for s, v in h.nets.items()})))
            for seat, player in h.seats.items():
                conn.execute(
                    "INSERT INTO history.hand_players (player_id, ended_at, table_id, hand, "
                    "seat, net, pot) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    (player, h.ended_at, h.table_id, h.hand, seat, h.nets[seat], h.pot))


def query(dsn: str, sql: str, params: Any = None, time_zone: str = "UTC") -> list[dict[str, Any]]:
    with psycopg.connect(dsn, options=f"-c TimeZone={time_zone}") as conn:
        cursor = conn.execute(sql, params)
        names = [c.name for c in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def expected_tables(rows: list[Hand]) -> list[dict[str, Any]]:
    """history.daily_tables computed here from the hands themselves."""
    groups: dict[tuple[date, int, int, str], list[Hand]] = defaultdict(list)
    for h in rows:
        groups[(h.ended_at.astimezone(UTC).date(), h.small_bet, h.big_bet, h.table_id)].append(h)
    return [{"day": k[0], "small_bet": k[1], "big_bet": k[2], "table_id": k[3],
             "hands": len(g), "rake": sum(h.rake for h in g),
             "players": len({p for h in g for p in h.seats.values()}),
             "pot": sum(h.pot for h in g)} for k, g in sorted(groups.items())]


def expected_stakes(rows: list[Hand]) -> list[dict[str, Any]]:
    groups: dict[tuple[date, int, int], list[Hand]] = defaultdict(list)
    for h in rows:
        groups[(h.ended_at.astimezone(UTC).date(), h.small_bet, h.big_bet)].append(h)
    return [{"day": k[0], "small_bet": k[1], "big_bet": k[2], "hands": len(g),
             "rake": sum(h.rake for h in g),
             "players": len({p for h in g for p in h.seats.values()}),
             "tables": len({h.table_id for h in g}), "pot": sum(h.pot for h in g)}
            for k, g in sorted(groups.items())]


def expected_players(rows: list[Hand]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, date], list[int]] = defaultdict(list)
    for h in rows:
        for seat, player in h.seats.items():
            groups[(player, h.ended_at.astimezone(UTC).date())].append(h.nets[seat])
    return [{"player_id": k[0], "day": k[1], "hands": len(nets), "net": sum(nets)}
            for k, nets in sorted(groups.items())]


@pytest.fixture
def archived(history_dsns: HistoryDsns) -> Iterator[list[Hand]]:
    rows = hands()
    insert(history_dsns.archiver, rows)
    yield rows


TABLES = "SELECT * FROM history.daily_tables ORDER BY day, small_bet, big_bet, table_id"
STAKES = "SELECT * FROM history.daily_stakes ORDER BY day, small_bet, big_bet"
PLAYERS = "SELECT * FROM history.player_daily ORDER BY player_id, day"


@pytest.mark.parametrize("time_zone", ["UTC", "Pacific/Kiritimati", "America/Adak"])
def test_the_views_add_up_the_archived_rows_by_utc_day(
        history_dsns: HistoryDsns, archived: list[Hand], time_zone: str) -> None:
    """Per day, stake and table; per day and stake; per player and day: exactly what the
    rows hold, each hand on its own UTC day (a hand at 23:59:59.999999 and one at 00:00 fall
    on either side), whatever the session's time zone (+14 h and -10 h here)."""
    assert query(history_dsns.support, TABLES, time_zone=time_zone) == expected_tables(archived)
    assert query(history_dsns.support, STAKES, time_zone=time_zone) == expected_stakes(archived)
    assert query(history_dsns.support, PLAYERS, time_zone=time_zone) == expected_players(archived)
    days = {r["day"] for r in query(history_dsns.support, STAKES)}
    assert days == {DAY.date() + timedelta(days=n) for n in range(3)}
    # The day's edges: the first 12 hands end at 00:00:00 or 23:59:59.999999 UTC.
    edge = [h for h in archived if h.hand <= 12]
    assert {h.ended_at.date() for h in edge} == days


def test_a_players_days_add_up_to_their_net_and_every_day_balances(
        history_dsns: HistoryDsns, archived: list[Hand]) -> None:
    by_player = query(history_dsns.support, PLAYERS)
    for player in {p for h in archived for p in h.seats.values()}:
        total = query(history_dsns.support, "SELECT sum(net)::bigint AS net, count(*) AS hands "
                      "FROM history.hand_players WHERE player_id = %s", (player,))[0]
        mine = [r for r in by_player if r["player_id"] == player]
        assert sum(r["net"] for r in mine) == total["net"]
        assert sum(r["hands"] for r in mine) == total["hands"]
    # Chips are never made or lost: a day's nets, every player's, are minus its rake.
    for day in query(history_dsns.support, STAKES):
        nets = sum(r["net"] for r in by_player if r["day"] == day["day"])
        rake = sum(r["rake"] for r in query(history_dsns.support, STAKES)
                   if r["day"] == day["day"])
        assert nets == -rake


def test_support_and_the_auditor_read_the_views_and_nobody_else_makes_any(
        history_dsns: HistoryDsns, archived: list[Hand]) -> None:
    for dsn in (history_dsns.support, history_dsns.auditor):
        for view in ("daily_tables", "daily_stakes", "player_daily"):
            assert query(dsn, f"SELECT count(*) AS n FROM history.{view}")[0]["n"] > 0
    for dsn in (history_dsns.archiver, history_dsns.support, history_dsns.auditor):
        with psycopg.connect(dsn) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE VIEW history.mine AS SELECT 1 AS one")
    for dsn in (history_dsns.support, history_dsns.auditor):
        with psycopg.connect(dsn) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO history.hands SELECT * FROM history.hands LIMIT 1")
    with psycopg.connect(history_dsns.admin) as conn:
        grants = conn.execute(
            "SELECT table_name, grantee, privilege_type FROM information_schema.role_table_grants "
            "WHERE table_schema = 'history' AND table_name IN ('daily_tables', 'daily_stakes', "
            "'player_daily') AND grantee LIKE 'stud_%' ORDER BY 1, 2").fetchall()
    assert grants == [(view, "stud_support", "SELECT")
                      for view in ("daily_stakes", "daily_tables", "player_daily")]


def test_a_days_report_reads_that_days_index(
        history_dsns: HistoryDsns, archived: list[Hand]) -> None:
    """A report of a few days reads those days only (hands_by_day), not the whole archive."""
    with psycopg.connect(history_dsns.admin) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT * FROM history.daily_stakes WHERE day = %s", (DAY.date(),)))
    assert "hands_default_timezone_idx" in plan or "hands_by_day" in plan, plan


# --- stud report ---------------------------------------------------------------------------

def stud(env: dict[str, str], *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = cli_main(["report", *argv], out, env)
    return status, out.getvalue()


@pytest.fixture
def env(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No PostgreSQL URL anywhere: not in the process, not in a run directory's env file."""
    for name in ("STUD_SUPPORT_DSN", "STUD_AUDITOR_DSN", "STUD_HISTORY_DSN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STUD_RUN_DIR", str(tmp_path))
    return {"STUD_RUN_DIR": str(tmp_path)}


def iso(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v.isoformat() if isinstance(v, date) else v for k, v in r.items()}
            for r in rows]


def test_stud_report_daily_json_is_the_views_rows_and_their_totals(
        history_dsns: HistoryDsns, archived: list[Hand], env: dict[str, str]) -> None:
    env["STUD_SUPPORT_DSN"] = history_dsns.support
    status, text = stud(env, "daily", "--json")
    assert status == 0, text
    report = json.loads(text)
    assert report["rows"] == iso(expected_stakes(archived))
    assert report["totals"] == {
        "hands": len(archived), "rake": sum(h.rake for h in archived),
        "pot": sum(h.pot for h in archived), "days": 3, "tables": 3,
        "players": len({p for h in archived for p in h.seats.values()})}
    assert (report["report"], report["by"], report["since"], report["until"]) == (
        "daily", "stake", None, None)

    status, text = stud(env, "daily", "--by", "table", "--json")
    assert status == 0 and json.loads(text)["rows"] == iso(expected_tables(archived))

    # Whole UTC days: --since's day on, up to --until exclusive (a time within a day keeps it).
    second = DAY + timedelta(days=1)
    one_day = [h for h in archived if h.ended_at.date() == second.date()]
    for until in ("2026-12-07", "2026-12-06T00:00:01+00:00", "2026-12-06T12:00"):
        status, text = stud(env, "daily", "--since", "2026-12-06", "--until", until, "--json")
        report = json.loads(text)
        assert report["rows"] == iso(expected_stakes(one_day)), until
        assert report["totals"]["hands"] == len(one_day)
        assert report["totals"]["players"] == len({p for h in one_day for p in h.seats.values()})
        assert (report["since"], report["until"]) == ("2026-12-06", "2026-12-07")
    status, text = stud(env, "daily", "--until", "2026-12-05", "--json")
    assert json.loads(text)["rows"] == [] and json.loads(text)["totals"]["hands"] == 0

    # The text: one line per row, then the same totals.
    status, text = stud(env, "daily")
    lines = text.splitlines()
    assert status == 0 and len(lines) == 1 + len(expected_stakes(archived)) + 1
    assert lines[1].split()[:2] == ["2026-12-05", "10/20"]
    assert lines[-1] == (f"total (every archived day): {len(archived)} hands, rake "
                         f"{sum(h.rake for h in archived)}, pot {sum(h.pot for h in archived)}, "
                         "5 players, 3 tables, 3 days")


def test_stud_report_player_adds_up_to_their_net(
        history_dsns: HistoryDsns, archived: list[Hand], env: dict[str, str]) -> None:
    env["STUD_AUDITOR_DSN"] = history_dsns.auditor  # the auditor reads what support reads
    mine = [(h, seat) for h in archived for seat, p in h.seats.items() if p == "bob"]
    status, text = stud(env, "player", "bob", "--json")
    assert status == 0, text
    report = json.loads(text)
    assert report["player"] == "bob" and len(report["rows"]) == 3
    assert report["totals"] == {"hands": len(mine), "net": sum(h.nets[s] for h, s in mine),
                                "days": 3}
    assert sum(r["net"] for r in report["rows"]) == report["totals"]["net"]
    status, text = stud(env, "player", "bob")
    assert text.splitlines()[-1] == (f"total for bob (every archived day): {len(mine)} hands, "
                                     f"net {sum(h.nets[s] for h, s in mine):+}, 3 days")
    status, text = stud(env, "player", "nobody", "--since", "2026-12-06")
    assert status == 0 and text.splitlines()[-1] == (
        "total for nobody (2026-12-06 .. the last): 0 hands, net +0, 0 days")


def test_stud_report_without_postgres_exits_2_and_on_its_errors_1(
        postgres: TestPostgres, env: dict[str, str], tmp_path: Any) -> None:
    for argv in (["daily"], ["player", "ann", "--json"]):
        status, text = stud(env, *argv)
        assert status == 2 and "no PostgreSQL: set STUD_SUPPORT_DSN" in text
    # Bad dates are usage errors (argparse: exit 2, nothing read).
    with pytest.raises(SystemExit) as exited:
        stud(env, "daily", "--since", "5 December")
    assert exited.value.code == 2
    # make run's env file is read when the process has no URL: a database without the views.
    (tmp_path / "env").write_text(
        f"export STUD_SUPPORT_DSN='{postgres.server.dsn('support', 'postgres')}'\n")
    status, text = stud(env, "daily")
    assert status == 1 and text.startswith("stud report: PostgreSQL failed: ")
    assert "history.daily_stakes" in text or "schema \"history\"" in text, text
    env["STUD_SUPPORT_DSN"] = "postgresql://support@127.0.0.1:1/nothing"
    status, text = stud(env, "player", "ann")
    assert status == 1 and text.startswith("stud report: PostgreSQL failed: "), text


# --- over hands really dealt and archived ---------------------------------------------------

async def test_reports_over_really_archived_hands(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        history_dsns: HistoryDsns, env: dict[str, str]) -> None:
    """A real room deals, the archiver moves its hands: the reports' totals are the hands'
    own rows' (hands, rake, pot, players), each player's net is what the hands' nets give
    their seat, and the day's nets are minus its rake."""
    admin = connect(redis_url)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room_with_hands(room, 6, random.Random(7))
        await room.table_deps.app.stop()
    history = await PgHistory.connect(history_dsns.archiver)
    try:
        outcome = await archive_table(EventStore(admin), history, table_id, keep_hands=HOT)
    finally:
        await history.aclose()
        await admin.aclose()
    assert len(outcome.plan.hands) >= 5

    rows = query(history_dsns.admin, "SELECT hand, ended_at, small_bet, big_bet, pot, rake, "
                 "players, seats, nets FROM history.hands WHERE table_id = %s", (table_id,))
    assert sorted(r["hand"] for r in rows) == sorted(outcome.plan.hands)
    env["STUD_SUPPORT_DSN"] = history_dsns.support
    status, text = await asyncio.to_thread(stud, env, "daily", "--by", "table", "--json")
    assert status == 0, text
    report = json.loads(text)
    assert report["totals"] == {
        "hands": len(rows), "rake": sum(r["rake"] for r in rows),
        "pot": sum(r["pot"] for r in rows), "tables": 1, "days": len(report["rows"]),
        "players": len({p for r in rows for p in r["players"]})}
    assert {p for r in rows for p in r["players"]} <= set(NAMES.values())
    assert {(r["table_id"], r["small_bet"], r["big_bet"]) for r in report["rows"]} == {
        (table_id, r["small_bet"], r["big_bet"]) for r in rows}

    nets: dict[str, int] = defaultdict(int)
    for r in rows:
        for seat, player in r["seats"].items():
            nets[player] += int(r["nets"].get(seat, 0))
    assert sum(nets.values()) == -sum(r["rake"] for r in rows)
    for player in NAMES.values():
        status, text = await asyncio.to_thread(stud, env, "player", player, "--json")
        mine = json.loads(text)
        assert status == 0 and mine["totals"]["net"] == nets[player], (player, text)
        assert sum(d["net"] for d in mine["rows"]) == nets[player]
        assert mine["totals"]["hands"] == sum(player in r["players"] for r in rows)


async def _write_tournaments(dsn: str) -> None:
    """Two tournaments as the archiver writes them: a finished one that paid prizes (ended
    2026-12-04, 23:30 UTC) and a cancelled one that refunded an entry (2026-12-05); and a
    third still running (no ending: not in the report)."""
    def at(day: int, hour: int, minute: int = 0) -> datetime:
        return datetime(2026, 12, day, hour, minute, tzinfo=UTC)

    def entries(tid: str, n: int, buy_in: int, fee: int) -> list[tuple[Any, ...]]:
        return [(tid, f"e{i}", f"p{i}", buy_in, fee, at(4, 10)) for i in range(1, n + 1)]

    done = Facts(tournament=("t-done", "Sunday", "multi_table", 1000, 100, Jsonb({}), at(4, 9)),
                 entries=entries("t-done", 3, 1000, 100),
                 prizes=[("t-done", "pay-1", "e1", "p1", 2000, 1, 1, at(4, 23, 30)),
                         ("t-done", "pay-2", "e2", "p2", 1000, 2, 2, at(4, 23, 30))],
                 ending=("t-done", "finished", "", "p1", at(4, 23, 30)))
    gone = Facts(tournament=("t-gone", "Late", "sit_and_go", 500, 50, Jsonb({}), at(5, 9)),
                 entries=entries("t-gone", 2, 500, 50),
                 refunds=[("t-gone", "ref-1", "e1", "p1", 500, 50, at(5, 10)),
                          ("t-gone", "ref-2", "e2", "p2", 500, 50, at(5, 10))],
                 ending=("t-gone", "cancelled", "too few entrants", "", at(5, 10)))
    running = Facts(tournament=("t-on", "On", "sit_and_go", 10, 1, Jsonb({}), at(5, 9)),
                    entries=entries("t-on", 2, 10, 1))
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        assert [await write(conn, f) for f in (done, gone, running)] == [True, True, False]


async def test_stud_report_tournaments_adds_up_fees_refunds_and_prizes(
        history_dsns: HistoryDsns, env: dict[str, str]) -> None:
    await _write_tournaments(history_dsns.archiver)
    env["STUD_SUPPORT_DSN"] = history_dsns.support
    status, text = await asyncio.to_thread(stud, env, "tournaments", "--json")
    assert status == 0, text
    report = json.loads(text)
    assert [(r["day"], r["tournament_id"], r["outcome"], r["entries"], r["fees"],
             r["refunded_fees"], r["prizes"]) for r in report["rows"]] == [
        ("2026-12-04", "t-done", "finished", 3, 300, 0, 3000),
        ("2026-12-05", "t-gone", "cancelled", 2, 100, 100, 0)]
    totals = report["totals"]
    assert (totals["tournaments"], totals["cancelled"], totals["house"], totals["prizes"]) == (
        2, 1, 300, 3000)
    # Every buy-in went back out as a prize or a refund: the pools are empty.
    assert totals["buy_ins"] == totals["prizes"] + totals["refunded_buy_ins"]
    status, text = await asyncio.to_thread(stud, env, "tournaments", "--since", "2026-12-05")
    assert status == 0 and "t-gone" in text and "t-done" not in text
    assert text.strip().endswith("house 0; prizes 0")
    # The archiver may not read the view (it writes facts; reports are support's).
    with psycopg.connect(history_dsns.archiver) as conn, pytest.raises(
            psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT * FROM tournaments.results")
