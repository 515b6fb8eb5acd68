"""Tournaments into PostgreSQL (docs/history.md, "Tournaments"): the archiver's step for a
tournament that is over, and the one reader of a tournament's stream, wherever it lives.

A tournament's stream (``stud:tournament:{id}:events``, ``stud.v1.TournamentEvent``
envelopes) holds everything it decided. Once it is over (``Finished`` or ``Cancelled``) and
every prize and refund it owed is paid (a ``PaymentMade`` for each ``PrizeDue`` and
``RefundDue``), nothing more is added, and :func:`archive_tournaments` moves it in three
steps, as the tables' step does (:mod:`studhistory.archiver`):

1. **Write**, in one transaction: every event of the stream exactly as stored (its bytes and
   SHA-256, ``tournaments.events``, migration 0007), after its hash chain was checked, and
   its facts (:func:`facts`, pure, folded from the stream alone): the tournament
   (``Created``), its paid entries, its busts, its final places, its prizes and refunds
   paid, and its ending. Each row's key makes the write happen once: a second step, or a
   second archiver, finds them there and writes nothing.
2. **Verify**: the rows read back from PostgreSQL equal a fresh read of the stream byte for
   byte, every sequence ``1..version`` once.
3. **Trim**, once the tournament's last event is older than the idempotency window
   (``command_window_s``: a caller's retry within it is still answered from its command
   record): one script (:data:`TRIM_LUA`) removes the tournament's keys (stream, version,
   command records, chain, owner, trimmed count) only while the stream is still the one
   verified (its version, length and chain head), leaving in their place a tombstone
   (:data:`TOMBSTONE`: the archived version), then the index and the wake set forget it.
   From then on the tournament service answers it from PostgreSQL
   (``TOURNAMENT_HISTORY_DSN``) and ``stud replay tournament`` reads it there.

A step holds a PostgreSQL advisory lock per tournament (two archivers never work on one at
once) and can stop anywhere: before the write's commit nothing is there; after it, the next
step finds the rows, verifies and trims; after the script, it finds the stream gone and the
rows there and finishes the index. A tournament still running is never written nor trimmed.

:func:`read_raw` is the one reader of a tournament's stored events (Redis's stream, else
PostgreSQL's rows), for this step, the tournament service and ``stud replay tournament``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, cast

import psycopg
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError
from psycopg.types.json import Jsonb

from stud.v1 import tournament_pb2 as pb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.chain import GENESIS, digest, verify_chain
from studkit.commandwindow import COMMAND_WINDOW_S
from studkit.redis_client import Client

PAGE: Final = 1000
KEYS: Final = ("events", "version", "commands", "owner", "trimmed", "chain")
"""Every key of one tournament beside the index (``studkit.store``'s and ``append.lua``'s
names, all in the tournament's hash tag): what the trim removes."""
TOMBSTONE: Final = "archived"
"""The key the trim leaves in the tournament's slot (``stud:tournament:{id}:archived``,
the archived version, a few dozen bytes): the tournament service reads PostgreSQL only for
an id that has one, and refuses to create a tournament again under it."""
WOKEN: Final = f"{keys.TOURNAMENT_PREFIX}woken"
"""The tournament service's wake set (``tournament.app.WOKEN``)."""

TRIM_LUA: Final = """
-- KEYS: events, version, commands, owner, trimmed, chain, then the tombstone of one
-- tournament (one slot). ARGV[1] the version verified in PostgreSQL, ARGV[2] the digest of
-- its last event. Removes the first six only while the stream is the one verified: its
-- version, its length (nothing trimmed before) and its chain's head (when it has one), and
-- in the same step sets the tombstone to that version. Replies {'trimmed', n}, {'gone', 0}
-- (no stream left: trimmed before), or {'changed', version}.
local events, version_key, chain = KEYS[1], KEYS[2], KEYS[6]
local version = tonumber(redis.call('GET', version_key) or '0')
local length = redis.call('XLEN', events)
if version == 0 and length == 0 then
  return {'gone', 0}
end
local wanted = tonumber(ARGV[1])
if version ~= wanted or length ~= wanted
    or tonumber(redis.call('GET', KEYS[5]) or '0') ~= 0 then
  return {'changed', version}
end
local last = redis.call('XREVRANGE', events, '+', '-', 'COUNT', 1)
if #last ~= 1 or last[1][1] ~= '0-' .. wanted then
  return {'changed', version}
end
local head = redis.call('HGET', chain, 'head')
if head and head ~= ARGV[2] then
  return {'changed', version}
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
redis.call('SET', KEYS[7], wanted)
return {'trimmed', wanted}
"""


class TournamentArchiveError(RuntimeError):
    """A tournament's step could not be written or verified: nothing was trimmed."""


# --- reading ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Record:
    """One event of a tournament's stream and when it was recorded."""

    sequence: int
    at: datetime
    event: pb.TournamentEvent

    @property
    def seconds(self) -> float:
        """``at`` in Unix seconds."""
        return self.at.timestamp()


def record_of(raw: bytes) -> Record:
    """The record of one stored envelope."""
    env = EventEnvelope.FromString(raw)
    return Record(env.sequence, env.occurred_at.ToDatetime(tzinfo=UTC),
                  pb.TournamentEvent.FromString(env.payload))


async def stream_raw(redis: Client, tournament_id: str) -> list[tuple[int, bytes]]:
    """A tournament's stream in Redis, in order: (sequence, the envelope's stored bytes)."""
    key = keys.tournament_key(tournament_id, "events")
    out: list[tuple[int, bytes]] = []
    start = "-"
    while True:
        rows = cast(list[tuple[Any, dict[Any, Any]]],
                    await redis.xrange(key, min=start, max="+", count=PAGE) or [])
        for entry, fields in rows:
            raw = fields.get(b"envelope", fields.get("envelope", b""))
            entry_id = entry.decode() if isinstance(entry, bytes) else str(entry)
            out.append((int(entry_id.split("-")[1]),
                        raw if isinstance(raw, bytes) else str(raw).encode()))
        if len(rows) < PAGE:
            return out
        last = rows[-1][0]
        start = "(" + (last.decode() if isinstance(last, bytes) else str(last))


async def archived_raw(conn: psycopg.AsyncConnection[Any], tournament_id: str,
                       after: int = 0) -> list[tuple[int, bytes]]:
    """A tournament's events archived in PostgreSQL after ``after``, in order (none while it
    is not archived)."""
    cur = await conn.execute(
        "SELECT sequence, envelope FROM tournaments.events WHERE tournament_id = %s "
        "AND sequence > %s ORDER BY sequence", (tournament_id, after))
    return [(int(s), bytes(raw)) for s, raw in await cur.fetchall()]


async def read_raw(redis: Client, tournament_id: str, dsn: str = "",
                   conn: psycopg.AsyncConnection[Any] | None = None
                   ) -> tuple[list[tuple[int, bytes]], str]:
    """A tournament's stored events from Redis, else (none there) from PostgreSQL (``conn``,
    or a connection made with ``dsn``; neither: Redis only), and which store answered
    (``redis``, ``postgresql``; ``""``: neither holds it). Redis is read first: the trim
    removes the stream only after the rows are committed, so one of the two holds it whole."""
    hot = await stream_raw(redis, tournament_id)
    if hot:
        return hot, "redis"
    if conn is not None:
        cold = await archived_raw(conn, tournament_id)
    elif dsn:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True,
                                                         connect_timeout=5) as own:
            cold = await archived_raw(own, tournament_id)
    else:
        return [], ""
    return cold, "postgresql" if cold else ""


