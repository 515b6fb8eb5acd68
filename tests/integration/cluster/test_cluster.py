"""The project on a real three-master Redis Cluster (the short version ``make test`` runs;
``make test-cluster`` runs the whole integration and end-to-end suites on one).

The proof that every multi-key script stays in one slot: statically, every key a script is
called with for a table (built with :mod:`studkit.keys` for a few table ids) and every wallet
key hash to one slot; dynamically, every ``EVAL``/``EVALSHA`` the services send while a room
plays hands on the cluster is recorded, each call's keys hash to one slot, and every script
of the project was among them and succeeded (a cross-slot call fails with ``CROSSSLOT``).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import secrets
from collections.abc import AsyncIterator, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from stud.v1 import table_pb2 as pb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys, ownership
from studkit.ownership import Ownership, Replica
from studkit.redis_client import connect, is_cluster
from studkit.repository import snapshot_key
from studkit.store import EventStore, NotOwner, StreamConflict, TrimRefused, trimmed_key
from studtest.redis import RedisSource, TestRedis
from studtest.redis_cluster import LocalRedisCluster, slot_ranges
from studtest.table import OPERATOR, Room, act_once, play_until, player, running_room
from studtools.devkeys import DevKeys
from wallet import protection_store

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

ROOT = Path(__file__).resolve().parents[3]
TABLE_IDS = ("t1", "demo", "a.b-c_9", "x" * 64, "t4")
"""Over the three masters (slots 8943, 903, 5767, 4856, 12874)."""
DEPOSIT = 1_000_000


def _sha(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()


def _lua(package: str, name: str) -> str:
    return resources.files(package).joinpath(name).read_text("utf-8")


SCRIPTS = {
    _sha(_lua("studkit", "append.lua")): "append.lua",
    _sha(_lua("studkit", "trim.lua")): "trim.lua",
    _sha(ownership._LEASE_LUA): "ownership lease",
    _sha(ownership._HEARTBEAT_LUA): "ownership heartbeat",
    _sha(_lua("dealer", "create_hand.lua")): "create_hand.lua",
    _sha(_lua("dealer", "record_deal.lua")): "record_deal.lua",
    _sha(_lua("dealer", "seeds.lua")): "seeds.lua",
    _sha(_lua("wallet", "apply.lua")): "apply.lua",
    _sha(protection_store._APPEND): "protection append",
}
"""Every script the project runs on a cluster, by SHA-1 (what EVALSHA names)."""
ROOM_SCRIPTS = set(SCRIPTS.values()) - {"trim.lua", "protection append", "seeds.lua"}
"""The scripts a playing room runs (trim.lua runs only in the archiver, the protection append
when a player sets a limit or excludes themselves: its keys are the wallet's, one slot;
seeds.lua when players commit and open seeds, or a first street waits for an opening: the
hand's start and first street close and freeze the seeds in create_hand.lua and
record_deal.lua otherwise, issue 35; its two keys are the dealer's of one table)."""
Calls = list[tuple[str, tuple[bytes, ...]]]
PLAIN_REDIS_ONLY = {"services/wallet/store.py"}
"""Modules with inline scripts outside the appends: the wallet's adoption of its keys from the
layout before the hash tag (a single-Redis migration; skipped on a cluster) and its rebuild of
the sessions projection (the ledger and the sessions hash, both in the wallet's slot:
:func:`test_every_wallet_key_shares_one_slot`)."""


def slot(key: str | bytes) -> int:
    return key_slot(key.encode() if isinstance(key, str) else key)


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def redis_server(redis_server: TestRedis) -> Iterator[TestRedis]:
    """The session's Redis when it is a cluster (``make test-cluster``), else a three-master
    cluster of this module's own."""
    if redis_server.cluster:
        yield redis_server
        return
    passwords = {s: secrets.token_urlsafe(12) for s in ("table", "dealer", "wallet", "auditor")}
    with LocalRedisCluster(passwords=passwords) as cluster:
        yield TestRedis(url=cluster.url, source=RedisSource.CLUSTER, server=cluster)


@pytest.fixture(scope="module")
def script_calls() -> Iterator[Calls]:
    """Every EVAL/EVALSHA a cluster client sends in this module: (sha, keys)."""
    calls: Calls = []
    original = RedisCluster.execute_command

    async def recording(self: RedisCluster, *args: Any, **kwargs: Any) -> Any:
        name = str(args[0]).upper() if args else ""
        if name in ("EVAL", "EVALSHA"):
            script = str(args[1])
            sha = _sha(script) if name == "EVAL" else script
            numkeys = int(args[2])
            names = tuple(k if isinstance(k, bytes) else str(k).encode()
                          for k in args[3:3 + numkeys])
            calls.append((sha, names))
        return await original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RedisCluster, "execute_command", recording)
        yield calls


