"""Conservation under random play (hypothesis, real gRPC and Redis): after any sequence of
deposits, withdrawals, buy-ins, settlements (some retried) and cash-outs, the wallet agrees
with a dict model, every account sums to zero, and the ledger replays to the balances."""

from __future__ import annotations

import uuid

import grpc
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rules.streets import Street
from stud.v1 import wallet_pb2 as pb
from studkit.grpc_server import rpc_error_reason
from studtest.wallet import OPERATOR, RunningWallet
from wallet.ledger import compute_rake, replay
from wallet.model import RakePolicy

pytestmark = pytest.mark.integration

SEATS = 4
STREETS = {
    Street.THIRD: pb.SettleHandRequest.STREET_THIRD,
    Street.FOURTH: pb.SettleHandRequest.STREET_FOURTH,
    Street.FIFTH: pb.SettleHandRequest.STREET_FIFTH,
    Street.SIXTH: pb.SettleHandRequest.STREET_SIXTH,
    Street.SEVENTH: pb.SettleHandRequest.STREET_SEVENTH,
}


class Model:
    """What the balances should be: players' accounts, seat escrows and seat holders."""

    def __init__(self, players: list[str]) -> None:
        self.accounts = dict.fromkeys(players, 0)
        self.escrow = dict.fromkeys(range(1, SEATS + 1), 0)
        self.holder: dict[int, str] = {}


async def expect_refused(call: object, reason: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    assert info.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert rpc_error_reason(info.value) == reason


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_random_play_conserves_money(wallet: RunningWallet, data: st.DataObject) -> None:
    """Random operations keep the wallet equal to the model and the ledger balanced."""
    client = wallet.client
    prefix = uuid.uuid4().hex[:10]  # examples share one Redis; ids keep them apart
    table = f"{prefix}-t"
    players = [f"{prefix}-p{i}" for i in range(3)]
    model = Model(players)
    settled: list[pb.SettleHandRequest] = []
    for name in players:
        await client.create_account(name)
        opening = data.draw(st.integers(0, 2_000), label="opening deposit")
        if opening:
            await client.deposit(name, opening, "opening")
            model.accounts[name] = opening

    for step in range(data.draw(st.integers(8, 30), label="steps")):
        op = data.draw(
            st.sampled_from(
                ["deposit", "withdraw", "buy_in", "buy_in", "settle", "settle", "retry",
                 "cash_out"]
            ),
            label="op",
        )
        key = f"k{step}"
        if op == "deposit":
            name = data.draw(st.sampled_from(players))
            amount = data.draw(st.integers(1, 1_000))
            await client.deposit(name, amount, key)
            model.accounts[name] += amount
        elif op == "withdraw":
            name = data.draw(st.sampled_from(players))
            amount = data.draw(st.integers(1, 1_200))
            call = client.stub.Withdraw(
                pb.WithdrawRequest(player_id=name, amount=amount, idempotency_key=key),
                metadata=client.metadata(OPERATOR),
            )
            if amount > model.accounts[name]:
                await expect_refused(call, "insufficient_funds")
            else:
                await call
                model.accounts[name] -= amount
        elif op == "buy_in":
            name = data.draw(st.sampled_from(players))
            seat = data.draw(st.integers(1, SEATS))
            amount = data.draw(st.integers(1, 800))
            call = client.buy_in(name, table, seat, amount, key)
            if model.holder.get(seat, name) != name:
                await expect_refused(call, "seat_taken")
            elif amount > model.accounts[name]:
                await expect_refused(call, "insufficient_funds")
            else:
                await call
                model.accounts[name] -= amount
                model.escrow[seat] += amount
                model.holder[seat] = name
        elif op == "settle" and model.holder:
            request = draw_settlement(data, model, table, f"h{step}")
            event("settled with rake" if request.rake else "settled without rake")
            await client.settle(request)
            for s in request.seats:
                model.escrow[s.seat] += s.amount_won - s.amount_in
            settled.append(request)
        elif op == "retry" and settled:
            request = data.draw(st.sampled_from(settled))
            assert (await client.settle(request)).replayed
        elif op == "cash_out" and model.holder:
            seat = data.draw(st.sampled_from(sorted(model.holder)))
            name = model.holder.pop(seat)
            reply = await client.cash_out(name, table, seat, key)
            assert reply.amount == model.escrow[seat]
            model.accounts[name] += model.escrow[seat]
            model.escrow[seat] = 0

    for name, expected in model.accounts.items():
        assert await client.player_balance(name) == expected
    assert await client.escrows(table) == {s: model.escrow[s] for s in model.holder}
    store = wallet.deps.store
    balances = await store.balances()
    assert sum(balances.values()) == 0
    assert replay(await store.ledger()) == balances


def draw_settlement(
    data: st.DataObject, model: Model, table: str, hand_id: str
) -> pb.SettleHandRequest:
    """A balanced settlement of some held seats, with a random rake policy and street."""
    seats = data.draw(
        st.lists(st.sampled_from(sorted(model.holder)), min_size=1, unique=True), label="seats"
    )
    amounts_in = {s: data.draw(st.integers(0, model.escrow[s])) for s in seats}
    pot = sum(amounts_in.values())
    policy = data.draw(
        st.sampled_from([RakePolicy(), RakePolicy(percent_bps=500, cap=30),
                         RakePolicy(percent_bps=1000, cap=7)])
    )
    street = data.draw(st.sampled_from(list(Street)))
    rake = compute_rake(pot, policy, street)
    remaining = pot - rake
    won = dict.fromkeys(seats, 0)
    for s in seats[:-1]:
        won[s] = data.draw(st.integers(0, remaining))
        remaining -= won[s]
    won[seats[-1]] += remaining
    return pb.SettleHandRequest(
        table_id=table,
        hand_id=hand_id,
        seats=[
            pb.SettlementSeat(
                seat=s, player_id=model.holder[s], amount_in=amounts_in[s], amount_won=won[s]
            )
            for s in seats
        ],
        rake=rake,
        rake_policy=pb.RakePolicy(percent_bps=policy.percent_bps, cap=policy.cap),
        ended_on_street=STREETS[street],
    )