async def read_records(redis: Client, tournament_id: str, dsn: str = "",
                       conn: psycopg.AsyncConnection[Any] | None = None) -> list[Record]:
    """:func:`read_raw`'s events as records."""
    raws, _ = await read_raw(redis, tournament_id, dsn, conn)
    return [record_of(raw) for _, raw in raws]


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


async def archived(conn: psycopg.AsyncConnection[Any]) -> set[str]:
    """The tournaments whose facts are archived (their ending is)."""
    cur = await conn.execute("SELECT tournament_id FROM tournaments.endings")
    return {str(row[0]) for row in await cur.fetchall()}


async def archived_streams(conn: psycopg.AsyncConnection[Any], ids: Sequence[str]
                           ) -> dict[str, int]:
    """Of ``ids``, the tournaments whose facts and stream are archived: how many events
    each (read by the primary keys of the tournaments asked about only)."""
    cur = await conn.execute(
        "SELECT v.tournament_id, count(*) FROM tournaments.events v JOIN "
        "tournaments.endings e USING (tournament_id) WHERE v.tournament_id = ANY(%s) "
        "GROUP BY 1", (list(ids),))
    return {str(t): int(n) for t, n in await cur.fetchall()}


_EVENT_COLUMNS: Final = ("tournament_id, sequence, occurred_at, event_type, command_id, "
                         "envelope, digest")