@pytest.fixture
async def room(script_calls: Calls, redis_server: TestRedis,
               redis_url: str, dev_keys: DevKeys) -> AsyncIterator[Room]:
    """A room on the cluster, its script calls recorded from the start."""
    async with running_room(redis_server, redis_url, dev_keys) as running:
        yield running


# --- static: the keys a script is called with share one slot -----------------------------------


@pytest.mark.parametrize("table_id", TABLE_IDS)
def test_every_key_of_a_table_shares_the_table_slot(table_id: str) -> None:
    """append.lua's five keys, trim.lua's four, the lease's owner key, the dealer's hand keys
    and the table service's side keys (intents, settings, summary) of one table: one slot."""
    tag = f"{{{table_id}}}"
    names = [keys.table_stream(table_id), keys.table_commands(table_id),
             keys.table_version(table_id), keys.table_owner(table_id),
             trimmed_key(table_id), snapshot_key(table_id),
             *(keys.dealer_key(table_id, f"hand:{n}") for n in (1, 2, 1000)),
             *(f"{keys.TABLE_PREFIX}{tag}:{s}" for s in ("intents", "settings", "summary"))]
    assert all(tag in name for name in names)
    assert {slot(name) for name in names} == {key_slot(table_id.encode())}


def test_every_wallet_key_shares_one_slot() -> None:
    """apply.lua's keys (ledger, balances, idempotency, accounts, a table's seats, last hand
    and each posting account's statement) carry the wallet's tag: one slot."""
    from wallet.model import HOUSE, player_account, seat_account
    from wallet.store import postings_key, seats_key

    names = [keys.wallet_key(s) for s in ("ledger", "balances", "idempotency", "accounts",
                                          "last_hand", "seats")]
    names += [seats_key(t) for t in TABLE_IDS]
    names += [postings_key(a) for a in (HOUSE, player_account("ann"), seat_account("t1", 3))]
    # the protection append's (a player's events, the projection, the accounts)
    from wallet.store import ACCOUNTS, PROTECTION, SESSIONS, usage_key
    names += [protection_store.protection_key("ann"), usage_key("ann"), PROTECTION, ACCOUNTS,
              SESSIONS]
    assert {slot(name) for name in names} == {slot(keys.wallet_key("ledger"))}


def test_every_script_of_the_project_is_covered() -> None:
    """Each .lua file is in :data:`SCRIPTS`, and each module with an inline script is known:
    a new script cannot escape the one-slot proof."""
    files = {str(p.relative_to(ROOT)) for base in ("libs", "services")
             for p in (ROOT / base).rglob("*.lua")}
    # read_table.lua runs on a single Redis only (dealer.store.TableReader: on a cluster the
    # dealer reads with the event store's MULTI); its keys are one table's, one slot.
    assert files == {"libs/studkit/append.lua", "libs/studkit/trim.lua",
                     "services/dealer/create_hand.lua", "services/dealer/read_table.lua",
                     "services/dealer/record_deal.lua", "services/dealer/seeds.lua",
                     "services/wallet/apply.lua"}
    inline = {str(p.relative_to(ROOT)) for base in ("libs", "services")
              for p in (ROOT / base).rglob("*.py") if "redis.call(" in p.read_text("utf-8")}
    assert inline == {"libs/studkit/ownership.py", "services/wallet/protection_store.py",
                      "libs/studhistory/tournament_archive.py", *PLAIN_REDIS_ONLY}


@pytest.mark.parametrize("tournament_id", ["sng-1", "mtt-2026-12", "t"])
def test_the_archived_tournament_trim_keys_share_one_slot(tournament_id: str) -> None:
    """The archiver's trim of a finished tournament (tournament_archive.TRIM_LUA) is called
    with every key of one tournament and the tombstone it leaves: all in the tournament's
    hash tag, one slot."""
    from studhistory import tournament_archive

    names = [keys.tournament_key(tournament_id, n)
             for n in (*tournament_archive.KEYS, tournament_archive.TOMBSTONE)]
    assert len(names) == 7
    assert {slot(name) for name in names} == {key_slot(tournament_id.encode())}


# --- on the cluster ------------------------------------------------------------------------------


def assert_one_slot_each(calls: Calls, expected: set[str]) -> None:
    """Each recorded call's keys hash to one slot, and the ``expected`` scripts all ran."""
    assert calls, "no script call was recorded"
    for sha, names in calls:
        assert len({slot(k) for k in names}) <= 1, (SCRIPTS.get(sha, sha), names)
    assert {SCRIPTS.get(sha, sha) for sha, _ in calls} >= expected


