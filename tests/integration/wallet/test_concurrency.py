"""Races through real gRPC and Redis: concurrent buy-ins never overdraw an account, concurrent
retries of a settlement apply it once, and cash-outs racing settlements keep money whole."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from stud.v1 import wallet_pb2 as pb
from studkit.grpc_server import rpc_error_reason
from studtest.wallet import RunningWallet
from wallet.ledger import replay

pytestmark = pytest.mark.integration

N = 50


async def test_concurrent_buy_ins_never_overdraw(wallet: RunningWallet) -> None:
    """50 concurrent buy-ins of 70 against 1000: exactly 14 succeed, the rest are
    FAILED_PRECONDITION, and the account ends at 20, never below zero."""
    client = wallet.client
    await client.create_account("alice")
    await client.deposit("alice", 1000, "d1")

    async def one(i: int) -> pb.BuyInResponse | grpc.aio.AioRpcError:
        try:
            return await client.buy_in("alice", f"t{i % 5}", 1 + i % 8, 70, f"b{i}")
        except grpc.aio.AioRpcError as exc:
            return exc

    results = await asyncio.gather(*(one(i) for i in range(N)))
    ok = [r for r in results if isinstance(r, pb.BuyInResponse)]
    refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(ok) == 1000 // 70
    assert all(r.code() is grpc.StatusCode.FAILED_PRECONDITION for r in refused)
    assert {rpc_error_reason(r) for r in refused} == {"insufficient_funds"}
    assert all(r.player_balance >= 0 for r in ok)
    assert sorted(r.player_balance for r in ok) == [1000 - 70 * k for k in range(14, 0, -1)]
    assert await client.player_balance("alice") == 1000 - 70 * 14
    balances = await wallet.deps.store.balances()
    assert sum(balances.values()) == 0
    assert replay(await wallet.deps.store.ledger()) == balances


async def test_concurrent_retries_of_a_settlement_apply_once(wallet: RunningWallet) -> None:
    """50 concurrent copies of one settlement: one applies, 49 answer replayed with the same
    transaction and balances; the escrows move once."""
    client = wallet.client
    for name, seat in (("alice", 1), ("bob", 2)):
        await client.create_account(name)
        await client.deposit(name, 1000, f"d-{name}")
        await client.buy_in(name, "t1", seat, 1000, f"b-{name}")
    request = pb.SettleHandRequest(
        table_id="t1",
        hand_id="h1",
        seats=[
            pb.SettlementSeat(seat=1, player_id="alice", amount_in=400, amount_won=780),
            pb.SettlementSeat(seat=2, player_id="bob", amount_in=400, amount_won=0),
        ],
        rake=20,
        rake_policy=pb.RakePolicy(percent_bps=250, cap=50),
        ended_on_street=pb.SettleHandRequest.STREET_FIFTH,
    )
    replies = await asyncio.gather(*(client.settle(request) for _ in range(N)))
    assert sum(not r.replayed for r in replies) == 1
    assert len({r.transaction_id for r in replies}) == 1
    assert all(list(r.seats) == list(replies[0].seats) for r in replies)
    assert await client.escrows("t1") == {1: 1380, 2: 600}
    ledger = await wallet.deps.store.ledger()
    assert sum(1 for e in ledger if e.hand_id == "h1") == 1


async def test_cash_outs_racing_settlements_keep_money_whole(wallet: RunningWallet) -> None:
    """Cash-outs fired while hands settle either see the settled escrow or make the later
    settlement fail; money is never created or lost."""
    client = wallet.client
    for name, seat in (("alice", 1), ("bob", 2)):
        await client.create_account(name)
        await client.deposit(name, 1000, f"d-{name}")
        await client.buy_in(name, "t1", seat, 1000, f"b-{name}")

    async def hand(i: int) -> object:
        try:
            return await client.settle(
                pb.SettleHandRequest(
                    table_id="t1", hand_id=f"h{i}",
                    seats=[
                        pb.SettlementSeat(seat=1, player_id="alice", amount_in=10, amount_won=20),
                        pb.SettlementSeat(seat=2, player_id="bob", amount_in=10, amount_won=0),
                    ],
                    ended_on_street=pb.SettleHandRequest.STREET_SEVENTH,
                )
            )
        except grpc.aio.AioRpcError as exc:
            return exc

    async def leave(name: str, seat: int, key: str) -> object:
        # ABORTED means the escrow kept moving past the wallet's retries: a client retries
        # with the same key (on a busy machine 20 settlements can outrun 5 attempts).
        while True:
            try:
                return await client.cash_out(name, "t1", seat, key)
            except grpc.aio.AioRpcError as exc:
                if exc.code() is not grpc.StatusCode.ABORTED:
                    raise

    results = await asyncio.gather(
        *(hand(i) for i in range(20)),
        leave("alice", 1, "leave-a"),
        leave("bob", 2, "leave-b"),
    )
    settled = [r for r in results[:20] if isinstance(r, pb.SettleHandResponse)]
    failed = [r for r in results[:20] if isinstance(r, grpc.aio.AioRpcError)]
    assert all(r.code() is grpc.StatusCode.FAILED_PRECONDITION for r in failed)
    assert len(settled) + len(failed) == 20
    assert await client.escrows("t1") == {}
    total = await client.player_balance("alice") + await client.player_balance("bob")
    assert total == 2000
    balances = await wallet.deps.store.balances()
    assert sum(balances.values()) == 0
    assert replay(await wallet.deps.store.ledger()) == balances
