"""Ownership rounds that scale (issue 17, F2): one replica holding 1,000 tables renews every
lease each round in one pipeline of batched scripts, on the table service's pool of 100
connections, while player commands use the same pool. No round fails, no lease lapses (a
rival replica trying to take every table each round never gets one), and a lease held at
another epoch is reported lost. On a real Redis (a Redis Cluster under ``make test-cluster``:
the scripts are then grouped by slot)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from studkit import keys
from studkit.ownership import Lease, Ownership, Replica
from studkit.redis_client import Client, connect
from studtest.redis import TestRedis

pytestmark = pytest.mark.integration

TABLES = 1_000
ROUNDS = 6
LEASE_MS = 3_000
"""The service's default (``TABLE_LEASE_MS``); a round runs every third of it, as the
table service's keeper does."""
POOL = 100
"""The table service's Redis pool (redis-py's default ``max_connections``)."""
PLAYER_CALLS = 60
"""Player commands in flight during each renewal, on the same pool."""


def table_url(redis_server: TestRedis, admin_url: str) -> str:
    """The table service's ACL user when this session runs the server, else the admin URL."""
    return redis_server.server.url_for("table") if redis_server.server else admin_url


@pytest.fixture
async def client(redis_server: TestRedis, redis_url: str) -> AsyncIterator[Client]:
    """A client as the table service opens it, with its pool of :data:`POOL` connections."""
    client = connect(table_url(redis_server, redis_url), max_connections=POOL,
                     socket_timeout=10)
    yield client
    await client.aclose()


async def remaining_ms(client: Client, table_ids: list[str]) -> list[int]:
    """Each table's lease time left by Redis's clock (negative: lapsed)."""
    pipe = client.pipeline(transaction=False)
    for table_id in table_ids:
        pipe.hget(keys.table_owner(table_id), "expires")
    expires = await pipe.execute()
    seconds, micros = await client.time()
    now = int(seconds) * 1000 + int(micros) // 1000
    return [int(e) - now for e in expires]


async def test_a_thousand_tables_renew_every_round_and_none_lapses(client: Client) -> None:
    """The issue's case past its threshold (112 tables already failed 9 rounds in 10): 1,000
    tables, every round renewed in full while 60 player commands share the pool; a rival
    replica asking for every table after each round finds each one held."""
    ids = [f"t{i}" for i in range(TABLES)]
    me = Ownership(client, Replica("r1", "127.0.0.1:1"), lease_ms=LEASE_MS)
    rival = Ownership(client, Replica("r2", "127.0.0.1:2"), lease_ms=LEASE_MS)
    taken = await me.acquire_many(ids)
    assert {t: lease.status for t, lease in taken.items()} == dict.fromkeys(ids, "acquired")
    epochs = {t: lease.epoch for t, lease in taken.items()}

    async def player_command(i: int) -> bool:
        return await client.hget(keys.table_owner(ids[i]), "replica") == b"r1"

    for _ in range(ROUNDS):
        await asyncio.sleep(LEASE_MS / 3000)
        renewed, *answers = await asyncio.gather(
            me.renew_many(epochs), *(player_command(i) for i in range(PLAYER_CALLS)))
        assert Counter(lease.status for lease in renewed.values()) == {"renewed": TABLES}
        assert set(renewed) == set(ids)
        assert {lease.epoch for t, lease in renewed.items() if lease.epoch != epochs[t]} == set()
        assert all(answers)
        assert min(await remaining_ms(client, ids)) > 0
        tried = await rival.acquire_many(ids)
        assert Counter(lease.status for lease in tried.values()) == {"held": TABLES}
    # Nothing changed hands: every owner record still names r1 at its first epoch.
    assert await me.renew_many(epochs) == {
        t: Lease("renewed", epochs[t], "r1", LEASE_MS) for t in ids}


async def test_a_lease_held_at_another_epoch_is_reported_lost(client: Client) -> None:
    """Renewing at a stale epoch (this replica took the table again since), after another
    replica took it over, or after the record vanished is ``lost`` (not ok) with the
    current epoch and owner, and renews nothing; a release at a stale epoch changes
    nothing either. The other leases of the round are renewed."""
    me = Ownership(client, Replica("r1", "127.0.0.1:1"), lease_ms=LEASE_MS)
    rival = Ownership(client, Replica("r2", "127.0.0.1:2"), lease_ms=LEASE_MS)
    first = await me.acquire_many(["kept", "again", "taken", "gone"])
    epochs = {t: lease.epoch for t, lease in first.items()}
    again = await me.acquire("again")  # a new incarnation of this replica: a new epoch
    assert again.epoch == epochs["again"] + 1
    await me.release("taken", epochs["taken"])
    stolen = await rival.acquire("taken")
    assert stolen.status == "acquired"
    await client.delete(keys.table_owner("gone"))

    leases = await me.renew_many(epochs)
    assert leases["kept"].ok and leases["kept"].status == "renewed"
    lost = {t: (lease.status, lease.ok, lease.epoch, lease.owner)
            for t, lease in leases.items() if t != "kept"}
    assert lost == {"again": ("lost", False, again.epoch, "r1"),
                    "taken": ("lost", False, stolen.epoch, "r2"),
                    "gone": ("lost", False, 0, "")}
    # The stale renewal renewed nothing; a stale release releases nothing.
    assert (await rival.renew("taken", stolen.epoch)).ok
    released = await me.release_many({"taken": epochs["taken"]})
    assert released["taken"].status == "lost"
    assert await me.owner("taken") == ("r2", stolen.epoch)
    assert await me.renew_many({}) == {}


async def test_batches_are_bounded(client: Client) -> None:
    """A round is split into scripts of at most ``batch`` leases (each in one slot on a
    cluster), every table exactly once; small batches renew as well as large ones."""
    ids = [f"b{i}" for i in range(250)]
    me = Ownership(client, Replica("r1", "127.0.0.1:1"), lease_ms=LEASE_MS, batch=7)
    batches = me.batches(ids)
    assert all(1 <= len(batch) <= 7 for batch in batches)
    assert sorted(t for batch in batches for t in batch) == sorted(ids)
    taken = await me.acquire_many(ids)
    renewed = await me.renew_many({t: lease.epoch for t, lease in taken.items()})
    assert Counter(lease.status for lease in renewed.values()) == {"renewed": len(ids)}
    with pytest.raises(ValueError):
        Ownership(client, Replica("r1", "127.0.0.1:1"), batch=0)


async def test_a_round_after_redis_lost_its_scripts(client: Client, redis_url: str) -> None:
    """A Redis that restarted (or flushed its scripts) answers NOSCRIPT: the round loads the
    script and sends the batches again, and every lease is renewed once."""
    me = Ownership(client, Replica("r1", "127.0.0.1:1"), lease_ms=LEASE_MS, batch=50)
    taken = await me.acquire_many([f"s{i}" for i in range(1_200)])
    admin = connect(redis_url)
    try:
        await admin.script_flush()
    finally:
        await admin.aclose()
    renewed = await me.renew_many({t: lease.epoch for t, lease in taken.items()})
    assert Counter(lease.status for lease in renewed.values()) == {"renewed": 1_200}
    assert {lease.epoch for lease in renewed.values()} == {1}
