"""Where ``stud replay list|show|verify|export`` read from: the services' Redis (tables'
streams and the wallet's ledger) and the dealer (``GetMyCards``, ``GetAudit``), with the
connection and credentials taken from environment variables, the process's over
``<run dir>/env`` (:mod:`studtools.runenv`; docs/replay.md):

==========================  ==================================================================
``STUD_REPLAY_REDIS_URL``   Redis URL; the auditor's ACL user is enough. Default: ``REDIS_URL``
                            of ``<run dir>/env``, else the URL in ``<run dir>/redis/admin.url``
                            (what ``make run`` writes).
``STUD_DEALER_TARGET``      the dealer's ``host:port``. Default: ``DEALER_ADDR`` of
                            ``<run dir>/env``. Without it, cards are not checked.
``STUD_AUDITOR_TOKEN``      an auditor's bearer token (every card; the deck checks).
``STUD_ISSUER_KEY``         or: an issuer key (PEM file) to mint a short auditor token. Default:
                            ``<run dir>/keys/issuer.pem`` when it exists (``make run``'s dev key).
``STUD_REPLAY_TOKEN``       the token of ``show --as-seat`` (a player's own, or an auditor's).
``STUD_SUPPORT_DSN``        PostgreSQL, the archive of record, as the support role (or
                            ``STUD_AUDITOR_DSN``): hands whose events left Redis are read there
                            (docs/history.md). Default: ``make run``'s ``<run dir>/env``.
``STUD_RUN_DIR``            the ``make run`` directory (default ``.run``).
==========================  ==================================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeAlias, cast

import grpc
import jwt
from google.protobuf.message import Message
from redis.exceptions import NoPermissionError, ResponseError

from rules import Card, Event, TableState, card_from_index
from stud.v1 import dealer_pb2 as dpb
from stud.v1 import dealer_pb2_grpc as dpb_grpc
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.auth import Principal, Role, SigningKey, TokenIssuer, bearer_metadata
from studkit.chain import GENESIS, ChainBreak, ChainVerifier, digest
from studkit.mapping import (
    ROOM_EVENT_TYPES,
    card_from_proto,
    event_from_envelope,
    is_room_event,
    room_event_from_envelope,
)
from studkit.redis_client import Client, connect, is_cluster
from studkit.repository import snapshot_key, state_from_json
from studtools.archive import archived_events
from studtools.replay_hands import LedgerTx, Logged, make_logged
from studtools.runenv import run_dir, run_env, stud_environment

REDIS_ENV: Final = "STUD_REPLAY_REDIS_URL"
DEALER_ENV: Final = "STUD_DEALER_TARGET"
AUDITOR_TOKEN_ENV: Final = "STUD_AUDITOR_TOKEN"
ISSUER_KEY_ENV: Final = "STUD_ISSUER_KEY"
TOKEN_ENV: Final = "STUD_REPLAY_TOKEN"
SUPPORT_DSN_ENV: Final = "STUD_SUPPORT_DSN"
AUDITOR_DSN_ENV: Final = "STUD_AUDITOR_DSN"
LEDGER_KEY: Final = keys.wallet_key("ledger")
PAGE: Final = 10_000
RawRows: TypeAlias = list[list[Any]]
"""A stream's entries as Redis sends them: ``[id, [field, value, ...]]``."""
TIMEOUT_S: Final = 10.0


class SourceError(RuntimeError):
    """Raised when the source cannot be reached or has no such table or hand."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Where to read and with which credentials (see the module's table)."""

    redis_url: str
    dealer_target: str = ""
    auditor_token: str = ""
    token: str = ""
    history_dsn: str = field(default="", repr=False)
    """PostgreSQL (the archive of record) as support or auditor; empty: Redis only."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``env`` (default ``os.environ``) over ``make run``'s env file
        (:func:`studtools.runenv.stud_environment`), with ``make run``'s defaults."""
        env = os.environ if env is None else env
        given = env  # what the caller set beats make run's file, whichever variable it is
        run = run_dir(env)
        made = run_env(env)  # REDIS_URL and DEALER_ADDR count only in make run's file
        env = stud_environment(env)
        url = env.get(REDIS_ENV) or made.get("REDIS_URL", "")
        if not url:
            try:
                url = (run / "redis" / "admin.url").read_text(encoding="utf-8").strip()
            except OSError:
                url = ""
        dealer = env.get(DEALER_ENV) or made.get("DEALER_ADDR", "")
        auditor = env.get(AUDITOR_TOKEN_ENV, "")
        if not auditor:
            key_path = env.get(ISSUER_KEY_ENV) or str(run / "keys" / "issuer.pem")
            auditor = mint_auditor_token(Path(key_path))
        # what the caller set: ``env`` may already hold make run's file under it (stud's
        # main passes stud_environment), and a value equal to the file's is the file's
        caller = {k: v for k, v in given.items() if v and made.get(k) != v}
        history = caller.get(AUDITOR_DSN_ENV) or caller.get(SUPPORT_DSN_ENV) or ""
        if not history and not caller.get(REDIS_ENV):
            # make run's archive only with make run's Redis: a room named by the caller's own
            # REDIS url is another room, whose history make run's PostgreSQL does not hold
            history = made.get(AUDITOR_DSN_ENV) or made.get(SUPPORT_DSN_ENV, "")
        return cls(redis_url=url, dealer_target=dealer, auditor_token=auditor,
                   token=env.get(TOKEN_ENV, ""), history_dsn=history)


