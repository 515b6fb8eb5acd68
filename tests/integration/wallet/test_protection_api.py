"""Player protection on a real Redis (issue 34): limits and exclusions enforced by apply.lua
with the money move, on a simulated clock (a raise waits 24 hours of data, not of sleep),
under races, agreeing with the pure check, and every RPC tried as an attacker would."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from stud.v1 import wallet_pb2 as pb
from studkit.auth import Principal, Role
from studkit.errors import ServiceError
from studkit.grpc_server import rpc_error_info, rpc_error_reason
from studtest.redis import TestRedis
from studtest.wallet import OPERATOR, TABLE, TOURNAMENT, RunningWallet, player
from wallet.app import WalletApp
from wallet.ledger import LedgerError, LedgerView, decide, replay
from wallet.model import BuyIn, CashOut, Deposit, EnterTournament, seat_account
from wallet.protection import (
    COOLING_OFF_MS,
    DAY_MS,
    LimitExceeded,
    LimitKind,
    Period,
    Protection,
    SelfExclude,
    SetLimit,
    SetRealityCheck,
    Usage,
    Window,
    check,
    replay_usage,
    rule_for,
)
from wallet.protection_app import ProtectionApp
from wallet.protection_store import ProtectionStore
from wallet.store import WalletStore

from .conftest import wallet_url

pytestmark = pytest.mark.integration

T0 = 1_800_000_000_000
ALICE = Principal(Role.PLAYER, "alice")


@dataclass
class Clocked:
    """The wallet's use cases on a real Redis with a clock the test moves."""

    now: list[int]
    app: WalletApp
    protection: ProtectionApp
    store: WalletStore

    def advance(self, ms: int) -> None:
        self.now[0] += ms


@pytest.fixture
async def clocked(redis_server: TestRedis, redis_url: str) -> AsyncIterator[Clocked]:
    now = [T0]
    store = WalletStore.from_url(wallet_url(redis_server, redis_url))
    app = WalletApp(store, clock_ms=lambda: now[0])
    protection = ProtectionApp(ProtectionStore(store.client), clock_ms=lambda: now[0])
    await store.create_account("alice", T0)
    yield Clocked(now, app, protection, store)
    await store.close()


def operator() -> Principal:
    return Principal(Role.OPERATOR, "ops")


def table() -> Principal:
    return Principal(Role.SERVICE, "table")


async def test_a_raise_used_within_its_cooling_off_is_refused(clocked: Clocked) -> None:
    """A wager limit of 100 raised to 1,000: a buy-in of 500 an hour later is refused
    (wager_limit, 100 left), and the same buy-in 24 hours after the raise is applied; no
    process slept or ran in between, the clock is the effective time."""
    await clocked.app.deposit(operator(), Deposit(player_id="alice", amount=5_000,
                                                  idempotency_key="d1"))
    await clocked.protection.set_limit(ALICE, SetLimit(
        player_id="alice", kind=LimitKind.WAGER, window=Window.DAY, amount=100))
    await clocked.protection.set_limit(ALICE, SetLimit(
        player_id="alice", kind=LimitKind.WAGER, window=Window.DAY, amount=1_000))
    clocked.advance(3_600_000)
    buy = BuyIn(player_id="alice", table_id="t1", seat=1, amount=500, idempotency_key="b1")
    with pytest.raises(LimitExceeded) as refused:
        await clocked.app.buy_in(table(), buy)
    assert (refused.value.reason, refused.value.remaining) == ("wager_limit", 100)
    clocked.advance(COOLING_OFF_MS - 3_600_000)
    applied = await clocked.app.buy_in(table(), buy)
    assert applied.amount == 500
    view = await clocked.protection.read(ALICE, "alice")
    (row,) = view.standings
    assert (row.in_force, row.used, row.remaining) == (1_000, 500, 500)
    assert [type(e).__name__ for _, e in view.events] == ["LimitSet", "LimitIncreaseRequested"]


