"""One player cannot stop the dealing: WatchMyCards refuses tables that do not exist, holds at
most a few streams per player and per connection, and tails on a Redis pool of its own, so
StartHand keeps working whatever the watchers do; the per-table cache stays bounded."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections import Counter
from collections.abc import AsyncIterator, Mapping

import grpc
import pytest
from redis.crc import key_slot

from dealer.config import Settings
from dealer.tables import PublicTables
from rules import TableConfig
from rules.commands import LeaveSeat, SitDown
from stud.v1 import dealer_pb2 as pb
from studkit.grpc_server import rpc_error_reason
from studkit.mapping import event_from_envelope
from studkit.metrics import REQUESTS
from studkit.redis_client import connect
from studkit.store import EventStore
from studtest.dealer import TABLE, RunningDealer, TableRole, player, running_dealer
from studtest.redis import TestRedis as Redis
from studtest.redis_cluster import slot_ranges
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration

PER_PLAYER = 3
PER_CONNECTION = 5
WATCH_CONNECTIONS = 6
SERVICE = "stud.v1.DealerService"
_ids = itertools.count(1)
OWN_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)
"""Channel options for a connection of its own (channels share connections by default)."""


@pytest.fixture
async def limited(redis_server: Redis, redis_url: str,
                  dev_keys: DevKeys) -> AsyncIterator[RunningDealer]:
    """A dealer with small stream limits and a small watchers' pool."""
    settings = Settings(addr="127.0.0.1:0", auth_keys=dev_keys.key_set(),
                        redis_url=service_url(redis_server, redis_url, "dealer"))
    settings = dataclasses.replace(settings, max_streams_per_player=PER_PLAYER,
                                   max_streams_per_connection=PER_CONNECTION,
                                   watch_redis_connections=WATCH_CONNECTIONS)
    async with running_dealer(settings, dev_keys) as running:
        yield running


@pytest.fixture
async def events(redis_server: Redis, redis_url: str) -> AsyncIterator[EventStore]:
    """The event store as the table service uses it."""
    client = connect(service_url(redis_server, redis_url, "table"))
    yield EventStore(client)
    await client.aclose()


async def open_table(events: EventStore, dealer: RunningDealer,
                     players: Mapping[int, str] | None = None) -> TableRole:
    table = TableRole(events, dealer.client, f"w-{next(_ids)}", TableConfig(),
                      players or {1: "ann", 2: "bob"})
    await table.open()
    return table


def service_url(redis_server: Redis, admin_url: str, service: str) -> str:
    """A service ACL user's URL when this session runs the server, else the admin URL."""
    return redis_server.server.url_for(service) if redis_server.server else admin_url


def watch(dealer: RunningDealer, table_id: str, who: str,
          channel: grpc.aio.Channel | None = None) -> grpc.aio.UnaryStreamCall:
    request = pb.WatchMyCardsRequest(table_id=table_id)
    metadata = dealer.client.metadata(player(who))
    if channel is None:
        return dealer.client.stub.WatchMyCards(request, metadata=metadata, timeout=60)
    method = channel.unary_stream(f"/{SERVICE}/WatchMyCards",
                                  request_serializer=pb.WatchMyCardsRequest.SerializeToString,
                                  response_deserializer=pb.MyCards.FromString)
    return method(request, metadata=metadata, timeout=60)


async def tailing(dealer: RunningDealer, table_id: str) -> None:
    """Wait until the dealer tails ``table_id`` (a watch has subscribed)."""
    for _ in range(250):
        if table_id in dealer.deps.tailer.tailed_tables():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{table_id} is not tailed")


async def tailed_or_done(dealer: RunningDealer, table_id: str,
                         call: grpc.aio.UnaryStreamCall) -> None:
    """Wait until the dealer tails ``table_id`` or the watch ``call`` has ended."""
    for _ in range(250):
        if table_id in dealer.deps.tailer.tailed_tables() or call.done():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{table_id} is neither tailed nor refused")


async def refusal(call: grpc.aio.UnaryStreamCall) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        async for _ in call:
            pass
    return info.value


def calls(dealer: RunningDealer, method: str, code: str) -> float:
    return dealer.deps.metrics.sample(f"{REQUESTS}_total", service=SERVICE, method=method,
                                      code=code)


