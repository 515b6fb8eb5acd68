"""A session time limit on a real Redis (issue 34): a session is the player's play (buy-ins
and settled hands) with no gap of 30 minutes; once it has lasted the player's limit, the
settlement names their seat for the table to stand up (reason ``session_limit``) and a buy-in
is refused ``session_limit``. The clock is data: the app-level tests move a simulated clock,
the gRPC ones record a session that started long ago."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest

from stud.v1 import wallet_pb2 as pb
from studkit.auth import Principal, Role
from studkit.errors import ServiceError
from studkit.grpc_server import rpc_error_info, rpc_error_reason
from studtest.redis import TestRedis
from studtest.wallet import OPERATOR, RunningWallet, player
from wallet.app import WalletApp
from wallet.model import Applied, BuyIn, Deposit, SeatResult, SettleHand
from wallet.protection import (
    COOLING_OFF_MS,
    SESSION_GAP_MS,
    Session,
    SetSessionLimit,
    session_to_text,
)
from wallet.protection_app import ProtectionApp
from wallet.protection_store import SESSIONS, ProtectionStore
from wallet.store import BALANCES, WalletStore, usage_key

from .conftest import wallet_url

pytestmark = pytest.mark.integration

T0 = 1_800_000_000_000
MINUTE = 60_000
ALICE = Principal(Role.PLAYER, "alice")
TABLE = Principal(Role.SERVICE, "table")


class Clocked:
    """The wallet's use cases on a real Redis with a clock the test moves."""

    def __init__(self, store: WalletStore) -> None:
        self.now = T0
        self.tick = 0
        """How far each read of the clock moves it (0: it stands still)."""
        self.store = store
        self.hands = 0
        self.app = WalletApp(store, clock_ms=self.clock)
        self.protection = ProtectionApp(ProtectionStore(store.client), clock_ms=self.clock)

    def clock(self) -> int:
        now = self.now
        self.now += self.tick
        return now

    async def settle(self) -> dict[str, str]:
        """A hand of alice's (seat 1) settled as the table settles it: her session goes on,
        or starts, in the settlement's script; who it says to stand up, and why."""
        self.hands += 1
        applied = await self.app.settle_hand(TABLE, SettleHand(
            table_id="t1", hand_id=f"h{self.hands}",
            results=(SeatResult(seat=1, player_id="alice", amount_in=0, amount_won=0),)))
        return dict(applied.stood_up)

    async def buy_in(self, key: str, amount: int = 100) -> Applied:
        """A buy-in as the server's BuyIn makes it (the session checked and recorded by the
        buy-in's script)."""
        return await self.app.buy_in(TABLE, BuyIn(player_id="alice", table_id="t1", seat=1,
                                                  amount=amount, idempotency_key=key))


@pytest.fixture
async def clocked(redis_server: TestRedis, redis_url: str) -> AsyncIterator[Clocked]:
    store = WalletStore.from_url(wallet_url(redis_server, redis_url))
    await store.create_account("alice", T0)
    clocked = Clocked(store)
    await clocked.app.deposit(Principal(Role.OPERATOR, "ops"), Deposit(
        player_id="alice", amount=10_000, idempotency_key="d1"))
    yield clocked
    await store.close()


async def test_a_session_past_its_limit_deals_no_new_hand_and_takes_no_buy_in(
        clocked: Clocked) -> None:
    """A 60-minute limit: hands settled every 10 minutes from the buy-in keep the session
    going and the player in; the first settlement at 60 minutes says session_limit; a buy-in
    then (a top-up, another table) is refused, a retry of one applied before is not; 30
    minutes away from every table start a new session, and the player may buy in again."""
    await clocked.protection.set_session_limit(ALICE, SetSessionLimit(player_id="alice",
                                                                      minutes=60))
    await clocked.buy_in("b1")
    said = []
    for _ in range(6):
        clocked.now += 10 * MINUTE
        said.append(await clocked.settle())
    assert said == [{}] * 5 + [{"alice": "session_limit"}]
    with pytest.raises(ServiceError) as refused:
        await clocked.buy_in("b2")
    assert refused.value.reason == "session_limit"
    assert refused.value.error_metadata == {"session_started_ms": str(T0),
                                            "ended_ms": str(T0 + 60 * MINUTE)}
    await clocked.buy_in("b1")  # the retry of an applied buy-in is answered as applied
    clocked.now += SESSION_GAP_MS - 1
    with pytest.raises(ServiceError):
        await clocked.buy_in("b3")
    clocked.now += 1
    await clocked.buy_in("b3")
    view = await clocked.protection.read(ALICE, "alice")
    assert view.session_started_ms == clocked.now