async def test_a_move_applied_first_counts_even_stamped_after_the_next(
        clocked: Clocked) -> None:
    """Two buy-ins read the wallet's clock 1 ms apart and their scripts run the other way
    round (as concurrent calls do): the one stamped later, applied first, counts against
    the one stamped earlier, so 80 then 30 against a daily wager limit of 100 is refused
    wager_limit with 20 left (it passed the limit, 110, when the window ended at its own
    time)."""
    await clocked.app.deposit(operator(), Deposit(player_id="alice", amount=5_000,
                                                  idempotency_key="d1"))
    await clocked.protection.set_limit(ALICE, SetLimit(
        player_id="alice", kind=LimitKind.WAGER, window=Window.DAY, amount=100))
    clocked.advance(1)
    await clocked.app.buy_in(table(), BuyIn(player_id="alice", table_id="t1", seat=1,
                                            amount=80, idempotency_key="b1"))
    clocked.advance(-1)
    with pytest.raises(LimitExceeded) as refused:
        await clocked.app.buy_in(table(), BuyIn(player_id="alice", table_id="t2", seat=1,
                                                amount=30, idempotency_key="b2"))
    assert (refused.value.reason, refused.value.remaining) == ("wager_limit", 20)


async def test_the_script_agrees_with_the_pure_check(clocked: Clocked) -> None:
    """400 random steps (deposits, buy-ins, cash-outs, entries, limit changes, an exclusion,
    the clock moving hours or days): apply.lua accepts exactly what protection.check
    accepts, refuses with the same reason, what is left and when the window frees some."""
    rng = random.Random(34)
    state = Protection()
    usage: list[Usage] = []
    await clocked.app.deposit(operator(), Deposit(player_id="alice", amount=10**9,
                                                  idempotency_key="seed"))
    usage.append(Usage(T0, deposit=10**9))
    seated: set[int] = set()
    outcomes: dict[str, int] = {}
    for step in range(400):
        clocked.advance(rng.choice([1, 60_000, 3_600_000, 6 * 3_600_000, DAY_MS]))
        now = clocked.now[0]
        roll = rng.random()
        if roll < 0.15:
            kind, window = rng.choice(list(LimitKind)), rng.choice(list(Window))
            change = SetLimit(player_id="alice", kind=kind, window=window,
                              amount=rng.choice([0, 50, 200, 1_000, 5_000]))
            await clocked.protection.set_limit(ALICE, change)
            state = await clocked.protection._store.state("alice")
            continue
        if roll < 0.16:
            await clocked.protection.self_exclude(ALICE, SelfExclude(player_id="alice",
                                                                     period=Period.DAY))
            state = await clocked.protection._store.state("alice")
            continue
        amount = rng.choice([10, 40, 100, 300, 900])
        seat = rng.randint(1, 8)
        command: Any
        call: Callable[[], Awaitable[Any]]
        if roll < 0.4:
            command = Deposit(player_id="alice", amount=amount, idempotency_key=f"d{step}")
            call = lambda c=command: clocked.app.deposit(operator(), c)  # noqa: E731
        elif roll < 0.7 and seat not in seated:
            command = BuyIn(player_id="alice", table_id="t1", seat=seat, amount=amount,
                            idempotency_key=f"b{step}")
            call = lambda c=command: clocked.app.buy_in(table(), c)  # noqa: E731
        elif roll < 0.85 and seated:
            seat = rng.choice(sorted(seated))
            command = CashOut(player_id="alice", table_id="t1", seat=seat,
                              idempotency_key=f"c{step}")
            call = lambda c=command: clocked.app.cash_out(table(), c)  # noqa: E731
        else:
            command = EnterTournament(player_id="alice", tournament_id="tt", entry_id=f"e{step}",
                                      buy_in=100, fee=10, idempotency_key=f"e{step}")
            call = lambda c=command: clocked.app.enter_tournament(  # noqa: E731
                Principal(Role.SERVICE, "tournament"), c)
        if isinstance(command, CashOut):
            escrow = (await clocked.store.reconcile("t1")).seats
            amount_out = next(s.balance for s in escrow if s.seat == seat)
            tx = decide(command, LedgerView(balances={seat_account("t1", seat).key:
                                                      amount_out}))
        else:
            tx = decide(command)
        rule = rule_for(tx, now)
        expected: ServiceError | None = None
        if rule is not None:
            try:
                check(state, usage, rule, now)
            except ServiceError as exc:
                expected = exc
        try:
            await call()
        except (ServiceError, LedgerError) as exc:
            assert expected is not None, f"step {step}: refused {exc.reason}, check accepts"
            assert exc.reason == expected.reason
            assert getattr(exc, "error_metadata", None) == getattr(expected, "error_metadata",
                                                                   None)
            outcomes[exc.reason] = outcomes.get(exc.reason, 0) + 1
            continue
        assert expected is None, f"step {step}: applied, check refuses {expected.reason}"
        outcomes["applied"] = outcomes.get("applied", 0) + 1
        if rule is not None and (rule.usage.deposit or rule.usage.wager or rule.usage.loss):
            usage.append(rule.usage)
        if isinstance(command, BuyIn):
            seated.add(seat)
        elif isinstance(command, CashOut):
            seated.discard(seat)
    assert outcomes.get("applied", 0) > 50
    assert {"deposit_limit", "wager_limit", "self_excluded"} <= set(outcomes), outcomes
    stored = await clocked.protection._store.usage("alice")
    assert sorted(stored, key=lambda u: u.at_ms) == [
        u for u in usage if u.at_ms > clocked.now[0] - 31 * DAY_MS]
    assert replay_usage(await clocked.store.ledger()) == {"alice": stored}  # a projection
    balances = await clocked.store.balances()
    assert sum(balances.values()) == 0
    assert replay(await clocked.store.ledger()) == balances


