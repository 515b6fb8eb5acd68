"""``stud report``: the operator's reports, read from the archive's views (docs/history.md,
"Reports"; migration ``0004_reports.sql``).

- ``stud report daily [--since D] [--until D] [--by stake|table] [--json]``: per UTC day and
  stake (``history.daily_stakes``) or per day, stake and table (``history.daily_tables``):
  hands, rake, distinct players (and tables), the pots' total; then a totals line.
- ``stud report player P [--since D] [--until D] [--json]``: a player's hands and net per UTC
  day (``history.player_daily``); then a totals line.
- ``stud report tournaments [--since D] [--until D] [--json]``: each archived tournament on
  the UTC day it ended (``tournaments.results``, migration ``0006``): entries, buy-ins,
  fees, what was refunded, prizes; then the totals and the fees the house kept.

Reports count archived hands only (the archiver copies each hand seconds after it settles).
They read PostgreSQL as support (``STUD_SUPPORT_DSN``, else ``STUD_AUDITOR_DSN``), from the
environment or ``make run``'s ``.run/env``. Days are whole UTC days: ``--since D`` starts at
D's day, ``--until D`` ends before D (a date is exclusive, as in ``stud replay list``; a time
within a day keeps that day). Exit status: 0; 1 when PostgreSQL fails (the message says
why); 2 without a PostgreSQL URL or with bad arguments.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Final, TextIO

import psycopg

from studhistory import pg
from studhistory.pg import AUDITOR_DSN_ENV, SUPPORT_DSN_ENV
from studtools.replay_find import parse_when
from studtools.runenv import run_env

DSN_NAMES: Final = (SUPPORT_DSN_ENV, AUDITOR_DSN_ENV)

Row = dict[str, Any]


def report_dsn(env: Mapping[str, str]) -> str:
    """Support's URL (else the auditor's): the environment first, then ``make run``'s file."""
    for source in (env, run_env(env)):
        for name in DSN_NAMES:
            if source.get(name):
                return source[name]
    return ""


def day_range(since: datetime | None, until: datetime | None) -> tuple[date | None, date | None]:
    """The whole UTC days ``[first, end)`` that ``[since, until)`` touches (None: unbounded).

    >>> day_range(datetime(2026, 12, 5, 13, tzinfo=UTC), datetime(2026, 12, 7, tzinfo=UTC))
    (datetime.date(2026, 12, 5), datetime.date(2026, 12, 7))
    >>> day_range(None, datetime(2026, 12, 7, 0, 0, 1, tzinfo=UTC))
    (None, datetime.date(2026, 12, 8))
    """
    first = since.astimezone(UTC).date() if since is not None else None
    end = None
    if until is not None:
        moment = until.astimezone(UTC)
        end = moment.date()
        if moment != datetime.combine(end, time(), UTC):
            end += timedelta(days=1)
    return first, end


def _where(first: date | None, end: date | None, player: str | None = None,
           day: str = "day") -> tuple[str, dict[str, Any]]:
    terms: list[str] = []
    params: dict[str, Any] = {}
    if player is not None:
        terms.append("player_id = %(player)s")
        params["player"] = player
    if first is not None:
        terms.append(f"{day} >= %(first)s")
        params["first"] = first
    if end is not None:
        terms.append(f"{day} < %(end)s")
        params["end"] = end
    return (" WHERE " + " AND ".join(terms) if terms else ""), params


_DAILY: Final = {
    "stake": "SELECT day, small_bet, big_bet, hands, rake, players, tables, pot "
             "FROM history.daily_stakes{where} ORDER BY day, small_bet, big_bet",
    "table": "SELECT day, small_bet, big_bet, table_id, hands, rake, players, pot "
             "FROM history.daily_tables{where} ORDER BY day, small_bet, big_bet, table_id",
}
# The period's distinct players and tables: not a sum of the days' (one player plays on
# many days), so read once from the hands of those days, as the views count them.
_PERIOD: Final = (
    "SELECT count(DISTINCT u.player_id), count(DISTINCT h.table_id) FROM history.hands h "
    "LEFT JOIN LATERAL unnest(h.players) AS u(player_id) ON true{where}")


def _rows(cursor: psycopg.Cursor[Any]) -> list[Row]:
    names = [c.name for c in cursor.description or ()]
    return [{name: (value.isoformat() if isinstance(value, date) else value)
             for name, value in zip(names, row, strict=True)} for row in cursor.fetchall()]


