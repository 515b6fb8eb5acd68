"""The SDK rides out what a real network and server do: its live view resumes after the
server cuts a too-slow watcher off (RESOURCE_EXHAUSTED), after the table service goes away and
comes back, and after its token expires (with a fresh one); a command sent while the server
is down is retried with the same command id and applied once; every refusal is a typed
exception carrying the server's reason."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from studclient import (
    AlreadyExists,
    Client,
    InsufficientFunds,
    NotFound,
    NotYourTurn,
    PermissionDenied,
    RetryPolicy,
    Stale,
    StudError,
    TableWatch,
    Unauthenticated,
)
from studkit.auth import Principal
from studkit.mapping import is_room_event
from studkit.store import StoredEvent
from studtest.redis import TestRedis
from studtest.table import (
    OPERATOR,
    Room,
    fast_settings,
    play_until,
    player,
    running_room,
    running_table,
    table_settings,
)
from studtools.devkeys import DevKeys
from studtools.redis_server import free_port

ClientFor = Callable[[Principal], Client]
Connect = Callable[..., Client]

pytestmark = pytest.mark.integration
DEPOSIT = 1_000_000


class Recorder(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Observes every attempt of a unary call: (method, command id)."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, str]] = []

    async def intercept_unary_unary(self, continuation: Any, details: Any,
                                    request: Any) -> Any:
        method = details.method.decode() if isinstance(details.method, bytes) \
            else details.method
        self.attempts.append((method.rsplit("/", 1)[-1], getattr(request, "command_id", "")))
        return await continuation(details, request)


def game_stored(stored: list[StoredEvent]) -> list[StoredEvent]:
    return [s for s in stored if not is_room_event(s.envelope)]


async def caught_up(watch: TableWatch, version: int) -> None:
    """Wait until the watch's event feed has delivered ``version``."""
    async with asyncio.timeout(20):
        while watch.last_sequence < version:
            await asyncio.sleep(0.02)


async def fund(ops: Client, *names: str) -> None:
    for name in names:
        await ops.create_account(name)
        await ops.deposit(name, DEPOSIT)


async def test_watch_resumes_after_the_server_cuts_a_slow_watcher_off(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        connector: Connect) -> None:
    """A watcher allowed only two events of backlog is cut off (RESOURCE_EXHAUSTED) at the
    first multi-event append; the watch resumes from its last sequence each time, delivers
    every event exactly once and in order, and ends on the table's latest view."""
    async with running_room(redis_server, redis_url, dev_keys, watch_buffer=2) as room:
        ops = connector(room, OPERATOR)
        zed = connector(room, player("zed"))
        table_id = await ops.open_table(settings=fast_settings())
        seen: list[int] = []
        watch = zed.watch(table_id)
        watch.on_event = lambda record: seen.append(record.sequence)
        async with watch:
            await fund(ops, "ann", "bob")
            for seat, name in ((1, "ann"), (2, "bob")):
                async with connector(room, player(name)) as client:
                    await client.sit(table_id, seat, 10_000)
            await play_until(room.client, table_id, 2, random.Random(3).choice)
            final = await ops.get_table(table_id)
            view = await watch.wait_for(lambda v: v.version >= final.version, timeout=20)
            await caught_up(watch, final.version)
        assert watch.resumes >= 1
        # Every game event once, in order (the room's own events are not sent).
        stored = await room.table_deps.events.read(table_id)
        game = [s.envelope.sequence for s in game_stored(stored)]
        assert seen == [n for n in game if seen[0] <= n <= seen[-1]]
        assert seen[-1] >= final.version
        assert view.hands_started >= 2
        await zed.close()
        await ops.close()


async def test_commands_are_retried_with_the_same_id_and_the_watch_survives_a_restart(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        connector: Connect) -> None:
    """The table service goes away: a SitDown sent meanwhile fails UNAVAILABLE and is sent
    again, with the same command id, until a new table service on the same address answers;
    it is applied once. A live view follows the new service without missing an event."""
    async with running_room(redis_server, redis_url, dev_keys) as room:
        await room.table_deps.app.stop()  # our own table services drive from here on
        port = free_port()
        settings = table_settings(redis_server, redis_url, dev_keys, room.dealer.port,
                                  room.wallet.port, addr=f"127.0.0.1:{port}")
        recorder = Recorder()
        ops = connector(room, OPERATOR, table_port=port)
        bob = connector(room, player("bob"), table_port=port, interceptors=[recorder],
                      retry=RetryPolicy(attempts=30, initial_backoff_s=0.05,
                                        max_backoff_s=0.2))
        ann = connector(room, player("ann"), table_port=port)
        seen: list[int] = []
        async with running_table(settings):
            table_id = await ops.open_table(settings=fast_settings())
            await fund(ops, "ann", "bob")
            await ann.sit(table_id, 1, 10_000)
            watch = ann.watch(table_id)
            watch.on_event = lambda record: seen.append(record.sequence)
            await watch.start()
        sitting = asyncio.create_task(bob.sit(table_id, 2, 10_000))
        await asyncio.sleep(0.6)
        assert not sitting.done()
        async with running_table(settings):
            reply = await asyncio.wait_for(sitting, 20)
            assert not reply.duplicate
            ids = {cid for method, cid in recorder.attempts if method == "SitDown"}
            tries = [cid for method, cid in recorder.attempts if method == "SitDown"]
            assert len(tries) >= 2 and len(ids) == 1
            view = await watch.wait_for(
                lambda v: len(v.seats) == 2 and v.HasField("hand"), timeout=20)
            assert watch.resumes >= 1
            # Applied once: bob paid one buy-in.
            assert await bob.balance() == DEPOSIT - 10_000
            # The same command id again is answered with the original outcome.
            again = await bob.sit(table_id, 2, 10_000, command_id=tries[0])
            assert again.duplicate
            assert await bob.balance() == DEPOSIT - 10_000
            final = await ops.get_table(table_id)
            await caught_up(watch, final.version)
            assert seen == list(range(seen[0], seen[-1] + 1))
            assert [s.player_id for s in view.seats] == ["ann", "bob"]
            await watch.close()
        for client in (ops, bob, ann):
            await client.close()