# --- over gRPC --------------------------------------------------------------------------------


def _md(wallet: RunningWallet, who: Principal) -> Any:
    return wallet.client.metadata(who)


async def _set(wallet: RunningWallet, name: str, kind: int, window: int, amount: int,
               who: Principal | None = None) -> pb.ProtectionResponse:
    reply: pb.ProtectionResponse = await wallet.client.stub.SetLimit(
        pb.SetLimitRequest(player_id=name, kind=kind, window=window, amount=amount),
        metadata=_md(wallet, who or player(name)), timeout=10)
    return reply


async def _refused(call: Awaitable[Any]) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def test_concurrent_buy_ins_cannot_pass_one_limit_together(wallet: RunningWallet
                                                                 ) -> None:
    """50 concurrent buy-ins of 70 against a daily wager limit of 1,000 (the balance holds
    ten times that): exactly 14 pass, the rest are FAILED_PRECONDITION wager_limit with what
    is left in ErrorInfo, and the day's wagers end at 980."""
    client = wallet.client
    await client.create_account("alice")
    await client.deposit("alice", 10_000, "d1")
    await _set(wallet, "alice", pb.LIMIT_KIND_WAGER, pb.LIMIT_WINDOW_DAY, 1_000)

    async def one(i: int) -> pb.BuyInResponse | grpc.aio.AioRpcError:
        try:
            return await client.buy_in("alice", f"t{i % 7}", 1 + i % 8, 70, f"b{i}")
        except grpc.aio.AioRpcError as exc:
            return exc

    results = await asyncio.gather(*(one(i) for i in range(50)))
    ok = [r for r in results if isinstance(r, pb.BuyInResponse)]
    refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(ok) == 1_000 // 70
    assert {(r.code(), rpc_error_reason(r)) for r in refused} == {
        (grpc.StatusCode.FAILED_PRECONDITION, "wager_limit")}
    info = rpc_error_info(refused[0])
    assert info is not None
    assert (info.metadata["remaining"], info.metadata["window"]) == ("20", "day")
    assert int(info.metadata["resets_at_ms"]) > 0
    reply: pb.ProtectionResponse = await client.stub.GetProtection(
        pb.GetProtectionRequest(player_id="alice"), metadata=_md(wallet, player("alice")),
        timeout=10)
    (row,) = reply.limits
    assert (row.amount, row.used, row.remaining) == (1_000, 980, 20)
    assert await client.player_balance("alice") == 10_000 - 980


