"""``stud replay list --player P [--since D] [--until D] [--table T] [--min-pot N]``: the hands
a player was dealt into, wherever they live: PostgreSQL's ``history.hand_players`` for the
hands the archiver moved, the tables' streams in Redis for the hands still in their hot
window; one list, newest first, the same line for either (docs/history.md, docs/replay.md).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TextIO

import psycopg

from rules import TableState
from studkit.repository import state_from_json
from studtools.replay_hands import Logged, split_hands, summary
from studtools.replay_source import RedisSource, Settings, SourceError, decode_entry

DEFAULT_LIMIT = 100


@dataclass(frozen=True, slots=True)
class FoundHand:
    """One hand of a player's list."""

    table: str
    hand: int
    ended_at: float
    seat: int
    net: int
    pot: int
    rake: int
    players: dict[str, str]
    where: str
    """``archive`` (PostgreSQL) or ``redis`` (still in the table's hot window)."""


def parse_when(text: str) -> datetime:
    """``2026-12-05`` or an ISO time (UTC when no zone is given)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date or ISO time: {text!r}") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


_QUERY = """
SELECT hp.table_id, hp.hand, hp.ended_at, hp.seat, hp.net, h.pot, h.rake, h.seats
FROM history.hand_players hp
JOIN history.hands h ON h.table_id = hp.table_id AND h.hand = hp.hand
                    AND h.ended_at = hp.ended_at
WHERE hp.player_id = %(player)s AND hp.ended_at >= %(since)s AND hp.ended_at < %(until)s
  AND (%(table)s::text IS NULL OR hp.table_id = %(table)s)
  AND hp.pot >= %(min_pot)s
ORDER BY hp.ended_at DESC, hp.table_id, hp.hand DESC
LIMIT %(limit)s
"""


def archived_hands(dsn: str, player: str, since: datetime, until: datetime,
                   table: str | None, min_pot: int, limit: int) -> list[FoundHand]:
    """The player's archived hands (newest first) from PostgreSQL."""
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        rows = conn.execute(_QUERY, {"player": player, "since": since, "until": until,
                                     "table": table, "min_pot": min_pot,
                                     "limit": limit}).fetchall()
    return [FoundHand(table_id, int(hand), ended.timestamp(), int(seat), int(net), int(pot),
                      int(rake), dict(seats), "archive")
            for table_id, hand, ended, seat, net, pot, rake, seats in rows]


def _archive_end(dsn: str, table_id: str, trimmed: int) -> TableState | None:
    """The rules' state after the archived event ``trimmed`` (its segment's), or None."""
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        row = conn.execute("SELECT state FROM history.segments WHERE table_id = %s AND "
                           "last_sequence = %s", (table_id, trimmed)).fetchone()
    return None if row is None else state_from_json(row[0])


async def hot_log(source: RedisSource, table_id: str, dsn: str) -> tuple[TableState,
                                                                         list[Logged]]:
    """What a table's stream still holds, with the state before it: nothing archived yet,
    the empty table; else the archive's end state (PostgreSQL); without PostgreSQL, from the
    table's snapshot on (the hands before it are left out)."""
    decoded = [decode_entry(i, raw) for i, raw in await source.raw_log(table_id)]
    events = [e for e in decoded if isinstance(e, Logged)]
    if not decoded or decoded[0].sequence <= 1:
        return TableState(), events
    start = _archive_end(dsn, table_id, decoded[0].sequence - 1) if dsn else None
    if start is not None:
        return start, events
    log = await RedisSource(source.client).log(table_id)
    return log.start, log.events


async def live_hands(source: RedisSource, player: str, since: datetime, until: datetime,
                     table: str | None, min_pot: int, dsn: str = "") -> list[FoundHand]:
    """The player's complete hands still in Redis (every table, or ``table``)."""
    found = []
    tables = [table] if table else await source.table_ids()
    for table_id in tables:
        start, events = await hot_log(source, table_id, dsn)
        hands, _ = split_hands(table_id, events, start)
        for hand in hands:
            if not hand.complete:
                continue
            line = summary(hand)
            seats = {int(s): name for s, name in line["players"].items()}
            mine = [s for s, name in seats.items() if name == player]
            ended = hand.events[-1].occurred_at
            if not mine or line["pot"] < min_pot or not since.timestamp() <= ended < \
                    until.timestamp():
                continue
            after = hand.after()
            put_in = {p.seat: p.hand_total for p in after.hand.players} if after.hand else {}
            won = {int(s): int(a) for s, a in line["winners"].items()}
            seat = mine[0]
            found.append(FoundHand(table_id, hand.number, ended, seat,
                                   won.get(seat, 0) - put_in.get(seat, 0), int(line["pot"]),
                                   int(line["rake"]), {str(s): n for s, n in seats.items()},
                                   "redis"))
    return found


async def find(args: argparse.Namespace, out: TextIO, settings: Settings) -> int:
    """``stud replay list --player``: print the list; 0, or 3 when a store cannot answer."""
    since = args.since or datetime(1970, 1, 1, tzinfo=UTC)
    until = args.until or datetime(9999, 1, 1, tzinfo=UTC)
    limit = args.limit
    rows: list[FoundHand] = []
    source = RedisSource.from_url(settings.redis_url)
    try:
        rows.extend(await live_hands(source, args.player, since, until, args.table,
                                     args.min_pot, settings.history_dsn))
    finally:
        await source.aclose()
    if settings.history_dsn:
        try:
            rows.extend(archived_hands(settings.history_dsn, args.player, since, until,
                                       args.table, args.min_pot, limit))
        except psycopg.Error as exc:
            raise SourceError(f"PostgreSQL: {exc}") from None
    unique = {(r.table, r.hand): r for r in rows}  # a hand archived mid-read: once
    ordered = sorted(unique.values(), key=lambda r: (-r.ended_at, r.table, -r.hand))[:limit]
    return _print(ordered, args, out)


def _print(rows: Sequence[FoundHand], args: argparse.Namespace, out: TextIO) -> int:
    if args.json:
        json.dump({"player": args.player, "hands": [asdict(r) for r in rows]}, out, indent=1)
        out.write("\n")
        return 0
    print(f"{'time (UTC)':<19}  {'table':<14} {'hand':>6}  {'seat':>4}  {'net':>8}  "
          f"{'pot':>8}  {'rake':>5}  where", file=out)
    for r in rows:
        when = datetime.fromtimestamp(r.ended_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        print(f"{when:<19}  {r.table:<14} {r.hand:>6}  {r.seat:>4}  {r.net:>+8}  "
              f"{r.pot:>8}  {r.rake:>5}  {r.where}", file=out)
    print(f"{len(rows)} hand{'s' if len(rows) != 1 else ''} of {args.player}", file=out)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The look-up options of ``stud replay list``."""
    parser.add_argument("--player", metavar="P", help="the hands player P was dealt into, "
                        "archived or live, newest first (needs no --table)")
    parser.add_argument("--since", type=parse_when, metavar="D",
                        help="hands that ended at or after D (a date or ISO time, UTC)")
    parser.add_argument("--until", type=parse_when, metavar="D",
                        help="hands that ended before D")
    parser.add_argument("--min-pot", type=int, default=0, metavar="N",
                        help="hands whose pot was at least N")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                        help=f"at most N hands (default {DEFAULT_LIMIT})")