async def test_concurrent_buy_ins_as_the_limit_passes_none_is_applied_after_it(
        clocked: Clocked) -> None:
    """Twenty buy-ins at once while the session (a hand every 10 minutes) reaches its
    60-minute limit (each read of the clock moves it 1 ms, from 10 ms before the limit): the
    check and the money move are one script, so every buy-in applied moved its money before
    the limit (its usage entry's time) and every later one is refused session_limit with the
    session's times; a retry of an applied one, after the limit, is answered as a replay and
    moves nothing."""
    await clocked.protection.set_session_limit(ALICE, SetSessionLimit(player_id="alice",
                                                                      minutes=60))
    await clocked.buy_in("b0")
    for _ in range(5):  # a hand settled every 10 minutes: the session goes on
        clocked.now += 10 * MINUTE
        assert await clocked.settle() == {}
    ends = T0 + 60 * MINUTE
    clocked.now, clocked.tick = ends - 10, 1
    keys = [f"c{i}" for i in range(20)]
    outcomes = await asyncio.gather(*(clocked.buy_in(key, 10) for key in keys),
                                    return_exceptions=True)
    clocked.tick = 0
    applied = [key for key, o in zip(keys, outcomes, strict=True) if isinstance(o, Applied)]
    refused = [o for o in outcomes if not isinstance(o, Applied)]
    assert applied and refused
    for error in refused:
        assert isinstance(error, ServiceError) and error.reason == "session_limit", error
        assert error.error_metadata == {"session_started_ms": str(T0), "ended_ms": str(ends)}
    moves = [text.split(":") for text in  # at:deposit:wager:loss; the buy-ins wager
             await clocked.store.client.lrange(usage_key("alice"), 0, -1)]
    moves = [move for move in moves if move[2] != "0"]
    assert len(moves) == 1 + len(applied)
    assert all(int(at) < ends for at, *_ in moves), moves
    balance = await clocked.store.client.hget(BALANCES, "player:alice")
    for key in applied:
        assert (await clocked.buy_in(key, 10)).replayed
    assert await clocked.store.client.hget(BALANCES, "player:alice") == balance
    assert len(await clocked.store.client.lrange(usage_key("alice"), 0, -1)) == len(moves) + 1


async def test_a_sitting_out_player_starts_a_new_session_after_the_gap(
        clocked: Clocked) -> None:
    """Dealt no hand for 30 minutes (away from every table), the next settled hand starts a
    new session: the 60 minutes count from there."""
    await clocked.protection.set_session_limit(ALICE, SetSessionLimit(player_id="alice",
                                                                      minutes=60))
    await clocked.buy_in("b1")
    clocked.now += 50 * MINUTE
    assert await clocked.settle() == {}
    clocked.now += SESSION_GAP_MS
    assert await clocked.settle() == {}  # a new session at 80 minutes
    said = []
    for step in (10, 10, 10, 10, 10, 9, 1):
        clocked.now += step * MINUTE
        said.append(await clocked.settle())
    assert said == [{}] * 6 + [{"alice": "session_limit"}]


async def test_a_longer_session_limit_waits_its_cooling_off(clocked: Clocked) -> None:
    """Lowered at once, raised (or removed) only 24 hours later: a player past a 30-minute
    limit who asks for 120 is still stood up until the raise applies."""
    protection = clocked.protection
    await protection.set_session_limit(ALICE, SetSessionLimit(player_id="alice", minutes=60))
    view = await protection.set_session_limit(ALICE, SetSessionLimit(player_id="alice",
                                                                     minutes=30))
    assert view.state.session_limit is not None
    assert view.state.session_limit.in_force(clocked.now) == 30
    await clocked.buy_in("b1")
    clocked.now += 20 * MINUTE
    assert await clocked.settle() == {}
    clocked.now += 10 * MINUTE
    await protection.set_session_limit(ALICE, SetSessionLimit(player_id="alice", minutes=120))
    assert await clocked.settle() == {"alice": "session_limit"}
    view = await protection.read(ALICE, "alice")
    assert view.state.session_limit is not None
    assert (view.state.session_limit.pending, view.state.session_limit.effective_ms) == (
        120, T0 + 30 * MINUTE + COOLING_OFF_MS)
    await protection.set_session_limit(ALICE, SetSessionLimit(player_id="alice", minutes=0))
    assert await clocked.settle() == {"alice": "session_limit"}


