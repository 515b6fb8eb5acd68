"""The event store: each table's events in one Redis Stream, appended conditionally and
idempotently by one Lua script (``append.lua``), read back in pages, and tailed live.

This is the only module that talks to Redis about events. Stream entry ids are explicit,
``0-<sequence>``: the entry holding the table's n-th event has id ``0-n``, so a version and an
id name the same position and resuming from either is one ``XRANGE``. Each entry has one
field, ``envelope``, the serialized :class:`stud.v1.envelope_pb2.EventEnvelope`.

The events of a stream form a hash chain (:mod:`studkit.chain`; docs/history.md "The
chain"): the store seals each envelope of an append with ``prev_digest``, the SHA-256 of the
stored bytes of the event before it (the previous envelope of the same command, or the
stream's event ``expected_version``: the digest of the bytes this store appended last, else
of the bytes it reads from the stream then; GENESIS for a stream's first event), and sends
the script the first link and the new head. The script refuses an append whose first link is
not the head it keeps beside the stream (``chain`` key: :class:`ChainBroken`, handled like a
lost race) and sets the head; it compares links only, and readers check the bytes. A stream
written before the chain has no head: its first append links to its last stored event and
the script records where the chain starts (``since``).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Final, TypeAlias

from redis.exceptions import (
    ClusterDownError,
    NoScriptError,
    ReadOnlyError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys, telemetry
from studkit.chain import GENESIS, digest
from studkit.redis_client import Client

ENVELOPE_FIELD: Final = b"envelope"
_APPEND_LUA: Final = resources.files("studkit").joinpath("append.lua").read_text("utf-8")
_APPEND_SHA: Final = hashlib.sha1(_APPEND_LUA.encode("utf-8")).hexdigest()
_TRIM_LUA: Final = resources.files("studkit").joinpath("trim.lua").read_text("utf-8")

StreamId: TypeAlias = tuple[int, int]
_HEADS_KEPT: Final = 65_536
"""Streams whose last appended digest a store keeps (a table's next append links to it)."""

STORE_UNAVAILABLE_ERRORS: Final[tuple[type[Exception], ...]] = (
    RedisConnectionError,  # refused, reset, pool exhausted, LOADING (BusyLoadingError), auth
    RedisTimeoutError,
    ReadOnlyError,  # a replica that has not been promoted yet
    TryAgainError,
    ClusterDownError,  # and MASTERDOWN
)
"""The Redis client's exceptions that mean "the store cannot answer now", not "the request is
wrong": the services report them as ``UNAVAILABLE`` (reason ``store_unavailable``). A write
cut off this way may or may not have been applied, so a client retries it with the same
idempotency key (or command id), which the store answers as a replay if it was."""


class StreamConflict(Exception):
    """Raised when an append expected the stream at one version and found it at another:
    someone else appended first. Re-read, decide again, and append at the new version."""

    def __init__(self, table_id: str, expected: int, actual: int) -> None:
        super().__init__(f"table {table_id}: expected version {expected}, stream is at {actual}")
        self.table_id = table_id
        self.expected = expected
        self.actual = actual


class ChainBroken(StreamConflict):
    """Raised when an append's first envelope does not link to the stream's head: the
    writer's idea of the stream's last event (its bytes) is not what the stream's chain
    records. Nothing is written; like a lost race, re-read and decide again (the store then
    links to the bytes it reads afresh). It persists only if the stored bytes themselves no
    longer hash to the head: the stream was changed behind the store's back."""

    reason = "chain_broken"

    def __init__(self, table_id: str, expected: int, link: bytes, head: bytes) -> None:
        super().__init__(table_id, expected, expected)
        self.args = (f"table {table_id}: the append at version {expected} links to "
                     f"{link.hex()}, the stream's head is {head.hex()}",)
        self.link = link
        self.head = head


class CommandIdReused(Exception):
    """Raised when a command id already recorded for a table is sent with another command
    (a different fingerprint): nothing is written. The recorded outcome is attached."""

    reason = "command_id_reused"

    def __init__(self, table_id: str, command_id: str, recorded: AppendResult) -> None:
        super().__init__(f"table {table_id}: command id {command_id!r} was used for "
                         "another command")
        self.table_id = table_id
        self.command_id = command_id
        self.recorded = recorded


class NotOwner(Exception):
    """Raised when an append carries a fencing epoch that is not the table's current one: the
    writer is a former owner (paused, partitioned, or replaced) and must stop writing."""

    reason = "not_owner"

    def __init__(self, table_id: str, epoch: int | None, current: int) -> None:
        super().__init__(f"table {table_id}: epoch {epoch} is not the owner's ({current})")
        self.table_id = table_id
        self.epoch = epoch
        self.current = current
        self.error_metadata: dict[str, str] = {}


class StoreCorrupted(RuntimeError):
    """Raised when a table's keys contradict each other (e.g. the stream was written to
    outside the store); the store refuses to append rather than make it worse."""


class TrimmedRange(LookupError):
    """Raised by a strict read that asks for events the archive has removed from Redis
    (``stud archive``, :mod:`studtools.archive`): they are in the archive, not in the stream."""

    reason = "archived"

    def __init__(self, table_id: str, from_version: int, trimmed: int) -> None:
        super().__init__(f"table {table_id}: events 1..{trimmed} are archived (asked for the "
                         f"events after {from_version}); read them with "
                         "studtools.archive.read_archived")
        self.table_id = table_id
        self.from_version = from_version
        self.trimmed = trimmed


class TrimRefused(RuntimeError):
    """Raised when a trim is refused: ``conflict`` (trimmed meanwhile: value = the count),
    ``no_snapshot`` (the snapshot is older than the trim point: value = its version, -1 for
    none) or ``beyond`` (past the stream's end: value = the version). Nothing was removed."""

    def __init__(self, table_id: str, reason: str, value: int) -> None:
        super().__init__(f"table {table_id}: trim refused ({reason}, {value})")
        self.table_id = table_id
        self.reason = reason
        self.value = value


def trimmed_key(table_id: str) -> str:
    """String beside the stream: how many events were archived and trimmed from its head
    (absent: none). The stream holds events ``trimmed+1 .. version``."""
    return keys.table_key(table_id, "trimmed")


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The outcome of one command's append: the version after it, the ids of its entries,
    and whether this was a retry that wrote nothing and returned the recorded outcome."""

    version: int
    stream_ids: tuple[str, ...]
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class Tail:
    """A stream's version, its trimmed count and the events after a version, read together
    (:meth:`EventStore.tail`)."""

    version: int
    trimmed: int
    events: list[StoredEvent]
    hash: dict[bytes, bytes] | None = field(default=None, repr=False)
    """The hash :meth:`EventStore.tail` was asked to read in the same ``MULTI`` (the
    dealer's hand: its deck's secrets, so never in a repr)."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event as stored: its stream entry id and its envelope."""

    stream_id: str
    envelope: EventEnvelope


def parse_stream_id(value: str) -> StreamId:
    """``"5-0"`` -> ``(5, 0)``; ``"0"`` means ``(0, 0)``, i.e. before every entry.

    >>> parse_stream_id("0-7"), parse_stream_id("0")
    ((0, 7), (0, 0))
    >>> parse_stream_id("x")
    Traceback (most recent call last):
    ...
    ValueError: not a stream id: 'x'
    """
    ms, _, seq = value.partition("-")
    if not ms.isdigit() or not (seq.isdigit() or seq == ""):
        raise ValueError(f"not a stream id: {value!r}")
    return int(ms), int(seq or 0)


def format_stream_id(value: StreamId) -> str:
    """``(0, 7)`` -> ``"0-7"``."""
    return f"{value[0]}-{value[1]}"


def _outcome(raw: object, duplicate: bool) -> AppendResult:
    version, *ids = _text(raw).split(" ")
    return AppendResult(version=int(version), stream_ids=tuple(ids), duplicate=duplicate)


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    raise TypeError(f"expected bytes from Redis, got {value!r}")


def _stored(entry: object) -> StoredEvent:
    """A stream entry ``(id, {b"envelope": bytes})`` as returned by XRANGE/XREAD."""
    if not isinstance(entry, tuple | list) or len(entry) != 2:
        raise TypeError(f"not a stream entry: {entry!r}")
    entry_id, fields = entry
    payload = fields.get(ENVELOPE_FIELD) if isinstance(fields, dict) else None
    if not isinstance(payload, bytes):
        raise TypeError(f"stream entry {entry_id!r} has no bytes field 'envelope'")
    return StoredEvent(_text(entry_id), EventEnvelope.FromString(payload))


def _payload(entry: object) -> bytes:
    """The envelope's stored bytes of a stream entry."""
    fields = entry[1] if isinstance(entry, tuple | list) and len(entry) == 2 else None
    payload = fields.get(ENVELOPE_FIELD) if isinstance(fields, dict) else None
    if not isinstance(payload, bytes):
        raise TypeError(f"not a stream entry with bytes field 'envelope': {entry!r}")
    return payload


async def _xrange(
    client: Client, key: str, after: StreamId, until: str, page: int
) -> AsyncIterator[StoredEvent]:
    """Entries with id > ``after`` and <= ``until``, fetched ``page`` at a time."""
    start = "(" + format_stream_id(after)
    while True:
        entries = await client.xrange(key, min=start, max=until, count=page) or []
        events = [_stored(entry) for entry in entries]
        for event in events:
            yield event
        if len(events) < page:
            return
        start = "(" + events[-1].stream_id


class EventStore:
    """Append, read and list tables' event streams over an asyncio Redis client.

    The client must return bytes (``decode_responses=False``, the default).
    """

    def __init__(self, client: Client, *, page_size: int = 500,
                 key: Callable[[str, str], str] = keys.table_key,
                 index: str = keys.table_index()) -> None:
        """``key(id, name)`` names a stream's keys and ``index`` the set of ids with events:
        tables' by default, ``keys.tournament_key`` and ``keys.tournament_index()`` for the
        tournament service's streams (the same script, under its own prefix)."""
        self._client = client
        self._page_size = page_size
        self._key = key
        self._index = index
        self._heads: dict[str, tuple[int, bytes]] = {}
        """Stream -> (version, the digest of its event at that version) for the streams this
        store appended to: the next append's link, without a read."""

    @property
    def page_size(self) -> int:
        """Entries per read of a stream (:meth:`pages`' default page)."""
        return self._page_size

    @property
    def client(self) -> Client:
        """The Redis client this store uses."""
        return self._client

    async def append(
        self,
        table_id: str,
        envelopes: Sequence[EventEnvelope],
        expected_version: int,
        command_id: str,
        fingerprint: str = "",
        epoch: int | None = None,
    ) -> AppendResult:
        """Append one command's events if the stream is at ``expected_version``.

        The store copies the envelopes and sets ``sequence`` (expected_version + 1, ...),
        ``table_id`` and ``command_id`` on the copies; the caller's messages are untouched.
        Envelopes the writer sealed already (:func:`studkit.commit.seal`) are stored as
        they are, without a copy, once the store has set their chain link (``prev_digest``)
        in place.
        A retry with a ``command_id`` already recorded for this table returns the recorded
        outcome with ``duplicate=True`` and writes nothing, whatever it carries; given a
        ``fingerprint`` (a hash of the command), a recorded id with another fingerprint raises
        :class:`CommandIdReused`. Raises :class:`StreamConflict` when the stream is at
        another version (:class:`ChainBroken` when it is at ``expected_version`` but its
        chain's head is not the digest of the event this append links to), and
        :class:`NotOwner` when the table has an owner record whose fencing epoch is not
        ``epoch`` (nothing written either way).
        """
        if expected_version < 0:
            raise ValueError("expected_version must be >= 0")
        if not command_id:
            raise ValueError("command_id must not be empty")
        if not telemetry.ENABLED:
            return await self._append(table_id, envelopes, expected_version, command_id,
                                      fingerprint, epoch, "")
        # Traced: the append's span, its context stored on each envelope (studkit.telemetry).
        with telemetry.appending(table_id, len(envelopes), expected_version) as parent:
            return await self._append(table_id, envelopes, expected_version, command_id,
                                      fingerprint, epoch, parent)

    async def _append(self, table_id: str, envelopes: Sequence[EventEnvelope],
                      expected_version: int, command_id: str, fingerprint: str,
                      epoch: int | None, traceparent: str) -> AppendResult:
        first = head = await self._link(table_id, expected_version) if envelopes else b""
        payloads = []
        for offset, envelope in enumerate(envelopes, start=1):
            payload = _sealed(envelope, table_id, command_id, expected_version + offset, head,
                              traceparent)
            payloads.append(payload)
            head = digest(payload)
        keys_ = tuple(self._key(table_id, name) for name in
                      ("events", "commands", "version", "owner", "trimmed", "chain"))
        if payloads and expected_version == 0:
            # Only a table's first append can create it. Indexed outside the script (the index
            # has no table hash tag, so the script stays in one Cluster slot) and before it: a
            # crash in between leaves at most an indexed table without events, never events of
            # an unindexed table. SADD is idempotent. (append.lua says the same; the
            # crash points: tests/integration/studkit/test_append_order.py.)
            await self._client.sadd(self._index, table_id)
        reply = await self._run_append(
            keys_, (expected_version, command_id, table_id, fingerprint,
                    "" if epoch is None else str(epoch), first, head, *payloads))
        match reply:
            case [b"appended", outcome]:
                result = _outcome(outcome, duplicate=False)
                if payloads:
                    self._remember(table_id, result.version, head)
                return result
            case [b"broken_link", bytes(recorded)]:
                self._heads.pop(table_id, None)
                raise ChainBroken(table_id, expected_version, first, recorded)
            case [b"duplicate", outcome]:
                return _outcome(outcome, duplicate=True)
            case [b"reused", outcome]:
                raise CommandIdReused(table_id, command_id, _outcome(outcome, duplicate=True))
            case [b"not_owner", int(current)]:
                raise NotOwner(table_id, epoch, current)
            case [b"conflict", int(actual)]:
                raise StreamConflict(table_id, expected_version, actual)
            case _:  # pragma: no cover - the script has no other reply
                raise RuntimeError(f"append.lua replied {reply!r}")

    async def _link(self, table_id: str, version: int) -> bytes:
        """The digest of the stream's event ``version`` (GENESIS for 0): what this store
        appended there, else the digest of the bytes the stream holds (one read), else, for
        an event trimmed from Redis, the chain's recorded head, else (a stream written
        before the chain whose last event left Redis) GENESIS."""
        if version == 0:
            return GENESIS
        known = self._heads.get(table_id)
        if known is not None and known[0] == version:
            return known[1]
        at = format_stream_id((0, version))
        entries = await self._client.xrange(self._key(table_id, "events"), min=at, max=at,
                                            count=1)
        if not entries:
            head = await self._client.hget(self._key(table_id, "chain"), "head")
            return head if isinstance(head, bytes) else GENESIS
        link = digest(_payload(entries[0]))
        self._remember(table_id, version, link)
        return link

    def _remember(self, table_id: str, version: int, head: bytes) -> None:
        heads = self._heads
        heads.pop(table_id, None)
        if len(heads) >= _HEADS_KEPT:
            del heads[next(iter(heads))]  # the stream least recently appended to
        heads[table_id] = (version, head)

    async def chain(self, table_id: str) -> tuple[bytes | None, int | None]:
        """The stream's chain as the script keeps it: the head (the digest of the last
        event's bytes) and ``since`` (the first sequence whose envelope carries a link: 1,
        or where a stream written before the chain began its chain); None for a stream
        not appended to since the chain existed."""
        head, since = await self._client.hmget(self._key(table_id, "chain"),
                                               ["head", "since"])
        return (head if isinstance(head, bytes) else None,
                int(since) if since is not None else None)

    async def _run_append(
        self, keys_: tuple[str, ...], args: tuple[int | str | bytes, ...]
    ) -> list[object]:
        try:
            try:
                reply = await self._client.evalsha(_APPEND_SHA, len(keys_), *keys_, *args)
            except NoScriptError:  # first use on this server, or after a restart/flush
                await self._client.script_load(_APPEND_LUA)
                reply = await self._client.evalsha(_APPEND_SHA, len(keys_), *keys_, *args)
        except ResponseError as exc:
            if "STORECORRUPT" in str(exc):
                raise StoreCorrupted(str(exc)) from exc
            raise
        if not isinstance(reply, list):  # pragma: no cover - the script always returns a list
            raise RuntimeError(f"append.lua replied {reply!r}")
        return reply

    async def read(self, table_id: str, from_version: int = 0, *,
                   strict: bool = False) -> list[StoredEvent]:
        """The table's events after ``from_version`` (0: all), in order.

        Events archived and trimmed from Redis (``stud archive``) are not in the stream: a
        read that starts before the first kept event returns from that event (its sequence,
        ``trimmed + 1``, shows the gap), or with ``strict`` raises :class:`TrimmedRange`.
        """
        if from_version < 0:
            raise ValueError("from_version must be >= 0")
        if strict and from_version < (trimmed := await self.trimmed(table_id)):
            raise TrimmedRange(table_id, from_version, trimmed)
        return [
            event
            async for event in _xrange(
                self._client, self._key(table_id, "events"), (0, from_version), "+",
                self._page_size,
            )
        ]

    async def tail(self, table_id: str, from_version: int = 0, *,
                   hash_key: str | None = None) -> Tail:
        """:meth:`version`, :meth:`trimmed` and :meth:`read` from ``from_version`` in one
        round trip (one ``MULTI``: the three agree with each other), for a reader that keeps
        its own copy of the stream and brings it up to date. A tail longer than a page reads
        its further pages as :meth:`read` does. ``hash_key``: a hash of the table's own hash
        tag (the dealer's record of a hand) read in the same ``MULTI`` (``Tail.hash``)."""
        if from_version < 0:
            raise ValueError("from_version must be >= 0")
        key = self._key(table_id, "events")
        page = self._page_size
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.get(self._key(table_id, "version"))
            pipe.get(self._key(table_id, "trimmed"))
            pipe.xrange(key, "(" + format_stream_id((0, from_version)), "+", page)
            if hash_key is not None:
                pipe.hgetall(hash_key)
            version, trimmed, entries, *read = await pipe.execute()
        events = [_stored(entry) for entry in entries or []]
        if len(events) == page:
            events += [event async for event in _xrange(
                self._client, key, parse_stream_id(events[-1].stream_id), "+", page)]
        return Tail(version=int(version) if version is not None else 0,
                    trimmed=int(trimmed) if trimmed is not None else 0, events=events,
                    hash=read[0] if read else None)

    async def pages(self, table_id: str, from_version: int = 0, *, page: int | None = None
                    ) -> AsyncIterator[list[StoredEvent]]:
        """The table's events after ``from_version``, a page at a time (a long catch-up or
        one hand of a long table is read without holding the whole stream). Strict: raises
        :class:`TrimmedRange` for archived events."""
        if from_version < (trimmed := await self.trimmed(table_id)):
            raise TrimmedRange(table_id, from_version, trimmed)
        size = page or self._page_size
        start = "(" + format_stream_id((0, from_version))
        while True:
            entries = await self._client.xrange(self._key(table_id, "events"), min=start,
                                                max="+", count=size) or []
            events = [_stored(entry) for entry in entries]
            if events:
                yield events
            if len(events) < size:
                return
            start = "(" + events[-1].stream_id

    async def recorded(self, table_id: str, command_id: str,
                       fingerprint: str = "") -> AppendResult | None:
        """The recorded outcome of ``command_id`` at ``table_id``, or None if it was never
        appended; raises :class:`CommandIdReused` if it was recorded with another
        ``fingerprint``."""
        key = self._key(table_id, "commands")
        outcome, seen = await self._client.hmget(key, [command_id, f"{command_id}#fp"])
        if outcome is None:
            return None
        result = _outcome(outcome, duplicate=True)
        if fingerprint and seen is not None and _text(seen) != fingerprint:
            raise CommandIdReused(table_id, command_id, result)
        return result

    async def version(self, table_id: str) -> int:
        """The table's current version: the number of events ever appended (0 if none),
        those archived and trimmed from the stream included."""
        raw = await self._client.get(self._key(table_id, "version"))
        return int(raw) if raw is not None else 0

    async def owner_epoch(self, table_id: str) -> int | None:
        """The fencing epoch of the stream's owner record (None while it has none): what an
        append must carry now (``epoch=``) to pass the fence."""
        raw = await self._client.hget(self._key(table_id, "owner"), "epoch")
        return None if raw is None else int(_text(raw))

    async def trim_head(self, table_id: str, upto: int, expected_trimmed: int, *,
                        commands: bool = True, commands_upto: int | None = None) -> int:
        """Remove events ``expected_trimmed+1 .. upto`` from the head of the stream (they
        must be archived and verified first: :mod:`studhistory.archiver`) and record ``upto``
        as the trimmed count, atomically, only if the count is still ``expected_trimmed`` and
        the table's snapshot is at ``upto`` or later (the table loads from it); with
        ``commands``, the command records whose outcome's version is at most ``upto`` go too
        (the archiver copied them first; a retry of one is then no longer recognised), or
        only those at most ``commands_upto`` when given (the idempotency window's records
        stay: docs/history.md, "Expired commands").
        Returns the trimmed count; raises :class:`TrimRefused` otherwise (nothing removed)."""
        names = ("events", "version", "trimmed", "snapshot", *(("commands",) if commands
                                                               else ()))
        keys_ = tuple(self._key(table_id, name) for name in names)
        try:
            extra = () if commands_upto is None else (commands_upto,)
            reply = await self._client.eval(_TRIM_LUA, len(keys_), *keys_,
                                            expected_trimmed, upto, *extra)
        except ResponseError as exc:
            if "STORECORRUPT" in str(exc):
                raise StoreCorrupted(str(exc)) from exc
            raise
        match reply:
            case [b"trimmed", int(count)]:
                return count
            case [bytes(refusal), int(value)]:
                raise TrimRefused(table_id, refusal.decode(), value)
            case _:  # pragma: no cover - the script has no other reply
                raise RuntimeError(f"trim.lua replied {reply!r}")

    async def trimmed(self, table_id: str) -> int:
        """How many events were archived and trimmed from the head of the table's stream
        (0: none); the stream holds the events after it."""
        raw = await self._client.get(self._key(table_id, "trimmed"))
        return int(raw) if raw is not None else 0

    async def hand_start(self, table_id: str, hand_number: int, *, page: int = 16) -> int:
        """Where hand ``hand_number`` begins in the part of the stream still in Redis: the
        sequence of the first envelope that names this hand or a later one (an envelope's
        hand number is 0 between hands and never goes down), so a read from just before it
        meets the hand's ``HandStarted`` first, or, for a hand archived, a later hand. When
        no envelope names such a hand: a sequence from which none names a hand (past the
        last event when the last names one).

        Found by bisection over the first sequence from which the next envelope naming a
        hand names this one or a later one, never by reading the stream from its start: each
        step reads ``page`` events, and on through a run of envelopes naming no hand that it
        lands in (between hands: a few room events, rarely a page). The answer is the
        envelope that step found, not the start of the run before it, so the hand's read
        does not read that run again."""
        lo = await self.trimmed(table_id) + 1
        hi = await self.version(table_id) + 1  # the answer is in [lo, hi]
        found = hi  # the first envelope naming such a hand from ``hi`` on (none: ``hi``)
        size = min(page, self._page_size)
        while lo < hi:
            mid = (lo + hi) // 2
            named, at = 0, 0
            async for entries in self.pages(table_id, mid - 1, page=size):
                named, at = next(((e.envelope.hand_number, e.envelope.sequence)
                                  for e in entries if e.envelope.hand_number), (0, 0))
                if named:
                    break
            if not named or named >= hand_number:
                hi, found = mid, (at if named else mid)
            else:
                lo = mid + 1
        return found

    async def hand_envelopes(self, table_id: str, hand_number: int, *,
                             start: int | None = None, page: int | None = None
                             ) -> AsyncIterator[EventEnvelope]:
        """The envelopes that name hand ``hand_number``, in order (its room events too):
        read a page at a time from ``start`` (the sequence of its ``HandStarted``, when the
        caller knows it) or from where :meth:`hand_start` finds it begins, up to the first
        envelope that names a later hand. Nothing for a hand archived out of the stream;
        strict: :class:`TrimmedRange` when the read starts in the archived head."""
        if start is None:
            start = await self.hand_start(table_id, hand_number)
        async for entries in self.pages(table_id, start - 1, page=page):
            for entry in entries:
                envelope = entry.envelope
                if envelope.hand_number > hand_number:
                    return
                if envelope.hand_number == hand_number:
                    yield envelope

    async def table_ids(self) -> list[str]:
        """Every table that has events, sorted (from the index set, never a key scan)."""
        members = await self._client.smembers(self._index)
        return sorted(_text(member) for member in members)


def _sealed(envelope: EventEnvelope, table_id: str, command_id: str, sequence: int,
            prev_digest: bytes, traceparent: str = "") -> bytes:
    if envelope.table_id and envelope.table_id != table_id:
        raise ValueError(f"envelope for table {envelope.table_id!r} appended to {table_id!r}")
    if envelope.command_id and envelope.command_id != command_id:
        raise ValueError(f"envelope of command {envelope.command_id!r} in {command_id!r}")
    if envelope.sequence == sequence and envelope.table_id and envelope.command_id:
        envelope.prev_digest = prev_digest  # sealed by the writer: the link completes it
        if traceparent:
            envelope.traceparent = traceparent
        return bytes(envelope.SerializeToString(deterministic=True))
    sealed = EventEnvelope()
    sealed.CopyFrom(envelope)
    sealed.table_id = table_id
    sealed.command_id = command_id
    sealed.sequence = sequence
    sealed.prev_digest = prev_digest
    if traceparent:
        sealed.traceparent = traceparent
    return bytes(sealed.SerializeToString(deterministic=True))