async def test_an_excluded_player_moves_no_money_in_and_keeps_what_is_at_the_table(
        wallet: RunningWallet, snapshot: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    """After SelfExclude: a deposit, a buy-in (a top-up too) and a tournament entry are
    FAILED_PRECONDITION self_excluded and change nothing; the chips already at the table
    are never taken back and cash out to the account; the player cannot lift it, and an
    operator cannot lift a timed exclusion early."""
    client = wallet.client
    await client.create_account("alice")
    await client.deposit("alice", 1_000, "d1")
    await client.buy_in("alice", "t1", 1, 300, "b1")
    reply: pb.ProtectionResponse = await client.stub.SelfExclude(
        pb.SelfExcludeRequest(player_id="alice", period=pb.EXCLUSION_PERIOD_WEEK),
        metadata=_md(wallet, player("alice")), timeout=10)
    assert reply.excluded and reply.excluded_until_ms > reply.now_ms
    before = await snapshot()
    for call in (client.deposit("alice", 10, "d2"), client.buy_in("alice", "t1", 1, 10, "b2"),
                 client.buy_in("alice", "t2", 3, 10, "b3"),
                 client.enter("alice", "tt", "e1", 100, 10, "e1")):
        error = await _refused(call)
        assert (error.code(), rpc_error_reason(error)) == (
            grpc.StatusCode.FAILED_PRECONDITION, "self_excluded")
    assert await snapshot() == before
    out = await client.cash_out("alice", "t1", 1, "c1")
    assert out.amount == 300
    assert await client.player_balance("alice") == 1_000
    for who in (player("alice"), OPERATOR):
        error = await _refused(client.stub.LiftExclusion(
            pb.LiftExclusionRequest(player_id="alice", reason="please"),
            metadata=_md(wallet, who), timeout=10))
        assert rpc_error_reason(error) == (
            "permission_denied" if who.role is Role.PLAYER else "exclusion_active")


async def test_an_operator_exclusion_is_an_audited_event(wallet: RunningWallet) -> None:
    """ExcludePlayer records the operator and the reason; GetProtection shows them to the
    player, and the player's next buy-in is operator_excluded."""
    client = wallet.client
    await client.create_account("bob")
    await client.deposit("bob", 500, "d1")
    await client.stub.ExcludePlayer(
        pb.ExcludePlayerRequest(player_id="bob", period=pb.EXCLUSION_PERIOD_INDEFINITE,
                                reason="chargeback investigation"),
        metadata=_md(wallet, OPERATOR), timeout=10)
    reply: pb.ProtectionResponse = await client.stub.GetProtection(
        pb.GetProtectionRequest(player_id="bob"), metadata=_md(wallet, player("bob")),
        timeout=10)
    assert (reply.excluded, reply.excluded_until_ms, reply.excluded_by,
            reply.exclusion_reason) == (True, 0, "operator:ops", "chargeback investigation")
    (event,) = reply.events
    assert event.type == "PlayerExcluded" and "chargeback investigation" in event.json
    error = await _refused(client.buy_in("bob", "t1", 2, 100, "b1"))
    assert rpc_error_reason(error) == "operator_excluded"


ATTACKS = [
    # (who, method, request, code, reason)
    ("mallory", "SetLimit", pb.SetLimitRequest(player_id="alice", kind=pb.LIMIT_KIND_DEPOSIT,
     window=pb.LIMIT_WINDOW_DAY, amount=10**12), "PERMISSION_DENIED", "permission_denied"),
    ("mallory", "SetLimit", pb.SetLimitRequest(player_id="alice", kind=pb.LIMIT_KIND_DEPOSIT,
     window=pb.LIMIT_WINDOW_DAY, amount=1), "PERMISSION_DENIED", "permission_denied"),
    ("mallory", "CancelLimitIncrease", pb.CancelLimitIncreaseRequest(
        player_id="alice", kind=pb.LIMIT_KIND_WAGER, window=pb.LIMIT_WINDOW_DAY),
     "PERMISSION_DENIED", "permission_denied"),
    ("mallory", "SelfExclude", pb.SelfExcludeRequest(
        player_id="alice", period=pb.EXCLUSION_PERIOD_INDEFINITE),
     "PERMISSION_DENIED", "permission_denied"),
    ("mallory", "GetProtection", pb.GetProtectionRequest(player_id="alice"),
     "PERMISSION_DENIED", "permission_denied"),
    ("mallory", "SetRealityCheck", pb.SetRealityCheckRequest(
        player_id="alice", interval_minutes=1), "PERMISSION_DENIED", "permission_denied"),
    ("ops", "SetRealityCheck", pb.SetRealityCheckRequest(
        player_id="alice", interval_minutes=0), "PERMISSION_DENIED", "permission_denied"),
    ("alice", "ExcludePlayer", pb.ExcludePlayerRequest(
        player_id="mallory", period=pb.EXCLUSION_PERIOD_DAY, reason="x"),
     "PERMISSION_DENIED", "permission_denied"),
    ("alice", "LiftExclusion", pb.LiftExclusionRequest(player_id="alice", reason="x"),
     "PERMISSION_DENIED", "permission_denied"),
    ("ops", "SetLimit", pb.SetLimitRequest(player_id="alice", kind=pb.LIMIT_KIND_WAGER,
     window=pb.LIMIT_WINDOW_DAY, amount=10**9), "PERMISSION_DENIED", "permission_denied"),
    ("table", "SelfExclude", pb.SelfExcludeRequest(
        player_id="alice", period=pb.EXCLUSION_PERIOD_DAY), "PERMISSION_DENIED",
     "permission_denied"),
    ("alice", "SetLimit", pb.SetLimitRequest(player_id="alice", kind=pb.LIMIT_KIND_WAGER,
     window=pb.LIMIT_WINDOW_DAY, amount=-5), "INVALID_ARGUMENT", "negative_amount"),
    ("alice", "SetLimit", pb.SetLimitRequest(player_id="alice", kind=pb.LIMIT_KIND_WAGER,
     window=pb.LIMIT_WINDOW_DAY, amount=2**63 - 1), "INVALID_ARGUMENT", "amount_too_large"),
    ("alice", "SetLimit", pb.SetLimitRequest(player_id="alice", kind=pb.LIMIT_KIND_WAGER,
     amount=5), "INVALID_ARGUMENT", "bad_request"),
    ("alice", "SetLimit", pb.SetLimitRequest(player_id="alice", kind=99,
     window=pb.LIMIT_WINDOW_DAY, amount=5), "INVALID_ARGUMENT", "bad_request"),
    ("alice", "SetLimit", pb.SetLimitRequest(player_id="alice\n", kind=pb.LIMIT_KIND_WAGER,
     window=pb.LIMIT_WINDOW_DAY, amount=5), "INVALID_ARGUMENT", "malformed_id"),
    ("alice", "SelfExclude", pb.SelfExcludeRequest(player_id="alice"),
     "INVALID_ARGUMENT", "bad_request"),
    ("alice", "CancelLimitIncrease", pb.CancelLimitIncreaseRequest(
        player_id="alice", kind=pb.LIMIT_KIND_WAGER, window=pb.LIMIT_WINDOW_DAY),
     "FAILED_PRECONDITION", "no_pending_increase"),
    ("ops", "ExcludePlayer", pb.ExcludePlayerRequest(
        player_id="alice", period=pb.EXCLUSION_PERIOD_DAY, reason=""),
     "INVALID_ARGUMENT", "bad_request"),
    ("ops", "LiftExclusion", pb.LiftExclusionRequest(player_id="alice", reason="x"),
     "FAILED_PRECONDITION", "not_excluded"),
    ("ops", "GetProtection", pb.GetProtectionRequest(player_id="nobody"),
     "NOT_FOUND", "unknown_account"),
    ("nobody", "SelfExclude", pb.SelfExcludeRequest(
        player_id="nobody", period=pb.EXCLUSION_PERIOD_DAY), "NOT_FOUND", "unknown_account"),
]


def _who(name: str) -> Principal:
    return {"ops": OPERATOR, "table": TABLE, "tournament": TOURNAMENT}.get(name) \
        or player(name)


@pytest.mark.parametrize("who,method,request_,code,reason", ATTACKS,
                         ids=[f"{a[0]}-{a[1]}-{a[4]}-{i}" for i, a in enumerate(ATTACKS)])
async def test_every_protection_rpc_tried_as_an_attacker(
        wallet: RunningWallet, snapshot: Callable[[], Awaitable[dict[str, Any]]], who: str,
        method: str, request_: Any, code: str, reason: str) -> None:
    """Another player's account, the wrong role, negative and huge amounts, unspecified
    enums, a cancel with nothing waiting, a lift of nothing: each its status and reason,
    and nothing changes."""
    for name in ("alice", "mallory"):
        await wallet.client.create_account(name)
    await _set(wallet, "alice", pb.LIMIT_KIND_DEPOSIT, pb.LIMIT_WINDOW_DAY, 100)
    before = await snapshot()
    error = await _refused(getattr(wallet.client.stub, method)(
        request_, metadata=_md(wallet, _who(who)), timeout=10))
    assert (error.code().name, rpc_error_reason(error)) == (code, reason)
    assert await snapshot() == before


async def test_a_raise_waits_and_a_deposit_past_the_limit_says_what_is_left(
        wallet: RunningWallet) -> None:
    """A daily deposit limit of 100 raised to 10,000 over gRPC: the raise is pending with
    its effective time 24 hours on, and a deposit of 150 is still deposit_limit with 100
    left; lowering to 50 applies at once and drops the raise."""
    client = wallet.client
    await client.create_account("alice")
    await _set(wallet, "alice", pb.LIMIT_KIND_DEPOSIT, pb.LIMIT_WINDOW_DAY, 100)
    reply = await _set(wallet, "alice", pb.LIMIT_KIND_DEPOSIT, pb.LIMIT_WINDOW_DAY, 10_000)
    (row,) = reply.limits
    assert (row.amount, row.increase_pending, row.pending_amount) == (100, True, 10_000)
    assert row.pending_effective_ms - reply.events[-1].at_ms == COOLING_OFF_MS
    error = await _refused(client.deposit("alice", 150, "d1"))
    info = rpc_error_info(error)
    assert rpc_error_reason(error) == "deposit_limit"
    assert info is not None and info.metadata["remaining"] == "100"
    reply = await _set(wallet, "alice", pb.LIMIT_KIND_DEPOSIT, pb.LIMIT_WINDOW_DAY, 50)
    (row,) = reply.limits
    assert (row.amount, row.increase_pending) == (50, False)
    assert [e.type for e in reply.events] == ["LimitSet", "LimitIncreaseRequested",
                                              "LimitDecreased"]
    await client.deposit("alice", 50, "d2")
    error = await _refused(client.deposit("alice", 1, "d3"))
    assert rpc_error_reason(error) == "deposit_limit"


async def test_a_settlement_names_the_seats_of_excluded_players(wallet: RunningWallet) -> None:
    """A player who self-excludes during a hand: the hand settles (money at the table is
    never taken back) and its reply names their seat for the table to stand up; a retry of
    the settlement says the same; the other player is not named."""
    client = wallet.client
    for name, seat in (("alice", 1), ("bob", 2)):
        await client.create_account(name)
        await client.deposit(name, 1_000, f"d-{name}")
        await client.buy_in(name, "t1", seat, 500, f"b-{name}")
    await client.stub.SelfExclude(
        pb.SelfExcludeRequest(player_id="bob", period=pb.EXCLUSION_PERIOD_DAY),
        metadata=_md(wallet, player("bob")), timeout=10)
    request = pb.SettleHandRequest(
        table_id="t1", hand_id="h1",
        seats=[pb.SettlementSeat(seat=1, player_id="alice", amount_in=100, amount_won=200),
               pb.SettlementSeat(seat=2, player_id="bob", amount_in=100, amount_won=0)],
        ended_on_street=pb.SettleHandRequest.STREET_FIFTH)
    first = await client.settle(request)
    again = await client.settle(request)
    assert (list(first.excluded_seats), again.replayed, list(again.excluded_seats)) == (
        [2], True, [2])
    assert await client.escrows("t1") == {1: 600, 2: 400}


async def test_reality_checks_every_interval_with_the_sessions_time_and_net(
        clocked: Clocked) -> None:
    """A reminder every 30 minutes: the session starts when the player starts watching;
    each reminder has the session's time and its net result (a buy-in of 300 is -300 until
    cashed out); turned off, the stream ends. The clock and the sleep are the test's."""
    moves = iter([
        clocked.app.buy_in(table(), BuyIn(player_id="alice", table_id="t1", seat=1,
                                          amount=300, idempotency_key="b1")),
        clocked.app.cash_out(table(), CashOut(player_id="alice", table_id="t1", seat=1,
                                              idempotency_key="c1")),
        clocked.protection.set_reality_check(ALICE, SetRealityCheck(player_id="alice",
                                                                    minutes=0)),
    ])

    async def sleep(seconds: float) -> None:
        clocked.advance(int(seconds * 1000))
        await next(moves)

    await clocked.app.deposit(operator(), Deposit(player_id="alice", amount=1_000,
                                                  idempotency_key="d1"))
    protection = ProtectionApp(ProtectionStore(clocked.store.client),
                               clock_ms=lambda: clocked.now[0], sleep=sleep)
    view = await protection.set_reality_check(ALICE, SetRealityCheck(player_id="alice",
                                                                     minutes=30))
    assert view.state.reality_check_minutes == 30
    checks = [c async for c in protection.reality_checks(ALICE, "alice")]
    half_hour = 30 * 60_000
    assert [(c.session_ms, c.net_result, c.interval_minutes) for c in checks] == [
        (half_hour, -300, 30), (2 * half_hour, 0, 30)]


async def test_reality_checks_are_the_players_own(wallet: RunningWallet) -> None:
    """Another player's stream is PERMISSION_DENIED; with none set it is
    FAILED_PRECONDITION reality_check_off; an interval out of range is INVALID_ARGUMENT."""
    client = wallet.client
    for name in ("alice", "mallory"):
        await client.create_account(name)
    for who, code, reason in (("mallory", "PERMISSION_DENIED", "permission_denied"),
                              ("alice", "FAILED_PRECONDITION", "reality_check_off")):
        stream = client.stub.WatchRealityChecks(
            pb.WatchRealityChecksRequest(player_id="alice"), metadata=_md(wallet, player(who)),
            timeout=10)
        error = await _refused(stream.read())
        assert (error.code().name, rpc_error_reason(error)) == (code, reason)
    for minutes in (-1, 1441):
        error = await _refused(client.stub.SetRealityCheck(
            pb.SetRealityCheckRequest(player_id="alice", interval_minutes=minutes),
            metadata=_md(wallet, player("alice")), timeout=10))
        assert rpc_error_reason(error) == "bad_request"
    reply: pb.ProtectionResponse = await client.stub.SetRealityCheck(
        pb.SetRealityCheckRequest(player_id="alice", interval_minutes=45),
        metadata=_md(wallet, player("alice")), timeout=10)
    assert reply.reality_check_minutes == 45
    assert reply.events[-1].type == "RealityCheckSet"