def mint_auditor_token(key_path: Path, ttl_seconds: int = 600) -> str:
    """A short auditor token signed by the issuer key at ``key_path`` ("" if none)."""
    try:
        pem = key_path.read_text(encoding="utf-8")
    except OSError:
        return ""
    issuer = TokenIssuer(SigningKey.from_pem(pem))
    return issuer.issue(Principal(role=Role.AUDITOR, name="replay"), ttl_seconds=ttl_seconds)


def token_role(token: str) -> str:
    """The ``role`` claim of a token, unverified (the dealer verifies it): it only picks
    which call to make. "" when unreadable."""
    if not token:
        return ""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return ""
    return str(claims.get("role", ""))


# --- Redis -----------------------------------------------------------------------------------

_DECODED: dict[tuple[str, int, bytes], Event] = {}
"""Events decoded so far, by (event type, schema version, payload): rules events are frozen
values, and most payloads recur (an ante, a check, a card dealt to a seat on a street), so
a replay decodes each distinct payload once."""
_DECODED_MAX: Final = 500_000


@dataclass(frozen=True, slots=True)
class RoomLogged:
    """A room event of a table's log (a buy-in, a settlement, a close: ``room.proto``)."""

    sequence: int
    occurred_at: float
    hand_number: int
    event: Message


def decode_entry(entry_id: bytes | str, payload: bytes) -> Logged | RoomLogged:
    """One stream entry as a :class:`Logged` event (or a :class:`RoomLogged` one)."""
    envelope = EventEnvelope.FromString(payload)
    if is_room_event(envelope):
        return decode_envelope(envelope)
    sequence = envelope.sequence
    if not sequence:
        text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        sequence = int(text.partition("-")[2] or 0)
    return _decoded(envelope, sequence)


def decode_stored(payload: bytes) -> Logged | RoomLogged:
    """One archived envelope's stored bytes (a row of PostgreSQL's ``history.events``) as
    :func:`decode_entry` decodes a stream entry: parsed once, its event from the cache."""
    envelope = EventEnvelope.FromString(payload)
    if is_room_event(envelope):
        return decode_envelope(envelope)
    return _decoded(envelope, envelope.sequence)


def decode_all(payloads: Iterable[bytes], entry_ids: Sequence[bytes | str] | None = None
               ) -> list[Logged | RoomLogged]:
    """Stored envelopes in order, each as :func:`decode_stored` (or, with the stream's
    ``entry_ids``, :func:`decode_entry`) decodes it, in one loop: no call per envelope to
    parse, classify and look it up (the bench's 97,036 archived rows, best of 5, CPU time:
    124-128 against 112-117 us a hand)."""
    out: list[Logged | RoomLogged] = []
    stored = payloads if isinstance(payloads, Sequence) else list(payloads)
    try:
        _decode_into(out, stored, entry_ids)
    except Exception as exc:  # a stored entry that does not decode: named
        raise SourceError(f"{_undecodable(stored, entry_ids, len(out))} does not decode: "
                          f"{type(exc).__name__}: {exc}") from exc
    return out


def _undecodable(payloads: Sequence[bytes], entry_ids: Sequence[bytes | str] | None,
                 index: int) -> str:
    """The stored entry ``index`` named: ``event #57 (UpCardDealt)``, or by its place."""
    sequence = _sequence(entry_ids[index]) if entry_ids is not None else 0
    try:
        envelope = EventEnvelope.FromString(payloads[index])
    except Exception:  # not even an envelope
        return f"event #{sequence}" if sequence else f"stored entry {index + 1}"
    return f"event #{envelope.sequence or sequence} ({envelope.event_type})"


