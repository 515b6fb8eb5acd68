"""The tournament app's two write paths over a real Redis: the process manager's append
carries its lease's epoch and is refused ``not_owner`` once another replica holds the
tournament (nothing written); a caller's command carries the owner's current epoch, and one
that races a takeover (the epoch read, then moved before its append) is decided again and
appended exactly once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import tournament.app
from stud.v1 import tournament_pb2 as pb
from studkit import keys
from studkit.ownership import Ownership, Replica
from studkit.redis_client import Client, connect
from studkit.store import NotOwner
from tournament import commands as c
from tournament.app import TournamentApp, tournament_store
from tournament.codec import config_from_proto

pytestmark = pytest.mark.integration

SNG = config_from_proto(pb.TournamentConfig(
    name="sng", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=100, fee=10, seats=3,
    structure=pb.TournamentStructure(preset="turbo")))


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[Client]:
    redis = connect(redis_url)
    yield redis
    await redis.aclose()


def owners(client: Client, replica_id: str) -> Ownership:
    return Ownership(client, Replica(replica_id, ""), lease_ms=60_000,
                     owner_key=keys.tournament_owner,
                     replicas_key=keys.tournament_replicas())


async def test_a_former_owners_append_is_refused_and_a_callers_is_not(client: Client) -> None:
    app = TournamentApp(tournament_store(client))
    await app.execute("f1", c.Create("f1", SNG), "create")  # no owner record yet
    first = await owners(client, "a").acquire("f1")
    await app.execute("f1", c.Register("ann"), "r-ann")  # a caller: the owner's epoch
    assert (await app.load("f1")).version == 2
    await owners(client, "a").release("f1", first.epoch)
    second = await owners(client, "b").acquire("f1")
    assert second.epoch == first.epoch + 1
    with pytest.raises(NotOwner):
        await app.execute("f1", c.Register("bob"), "r-bob", epoch=first.epoch)
    assert await app.store.version("f1") == 2
    assert await app.store.recorded("f1", "r-bob") is None
    out = await app.execute("f1", c.Register("bob"), "r-bob", epoch=second.epoch)
    assert out.version == 3 and not out.duplicate


async def test_a_callers_command_that_races_a_takeover_is_appended_once(
        client: Client) -> None:
    app = TournamentApp(tournament_store(client))
    await app.execute("f2", c.Create("f2", SNG), "create")
    first = await owners(client, "a").acquire("f2")
    store = app.store
    read = store.owner_epoch
    reads: list[int | None] = []

    async def stale_once(tournament_id: str) -> int | None:
        """The first read sees the owner before a takeover that lands before the append."""
        if not reads:
            reads.append(first.epoch)
            await owners(client, "a").release(tournament_id, first.epoch)
            await owners(client, "b").acquire(tournament_id)
            return first.epoch
        reads.append(await read(tournament_id))
        return reads[-1]

    store.owner_epoch = stale_once  # type: ignore[method-assign]
    out = await app.execute("f2", c.Register("ann"), "r-ann")
    assert reads == [first.epoch, first.epoch + 1]  # refused once, decided again
    assert out.version == 2 and not out.duplicate
    again = await app.execute("f2", c.Register("ann"), "r-ann")  # the caller's retry
    assert again.duplicate and again.version == 2
    t = await app.load("f2")
    assert [e.player_id for e in t.field()] == ["ann"]


async def test_a_process_keeps_a_bounded_number_of_tournaments(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that runs for months reads every tournament of those months: it keeps
    ``STATES_KEPT`` folded (one here) and folds one it let go again from its stream, the
    same state. A command whose tournament is let go while it is under way, and that loses
    a race to another writer meanwhile, is decided again on the state folded again."""
    monkeypatch.setattr(tournament.app, "STATES_KEPT", 1)
    app = TournamentApp(tournament_store(client))
    for tid in ("k1", "k2"):
        await app.execute(tid, c.Create(tid, SNG), f"create-{tid}")
        await app.execute(tid, c.Register("ann"), f"r-ann-{tid}")
    assert list(app._states) == ["k2"]
    other = TournamentApp(tournament_store(client))
    assert await app.load("k1") == await other.load("k1")
    assert list(app._states) == ["k1"]
    read = app.store.owner_epoch
    raced: list[str] = []

    async def let_go_and_race(tournament_id: str) -> int | None:
        if not raced:  # the first attempt: k1 let go, and another writer appends first
            raced.append(tournament_id)
            await app.load("k2")
            assert "k1" not in app._states
            await other.execute("k1", c.Register("cat"), "r-cat-k1")
        return await read(tournament_id)

    app.store.owner_epoch = let_go_and_race  # type: ignore[method-assign]
    out = await app.execute("k1", c.Register("bob"), "r-bob-k1")
    assert raced == ["k1"] and out.version == 4 and not out.duplicate
    assert list(app._states) == ["k1"]
    fresh = TournamentApp(tournament_store(client))
    assert await app.load("k1") == await fresh.load("k1")
    assert {e.player_id for e in (await fresh.load("k1")).entries.values()} == {
        "ann", "bob", "cat"}
