"""The order of a table's first append (issue 29): the store adds the table to the index set
(``SADD``, outside the script: the index has no table hash tag) BEFORE the append script
writes its first events, so a crash between the two steps leaves at most an indexed table
without events, never events of a table the index does not list. Readers find tables only
through the index (:meth:`EventStore.table_ids`: the table service's replicas, the archiver,
``stud replay``, the tournament service), so an unindexed stream would never be driven,
archived or replayed; an indexed table without events reads as empty and is created by the
retry.

Each crash point is made on a real Redis by an ACL user that may not run the step: the
store's append fails there, as a process killed between its two round trips would leave
Redis, and the test looks at what exists."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
from redis.exceptions import NoPermissionError

from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.redis_client import Client, connect, is_cluster
from studkit.store import EventStore

pytestmark = pytest.mark.integration

STEPS = {
    "index": ("-sadd",),
    "script": ("-evalsha", "-eval", "-script"),
}
"""The two steps of a table's first append, and the commands an ACL user lacks to fail there
(the crash point is just before that step)."""


def envelopes(n: int) -> list[EventEnvelope]:
    return [EventEnvelope(event_type=f"E{i}", schema_version=1, hand_number=1)
            for i in range(n)]


@pytest.fixture
async def admin(redis_url: str) -> AsyncIterator[Client]:
    client = connect(redis_url)
    yield client
    await client.aclose()


async def acl(admin: Client, *args: str) -> None:
    if is_cluster(admin):
        await admin.execute_command("ACL", *args, target_nodes=admin.ALL_NODES)  # type: ignore[call-arg]
    else:
        await admin.execute_command("ACL", *args)


@pytest.fixture
async def crashing(admin: Client, redis_url: str) -> AsyncIterator[dict[str, EventStore]]:
    """A store per step, logged in as a user refused that step's commands."""
    if is_cluster(admin):
        pytest.skip("the crash points are users refused one command, made with ACL SETUSER, "
                    "which the cluster client cannot send to every node here; the order is "
                    "the store's, the same on a cluster")
    stores: dict[str, EventStore] = {}
    users = []
    for step, denied in STEPS.items():
        user, password = f"crash-{step}-{secrets.token_hex(4)}", secrets.token_hex(16)
        await acl(admin, "SETUSER", user, "on", f">{password}", "~*", "+@all", *denied)
        users.append(user)
        scheme, rest = redis_url.split("://", 1)
        stores[step] = EventStore(connect(f"{scheme}://{user}:{password}@"
                                          f"{rest.rsplit('@', 1)[-1]}"))
    yield stores
    for store in stores.values():
        await store.client.aclose()
    await acl(admin, "DELUSER", *users)


async def state(admin: Client, table_id: str) -> tuple[bool, int]:
    """(the table is in the index, its stream's length)."""
    indexed = bool(await admin.sismember(keys.table_index(), table_id))  # type: ignore[misc]
    return indexed, int(await admin.xlen(keys.table_stream(table_id)))


async def test_a_crash_before_the_index_leaves_nothing(
        admin: Client, crashing: dict[str, EventStore]) -> None:
    """Killed before the first step: nothing of the table exists, neither index entry nor
    events (with the script first, its events would be stored and the table unindexed)."""
    with pytest.raises(NoPermissionError):
        await crashing["index"].append("t1", envelopes(3), 0, command_id="open")
    assert await state(admin, "t1") == (False, 0)
    assert await EventStore(admin).table_ids() == []


async def test_a_crash_between_index_and_script_leaves_an_indexed_empty_table(
        admin: Client, crashing: dict[str, EventStore]) -> None:
    """Killed between the steps: the table is indexed and has no events; readers list it
    and read it as empty (version 0, no events); the command's retry appends its events
    once, and the index lists the table once."""
    with pytest.raises(NoPermissionError):
        await crashing["script"].append("t1", envelopes(3), 0, command_id="open")
    assert await state(admin, "t1") == (True, 0)
    store = EventStore(admin)
    assert await store.table_ids() == ["t1"]
    assert await store.version("t1") == 0
    assert await store.read("t1") == []
    retry = await store.append("t1", envelopes(3), 0, command_id="open")
    assert (retry.version, retry.duplicate) == (3, False)
    assert await state(admin, "t1") == (True, 3)
    assert await store.table_ids() == ["t1"]


async def test_every_crash_point_keeps_every_stream_indexed(
        admin: Client, crashing: dict[str, EventStore]) -> None:
    """Whatever step a first append dies at, and after the full append, every table with
    events is in the index (the invariant the readers rely on); later appends to a table
    (no index step) never leave it unindexed either."""
    store = EventStore(admin)
    for n, step in enumerate((*STEPS, "none")):
        table_id = f"t{n}"
        if step == "none":
            await store.append(table_id, envelopes(2), 0, command_id="open")
            await store.append(table_id, envelopes(1), 2, command_id="next")
        else:
            with pytest.raises(NoPermissionError):
                await crashing[step].append(table_id, envelopes(2), 0, command_id="open")
        indexed, length = await state(admin, table_id)
        assert indexed or length == 0, (step, indexed, length)