def _decode_into(out: list[Logged | RoomLogged], payloads: Iterable[bytes],
                 entry_ids: Sequence[bytes | str] | None) -> None:
    parse = EventEnvelope.FromString
    cache, room, logged = _DECODED, ROOM_EVENT_TYPES, make_logged
    append = out.append
    for index, payload in enumerate(payloads):
        envelope = parse(payload)
        event_type = envelope.event_type
        if event_type in room:
            append(decode_envelope(envelope))
            continue
        key = (event_type, envelope.schema_version, envelope.payload)
        event = cache.get(key)
        if event is None:
            event = event_from_envelope(envelope)
            if len(cache) >= _DECODED_MAX:
                cache.clear()
            cache[key] = event
        sequence = envelope.sequence
        if not sequence and entry_ids is not None:
            sequence = _sequence(entry_ids[index])
        ts = envelope.occurred_at
        append(logged(sequence, envelope.command_id, ts.seconds + ts.nanos / 1e9, event))


def _decoded(envelope: EventEnvelope, sequence: int) -> Logged:
    ts = envelope.occurred_at
    key = (envelope.event_type, envelope.schema_version, envelope.payload)
    event = _DECODED.get(key)
    if event is None:
        event = event_from_envelope(envelope)
        if len(_DECODED) >= _DECODED_MAX:
            _DECODED.clear()
        _DECODED[key] = event
    return make_logged(sequence, envelope.command_id, ts.seconds + ts.nanos / 1e9, event)


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic garbage collector off meanwhile (as it was, afterwards): building a big
    log triggers collections that walk every object made so far, for nothing."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass(frozen=True, slots=True)
class TableLog:
    """A table's log as read: the state before its first event, the events, and a note when
    the hands before that state were left out."""

    start: TableState
    events: list[Logged]
    note: str = ""
    room: list[RoomLogged] = field(default_factory=list)
    """The room's events (buy-ins, settlements, refunds, closing), beside the game's."""
    chain: ChainBreak | None = None
    """The first broken link of the events read (their stored bytes), None when whole."""
    chain_note: str = ""
    """What of the chain could not be checked (e.g. the links into an archive not read)."""
    archived_to: int = 0
    """Events ``..archived_to`` were read from ``archived_in``, those after it from Redis."""
    archived_in: str = ""
    """Where the archived events were read from (``PostgreSQL``, the export's files)."""


def _split(decoded: list[Logged | RoomLogged]) -> tuple[list[Logged], list[RoomLogged]]:
    game = [e for e in decoded if isinstance(e, Logged)]
    return game, [e for e in decoded if isinstance(e, RoomLogged)]


def decode_envelope(envelope: EventEnvelope) -> Logged | RoomLogged:
    """An archived (or any) envelope as a :class:`Logged` event (a room event as a
    :class:`RoomLogged` one)."""
    ts = envelope.occurred_at
    if is_room_event(envelope):
        return RoomLogged(envelope.sequence, ts.seconds + ts.nanos / 1e9,
                          envelope.hand_number, room_event_from_envelope(envelope))
    return Logged(envelope.sequence, envelope.command_id, ts.seconds + ts.nanos / 1e9,
                  event_from_envelope(envelope))


