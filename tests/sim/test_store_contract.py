"""The simulated store against the real one: the same appends, the same answers. Each case
runs on ``studkit.store.EventStore`` over a real Redis (``append.lua``) and over the
simulator's :class:`sim.redis.SimRedis` (its Python port of the script); the outcomes,
the stored envelopes and the bookkeeping must agree, case by case."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from sim.redis import Data, SimRedis
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.redis_client import connect
from studkit.store import (
    ChainBroken,
    CommandIdReused,
    EventStore,
    NotOwner,
    StoreCorrupted,
    StreamConflict,
    Tail,
    TrimRefused,
)

Case = Callable[[EventStore, Any], Awaitable[list[object]]]


def env(kind: str, n: int = 0) -> EventEnvelope:
    return EventEnvelope(event_type=kind, schema_version=1, hand_number=n, payload=b"x" * n)


async def outcome(call: Awaitable[object]) -> object:
    """What an append answered, as comparable data."""
    try:
        result = await call
    except ChainBroken as exc:
        return ("broken_link", exc.actual, exc.link, exc.head)
    except StreamConflict as exc:
        return ("conflict", exc.actual)
    except CommandIdReused as exc:
        return ("reused", exc.recorded.version, exc.recorded.stream_ids)
    except NotOwner as exc:
        return ("not_owner", exc.current)
    except StoreCorrupted:
        return ("corrupt",)
    return ("ok", result.version, result.stream_ids, result.duplicate)  # type: ignore[attr-defined]


async def stored(store: EventStore, table: str) -> list[object]:
    return [(s.stream_id, s.envelope.SerializeToString(deterministic=True))
            for s in await store.read(table)] + [await store.version(table),
                                                 await store.table_ids()]


async def conditional(store: EventStore, _client: Any) -> list[object]:
    return [await outcome(store.append("t", [env("A"), env("B", 2)], 0, "c1")),
            await outcome(store.append("t", [env("C")], 0, "c2")),
            await outcome(store.append("t", [env("C")], 3, "c2")),
            await outcome(store.append("t", [env("C")], 2, "c2")),
            await store.recorded("t", "c2"), *await stored(store, "t")]


async def idempotent(store: EventStore, _client: Any) -> list[object]:
    return [await outcome(store.append("t", [env("A")], 0, "c1", "fp1")),
            await outcome(store.append("t", [env("Z"), env("Y")], 1, "c1", "fp1")),
            await outcome(store.append("t", [env("A")], 0, "c1")),
            await outcome(store.append("t", [env("A")], 1, "c1", "fp2")),
            await outcome(store.append("t", [], 1, "empty")),
            await outcome(store.append("t", [env("B")], 1, "empty")),
            await store.recorded("t", "empty"), await store.recorded("t", "nope"),
            *await stored(store, "t")]


async def fenced(store: EventStore, client: Any) -> list[object]:
    first = await outcome(store.append("t", [env("A")], 0, "c0", epoch=None))
    await client.hset(keys.table_owner("t"), mapping={"epoch": "3"})
    return [first,
            await outcome(store.append("t", [env("B")], 1, "c1", epoch=None)),
            await outcome(store.append("t", [env("B")], 1, "c1", epoch=2)),
            await outcome(store.append("t", [env("B")], 1, "c1", epoch=3)),
            await outcome(store.append("t", [env("C")], 2, "c1", epoch=2)),  # a replay
            await outcome(store.append("t", [env("C")], 2, "c2", epoch=4)),
            *await stored(store, "t")]


async def corrupt(store: EventStore, client: Any) -> list[object]:
    first = await outcome(store.append("t", [env("A")], 0, "c0"))
    await client.xadd(keys.table_stream("t"), {"envelope": b"junk"}, id="0-9")
    return [first, await outcome(store.append("t", [env("B")], 1, "c1")),
            await outcome(store.append("t", [env("B")], 1, "c0"))]


def _tail(tail: Tail) -> tuple[object, ...]:
    return (tail.version, tail.trimmed, [(s.stream_id, s.envelope.SerializeToString(
        deterministic=True)) for s in tail.events])


async def tail(store: EventStore, client: Any) -> list[object]:
    """The one-round-trip read (a MULTI of GET, GET, XRANGE), over several pages."""
    paged = EventStore(client, page_size=2)
    empty = [_tail(await paged.tail("t")), _tail(await paged.tail("t", 3))]
    await store.append("t", [env("A"), env("B", 2), env("C", 3)], 0, "c1")
    await store.append("t", [env("D", 4), env("E", 5)], 3, "c2")
    return [*empty, *[_tail(await paged.tail("t", v)) for v in range(7)],
            _tail(await store.tail("t", 1))]


async def chained(store: EventStore, client: Any) -> list[object]:
    """The chain's head and start, an append that does not link to the head (its stored
    event changed behind the store's back, read by a store without the digest in hand), and
    a stream written before the chain."""
    first = [await outcome(store.append("t", [env("A"), env("B", 2)], 0, "c1")),
             await outcome(store.append("t", [], 2, "c0")),
             await outcome(store.append("t", [env("C")], 2, "c2"))]
    chain = keys.table_key("t", "chain")
    state = [await client.hgetall(chain)]
    await client.hset(chain, "head", b"\x07" * 32)  # as if event 3 had other bytes
    fresh = EventStore(client)
    refused = [await outcome(fresh.append("t", [env("D")], 3, "c3")),
               await outcome(store.append("t", [env("D")], 3, "c3")),
               await store.recorded("t", "c3")]
    await client.hset(chain, "head", state[0][b"head"])
    after = [await outcome(fresh.append("t", [env("D")], 3, "c3"))]
    await client.xadd(keys.table_stream("old"), {"envelope": env("Old").SerializeToString()},
                      id="0-1")
    if isinstance(client, SimRedis):  # the simulated Redis has no SET: the store never sets
        client.data.strings[keys.table_version("old").encode()] = b"1"
    else:
        await client.set(keys.table_version("old"), "1")
    old = [await outcome(store.append("old", [env("New")], 1, "c1")),
           await client.hgetall(keys.table_key("old", "chain")), *await stored(store, "old")]
    return [*first, *state, *refused, *after, *old, *await stored(store, "t")]


async def trim(store: EventStore, upto: int, expected: int,
               commands_upto: int | None = None) -> object:
    """What a trim answered, as comparable data."""
    try:
        return ("trimmed", await store.trim_head("t", upto, expected,
                                                 commands_upto=commands_upto))
    except TrimRefused as exc:
        return (exc.reason, exc.value)


async def trimmed(store: EventStore, client: Any) -> list[object]:
    """``trim.lua``: its refusals, a trim at the snapshot, the command records it takes
    with it, and the stream it leaves (the simulated archiver's trim, ``sim.archive``)."""
    out: list[object] = []
    for n, command in enumerate(("c1", "c2", "c3", "c4")):
        out.append(await outcome(store.append("t", [env("A", n), env("B", n)], 2 * n, command,
                                              "fp" + command)))
    snapshot = keys.table_key("t", "snapshot")
    out += [await trim(store, 2, 0)]  # no snapshot yet
    await client.hset(snapshot, mapping={"version": "4"})
    out += [await trim(store, 6, 0), await trim(store, 9, 0), await trim(store, 4, 1),
            await trim(store, 4, 0, commands_upto=2), await store.recorded("t", "c1"),
            await store.recorded("t", "c2"), await trim(store, 2, 4), await trim(store, 4, 4),
            await store.trimmed("t"), await store.recorded("t", "c2"),
            await store.recorded("t", "c3"),
            await outcome(store.append("t", [env("C")], 8, "c5")), *await stored(store, "t")]
    await client.xadd(keys.table_stream("t"), {"envelope": b"junk"}, id="0-99")
    await client.hset(snapshot, mapping={"version": "9"})
    try:
        out.append(await trim(store, 8, 4))
    except StoreCorrupted:
        out.append(("corrupt",))
    return out


CASES = {"conditional": conditional, "idempotent": idempotent, "fenced": fenced,
         "corrupt": corrupt, "tail": tail, "chained": chained, "trimmed": trimmed}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_simulated_append_answers_as_append_lua(redis_url: str, name: str) -> None:
    case = CASES[name]

    async def real() -> list[object]:
        client = connect(redis_url)
        try:
            return await case(EventStore(client), client)
        finally:
            await client.aclose()

    async def simulated() -> list[object]:
        client = SimRedis(Data())
        return await case(EventStore(client), client)  # type: ignore[arg-type]

    on_redis = asyncio.run(real())
    assert len(on_redis) > 2 and any(o != on_redis[0] for o in on_redis)
    assert asyncio.run(simulated()) == on_redis
