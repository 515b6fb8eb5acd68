"""Tournaments' facts into PostgreSQL (docs/history.md, "Tournaments"): the archiver's step
for a tournament that is over.

A tournament's stream (``stud:tournament:{id}:events``, ``stud.v1.TournamentEvent``
envelopes) holds everything it decided. Once it is over (``Finished`` or ``Cancelled``) and
every prize and refund it owed is paid (a ``PaymentMade`` for each ``PrizeDue`` and
``RefundDue``), nothing more is added, and :func:`archive_tournament` writes its facts in one
transaction: the tournament (``Created``), its paid entries, its busts, its final places
(a finished tournament's, as its standings rank them), its prizes and refunds paid, and last
its ending, which marks it archived (a second step, or a second archiver, finds it and writes
nothing). The rows are folded from the stream alone (:func:`facts`), pure.

The stream itself stays in Redis: the tournament service reads a finished tournament's
stream for ``GetTournament`` and ``WatchTournament``, and nothing reads these tables in its
place yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import psycopg
from google.protobuf.json_format import MessageToDict
from psycopg.types.json import Jsonb

from stud.v1 import tournament_pb2 as pb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.redis_client import Client

PAGE = 1000


@dataclass(frozen=True, slots=True)
class Record:
    """One event of a tournament's stream and when it was recorded."""

    sequence: int
    at: datetime
    event: pb.TournamentEvent


@dataclass
class Facts:
    """A tournament's rows, as the ``tournaments`` schema holds them."""

    tournament: tuple[Any, ...] | None = None
    entries: list[tuple[Any, ...]] = field(default_factory=list)
    busts: list[tuple[Any, ...]] = field(default_factory=list)
    places: list[tuple[Any, ...]] = field(default_factory=list)
    prizes: list[tuple[Any, ...]] = field(default_factory=list)
    refunds: list[tuple[Any, ...]] = field(default_factory=list)
    ending: tuple[Any, ...] | None = None
    """None while the tournament is not over, or owes a payment."""


def _format(config: pb.TournamentConfig) -> str:
    name: str = pb.TournamentFormat.Name(config.format)
    return name.removeprefix("TOURNAMENT_FORMAT_").lower()


def _places(field_entries: Sequence[str], busts: Sequence[pb.TournamentEvent.Busted]
            ) -> dict[str, tuple[int, int]]:
    """Each entry's place (from, to), as the tournament's standings rank them: the entries
    still in share ``1..alive``; the busted by round (later is better), then by the stack
    they started that hand with (larger is better); equal ones share places."""
    busted = {b.entry_id for b in busts}
    alive = [e for e in field_entries if e not in busted]
    out = {e: (1, len(alive)) for e in alive}
    counted = set(field_entries)
    ranked = sorted((b for b in busts if b.entry_id in counted),
                    key=lambda b: (-b.round, -b.start_stack))
    place, i = len(alive) + 1, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and (ranked[j].round, ranked[j].start_stack) == (
                ranked[i].round, ranked[i].start_stack):
            j += 1
        out.update({b.entry_id: (place, place + j - i - 1) for b in ranked[i:j]})
        place, i = place + j - i, j
    return out


def facts(records: Sequence[Record]) -> Facts:
    """The rows of a tournament's records (pure)."""
    f = Facts()
    tid, buy_in, fee = "", 0, 0
    requested: dict[str, tuple[str, datetime]] = {}
    paid: list[str] = []
    gone: set[str] = set()
    busts: list[pb.TournamentEvent.Busted] = []
    due: dict[str, tuple[str, Any]] = {}
    made: dict[str, datetime] = {}
    end: tuple[str, str, str, datetime] | None = None
    for r in records:
        kind = r.event.WhichOneof("kind")
        body: Any = getattr(r.event, kind) if kind else None
        if kind == "created":
            tid, cfg = body.tournament_id, body.config
            buy_in, fee = int(cfg.buy_in), int(cfg.fee)
            f.tournament = (tid, cfg.name, _format(cfg), buy_in, fee,
                            Jsonb(MessageToDict(cfg, preserving_proto_field_name=True)), r.at)
        elif kind == "entry_requested":
            requested[body.entry_id] = (body.player_id, r.at)
        elif kind == "entry_paid" and body.entry_id in requested:
            paid.append(body.entry_id)
            player, at = requested[body.entry_id]
            f.entries.append((tid, body.entry_id, player, buy_in, fee, at))
        elif kind in ("entry_withdrawn", "entry_dropped"):
            gone.add(body.entry_id)
        elif kind == "busted":
            busts.append(body)
            f.busts.append((tid, body.entry_id, requested.get(body.entry_id, ("", r.at))[0],
                            body.table_id, body.seat, body.hand_number, body.start_stack,
                            body.round, r.at))
        elif kind in ("prize_due", "refund_due"):
            due[body.payment_id] = (kind, body)
        elif kind == "payment_made":
            made[body.payment_id] = r.at
        elif kind == "finished":
            # The event names the winning entry; the row, its player.
            end = ("finished", "", requested.get(body.winner, (body.winner, r.at))[0], r.at)
        elif kind == "cancelled":
            end = ("cancelled", body.reason, "", r.at)
    for payment_id, (kind, b) in due.items():
        if payment_id not in made:
            continue
        if kind == "prize_due":
            f.prizes.append((tid, payment_id, b.entry_id, b.player_id, b.amount, b.place,
                             b.place_to, made[payment_id]))
        else:
            f.refunds.append((tid, payment_id, b.entry_id, b.player_id, b.buy_in, b.fee,
                              made[payment_id]))
    if end is not None and end[0] == "finished":
        standing = [e for e in paid if e not in gone]
        f.places = [(tid, e, requested[e][0], a, b)
                    for e, (a, b) in sorted(_places(standing, busts).items(),
                                            key=lambda kv: (kv[1], standing.index(kv[0])))]
    if f.tournament is not None and end is not None and set(due) <= set(made):
        f.ending = (tid, *end)
    return f


