"""The wallet's metrics over real gRPC and Redis: calls counted per method and status code,
settlements by outcome (applied, duplicate, refused), and no label value that is a player id,
a table or hand id, an idempotency key or a token."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from stud.v1 import wallet_pb2 as pb
from studkit.metrics import metrics_endpoint, scrape
from studtest.wallet import OPERATOR, TABLE, RunningWallet, player
from studtools.redis_server import free_port

pytestmark = pytest.mark.integration

SERVICE = "stud.v1.WalletService"
LABELS = {"service", "method", "code", "outcome", "kind", "le",
          "command", "error"}  # stud_redis_*: a closed set of Redis command names (telemetry)


def settlement(hand: str, won_by_alice: int) -> pb.SettleHandRequest:
    return pb.SettleHandRequest(
        table_id="table-9", hand_id=hand,
        seats=[pb.SettlementSeat(seat=1, player_id="alice", amount_in=300,
                                 amount_won=won_by_alice),
               pb.SettlementSeat(seat=2, player_id="bob", amount_in=300,
                                 amount_won=600 - won_by_alice)],
        ended_on_street=pb.SettleHandRequest.STREET_SEVENTH,
    )


def calls(wallet: RunningWallet, method: str, code: str) -> float:
    return wallet.deps.metrics.sample("stud_grpc_requests_total", service=SERVICE,
                                      method=method, code=code)


async def refused(call: object) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    return info.value.code()


async def test_calls_and_settlements_are_counted(wallet: RunningWallet) -> None:
    """A settlement applied, replayed, and refused three ways counts 1/1/3 by outcome; every
    call lands under its code; /metrics shows it and carries no id, key or token."""
    client = wallet.client
    for seat, name in ((1, "alice"), (2, "bob")):
        await client.create_account(name)
        await client.deposit(name, 1000, f"dep-{name}")
        await client.buy_in(name, "table-9", seat, 500, f"buy-{name}")
    assert await client.settle(settlement("hand-1", 600))
    assert (await client.settle(settlement("hand-1", 600))).replayed
    assert await refused(client.settle(settlement("hand-1", 0))) \
        is grpc.StatusCode.ALREADY_EXISTS
    assert await refused(client.settle(settlement("hand-2", 600), who=player("alice"))) \
        is grpc.StatusCode.PERMISSION_DENIED
    unbalanced = settlement("hand-3", 600)
    unbalanced.seats[1].amount_won = 5
    assert await refused(client.settle(unbalanced)) is grpc.StatusCode.INVALID_ARGUMENT
    assert await refused(client.create_account("alice")) is grpc.StatusCode.ALREADY_EXISTS
    assert await refused(client.stub.GetBalance(
        pb.GetBalanceRequest(account=pb.AccountRef(player_id="nobody")),
        metadata=client.metadata(OPERATOR), timeout=5)) is grpc.StatusCode.NOT_FOUND
    assert await refused(client.stub.GetBalance(
        pb.GetBalanceRequest(account=pb.AccountRef(player_id="alice")), timeout=5)) \
        is grpc.StatusCode.UNAUTHENTICATED

    metrics = wallet.deps.metrics
    outcomes = {o: metrics.sample("stud_wallet_settlements_total", outcome=o)
                for o in ("applied", "duplicate", "refused")}
    assert outcomes == {"applied": 1, "duplicate": 1, "refused": 3}
    assert calls(wallet, "SettleHand", "OK") == 2
    for code in ("ALREADY_EXISTS", "PERMISSION_DENIED", "INVALID_ARGUMENT"):
        assert calls(wallet, "SettleHand", code) == 1, code
    assert calls(wallet, "CreateAccount", "OK") == 2
    assert calls(wallet, "CreateAccount", "ALREADY_EXISTS") == 1
    assert (calls(wallet, "Deposit", "OK"), calls(wallet, "BuyIn", "OK")) == (2, 2)
    assert calls(wallet, "GetBalance", "NOT_FOUND") == 1
    assert calls(wallet, "GetBalance", "UNAUTHENTICATED") == 1

    with metrics_endpoint(metrics.registry, free_port(), "127.0.0.1") as endpoint:
        assert endpoint is not None
        samples = await asyncio.to_thread(scrape, endpoint.port)
    scraped = {(s.name, s.labels.get("outcome")): s.value for s in samples
               if s.name == "stud_wallet_settlements_total"}
    assert scraped == {("stud_wallet_settlements_total", o): v for o, v in outcomes.items()}
    tokens = {client.metadata(who)[0][1] for who in (OPERATOR, TABLE, player("alice"))}
    ids = {"alice", "bob", "nobody", "table-9", "hand-1", "hand-2", "hand-3", "dep-alice",
           "dep-bob", "buy-alice", "buy-bob"}
    for sample in samples:
        assert set(sample.labels) <= LABELS, sample
        for value in sample.labels.values():
            assert not any(secret in value for secret in ids | tokens), sample