def event_rows(tournament_id: str, raws: Sequence[tuple[int, bytes]]) -> list[tuple[Any, ...]]:
    """The ``tournaments.events`` rows of a stream's stored events."""
    rows = []
    for sequence, raw in raws:
        env = EventEnvelope.FromString(raw)
        rows.append((tournament_id, sequence, env.occurred_at.ToDatetime(tzinfo=UTC),
                     env.event_type, env.command_id, raw, digest(raw)))
    return rows


async def write(conn: psycopg.AsyncConnection[Any], f: Facts,
                raws: Sequence[tuple[int, bytes]] = ()) -> bool:
    """A tournament's stored events (``raws``: every one, from 1) and its facts in one
    transaction; True when this call wrote the facts, False when they were there already (or
    it is not over). Events already there are left as they are (the verify compares them)."""
    if f.ending is None or f.tournament is None:
        return False
    async with conn.transaction(), conn.cursor() as cur:
        if raws:
            await cur.executemany(
                f"INSERT INTO tournaments.events ({_EVENT_COLUMNS}) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                event_rows(str(f.tournament[0]), raws))
        await cur.execute(
            "INSERT INTO tournaments.endings (tournament_id, outcome, reason, winner, "
            "ended_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
            f.ending)
        if await cur.fetchone() is None:
            return False
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
    return True


class TournamentLock:
    """Two archivers never work on one tournament at once: a session-level advisory lock
    per tournament (as :class:`studhistory.pgarchive.TableLock` per table), held for one
    step and released by the server when the holder's connection dies."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    async def acquire(self, tournament_id: str) -> bool:
        cur = await self.conn.execute(
            "SELECT pg_try_advisory_lock(hashtextextended('stud-archiver-tournament:' || %s, "
            "0))", (tournament_id,))
        row = await cur.fetchone()
        return bool(row and row[0])

    async def release(self, tournament_id: str) -> None:
        await self.conn.execute(
            "SELECT pg_advisory_unlock(hashtextextended('stud-archiver-tournament:' || %s, "
            "0))", (tournament_id,))


async def verify(redis: Client, conn: psycopg.AsyncConnection[Any],
                 tournament_id: str) -> tuple[int, bytes]:
    """What PostgreSQL holds of the tournament is its stream in Redis, byte for byte, every
    sequence ``1..version`` once (a fresh read of both), with each row's digest; the
    version and its last event's digest. :class:`TournamentArchiveError` otherwise."""
    version = int(await redis.get(keys.tournament_key(tournament_id, "version")) or 0)
    stream = await stream_raw(redis, tournament_id)
    cur = await conn.execute(
        "SELECT sequence, envelope, digest FROM tournaments.events WHERE tournament_id = %s "
        "ORDER BY sequence", (tournament_id,))
    rows = [(int(s), bytes(raw), bytes(sha)) for s, raw, sha in await cur.fetchall()]
    wanted = list(range(1, version + 1))
    if not version or [s for s, _ in stream] != wanted or [s for s, _, _ in rows] != wanted:
        raise TournamentArchiveError(
            f"{tournament_id}: PostgreSQL does not hold events 1-{version} exactly once")
    for (sequence, raw), (_, archived_bytes, sha) in zip(stream, rows, strict=True):
        if archived_bytes != raw or sha != digest(raw):
            raise TournamentArchiveError(
                f"{tournament_id}: event {sequence} in PostgreSQL differs from the stream")
    return version, digest(stream[-1][1])


async def trim(redis: Client, tournament_id: str, version: int, last_digest: bytes) -> str:
    """Remove the tournament's keys (:data:`TRIM_LUA`) if its stream is still the verified
    one, then its entries in the index and the wake set; ``trimmed`` or ``gone`` (the keys
    had gone before: the index is finished now). :class:`TournamentArchiveError` when the
    stream changed (nothing removed)."""
    names = [keys.tournament_key(tournament_id, name) for name in (*KEYS, TOMBSTONE)]
    reply = await redis.eval(TRIM_LUA, len(names), *names, version, last_digest)
    status = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
    if status == "changed":
        raise TournamentArchiveError(f"{tournament_id}: the stream changed since it was "
                                     f"verified (version {reply[1]}): nothing removed")
    # The index last: a step stopped before it finds the tournament there again, its keys
    # gone and its rows archived, and finishes here.
    await redis.zrem(WOKEN, tournament_id)
    await redis.srem(keys.tournament_index(), tournament_id)
    return status


@dataclass
class TournamentOutcome:
    """What one step did for the tournaments."""

    archived: list[str] = field(default_factory=list)
    """Tournaments whose facts this step wrote."""
    copied: dict[str, int] = field(default_factory=dict)
    """Tournament -> the events this step found to write (its stream, from 1)."""
    trimmed: list[str] = field(default_factory=list)
    """Tournaments whose keys this step removed from Redis (verified first)."""
    busy: list[str] = field(default_factory=list)
    """Tournaments another archiver held."""
    failed: dict[str, str] = field(default_factory=dict)
    """Tournament -> why its step stopped (nothing trimmed; tried again next round)."""


async def _last_at(redis: Client, tournament_id: str) -> float | None:
    """When the stream's last event happened (Unix seconds), None for an empty stream.
    :class:`TournamentArchiveError` when its last entry has no envelope, or one that does
    not parse or has no time: never taken as an old event (the trim would fail open)."""
    rows = cast(list[tuple[Any, dict[Any, Any]]], await redis.xrevrange(
        keys.tournament_key(tournament_id, "events"), count=1) or [])
    if not rows:
        return None
    fields = rows[0][1]
    raw = fields.get(b"envelope", fields.get("envelope"))
    try:
        if not raw:
            raise ValueError("no envelope")
        at = EventEnvelope.FromString(
            raw if isinstance(raw, bytes) else str(raw).encode()).occurred_at
    except (ValueError, DecodeError) as exc:
        raise TournamentArchiveError(f"{tournament_id}: its last event is unreadable "
                                     f"({exc}): nothing trimmed") from exc
    if at.seconds <= 0 and at.nanos == 0:
        raise TournamentArchiveError(f"{tournament_id}: its last event has no time: "
                                     "nothing trimmed")
    return float(at.ToMilliseconds()) / 1000


async def archive_tournament(redis: Client, conn: psycopg.AsyncConnection[Any],
                             tournament_id: str, out: TournamentOutcome, *,
                             stored: int | None, trim_streams: bool = True,
                             command_window_s: float = COMMAND_WINDOW_S,
                             clock: Callable[[], float] = time.time) -> bool:
    """One tournament's step (the module's docstring), under its lock: False when it is not
    over yet (nothing done). ``stored``: how many of its events PostgreSQL holds with its
    facts (None: not archived yet)."""
    length = int(await redis.xlen(keys.tournament_key(tournament_id, "events")))
    if length == 0 and stored is None:
        return True  # no stream and nothing archived: not ours to finish
    lock = TournamentLock(conn)
    if not await lock.acquire(tournament_id):
        out.busy.append(tournament_id)
        return True
    try:
        if length and (stored is None or length > stored):  # not copied, or it grew since
            hot = await stream_raw(redis, tournament_id)
            f = facts([record_of(raw) for _, raw in hot])
            if f.ending is None:
                return False
            chain = await redis.hmget(keys.tournament_key(tournament_id, "chain"),
                                      ["head", "since"])
            since = int(chain[1]) if chain[1] is not None else None
            broken = verify_chain(tournament_id, (raw for _, raw in hot), start=GENESIS,
                                  since=since,
                                  head=chain[0] if isinstance(chain[0], bytes) else None)
            if broken is not None:
                raise TournamentArchiveError(f"{tournament_id}: {broken.line()}: nothing "
                                             "copied")
            if [s for s, _ in hot] != list(range(1, len(hot) + 1)):
                raise TournamentArchiveError(f"{tournament_id}: the stream does not start "
                                             "at event 1")
            out.copied[tournament_id] = len(hot)
            if await write(conn, f, hot):
                out.archived.append(tournament_id)
        if not trim_streams:
            return True
        if length:
            last = await _last_at(redis, tournament_id)
            if last is not None and clock() < last + command_window_s:
                return True  # its command records answer retries for a while yet
            version, last_digest = await verify(redis, conn, tournament_id)
            if await trim(redis, tournament_id, version, last_digest) == "trimmed":
                out.trimmed.append(tournament_id)
        else:  # the keys went before the index was told (a step stopped there)
            await trim(redis, tournament_id, 0, b"")
        return True
    finally:
        if not conn.closed:
            await lock.release(tournament_id)


async def archive_tournaments(redis: Client, conn: psycopg.AsyncConnection[Any],
                              seen: dict[str, int] | None = None, *,
                              trim_streams: bool = True,
                              command_window_s: float = COMMAND_WINDOW_S,
                              clock: Callable[[], float] = time.time) -> TournamentOutcome:
    """Every tournament that is over and paid out: its events and facts written, verified,
    and its keys removed from Redis once its last event is ``command_window_s`` old (with
    ``trim_streams``; without, its stream stays in Redis). ``conn`` is in autocommit.
    ``seen`` (tournament -> its stream's length when it was last read and was not over)
    spares reading a stream again before it grew. A tournament whose step fails is in the
    outcome's ``failed`` (nothing trimmed) and the others go on."""
    if command_window_s < COMMAND_WINDOW_S:
        raise ValueError(f"command_window_s must be at least {COMMAND_WINDOW_S}")
    out = TournamentOutcome()
    seen = {} if seen is None else seen
    members = await redis.smembers(keys.tournament_index())
    ids = sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)
    stored = await archived_streams(conn, ids)
    for tid in ids:
        if tid in stored:
            seen.pop(tid, None)
            if not trim_streams:
                continue  # copied; its stream stays in Redis
        elif seen.get(tid) == int(await redis.xlen(keys.tournament_key(tid, "events"))):
            continue
        try:
            over = await archive_tournament(
                redis, conn, tid, out, stored=stored.get(tid), trim_streams=trim_streams,
                command_window_s=command_window_s, clock=clock)
        except TournamentArchiveError as exc:
            out.failed[tid] = str(exc)
            continue
        if over:
            seen.pop(tid, None)
        else:
            seen[tid] = int(await redis.xlen(keys.tournament_key(tid, "events")))
    return out