def daily(dsn: str, by: str, first: date | None, end: date | None) -> tuple[list[Row], Row]:
    """The daily report's rows and its totals (hands, rake, pot, players, tables, days)."""
    where, params = _where(first, end)
    period, _ = _where(first, end, day="(h.ended_at AT TIME ZONE 'UTC')::date")
    with pg.connect(dsn) as conn:
        rows = _rows(conn.execute(_DAILY[by].format(where=where), params))
        players, tables = conn.execute(_PERIOD.format(where=period), params).fetchone() or (0, 0)
    totals = {"hands": sum(r["hands"] for r in rows), "rake": sum(r["rake"] for r in rows),
              "pot": sum(r["pot"] for r in rows), "players": int(players),
              "tables": int(tables), "days": len({r["day"] for r in rows})}
    return rows, totals


def player_daily(dsn: str, player: str, first: date | None,
                 end: date | None) -> tuple[list[Row], Row]:
    """A player's days (hands, net) and their totals."""
    where, params = _where(first, end, player)
    with pg.connect(dsn) as conn:
        rows = _rows(conn.execute("SELECT day, hands, net FROM history.player_daily"
                                  f"{where} ORDER BY day", params))
    totals = {"hands": sum(r["hands"] for r in rows), "net": sum(r["net"] for r in rows),
              "days": len(rows)}
    return rows, totals


_TOURNAMENT_SUMS: Final = ("entries", "buy_ins", "fees", "refunded_buy_ins", "refunded_fees",
                           "prizes")


def tournaments(dsn: str, first: date | None, end: date | None) -> tuple[list[Row], Row]:
    """The archived tournaments that ended in the period and their totals (the sums, the
    fees the house kept, the tournaments and the cancelled among them)."""
    where, params = _where(first, end)
    with pg.connect(dsn) as conn:
        rows = _rows(conn.execute(
            "SELECT day, tournament_id, name, format, outcome, entries, buy_ins, fees, "
            f"refunded_buy_ins, refunded_fees, prizes FROM tournaments.results{where} "
            "ORDER BY day, tournament_id", params))
    totals: Row = {k: sum(r[k] for r in rows) for k in _TOURNAMENT_SUMS}
    totals["house"] = totals["fees"] - totals["refunded_fees"]
    totals["tournaments"] = len(rows)
    totals["cancelled"] = sum(1 for r in rows if r["outcome"] == "cancelled")
    return rows, totals


def _print_tournaments(rows: Sequence[Row], totals: Row, period: str, out: TextIO) -> None:
    print(f"{'day':<10}  {'tournament':<20} {'outcome':<9} {'entries':>7}  {'buy-ins':>10}  "
          f"{'fees':>8}  {'refunded':>10}  {'prizes':>10}", file=out)
    for r in rows:
        refunded = r["refunded_buy_ins"] + r["refunded_fees"]
        print(f"{r['day']:<10}  {r['tournament_id']:<20} {r['outcome']:<9} {r['entries']:>7}  "
              f"{r['buy_ins']:>10}  {r['fees']:>8}  {refunded:>10}  {r['prizes']:>10}",
              file=out)
    print(f"total ({period}): {_plural(totals['tournaments'], 'tournament')} "
          f"({totals['cancelled']} cancelled), {_plural(totals['entries'], 'entry')}, "
          f"fees {totals['fees']} less {totals['refunded_fees']} refunded: house "
          f"{totals['house']}; prizes {totals['prizes']}", file=out)


def _period(first: date | None, end: date | None) -> str:
    if first is None and end is None:
        return "every archived day"
    start = first.isoformat() if first else "the first"
    last = (end - timedelta(days=1)).isoformat() if end else "the last"
    return f"{start} .. {last}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _print_daily(rows: Sequence[Row], totals: Row, by: str, period: str, out: TextIO) -> None:
    what = "table" if by == "table" else "tables"
    print(f"{'day':<10}  {'stake':>11}  {what:<14} {'hands':>7}  {'rake':>9}  "
          f"{'players':>7}  {'pot':>12}", file=out)
    for r in rows:
        stake = f"{r['small_bet']}/{r['big_bet']}"
        where = r["table_id"] if by == "table" else str(r["tables"])
        print(f"{r['day']:<10}  {stake:>11}  {where:<14} {r['hands']:>7}  {r['rake']:>9}  "
              f"{r['players']:>7}  {r['pot']:>12}", file=out)
    print(f"total ({period}): {_plural(totals['hands'], 'hand')}, rake {totals['rake']}, "
          f"pot {totals['pot']}, {_plural(totals['players'], 'player')}, "
          f"{_plural(totals['tables'], 'table')}, {_plural(totals['days'], 'day')}", file=out)


