"""The event store: each table's events in one Redis Stream, appended conditionally and
idempotently by one Lua script (``append.lua``), read back in pages, and tailed live.

This is the only module that talks to Redis about events. Stream entry ids are explicit,
``0-<sequence>``: the entry holding the table's n-th event has id ``0-n``, so a version and an
id name the same position and resuming from either is one ``XRANGE``. Each entry has one
field, ``envelope``, the serialized :class:`stud.v1.envelope_pb2.EventEnvelope`.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Final, Self, TypeAlias

from redis.asyncio.cluster import RedisCluster
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
from studkit import keys
from studkit.redis_client import Client

ENVELOPE_FIELD: Final = b"envelope"
_APPEND_LUA: Final = resources.files("studkit").joinpath("append.lua").read_text("utf-8")
_APPEND_SHA: Final = hashlib.sha1(_APPEND_LUA.encode("utf-8")).hexdigest()
_TRIM_LUA: Final = resources.files("studkit").joinpath("trim.lua").read_text("utf-8")

StreamId: TypeAlias = tuple[int, int]

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
    (``stud archive``, :mod:`studkit.archive`): they are in the archive, not in the stream."""

    reason = "archived"

    def __init__(self, table_id: str, from_version: int, trimmed: int) -> None:
        super().__init__(f"table {table_id}: events 1..{trimmed} are archived (asked for the "
                         f"events after {from_version}); read them with "
                         "studkit.archive.read_archived")
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
    return f"{keys.TABLE_PREFIX}{{{keys.check_id(table_id, 'table id')}}}:trimmed"


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The outcome of one command's append: the version after it, the ids of its entries,
    and whether this was a retry that wrote nothing and returned the recorded outcome."""

    version: int
    stream_ids: tuple[str, ...]
    duplicate: bool = False


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


def _xread_events(reply: object) -> list[StoredEvent]:
    """The entries of a one-stream XREAD reply (RESP2 list or RESP3 map form)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        streams = list(reply.values())
    elif isinstance(reply, list):
        streams = [stream[1] for stream in reply]
    else:
        raise TypeError(f"not an XREAD reply: {reply!r}")
    return [_stored(entry) for entries in streams for entry in entries]


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

    def __init__(self, client: Client, *, page_size: int = 500) -> None:
        self._client = client
        self._page_size = page_size

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
        A retry with a ``command_id`` already recorded for this table returns the recorded
        outcome with ``duplicate=True`` and writes nothing, whatever it carries; given a
        ``fingerprint`` (a hash of the command), a recorded id with another fingerprint raises
        :class:`CommandIdReused`. Raises :class:`StreamConflict` when the stream is at
        another version, and :class:`NotOwner` when the table has an owner record whose
        fencing epoch is not ``epoch`` (nothing written either way).
        """
        if expected_version < 0:
            raise ValueError("expected_version must be >= 0")
        if not command_id:
            raise ValueError("command_id must not be empty")
        payloads = [
            _sealed(envelope, table_id, command_id, expected_version + offset)
            for offset, envelope in enumerate(envelopes, start=1)
        ]
        keys_ = (
            keys.table_stream(table_id),
            keys.table_commands(table_id),
            keys.table_version(table_id),
            keys.table_owner(table_id),
            trimmed_key(table_id),
        )
        if payloads and expected_version == 0:
            # Only a table's first append can create it. Indexed outside the script (the index
            # has no table hash tag, so the script stays in one Cluster slot) and before it: a
            # crash in between leaves at most an indexed table without events, never events of
            # an unindexed table. SADD is idempotent.
            await self._client.sadd(keys.table_index(), table_id)
        reply = await self._run_append(
            keys_, (expected_version, command_id, table_id, fingerprint,
                    "" if epoch is None else str(epoch), *payloads))
        match reply:
            case [b"appended", outcome]:
                return _outcome(outcome, duplicate=False)
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
                self._client, keys.table_stream(table_id), (0, from_version), "+",
                self._page_size,
            )
        ]

    async def recorded(self, table_id: str, command_id: str,
                       fingerprint: str = "") -> AppendResult | None:
        """The recorded outcome of ``command_id`` at ``table_id``, or None if it was never
        appended; raises :class:`CommandIdReused` if it was recorded with another
        ``fingerprint``."""
        key = keys.table_commands(table_id)
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
        raw = await self._client.get(keys.table_version(table_id))
        return int(raw) if raw is not None else 0

    async def trim_head(self, table_id: str, upto: int, expected_trimmed: int) -> int:
        """Remove events ``expected_trimmed+1 .. upto`` from the head of the stream (they
        must be archived and verified first: :mod:`studkit.archive`) and record ``upto`` as
        the trimmed count, atomically, only if the count is still ``expected_trimmed`` and the
        table's snapshot is at ``upto`` or later (the table loads from it). Returns the
        trimmed count; raises :class:`TrimRefused` otherwise (nothing removed)."""
        from studkit.repository import snapshot_key  # the repository imports this module

        keys_ = (keys.table_stream(table_id), keys.table_version(table_id),
                 trimmed_key(table_id), snapshot_key(table_id))
        try:
            reply = await self._client.eval(_TRIM_LUA, len(keys_), *keys_,
                                            expected_trimmed, upto)
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
        raw = await self._client.get(trimmed_key(table_id))
        return int(raw) if raw is not None else 0

    async def table_ids(self) -> list[str]:
        """Every table that has events, sorted (from the index set, never a key scan)."""
        members = await self._client.smembers(keys.table_index())
        return sorted(_text(member) for member in members)


def _sealed(envelope: EventEnvelope, table_id: str, command_id: str, sequence: int) -> bytes:
    if envelope.table_id and envelope.table_id != table_id:
        raise ValueError(f"envelope for table {envelope.table_id!r} appended to {table_id!r}")
    if envelope.command_id and envelope.command_id != command_id:
        raise ValueError(f"envelope of command {envelope.command_id!r} in {command_id!r}")
    sealed = EventEnvelope()
    sealed.CopyFrom(envelope)
    sealed.table_id = table_id
    sealed.command_id = command_id
    sealed.sequence = sequence
    return bytes(sealed.SerializeToString(deterministic=True))


# ---------------------------------------------------------------------------------------------
# Tailing


@dataclass(eq=False)
class _Subscriber:
    """One local subscriber's inbox, filled by its table's reader."""

    limit: int
    buffer: deque[StoredEvent] = field(default_factory=deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    overflowed: bool = False
    closed: bool = False
    error: Exception | None = None

    def deliver(self, events: Sequence[StoredEvent]) -> None:
        if self.overflowed:
            return
        if len(self.buffer) + len(events) > self.limit:
            # Too slow to keep up: drop the buffer and let the subscriber re-read the stream.
            self.overflowed = True
            self.buffer.clear()
        else:
            self.buffer.extend(events)
        self.wake.set()

    def fail(self, error: Exception) -> None:
        self.error = error
        self.wake.set()

    def close(self) -> None:
        self.closed = True
        self.wake.set()


@dataclass(eq=False)
class _TableReader:
    """The one blocked XREAD loop of a table in this process.

    Invariant: every entry with an id greater than ``position`` will be delivered to every
    subscriber registered now; everything up to ``position`` is already in the stream.
    """

    table_id: str
    position: StreamId
    subscribers: set[_Subscriber] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    stopping: bool = False


class StreamTailer:
    """Live events of tables, resumable from any event id, for many local subscribers.

    One background task per tailed table blocks on ``XREAD`` and fans each batch out to that
    table's subscribers; it starts with the first subscriber and stops with the last. Each
    blocked reader holds one connection of the client's pool, so size the pool for the
    number of tables tailed at once plus the store's own use, and keep ``block_ms`` below the
    client's ``socket_timeout``. If a reader fails (Redis gone), its subscribers' iterators
    raise that error; resubscribe from the last id seen.
    """

    def __init__(
        self,
        client: Client,
        *,
        block_ms: int = 2_000,
        batch: int = 500,
        buffer_limit: int = 10_000,
    ) -> None:
        socket_timeout = _socket_timeout(client)
        if socket_timeout is not None and block_ms >= socket_timeout * 1000:
            raise ValueError(f"block_ms={block_ms} must be below the client's socket_timeout")
        self._client = client
        self._block_ms = block_ms
        self._batch = batch
        self._buffer_limit = buffer_limit
        self._readers: dict[str, _TableReader] = {}
        self._closed = False

    def subscribe(self, table_id: str, after_id: str = "0-0") -> Subscription:
        """Events of ``table_id`` with ids after ``after_id`` ("0" or "0-0": all), first
        those already stored, then live ones, with no gap or duplicate at the switch."""
        keys.check_id(table_id, "table id")
        if self._closed:
            raise RuntimeError("subscribe on a closed StreamTailer")
        return Subscription(self._events(table_id, parse_stream_id(after_id)))

    def tailed_tables(self) -> frozenset[str]:
        """The tables that have a running reader in this tailer."""
        return frozenset(self._readers)

    async def aclose(self) -> None:
        """Stop every reader; every subscription's iterator ends (after its replay, for one
        still replaying)."""
        self._closed = True
        readers = list(self._readers.values())
        self._readers.clear()
        for reader in readers:
            for subscriber in reader.subscribers:
                subscriber.close()
            await _stop(reader)

    async def _events(self, table_id: str, after: StreamId) -> AsyncIterator[StoredEvent]:
        key = keys.table_stream(table_id)
        last = after
        replayed = False
        async for event in _xrange(self._client, key, last, "+", self._batch):
            yield event
            last, replayed = parse_stream_id(event.stream_id), True
        start = last if replayed else min(last, await self._stream_end(key))
        if self._closed:
            return
        # From here to the registration there is no await: the reader cannot move meanwhile.
        reader = self._readers.get(table_id)
        if reader is None:
            reader = _TableReader(table_id, position=start)
            reader.task = asyncio.create_task(self._run(reader), name=f"tail:{table_id}")
            self._readers[table_id] = reader
        subscriber = _Subscriber(limit=self._buffer_limit)
        reader.subscribers.add(subscriber)
        try:
            catch_up_to = reader.position
            while True:
                if catch_up_to > last:  # stored events the reader delivered before we joined
                    end = format_stream_id(catch_up_to)
                    async for event in _xrange(self._client, key, last, end, self._batch):
                        yield event
                        last = parse_stream_id(event.stream_id)
                if subscriber.error is not None:
                    raise subscriber.error
                if subscriber.closed:
                    return
                if subscriber.overflowed:
                    subscriber.overflowed = False
                    catch_up_to = reader.position
                    continue
                if not subscriber.buffer:
                    subscriber.wake.clear()
                    await subscriber.wake.wait()
                    continue
                event = subscriber.buffer.popleft()
                position = parse_stream_id(event.stream_id)
                if position > last:
                    yield event
                    last = position
        finally:
            await self._release(reader, subscriber)

    async def _stream_end(self, key: str) -> StreamId:
        newest = await self._client.xrevrange(key, count=1) or []
        return parse_stream_id(_text(newest[0][0])) if newest else (0, 0)

    async def _release(self, reader: _TableReader, subscriber: _Subscriber) -> None:
        reader.subscribers.discard(subscriber)
        if reader.subscribers or self._readers.get(reader.table_id) is not reader:
            return
        del self._readers[reader.table_id]
        await _stop(reader)

    async def _run(self, reader: _TableReader) -> None:
        key = keys.table_stream(reader.table_id)
        try:
            while not reader.stopping:
                reply = await self._client.xread(
                    {key: format_stream_id(reader.position)},
                    count=self._batch,
                    block=self._block_ms,
                )
                events = _xread_events(reply)
                if not events:
                    continue
                reader.position = parse_stream_id(events[-1].stream_id)
                for subscriber in list(reader.subscribers):
                    subscriber.deliver(events)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._readers.get(reader.table_id) is reader:
                del self._readers[reader.table_id]
            for subscriber in list(reader.subscribers):
                subscriber.fail(exc)


def _socket_timeout(client: Client) -> float | None:
    """The read timeout the client's connections use (redis-py's default when unset)."""
    if isinstance(client, RedisCluster):  # every node's connections get the same kwargs
        timeout = client.connection_kwargs.get("socket_timeout")
        return float(timeout) if isinstance(timeout, int | float) else None
    pool = client.connection_pool
    configured: object = None
    if "socket_timeout" in pool.connection_kwargs:
        configured = pool.connection_kwargs["socket_timeout"]
    else:  # the default of the first __init__ up the connection class's MRO that names it
        for cls in pool.connection_class.__mro__:
            init = cls.__dict__.get("__init__")
            parameter = inspect.signature(init).parameters.get("socket_timeout") if init else None
            if parameter is not None:
                configured = parameter.default
                break
    return float(configured) if isinstance(configured, int | float) else None


async def _stop(reader: _TableReader) -> None:
    reader.stopping = True
    task = reader.task
    if task is None:
        return
    # Cancel until done: on Python 3.11, asyncio.wait_for (which redis-py uses to send a
    # command) swallows a cancel that arrives as the send completes; the reader then blocks
    # in XREAD again, and only a further cancel (or the `stopping` flag) ends it.
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.05)
    if not task.cancelled():
        task.result()


class Subscription(AsyncIterator[StoredEvent]):
    """An async iterator of one table's events; close it (or use ``async with``) to
    unsubscribe."""

    def __init__(self, events: AsyncIterator[StoredEvent]) -> None:
        self._events = events

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> StoredEvent:
        return await anext(self._events)

    async def aclose(self) -> None:
        """Unsubscribe; the table's reader stops if this was its last subscriber."""
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
