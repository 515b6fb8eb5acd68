"""The wallet process killed (SIGKILL) again and again while a tournament's money moves: the
caller (standing in for the tournament service) retries every call with the key it derived
from its plan until it is answered, and in the end every entry, refund and prize is applied
exactly once, no chip is created or lost, and the pool is what the pure model says."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import cast

import grpc
import pytest

from stud.v1 import wallet_pb2_grpc as pb_grpc
from studkit.redis_client import connect
from studtest.processes import CHANNEL_OPTIONS, ServiceProcess
from studtest.redis import TestRedis
from studtest.wallet import WalletClient
from studtest.wallet_model import ModelWallet
from studtools.devkeys import DevKeys
from wallet.model import Command, EnterTournament, PayPrize, RefundEntry
from wallet.store import LEDGER, WalletStore

from .conftest import wallet_url

pytestmark = pytest.mark.integration

PLAYERS = [f"p{i}" for i in range(12)]
FUNDS, BUY_IN, FEE = 1_000, 100, 10


def plan() -> list[list[Command]]:
    """Batches of calls the tournament service would make, keys derived from its log
    position: twelve entries, three unregistrations, then a 50/30/20 payout of the pool."""
    entries: list[Command] = [
        EnterTournament(player_id=p, tournament_id="mtt", entry_id=f"e{i}", buy_in=BUY_IN,
                        fee=FEE, idempotency_key=f"mtt.{i}") for i, p in enumerate(PLAYERS)]
    refunds: list[Command] = [
        RefundEntry(player_id=PLAYERS[i], tournament_id="mtt", entry_id=f"e{i}",
                    idempotency_key=f"mtt.{20 + i}") for i in (1, 5, 9)]
    pool = BUY_IN * (len(PLAYERS) - 3)
    prizes: list[Command] = [
        PayPrize(player_id=PLAYERS[p], tournament_id="mtt", amount=pool * share // 100,
                 place=place, idempotency_key=f"mtt.{30 + place}")
        for place, (p, share) in enumerate(((0, 50), (2, 30), (3, 20)), start=1)]
    calls = entries + refunds + prizes
    return [calls[i:i + 2] for i in range(0, len(calls), 2)]


def call(client: WalletClient, command: Command) -> Awaitable[object]:
    match command:
        case EnterTournament():
            return client.enter(command.player_id, command.tournament_id, command.entry_id,
                                command.buy_in, command.fee, command.idempotency_key)
        case RefundEntry():
            return client.refund(command.player_id, command.tournament_id, command.entry_id,
                                 command.idempotency_key)
        case PayPrize():
            return client.prize(command.player_id, command.tournament_id, command.amount,
                                command.place, command.idempotency_key)
    raise AssertionError(command)


async def until_answered(attempt: Callable[[], Awaitable[object]]) -> object:
    """Retry while the wallet is down (UNAVAILABLE, or a deadline while it restarts)."""
    for _ in range(600):
        try:
            return await attempt()
        except grpc.aio.AioRpcError as exc:
            if exc.code() not in (grpc.StatusCode.UNAVAILABLE,
                                  grpc.StatusCode.DEADLINE_EXCEEDED):
                raise
            await asyncio.sleep(0.05)
    raise AssertionError("the wallet never answered")


async def test_killed_wallet_applies_each_tournament_payment_once(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys, tmp_path: Path) -> None:
    """Every second batch is sent while the wallet is killed under it (at once, or 1, 3 or
    10 ms after the calls go out); after each kill the wallet restarts and the batch is
    retried with the same keys. Finally: every call answered OK, some of the first attempts
    cut off by a kill, one ledger entry per scope, balances and pool equal to the pure
    model's."""
    url = wallet_url(redis_server, redis_url)
    wallet = ServiceProcess("wallet", {**dev_keys.env("wallet"), "REDIS_URL": url,
                                       "METRICS_PORT": "0", "WALLET_SHUTDOWN_GRACE": "1"},
                            tmp_path / "wallet.log")
    model = ModelWallet()
    kills, cut_off = 0, 0
    wallet.start()
    try:
        await wallet.wait_serving()
        async with grpc.aio.insecure_channel(wallet.target, options=CHANNEL_OPTIONS) as ch:
            client = WalletClient(pb_grpc.WalletServiceStub(ch),  # type: ignore[no-untyped-call]
                                  dev_keys)
            for name in PLAYERS:
                await client.create_account(name)
                await client.deposit(name, FUNDS, f"d-{name}")
                model.open(name, FUNDS)
            for n, batch in enumerate(plan()):
                sent = [asyncio.ensure_future(call(client, c)) for c in batch]
                if n % 2:
                    await asyncio.sleep((0, 0.001, 0.003, 0.01)[kills % 4])
                    wallet.kill()
                    kills += 1
                    wallet.start()
                    await wallet.wait_serving()
                first = await asyncio.gather(*sent, return_exceptions=True)
                cut_off += sum(isinstance(f, grpc.aio.AioRpcError) for f in first)
                answers = [await until_answered(partial(call, client, c)) for c in batch]
                assert len(answers) == len(batch)
                for command in batch:
                    assert model.call(command).reason == ""
            pool = await client.pool("mtt")
    finally:
        wallet.kill()
    assert kills >= 4 and cut_off >= 1
    assert (pool.balance, pool.buy_ins, pool.refunded, pool.prizes_paid) == (
        0, BUY_IN * len(PLAYERS), BUY_IN * 3, BUY_IN * 9)
    admin = connect(redis_url, decode_responses=True)
    store = WalletStore(admin)
    try:
        ledger = await store.ledger()
        assert await store.balances() == {k: v for k, v in model.balances.items() if v}
        assert await store.pool("mtt") == model.pool("mtt")
        rows = cast(list[tuple[str, dict[str, str]]], await admin.xrange(LEDGER))
    finally:
        await store.close()
    scopes = Counter(fields["scope"] for _id, fields in rows)
    assert max(scopes.values()) == 1
    assert len(ledger) == len(PLAYERS) + sum(len(b) for b in plan())