def _print_player(rows: Sequence[Row], totals: Row, player: str, period: str,
                  out: TextIO) -> None:
    print(f"{'day':<10}  {'hands':>7}  {'net':>10}", file=out)
    for r in rows:
        print(f"{r['day']:<10}  {r['hands']:>7}  {r['net']:>+10}", file=out)
    print(f"total for {player} ({period}): {_plural(totals['hands'], 'hand')}, "
          f"net {totals['net']:+}, {_plural(totals['days'], 'day')}", file=out)


def _run(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
    dsn = report_dsn(env)
    if not dsn:
        out.write(f"stud report: no PostgreSQL: set {SUPPORT_DSN_ENV} (or {AUDITOR_DSN_ENV}); "
                  "`make run` writes both to .run/env\n")
        return 2
    first, end = day_range(args.since, args.until)
    period = _period(first, end)
    try:
        if args.report_command == "daily":
            rows, totals = daily(dsn, args.by, first, end)
        elif args.report_command == "tournaments":
            rows, totals = tournaments(dsn, first, end)
        else:
            rows, totals = player_daily(dsn, args.player, first, end)
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        out.write(f"stud report: PostgreSQL failed: {reason}\n")
        return 1
    if args.json:
        head: Row = {"report": args.report_command,
                     "since": first.isoformat() if first else None,
                     "until": end.isoformat() if end else None}
        if args.report_command == "daily":
            head["by"] = args.by
        elif args.report_command == "player":
            head["player"] = args.player
        json.dump({**head, "rows": rows, "totals": totals}, out, indent=1)
        out.write("\n")
    elif args.report_command == "daily":
        _print_daily(rows, totals, args.by, period, out)
    elif args.report_command == "tournaments":
        _print_tournaments(rows, totals, period, out)
    else:
        _print_player(rows, totals, args.player, period, out)
    return 0


def _dates(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", type=parse_when, metavar="D",
                        help="from D's UTC day (a date or ISO time)")
    parser.add_argument("--until", type=parse_when, metavar="D",
                        help="up to D, exclusive (whole UTC days: a time within a day "
                        "keeps that day)")
    parser.add_argument("--json", action="store_true", help="print JSON: rows and totals")


def register(commands: Any) -> None:
    """Add ``stud report daily``, ``player`` and ``tournaments`` to the ``stud`` command
    line."""
    parser = commands.add_parser(
        "report", help="operator reports from the archive: hands, rake, players, nets per day",
        description="Reports over the archived hands (PostgreSQL's history.daily_stakes, "
                    "daily_tables and player_daily views), per UTC day. Environment: "
                    f"{SUPPORT_DSN_ENV} or {AUDITOR_DSN_ENV} (make run writes both).")
    sub = parser.add_subparsers(dest="report_command", required=True, metavar="SUBCOMMAND")
    p = sub.add_parser(
        "daily", help="hands, rake, players and pots per day and stake (or table)",
        description="Per UTC day and stake (small/big bet), or per day, stake and table: "
                    "hands, rake, distinct players, tables, the pots' total; then the "
                    "period's totals.")
    p.add_argument("--by", choices=("stake", "table"), default="stake",
                   help="one line per day and stake (default) or per day, stake and table")
    _dates(p)
    p.set_defaults(handler=_run)
    p = sub.add_parser(
        "player", help="a player's hands and net per day",
        description="A player's hands and net (won less put in) per UTC day; then the "
                    "period's totals.")
    p.add_argument("player", metavar="P")
    _dates(p)
    p.set_defaults(handler=_run)
    p = sub.add_parser(
        "tournaments", help="tournament fees and prizes, per tournament by the day it ended",
        description="Each archived tournament (over and paid out) on the UTC day it ended: "
                    "entries, buy-ins, fees, refunds, prizes; then the period's totals and "
                    "the fees the house kept.")
    _dates(p)
    p.set_defaults(handler=_run)