# --- over gRPC --------------------------------------------------------------------------------


def _md(wallet: RunningWallet, who: Principal) -> Any:
    return wallet.client.metadata(who)


async def _session_limit(wallet: RunningWallet, name: str, minutes: int,
                         who: Principal | None = None) -> pb.ProtectionResponse:
    reply: pb.ProtectionResponse = await wallet.client.stub.SetSessionLimit(
        pb.SetSessionLimitRequest(player_id=name, minutes=minutes),
        metadata=_md(wallet, who or player(name)), timeout=10)
    return reply


async def test_the_settlement_names_the_seat_with_its_reason_and_a_sit_down_is_refused(
        wallet: RunningWallet, redis_url: str) -> None:
    """Over gRPC: bob's session (recorded as started 61 minutes ago, seen a minute ago) is
    past his 60-minute limit: the settlement settles the hand, names his seat with
    session_limit (alice's, self-excluded, with self_excluded), and his buy-in at another
    table is FAILED_PRECONDITION session_limit with when the session started."""
    client = wallet.client
    for name, seat in (("alice", 1), ("bob", 2), ("carol", 3)):
        await client.create_account(name)
        await client.deposit(name, 1_000, f"d-{name}")
        await client.buy_in(name, "t1", seat, 500, f"b-{name}")
    reply = await _session_limit(wallet, "bob", 60)
    assert reply.session_limit_minutes == 60 and reply.session_started_ms > 0
    now = time.time_ns() // 1_000_000
    started = now - 61 * MINUTE
    await wallet.deps.store.client.hset(SESSIONS, "bob",
                                        session_to_text(Session(started, now - MINUTE)))
    await client.stub.SelfExclude(
        pb.SelfExcludeRequest(player_id="alice", period=pb.EXCLUSION_PERIOD_DAY),
        metadata=_md(wallet, player("alice")), timeout=10)
    settled = await client.settle(pb.SettleHandRequest(
        table_id="t1", hand_id="h1",
        seats=[pb.SettlementSeat(seat=s, player_id=n, amount_in=100, amount_won=w)
               for s, n, w in ((1, "alice", 0), (2, "bob", 300), (3, "carol", 0))],
        ended_on_street=pb.SettleHandRequest.STREET_FIFTH))
    assert sorted(settled.excluded_seats) == [1, 2]
    assert dict(settled.excluded_reasons) == {1: "self_excluded", 2: "session_limit"}
    assert await client.escrows("t1") == {1: 400, 2: 700, 3: 400}
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.buy_in("bob", "t2", 1, 100, "b-bob-2")
    error = caught.value
    info = rpc_error_info(error)
    assert (error.code(), rpc_error_reason(error)) == (grpc.StatusCode.FAILED_PRECONDITION,
                                                       "session_limit")
    assert info is not None and info.metadata["session_started_ms"] == str(started)
    await client.buy_in("carol", "t2", 1, 100, "b-carol-2")


@pytest.mark.parametrize("who,minutes,code,reason", [
    ("mallory", 30, "PERMISSION_DENIED", "permission_denied"),
    ("ops", 30, "PERMISSION_DENIED", "permission_denied"),
    ("table", 30, "PERMISSION_DENIED", "permission_denied"),
    ("alice", -1, "INVALID_ARGUMENT", "bad_request"),
    ("alice", 1441, "INVALID_ARGUMENT", "bad_request"),
    ("alice", 2**31 - 1, "INVALID_ARGUMENT", "bad_request"),
    ("alice", -(2**31), "INVALID_ARGUMENT", "bad_request"),
])
async def test_a_session_limit_is_the_players_own_and_in_range(
        wallet: RunningWallet, snapshot: Callable[[], Awaitable[dict[str, Any]]], who: str,
        minutes: int, code: str, reason: str) -> None:
    """Another player's account, an operator or a service, a negative or huge number of
    minutes: each its status and reason, and nothing changes."""
    for name in ("alice", "mallory"):
        await wallet.client.create_account(name)
    await _session_limit(wallet, "alice", 60)
    before = await snapshot()
    principal = {"ops": OPERATOR, "table": TABLE}.get(who) or player(who)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _session_limit(wallet, "alice", minutes, principal)
    assert (caught.value.code().name, rpc_error_reason(caught.value)) == (code, reason)
    assert await snapshot() == before