async def read_records(redis: Client, tournament_id: str) -> list[Record]:
    """A tournament's stream, in order."""
    key = keys.tournament_key(tournament_id, "events")
    out: list[Record] = []
    start = "-"
    while True:
        rows = cast(list[tuple[Any, dict[Any, Any]]],
                    await redis.xrange(key, min=start, max="+", count=PAGE) or [])
        for _entry, fields in rows:
            raw = fields.get(b"envelope", fields.get("envelope", b""))
            env = EventEnvelope.FromString(raw if isinstance(raw, bytes) else str(raw).encode())
            out.append(Record(env.sequence, env.occurred_at.ToDatetime(tzinfo=UTC),
                              pb.TournamentEvent.FromString(env.payload)))
        if len(rows) < PAGE:
            return out
        last = rows[-1][0]
        start = "(" + (last.decode() if isinstance(last, bytes) else str(last))


async def archived(conn: psycopg.AsyncConnection[Any]) -> set[str]:
    """The tournaments whose facts are archived (their ending is)."""
    cur = await conn.execute("SELECT tournament_id FROM tournaments.endings")
    return {str(row[0]) for row in await cur.fetchall()}


async def write(conn: psycopg.AsyncConnection[Any], f: Facts) -> bool:
    """A tournament's facts in one transaction, its ending last; False when it was there
    already (or is not over)."""
    if f.ending is None or f.tournament is None:
        return False
    try:
        async with conn.transaction(), conn.cursor() as cur:
            await cur.execute(
                "INSERT INTO tournaments.endings (tournament_id, outcome, reason, winner, "
                "ended_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                f.ending)
            if await cur.fetchone() is None:
                raise _AlreadyThere
            await cur.execute(
                "INSERT INTO tournaments.tournaments (tournament_id, name, format, buy_in, "
                "fee, config, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)", f.tournament)
            for table, columns, rows in (
                    ("entries", "entry_id, player_id, buy_in, fee, requested_at", f.entries),
                    ("busts", "entry_id, player_id, table_id, seat, hand, start_stack, round, "
                              "busted_at", f.busts),
                    ("places", "entry_id, player_id, place, place_to", f.places),
                    ("prizes", "payment_id, entry_id, player_id, amount, place, place_to, "
                               "paid_at", f.prizes),
                    ("refunds", "payment_id, entry_id, player_id, buy_in, fee, paid_at",
                     f.refunds)):
                if rows:
                    marks = ", ".join(["%s"] * (columns.count(",") + 2))
                    await cur.executemany(
                        f"INSERT INTO tournaments.{table} (tournament_id, {columns}) "
                        f"VALUES ({marks})", rows)
    except _AlreadyThere:
        return False
    return True


class _AlreadyThere(Exception):
    """The tournament's ending is archived: roll back whole."""


@dataclass
class TournamentOutcome:
    """What one step did for the tournaments."""

    archived: list[str] = field(default_factory=list)


async def archive_tournaments(redis: Client, conn: psycopg.AsyncConnection[Any],
                              seen: dict[str, int] | None = None) -> TournamentOutcome:
    """Every tournament that is over, paid out and not yet archived: its facts written.
    ``conn`` is in autocommit. ``seen`` (tournament -> its stream's length when it was last
    read and was not over) spares reading a stream again before it grew."""
    out = TournamentOutcome()
    seen = {} if seen is None else seen
    done = await archived(conn)
    members = await redis.smembers(keys.tournament_index())
    for tid in sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members):
        if tid in done:
            seen.pop(tid, None)
            continue
        length = int(await redis.xlen(keys.tournament_key(tid, "events")))
        if seen.get(tid) == length:
            continue
        if await write(conn, facts(await read_records(redis, tid))):
            out.archived.append(tid)
            seen.pop(tid, None)
        else:
            seen[tid] = length
    return out