class TestUnknownTables:
    async def test_watching_a_table_that_does_not_exist_is_not_found(
        self, limited: RunningDealer
    ) -> None:
        """A watch on a table with no public record is NOT_FOUND (unknown_table) and leaves
        no reader behind."""
        error = await refusal(watch(limited, "no-such-table", "ann"))
        assert error.code() is grpc.StatusCode.NOT_FOUND
        assert rpc_error_reason(error) == "unknown_table"
        assert limited.deps.tailer.tailed_tables() == frozenset()

    async def test_150_watches_of_made_up_tables_leave_dealing_alone(
        self, limited: RunningDealer, events: EventStore
    ) -> None:
        """The issue's attack: one player opens 150 watches on tables that do not exist. Each
        is NOT_FOUND, nothing is tailed, and 20 StartHand calls all succeed meanwhile."""
        tables = [await open_table(events, limited) for _ in range(20)]
        watches = [refusal(watch(limited, f"ghost-{i}", "eve")) for i in range(150)]
        starts = [table.dealer.start_hand(table.table_id, 1) for table in tables]
        results = await asyncio.gather(*watches, *starts)
        errors, commitments = results[:150], results[150:]
        # All on one connection: those past its limit while others are open are refused
        # before the table is looked up. How many are open at once is the machine's to decide
        # (a busy one may answer each NOT_FOUND before the next arrives), so only the
        # refusals' kinds are pinned here; the limits themselves: TestStreamLimits.
        reasons = Counter((e.code(), rpc_error_reason(e)) for e in errors)
        assert (grpc.StatusCode.NOT_FOUND, "unknown_table") in reasons
        assert set(reasons) <= {(grpc.StatusCode.NOT_FOUND, "unknown_table"),
                                (grpc.StatusCode.RESOURCE_EXHAUSTED, "too_many_streams")}
        assert all(isinstance(c, str) and c for c in commitments)
        assert limited.deps.tailer.tailed_tables() == frozenset()


class TestWatchersWithoutASeat:
    """Issue 17, F9: a watch by a player with no seat at the table used to stay open with no
    message, holding a stream slot, forever."""

    async def test_a_player_who_is_not_seated_is_refused_at_once(
        self, limited: RunningDealer, events: EventStore
    ) -> None:
        """FAILED_PRECONDITION not_seated, promptly; counted; nothing tailed, no slot held
        (the player's next watches are refused the same way, never RESOURCE_EXHAUSTED)."""
        table = await open_table(events, limited)
        await table.start_hand()
        await table.deal()
        for _ in range(PER_PLAYER + 2):
            error = await asyncio.wait_for(refusal(watch(limited, table.table_id, "zed")), 10)
            assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
            assert rpc_error_reason(error) == "not_seated"
        assert calls(limited, "WatchMyCards", "FAILED_PRECONDITION") == PER_PLAYER + 2
        assert limited.deps.tailer.tailed_tables() == frozenset()
        # A seated player at the same table still gets their cards.
        seated = watch(limited, table.table_id, "ann")
        assert len((await asyncio.wait_for(seated.read(), 10)).down) == 2
        seated.cancel()

    async def test_a_seated_player_waits_for_the_first_hand(
        self, limited: RunningDealer, events: EventStore
    ) -> None:
        """A seat with no hand dealt yet is a watch that waits (its first cards come with
        the first hand), not a refusal."""
        table = await open_table(events, limited)
        call = watch(limited, table.table_id, "bob")
        await tailing(limited, table.table_id)
        await asyncio.sleep(0.2)
        assert not call.done()
        await table.start_hand()
        await table.deal()
        first = await asyncio.wait_for(call.read(), 10)
        assert (first.hand_number, first.seat) == (1, 2)
        if not first.down:  # the hand's start, then its first street
            assert len((await asyncio.wait_for(call.read(), 10)).down) == 2
        call.cancel()

    async def test_the_watch_ends_when_the_player_leaves(
        self, limited: RunningDealer, events: EventStore
    ) -> None:
        """A watcher whose seat is left between hands gets FAILED_PRECONDITION not_seated
        at once, and its slot is free again."""
        table = await open_table(events, limited, {1: "ann", 2: "bob", 3: "cat"})
        call = watch(limited, table.table_id, "cat")
        await tailing(limited, table.table_id)
        await table.apply(LeaveSeat(seat=3))
        error = await asyncio.wait_for(refusal(call), 10)
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert rpc_error_reason(error) == "not_seated"
        # Seated again, the player may hold all PER_PLAYER watches: the ended one holds none.
        await table.apply(SitDown(seat=3, player_id="cat", stack=10_000))
        held = [watch(limited, table.table_id, "cat") for _ in range(PER_PLAYER)]
        await asyncio.sleep(0.3)
        assert not any(c.done() for c in held)
        for c in held:
            c.cancel()