async def test_watch_resumes_with_a_fresh_token_when_its_token_expires(
        room: Room, connector: Connect) -> None:
    """Tokens that live two seconds: the table's and the dealer's streams end with
    UNAUTHENTICATED token_expired, and the watch resumes them with a fresh token from the
    provider; calls made later refresh the token too."""
    issuer = room.keys.issuer()
    minted: list[str] = []

    def provider() -> str:
        minted.append(issuer.issue(player("ann"), ttl_seconds=2))
        return minted[-1]

    tokens = room.client.tokens
    ops = connector(room, OPERATOR)
    ann = Client.connect(f"127.0.0.1:{room.table_port}", f"127.0.0.1:{room.dealer.port}",
                         f"127.0.0.1:{room.wallet.port}", provider)
    table_id = await ops.open_table(settings=fast_settings())
    await fund(ops, "ann", "bob")
    await ann.sit(table_id, 1, 10_000)
    async with ann.watch(table_id) as watch:
        await asyncio.sleep(2.5)
        async with Client.connect(f"127.0.0.1:{room.table_port}",
                                  token=lambda: tokens.token(player("bob"))) as bob:
            await bob.sit(table_id, 2, 10_000)
        view = await watch.wait_for(lambda v: v.HasField("hand") and any(
            d.HasField("card") for p in v.hand.players if p.seat == 1 for d in p.down),
            timeout=20)
        assert watch.resumes >= 1
        assert len(minted) >= 2
        assert [s.player_id for s in view.seats] == ["ann", "bob"]
    await ann.close()
    await ops.close()


async def test_refusals_are_typed_and_carry_the_reason(room: Room,
                                                       client_for: ClientFor) -> None:
    ops = client_for(OPERATOR)
    ann, bob = client_for(player("ann")), client_for(player("bob"))
    with pytest.raises(NotFound) as unknown:
        await ann.get_table("no-such-table")
    assert unknown.value.reason == "unknown_table"
    assert unknown.value.code is grpc.StatusCode.NOT_FOUND
    table_id = await ops.open_table(settings=fast_settings(buy_in_max=10 * DEPOSIT))
    with pytest.raises(AlreadyExists) as exists:
        await ops.open_table(table_id)
    assert exists.value.reason == "table_exists"
    await fund(ops, "ann", "bob")
    with pytest.raises(InsufficientFunds) as short:
        await ann.sit(table_id, 1, DEPOSIT + 1)
    assert short.value.reason == "insufficient_funds"
    with pytest.raises(PermissionDenied) as not_operator:
        await ann.open_table()
    assert not_operator.value.code is grpc.StatusCode.PERMISSION_DENIED
    await ann.sit(table_id, 1, 10_000)
    await bob.sit(table_id, 2, 10_000)
    view = await room.client.wait_for(table_id, lambda v: v.HasField("hand")
                                      and v.hand.phase == pb.HAND_PHASE_BETTING)
    to_act = view.hand.to_act
    idle = {1: bob, 2: ann}[to_act]
    with pytest.raises(NotYourTurn) as out_of_turn:
        await idle.bring_in(table_id, expected_sequence=None)
    assert out_of_turn.value.reason == "not_your_turn"
    actor = {1: ann, 2: bob}[to_act]
    with pytest.raises(Stale) as stale:
        await actor.bring_in(table_id, expected_sequence=view.version - 1)
    assert stale.value.reason == "stale"
    with pytest.raises(PermissionDenied) as other_seat:
        await idle.bring_in(table_id, seat=to_act)
    assert other_seat.value.reason == "not_your_seat"
    async with Client.connect(f"127.0.0.1:{room.table_port}", token="not-a-token") as bad:
        with pytest.raises(Unauthenticated) as no_token:
            await bad.list_tables()
    assert isinstance(no_token.value, StudError)
    assert no_token.value.code is grpc.StatusCode.UNAUTHENTICATED
    # With the client's own view (AUTO), the action goes through.
    await actor.get_table(table_id)
    reply = await actor.bring_in(table_id)
    assert reply.version > view.version
