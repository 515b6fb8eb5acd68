"""Live events of tables for many local subscribers: one blocked ``XREAD`` per tailed table,
fanned out, resumable from any event id (:class:`StreamTailer`). The event store itself (append,
read) is :mod:`studkit.store`."""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Self

from redis.asyncio.cluster import RedisCluster

from studkit import keys
from studkit.redis_client import Client
from studkit.store import (
    StoredEvent,
    StreamId,
    _stored,
    _text,
    _xrange,
    format_stream_id,
    parse_stream_id,
)


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