class TestStreamLimits:
    async def test_one_player_past_the_limit_is_resource_exhausted(
        self, limited: RunningDealer, events: EventStore
    ) -> None:
        """A player holds at most PER_PLAYER watches (from any connection); one more is
        RESOURCE_EXHAUSTED (too_many_streams) and the table's StartHand still works. When one
        watch ends another may open."""
        table = await open_table(events, limited, {1: "ann", 2: "bob", 3: "cat"})
        await table.start_hand()
        await table.deal()
        open_ = [watch(limited, table.table_id, "ann") for _ in range(PER_PLAYER)]
        for call in open_:
            assert len((await call.read()).down) == 2
        extra = [refusal(watch(limited, table.table_id, "ann")) for _ in range(10)]
        for error in await asyncio.gather(*extra):
            assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert rpc_error_reason(error) == "too_many_streams"
        assert calls(limited, "WatchMyCards", "RESOURCE_EXHAUSTED") == 10
        # Another player is not affected, and dealing goes on.
        other = watch(limited, table.table_id, "bob")
        assert len((await other.read()).down) == 2
        other_table = await open_table(events, limited)
        assert await other_table.start_hand()
        open_[0].cancel()
        for _ in range(100):
            again = watch(limited, table.table_id, "ann")
            try:
                assert len((await again.read()).down) == 2
                break
            except grpc.aio.AioRpcError as error:
                assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
                await asyncio.sleep(0.02)
        else:
            raise AssertionError("the freed slot was never given back")
        for call in (*open_, other, again):
            call.cancel()

    async def test_one_connection_past_the_limit_is_resource_exhausted(
        self, limited: RunningDealer, events: EventStore
    ) -> None:
        """A client connection holds at most PER_CONNECTION watches, whoever they are for;
        a new connection may open more."""
        names = ["ann", "bob", "cat", "dan", "eve", "fay"]
        table = await open_table(events, limited, dict(enumerate(names, start=1)))
        target = f"127.0.0.1:{limited.port}"
        async with grpc.aio.insecure_channel(target, options=OWN_CONNECTION) as first, \
                grpc.aio.insecure_channel(target, options=OWN_CONNECTION) as second:
            held = []
            for name in names[:PER_CONNECTION]:
                call = watch(limited, table.table_id, name, first)
                await tailing(limited, table.table_id)
                held.append(call)
            # Every held watch is subscribed (a refusal would end it).
            await asyncio.sleep(0.1)
            assert not any(call.done() for call in held)
            error = await refusal(watch(limited, table.table_id, names[-1], first))
            assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert rpc_error_reason(error) == "too_many_streams"
            elsewhere = watch(limited, table.table_id, names[-1], second)
            await asyncio.sleep(0.2)
            assert not elsewhere.done()
            for call in (*held, elsewhere):
                call.cancel()


class TestWatchersHaveTheirOwnPool:
    async def test_a_full_watchers_pool_leaves_dealing_alone(
        self, limited: RunningDealer, events: EventStore, redis_server: Redis
    ) -> None:
        """Watches on more tables than the watchers' pool has connections: those past it are
        UNAVAILABLE (store_unavailable: retry later), while StartHand on every table still
        succeeds, as it uses the other pool. On a Redis Cluster the pool is per master."""
        tables = [await open_table(events, limited, {1: f"p{i}"})
                  for i in range(WATCH_CONNECTIONS + 3)]
        target = f"127.0.0.1:{limited.port}"
        channels = [grpc.aio.insecure_channel(target, options=OWN_CONNECTION) for _ in tables]
        calls_ = []
        for i, (table, channel) in enumerate(zip(tables, channels, strict=True)):
            call = watch(limited, table.table_id, f"p{i}", channel)
            calls_.append(call)
            await tailed_or_done(limited, table.table_id, call)
        await asyncio.sleep(0.3)
        held = [call for call in calls_ if not call.done()]
        refused = [await refusal(call) for call in calls_ if call.done()]
        # The tables' masters (one "master" on a single Redis).
        ranges = slot_ranges(3) if redis_server.cluster else [range(16384)]
        master = [next(i for i, r in enumerate(ranges) if key_slot(t.table_id.encode()) in r)
                  for t in tables]
        held_on = Counter(m for m, call in zip(master, calls_, strict=True) if not call.done())
        assert max(held_on.values(), default=0) <= WATCH_CONNECTIONS
        assert len(refused) >= sum(max(0, n - WATCH_CONNECTIONS)
                                   for n in Counter(master).values())
        assert len(held) <= WATCH_CONNECTIONS * len(ranges)
        commitments = await asyncio.gather(
            *(t.dealer.start_hand(t.table_id, 1, TABLE) for t in tables))
        assert all(commitments)
        for call in held:
            call.cancel()
        for channel in channels:
            await channel.close()


class TestTableCache:
    async def test_20000_unknown_ids_do_not_grow_the_cache(self, events: EventStore) -> None:
        """20,000 lookups of tables that do not exist cache nothing and leave no lock."""
        tables = PublicTables(events, event_from_envelope, max_tables=64)
        for start in range(0, 20_000, 50):
            views = await asyncio.gather(
                *(tables.view(f"nope-{i}") for i in range(start, start + 50)))
            assert not any(view.state.opened for view in views)
            assert tables.cached() == 0
        assert tables.locks() == 0

    async def test_the_cache_keeps_the_most_recent_tables_only(
        self, events: EventStore, limited: RunningDealer
    ) -> None:
        """Past its bound the cache drops the least recently used table, whose view is
        folded again (the same) when next asked for."""
        opened = [await open_table(events, limited) for _ in range(5)]
        tables = PublicTables(events, event_from_envelope, max_tables=3)
        first = await tables.view(opened[0].table_id)
        for table in opened[1:]:
            await tables.view(table.table_id)
            assert tables.cached() <= 3
        assert tables.cached() == 3
        again = await tables.view(opened[0].table_id)
        assert again is not first and again.state == first.state
        assert tables.cached() == 3 and tables.locks() == 0