class RedisSource:
    """Reads tables' logs and the wallet's ledger."""

    def __init__(self, client: Client, history_dsn: str = "") -> None:
        self.client = client
        self.history_dsn = history_dsn
        """PostgreSQL, where the events trimmed from a stream's head are (empty: none)."""
        self._pg: asyncio.Future[Any] | None = None
        """The connection to PostgreSQL (autocommit: each read its own transaction), made
        when first needed and kept until :meth:`aclose`: ``stud replay verify`` reads many
        tables through one source, and a connection costs several round trips and a
        server process."""

    @classmethod
    def from_url(cls, url: str, history_dsn: str = "") -> RedisSource:
        """A source over a new client (the caller closes it with :meth:`aclose`)."""
        if not url:
            raise SourceError(f"no Redis: set {REDIS_ENV} (or run `make run`)")
        return cls(connect(url, socket_timeout=30), history_dsn)

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisSource:
        """A source over Redis and, when configured, PostgreSQL."""
        return cls.from_url(settings.redis_url, settings.history_dsn)

    async def aclose(self) -> None:
        """Close the client (and PostgreSQL's connection, if made)."""
        await self.client.aclose()
        pending, self._pg = self._pg, None
        if pending is None:
            return
        if not pending.done():
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        elif not pending.cancelled() and pending.exception() is None:
            await pending.result().close()

    def _connect_history(self) -> asyncio.Future[Any]:
        """PostgreSQL's connection, being made (begun now if it is not yet): a caller that
        will need it soon starts it before its other reads."""
        if self._pg is None:
            import psycopg

            self._pg = asyncio.ensure_future(
                psycopg.AsyncConnection.connect(self.history_dsn, autocommit=True))
        return self._pg

    async def _history(self) -> Any:
        """PostgreSQL's connection (psycopg's errors raised as they are; the next call
        connects again)."""
        pending = self._connect_history()
        try:
            conn = await asyncio.shield(pending)
        except Exception:
            self._pg = None
            raise
        if conn.closed:
            self._pg = None
            return await self._history()
        return conn

    async def _drop_history(self) -> None:
        """Close and forget a connection that failed: the next read connects again."""
        pending, self._pg = self._pg, None
        if pending is not None and pending.done() and not pending.cancelled() \
                and pending.exception() is None:
            with contextlib.suppress(Exception):
                await pending.result().close()

    async def table_ids(self) -> list[str]:
        """Every table of the index, sorted."""
        members = await self.client.smembers(keys.table_index())
        return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)

    async def sizes(self, table_ids: Sequence[str]) -> dict[str, int]:
        """Each table's number of events, wherever they are (its version: the archived head
        counts too; XLEN when a table has no version key), for progress and sharing work."""
        pipe = self.client.pipeline(transaction=False)
        for table_id in table_ids:
            pipe.get(keys.table_version(table_id))
            pipe.xlen(keys.table_stream(table_id))
        found = await pipe.execute()
        return {t: max(int(found[2 * i] or 0), int(found[2 * i + 1]))
                for i, t in enumerate(table_ids)}

    async def ledger_readable(self) -> bool:
        """Whether this Redis user may read the wallet's ledger."""
        try:
            await self.client.xlen(LEDGER_KEY)
        except NoPermissionError:
            return False
        except ResponseError as exc:
            if "NOPERM" in str(exc):
                return False
            raise
        return True

    async def stream_page(self, key: str, start: str) -> RawRows:
        """Up to :data:`PAGE` entries of a stream from ``start`` (an id, ``(`` before it for
        after it, or ``-``), as Redis sends them: ``[id, [field, value, ...]]``. The command's
        name is given as bytes, which redis-py's table of reply parsers does not match, so
        the reply is not made into a dict per entry: that parse was three quarters of the
        read's CPU time (3.4 against 0.6 us an entry over a table's 10,734). A cluster's
        client routes a command by its name, so it is asked by name, and its dicts undone."""
        if is_cluster(self.client):
            parsed = cast(list[tuple[bytes, dict[bytes, bytes]]], await self.client.xrange(
                key, min=start, max="+", count=PAGE) or [])
            return [[entry_id, [item for pair in fields.items() for item in pair]]
                    for entry_id, fields in parsed]
        return cast(RawRows, await self.client.execute_command(
            b"XRANGE", key, start, "+", "COUNT", PAGE) or [])

    async def raw_log(self, table_id: str, after: int = 0) -> list[tuple[bytes, bytes]]:
        """The table's stream entries after sequence ``after``: (id, envelope bytes)."""
        key = keys.table_stream(table_id)
        start = f"(0-{after}"
        out: list[tuple[bytes, bytes]] = []
        while True:
            entries = await self.stream_page(key, start)
            for entry_id, fields in entries:
                out.append((entry_id, fields[1] if fields[0] == b"envelope"
                            else field_of(fields, b"envelope")))
            if len(entries) < PAGE:
                return out
            last = entries[-1][0]
            start = "(" + (last.decode() if isinstance(last, bytes) else str(last))

    async def chain_state(self, table_id: str) -> tuple[int, bytes | None, int | None]:
        """The stream's version, then its chain's head and start (``since``), in one round
        trip (:meth:`studkit.store.EventStore.chain`; None, None: never appended to since
        the chain existed). Not a MULTI (the auditor's user may not): an append between the
        two makes the head a later event's, which a reader finds among the events after the
        version."""
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.get(keys.table_version(table_id))
            pipe.hmget(keys.table_key(table_id, "chain"), ["head", "since"])
            version, (head, since) = await pipe.execute()
        return (int(version) if version is not None else 0,
                head if isinstance(head, bytes) else None,
                int(since) if since is not None else None)

    async def log(self, table_id: str, archive: Path | None = None) -> TableLog:
        """The table's log, decoded; :class:`SourceError` for an unknown table. When the
        stream's head was archived (``stud archive``), the archived events come first if
        ``archive`` (the archive's directory) has them; otherwise the log starts from the
        table's snapshot, and the hands before it are left out with a note.

        The chain of the stored bytes read is checked on the way (:mod:`studkit.chain`):
        from the stream's first event when PostgreSQL's rows and Redis's are read together,
        from the first event in Redis otherwise (its link into the archive taken as it is)."""
        if self.history_dsn and archive is None:
            self._connect_history()  # meanwhile: the stream's head may have been archived
        version, head, since = await self.chain_state(table_id)
        with no_gc():  # a long list of long-lived, acyclic objects: nothing to collect
            raw = await self.raw_log(table_id)
            if not raw and not await self.client.sismember(keys.table_index(), table_id):
                raise SourceError(f"no table {table_id!r}")
            try:
                decoded = decode_all([payload for _, payload in raw], [i for i, _ in raw])
            except SourceError as exc:
                raise SourceError(f"table {table_id}: {exc}") from exc
        events, room = _split(decoded)
        if not decoded or decoded[0].sequence <= 1:
            return TableLog(TableState(), events, room=room,
                            **_chained(table_id, [], raw, version, head, since))
        trimmed = decoded[0].sequence - 1
        if archive is not None or self.history_dsn:
            old_raw: list[bytes] = []
            if archive is not None:
                older = [decode_envelope(e) for e in archived_events(archive, table_id)
                         if e.sequence <= trimmed]  # an export may reach into the hot window
            else:
                old_raw = await self._archived(table_id, trimmed)
                with no_gc():
                    try:
                        older = decode_all(old_raw)
                    except SourceError as exc:
                        raise SourceError(f"table {table_id}: {exc}") from exc
            if [e.sequence for e in older] == list(range(1, trimmed + 1)):
                old_events, old_room = _split(older)
                chain = _chained(table_id, old_raw, raw, version, head, since,
                                 skipped="" if archive is None else
                                 "read from the export's files, not as stored bytes")
                return TableLog(TableState(), old_events + events, room=old_room + room,
                                archived_to=trimmed, archived_in="PostgreSQL"
                                if archive is None else f"the export in {archive}", **chain)
            raise SourceError(f"table {table_id}: the archive in {archive or 'PostgreSQL'} "
                              f"does not hold events 1..{trimmed}")
        snapshot = await self.client.hgetall(snapshot_key(table_id))
        try:
            version = int(snapshot[b"version"])
            state = state_from_json(snapshot[b"state"])
        except (KeyError, ValueError, TypeError):
            raise SourceError(f"table {table_id}: events 1..{trimmed} are archived and there "
                              "is no snapshot to start from: give --archive DIR") from None
        kept = [e for e in events if e.sequence > version]
        return TableLog(state, kept, room=[e for e in room if e.sequence > version], note=(
            f"table {table_id}: events 1..{version} (hands 1..{state.hands_started}) are "
            "archived: give --archive DIR to replay them"),
            **_chained(table_id, [], raw, version, head, since, skipped="archived"))

    async def hand_log(self, table_id: str, hand: int) -> TableLog | None:
        """Only as much of the log as hand ``hand`` needs, when it left Redis: from the start
        of the archived segment that holds it (the state before that segment, recorded with
        the segment before it) up to the next hand's start (the hand's settlement is after
        its end), from PostgreSQL alone. None when the
        hand is not archived (or there is no PostgreSQL): read the whole log instead."""
        if not self.history_dsn:
            return None
        import psycopg

        from studhistory.pgarchive import archived
        try:
            async with await psycopg.AsyncConnection.connect(self.history_dsn) as conn:
                # Each a single index probe (a join of the hand on its segment's range made
                # the planner walk every segment of a long table).
                row = await (await conn.execute(
                    "SELECT first_sequence FROM history.hands WHERE table_id = %s AND "
                    "hand = %s LIMIT 1", (table_id, hand))).fetchone()
                if row is None:
                    return None
                begins = int(row[0])
                row = await (await conn.execute(
                    "SELECT first_sequence, last_sequence FROM history.segments WHERE "
                    "table_id = %s AND first_sequence <= %s ORDER BY first_sequence DESC "
                    "LIMIT 1", (table_id, begins))).fetchone()
                if row is None or int(row[1]) < begins:
                    return None
                first, last = int(row[0]), int(row[1])
                row = await (await conn.execute(
                    "SELECT first_sequence - 1 FROM history.hands WHERE table_id = %s AND "
                    "hand = %s LIMIT 1", (table_id, hand + 1))).fetchone()
                if row is not None:
                    last = min(last, int(row[0])) if int(row[0]) >= begins else last
                before = None
                if first > 1:
                    row = await (await conn.execute(
                        "SELECT state FROM history.segments WHERE table_id = %s AND "
                        "last_sequence = %s", (table_id, first - 1))).fetchone()
                    if row is None:
                        return None
                    before = row[0]
                decoded = [decode_stored(raw)
                           async for _, raw in archived(conn, table_id, first, last)]
        except psycopg.Error as exc:
            raise SourceError(f"table {table_id}: PostgreSQL: {exc}") from None
        events, room = _split(decoded)
        start = state_from_json(before) if before is not None else TableState()
        return TableLog(start, events, room=room, archived_to=last, archived_in="PostgreSQL")

    async def _archived(self, table_id: str, trimmed: int) -> list[bytes]:
        """Events ``1 .. trimmed`` of a table from PostgreSQL: their stored bytes."""
        import psycopg

        from studhistory.pgarchive import archived_envelopes
        try:
            return await archived_envelopes(await self._history(), table_id, 1, trimmed)
        except psycopg.Error as exc:
            await self._drop_history()
            raise SourceError(f"table {table_id}: PostgreSQL: {exc}") from None

    async def settlements(self, table_ids: Sequence[str] | None = None
                          ) -> dict[tuple[str, str], list[LedgerTx]] | None:
        """The wallet's settlement transactions by (table, hand id); None when this Redis
        user may not read the ledger."""
        wanted = None if table_ids is None else set(table_ids)
        out: dict[tuple[str, str], list[LedgerTx]] = {}
        start = "-"
        try:
            while True:
                rows = await self.stream_page(LEDGER_KEY, start)
                for entry_id, fields in rows:
                    raw = fields[1] if fields[0] == b"tx" else field_of(fields, b"tx", b"")
                    if b'"settlement"' not in raw:
                        continue
                    record: dict[str, Any] = json.loads(raw)
                    if record.get("kind") != "settlement":
                        continue
                    table = str(record.get("table_id", ""))
                    if wanted is not None and table not in wanted:
                        continue
                    ident = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
                    postings = tuple((str(k), int(v)) for k, v in record.get("postings", []))
                    out.setdefault((table, str(record.get("hand_id", ""))), []).append(
                        LedgerTx(ident, postings))
                if len(rows) < PAGE:
                    break
                last = rows[-1][0]
                start = "(" + (last.decode() if isinstance(last, bytes) else str(last))
        except NoPermissionError:
            return None
        except ResponseError as exc:
            if "NOPERM" in str(exc):
                return None
            raise
        if self.history_dsn:  # read after Redis: what was trimmed meanwhile is archived
            seen = {t.entry_id for txs in out.values() for t in txs}
            for key, tx in await self._archived_settlements(table_ids):
                if tx.entry_id not in seen:
                    out.setdefault(key, []).append(tx)
            for txs in out.values():
                txs.sort(key=lambda t: tuple(int(n) for n in t.entry_id.split("-")))
        return out

    async def _archived_settlements(self, table_ids: Sequence[str] | None
                                    ) -> list[tuple[tuple[str, str], LedgerTx]]:
        """The settlements whose ledger entries left Redis (``ledger.postings``), and those
        with no posting (a break-even or voided hand: ``ledger.transactions``, migration
        0012, where alone their table and hand are)."""
        import psycopg

        where = "" if table_ids is None else " AND table_id = ANY(%s)"
        query = ("SELECT transaction_id, table_id, hand_id, account, amount FROM "
                 "ledger.postings WHERE kind = 'settlement'" + where
                 + " ORDER BY transaction_id, posting")
        empty = ("SELECT transaction_id, table_id, hand_id FROM ledger.transactions WHERE "
                 "kind = 'settlement' AND postings = 0" + where)
        args = () if table_ids is None else (list(table_ids),)
        rows: dict[str, tuple[tuple[str, str], list[tuple[str, int]]]] = {}
        try:
            conn = await self._history()
            cur = await conn.execute(query, args)
            for tx, table, hand, account, amount in await cur.fetchall():
                rows.setdefault(str(tx), ((str(table), str(hand)), []))[1].append(
                    (str(account), int(amount)))
            cur = await conn.execute(empty, args)
            for tx, table, hand in await cur.fetchall():
                rows.setdefault(str(tx), ((str(table), str(hand)), []))
        except psycopg.Error as exc:
            await self._drop_history()
            raise SourceError(f"the wallet's archived ledger: PostgreSQL: {exc}") from None
        return [(key, LedgerTx(tx, tuple(postings))) for tx, (key, postings) in rows.items()]