async def test_the_store_contract_holds_on_the_cluster(
        redis_server: TestRedis, redis_url: str, script_calls: Calls) -> None:
    """Appends to tables spread over the three masters: conditional, idempotent, fenced,
    trimmed after a snapshot; the index (a global key) lists them all."""
    start = len(script_calls)
    assert redis_server.server is not None
    client = connect(redis_server.server.url_for("table"))
    assert is_cluster(client)
    try:
        events = EventStore(client)
        owners = Ownership(client, Replica("r1", "127.0.0.1:1"), lease_ms=5_000)
        envelope = EventEnvelope(event_type="Probe", schema_version=1, hand_number=1)
        masters = {i for t in TABLE_IDS for i, r in enumerate(slot_ranges(3)) if slot(t) in r}
        assert len(masters) == 3, "the table ids should cover the three masters"
        for table_id in TABLE_IDS:
            first = await events.append(table_id, [envelope], 0, "c1")
            assert (first.version, first.duplicate) == (1, False)
            again = await events.append(table_id, [envelope], 0, "c1")
            assert again.duplicate
            with pytest.raises(StreamConflict):
                await events.append(table_id, [envelope], 0, "c2")
            lease = await owners.acquire(table_id)
            assert lease.ok
            with pytest.raises(NotOwner):
                await events.append(table_id, [envelope], 1, "c3", epoch=lease.epoch + 1)
            done = await events.append(table_id, [envelope, envelope], 1, "c3",
                                       epoch=lease.epoch)
            assert done.version == 3
            assert [e.envelope.sequence for e in await events.read(table_id)] == [1, 2, 3]
            with pytest.raises(TrimRefused):  # no snapshot yet: nothing removed
                await events.trim_head(table_id, 2, 0)
            await client.hset(snapshot_key(table_id), "version", "3")
            assert await events.trim_head(table_id, 2, 0) == 2
            assert [e.envelope.sequence for e in await events.read(table_id)] == [3]
            assert (await events.append(table_id, [envelope], 3, "c4", epoch=lease.epoch)
                    ).version == 4
        assert await events.table_ids() == sorted(TABLE_IDS)
        assert_one_slot_each(script_calls[start:],
                             {"append.lua", "trim.lua", "ownership lease"})
    finally:
        await client.aclose()


async def test_many_leases_renew_in_one_round_on_the_cluster(
        redis_server: TestRedis, redis_url: str) -> None:
    """An ownership round over 600 tables spread over the three masters: the batched
    scripts each stay in one slot (a cross-slot one would fail with CROSSSLOT), every lease
    is acquired and renewed, and a stale epoch is lost."""
    assert redis_server.server is not None
    client = connect(redis_server.server.url_for("table"))
    try:
        owners = Ownership(client, Replica("r1", "127.0.0.1:1"), lease_ms=5_000)
        ids = [f"many-{i}" for i in range(600)]
        batches = owners.batches(ids)
        assert all(len({slot(keys.table_owner(t)) for t in batch}) == 1 for batch in batches)
        assert len({i for t in ids for i, r in enumerate(slot_ranges(3)) if slot(t) in r}) == 3
        taken = await owners.acquire_many(ids)
        assert {lease.status for lease in taken.values()} == {"acquired"}
        epochs = {t: lease.epoch for t, lease in taken.items()}
        renewed = await owners.renew_many(epochs)
        assert set(renewed) == set(ids)
        assert {lease.status for lease in renewed.values()} == {"renewed"}
        stale = await owners.renew_many({ids[0]: epochs[ids[0]] - 1})
        assert not stale[ids[0]].ok
        released = await owners.release_many(epochs)
        assert {lease.status for lease in released.values()} == {"released"}
    finally:
        await client.aclose()


async def test_a_room_plays_and_settles_and_every_script_stays_in_one_slot(
        room: Room, script_calls: Calls) -> None:
    """Dealer, wallet and table over the cluster: hands are dealt, played and settled, the
    money adds up; every script call the services sent hashed to one slot and succeeded,
    and every script of the project ran."""
    table_id = await room.client.open_table()
    names = {1: "ann", 3: "bob", 5: "cat"}
    for seat, name in names.items():
        await room.fund(name, DEPOSIT)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=10_000), player(name))
    await play_until(room.client, table_id, 3, random.Random(7).choice)
    await room.client.call("CloseTable", pb.CloseTableRequest(table_id=table_id), OPERATOR)
    rng = random.Random(3)
    async with asyncio.timeout(30):
        while (view := await room.client.view(table_id)).seats:
            if not await act_once(room.client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)
    assert view.status == pb.TABLE_STATUS_CLOSED
    assert await room.wallet.client.paid_out(table_id) == {}
    balances = [await room.wallet.client.player_balance(n) for n in names.values()]
    assert sum(balances) == DEPOSIT * len(names)

    assert_one_slot_each(script_calls, ROOM_SCRIPTS)