def _chained(table_id: str, archived_raw: Sequence[bytes],
             raw: Sequence[tuple[bytes, bytes]], version: int, head: bytes | None,
             since: int | None, *, skipped: str = "") -> dict[str, Any]:
    """The chain over a table's stored bytes, as :class:`TableLog`'s ``chain`` and
    ``chain_note``: PostgreSQL's rows (``archived_raw``, from event 1) then Redis's entries
    (``raw``). The recorded head (read after ``version``, before the stream) must be the
    digest of event ``version`` or of one appended since (those are checked by their
    links)."""
    whole = bool(archived_raw) or not raw or _sequence(raw[0][0]) <= 1
    verifier = ChainVerifier(table_id, GENESIS if whole else None, since=since)
    broken = None
    for payload in [*archived_raw, *(payload for _, payload in raw)]:
        broken = verifier.feed(payload)
        if broken is not None:
            break
    if broken is None:
        broken = verifier.finish()
    last = _sequence(raw[-1][0]) if raw else len(archived_raw)
    if broken is None and head is not None and last < version:
        broken = ChainBreak(table_id, last + 1, head, verifier.last or b"",
                            f"events #{last + 1}..#{version} are missing from the stream's "
                            f"end (expected: the recorded head; found: event #{last}'s digest)")
    if broken is None and head is not None:
        recent = [(_sequence(i), digest(p)) for i, p in raw if _sequence(i) >= version]
        if recent and head not in {d for _, d in recent}:
            broken = ChainBreak(table_id, recent[0][0], head, recent[0][1],
                                "the stream's recorded head does not match this event's bytes")
    notes = []
    if not whole:
        first = _sequence(raw[0][0])
        notes.append(f"table {table_id}: the chain is checked from event #{first} "
                     f"(events 1..{first - 1}: {skipped or 'not read'})")
    if since is not None and since > 1:
        notes.append(f"table {table_id}: events 1..{since - 1} were stored before the chain: "
                     f"it starts at event #{since}")
    elif since is None and verifier.count and not verifier.chained:
        notes.append(f"table {table_id}: no event carries a link (stored before the chain)")
    return {"chain": broken, "chain_note": "; ".join(notes)}


def field_of(fields: Sequence[bytes], name: bytes, default: bytes | None = None) -> bytes:
    """The value of field ``name`` of a stream entry's ``[field, value, ...]``; ``default``
    when it has none (None: KeyError)."""
    for index in range(0, len(fields) - 1, 2):
        if fields[index] == name:
            return fields[index + 1]
    if default is None:
        raise KeyError(name)
    return default


def _sequence(entry_id: bytes | str) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.partition("-")[2] or 0)


# --- the dealer --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class AuditRecord:
    """The dealer's record of one hand as the replay uses it: each seat's down cards in
    dealing order, and the proto (for :func:`dealer.audit.verify_hand`)."""

    down: dict[int, list[Card]]
    message: dpb.HandAudit
    source: str = "the dealer"
    """Where the record was read from (the dealer, or PostgreSQL once it released it)."""


class DealerSource:
    """The dealer's ``GetMyCards`` and ``GetAudit`` over one channel."""

    def __init__(self, target: str, archive_dsn: str = "") -> None:
        if not target:
            raise SourceError(f"no dealer: set {DEALER_ENV}")
        self._channel = grpc.aio.insecure_channel(target)
        self._stub = dpb_grpc.DealerServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._archive_dsn = archive_dsn
        """PostgreSQL as the auditor: where the record of a hand the dealer released is."""

    async def _archived_record(self, table_id: str, hand: int) -> dpb.HandAudit | None:
        """The dealer's record of ``hand`` from the archive's auditor schema (None: none)."""
        import psycopg
        try:
            async with await psycopg.AsyncConnection.connect(self._archive_dsn) as conn:
                cur = await conn.execute("SELECT record FROM auditor.dealer_hands WHERE "
                                         "table_id = %s AND hand = %s", (table_id, hand))
                row = await cur.fetchone()
        except psycopg.Error as exc:
            raise SourceError(f"the archived record of {table_id} h{hand}: {exc}") from None
        if row is None or not row[0]:
            return None
        record: dpb.HandAudit = dpb.HandAudit.FromString(bytes(row[0]))
        return record

    async def aclose(self) -> None:
        """Close the channel."""
        await self._channel.close()

    async def _archived_records(self, table_id: str, hands: Sequence[int]
                                ) -> dict[int, dpb.HandAudit]:
        """The dealer's records of ``hands`` from the archive's auditor schema, in one query
        (hands without one are left out)."""
        import psycopg
        try:
            async with await psycopg.AsyncConnection.connect(self._archive_dsn) as conn:
                cur = await conn.execute("SELECT hand, record FROM auditor.dealer_hands WHERE "
                                         "table_id = %s AND hand = ANY(%s)",
                                         (table_id, list(hands)))
                rows = await cur.fetchall()
        except psycopg.Error as exc:
            raise SourceError(f"the archived records of {table_id}: {exc}") from None
        return {int(hand): dpb.HandAudit.FromString(bytes(record))
                for hand, record in rows if record}

    async def _get_audit(self, token: str, table_id: str, hand: int) -> dpb.HandAudit:
        """``GetAudit`` of one hand; :class:`grpc.aio.AioRpcError` as the dealer answers."""
        reply: dpb.HandAudit = await self._stub.GetAudit(
            dpb.GetAuditRequest(table_id=table_id, hand_number=hand),
            metadata=bearer_metadata(token), timeout=TIMEOUT_S)
        return reply

    async def audit(self, token: str, table_id: str, hand: int) -> AuditRecord:
        """The dealer's record of a finished hand (an auditor's token)."""
        try:
            reply = await self._get_audit(token, table_id, hand)
        except grpc.aio.AioRpcError as exc:
            archived = (exc.code() is grpc.StatusCode.NOT_FOUND and self._archive_dsn
                        and await self._archived_record(table_id, hand))
            if not archived:
                raise _audit_error(table_id, hand, exc) from None
            return _audit_record(archived, ARCHIVED_RECORDS)  # released by the dealer
        return _audit_record(reply)

    async def audits(self, token: str, table_id: str, hands: Sequence[int],
                     concurrency: int = 16) -> dict[int, AuditRecord | SourceError]:
        """Records of many hands, ``concurrency`` calls at a time; those the dealer released
        (``NOT_FOUND``) from the archive, in one query for them all (:meth:`audit` reads
        one; a connection a hand made a table's archived hands a connection each)."""
        gate = asyncio.Semaphore(concurrency)

        async def one(hand: int) -> tuple[int, dpb.HandAudit | grpc.aio.AioRpcError]:
            async with gate:
                try:
                    return hand, await self._get_audit(token, table_id, hand)
                except grpc.aio.AioRpcError as exc:
                    return hand, exc

        replies = dict(await asyncio.gather(*(one(h) for h in hands)))
        released = [h for h, r in replies.items() if isinstance(r, grpc.aio.AioRpcError)
                    and r.code() is grpc.StatusCode.NOT_FOUND]
        archived: dict[int, dpb.HandAudit | SourceError] = {}
        if released and self._archive_dsn:
            try:
                archived.update(await self._archived_records(table_id, released))
            except SourceError as exc:  # each released hand's problem, as one at a time
                archived.update((h, exc) for h in released)
        out: dict[int, AuditRecord | SourceError] = {}
        for hand in hands:
            reply = archived.get(hand, replies[hand])
            if isinstance(reply, SourceError):
                out[hand] = reply
                continue
            out[hand] = (_audit_error(table_id, hand, reply)
                         if isinstance(reply, grpc.aio.AioRpcError) else _audit_record(
                             reply, ARCHIVED_RECORDS if hand in archived else "the dealer"))
        return out

    async def my_cards(self, token: str, table_id: str, hand: int) -> tuple[int, list[Card]]:
        """(seat, down cards) of the token's player in the hand."""
        try:
            reply = await self._stub.GetMyCards(
                dpb.GetMyCardsRequest(table_id=table_id, hand_number=hand),
                metadata=bearer_metadata(token), timeout=TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            raise SourceError(f"GetMyCards {table_id} h{hand}: {exc.code().name}: "
                              f"{exc.details()}") from None
        return reply.seat, [card_from_proto(c) for c in reply.down]


ARCHIVED_RECORDS: Final = "PostgreSQL (auditor.dealer_hands)"
"""Where the dealer's records of the hands it released are read from."""


def _audit_record(reply: dpb.HandAudit, source: str = "the dealer") -> AuditRecord:
    down: dict[int, list[tuple[int, Card]]] = {}
    for street in reply.streets:
        for draw in street.cards:
            if not draw.up and draw.seat:
                down.setdefault(draw.seat, []).append((draw.index, card_from_proto(draw.card)))
    return AuditRecord({seat: [c for _, c in sorted(cards, key=lambda x: x[0])]
                        for seat, cards in down.items()}, reply, source)


def _audit_error(table_id: str, hand: int, exc: grpc.aio.AioRpcError) -> SourceError:
    return SourceError(f"GetAudit {table_id} h{hand}: {exc.code().name}: {exc.details()}")


def audit_card(index: int) -> Card:
    """A card of the dealer's deck by index."""
    return card_from_index(index)
