"""Command ids a player chooses equal to the ids the process manager derives from the log
(issue 29, G1): over real gRPC, a real Redis and a real wallet, a player registering with
``settle.e2`` or ``tick.<the next version>`` does not stop the
tournament's steps: it starts when full, and a cancel refunds everyone to an empty pool."""

from __future__ import annotations

import grpc
import pytest

from stud.v1 import tournament_pb2 as pb
from studkit.auth import Principal, Role
from studtest.tournament_service import RunningTournament, eventually
from studtest.wallet import RunningWallet

pytestmark = pytest.mark.integration

SNG = pb.TournamentConfig(name="sng", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=1000,
                          fee=100, seats=3, structure=pb.TournamentStructure(preset="turbo"))
FUNDS = 5000


def player(name: str) -> Principal:
    return Principal(Role.PLAYER, name)


async def funded(wallet: RunningWallet, *names: str) -> None:
    for name in names:
        await wallet.client.create_account(name)
        await wallet.client.deposit(name, FUNDS, f"d-{name}")


async def started_then_cancelled_to_an_empty_pool(
        tournament: RunningTournament, wallet: RunningWallet, tid: str,
        attacker_id: str | None = None) -> None:
    client = tournament.client
    await funded(wallet, "mal", "v1", "v2")
    await client.create(tid, SNG)
    if attacker_id is None:  # the next version, as the manager's clock derives it
        attacker_id = f"tick.{(await client.get(tid)).version + 1}"
    await client.register(tid, player("mal"), attacker_id)

    async def charged() -> bool:  # the manager's next rounds: its clock, the buy-in
        return bool((await client.get(tid)).entries[0].paid)
    await eventually(charged)
    await client.register(tid, player("v1"), "r-v1")
    await client.register(tid, player("v2"), "r-v2")

    async def started() -> bool:
        return (await client.get(tid)).phase == pb.TOURNAMENT_PHASE_RUNNING
    await eventually(started)
    view = await client.get(tid)
    assert all(e.paid for e in view.entries) and len(view.entries) == 3
    assert (await wallet.client.pool(tid)).balance == 3000
    await client.cancel(tid, "the attack is over", "c-1")

    async def refunded() -> bool:
        balances = [await wallet.client.player_balance(n) for n in ("mal", "v1", "v2")]
        return balances == [FUNDS] * 3
    await eventually(refunded)
    assert (await wallet.client.pool(tid)).balance == 0


@pytest.mark.parametrize("attacker_id", ["settle.e1", "settle.e2", "settle.e3"])
async def test_a_player_taking_a_managers_id_stops_nothing(
        tournament: RunningTournament, wallet: RunningWallet, attacker_id: str) -> None:
    await started_then_cancelled_to_an_empty_pool(tournament, wallet, "g1", attacker_id)


async def test_a_player_taking_the_next_ticks_id_does_not_freeze_the_start(
        tournament: RunningTournament, wallet: RunningWallet) -> None:
    await started_then_cancelled_to_an_empty_pool(tournament, wallet, "g1b")


async def test_two_players_may_choose_the_same_command_id(
        tournament: RunningTournament, wallet: RunningWallet) -> None:
    """Each caller's ids are their own: bob's ``r-1`` is not ann's."""
    client = tournament.client
    await funded(wallet, "ann", "bob")
    await client.create("same", SNG)
    ann = await client.register("same", player("ann"), "r-1")
    bob = await client.register("same", player("bob"), "r-1")
    assert (ann.entry_id, bob.entry_id) == ("e1", "e2")
    again = await client.register("same", player("bob"), "r-1")
    assert again.entry_id == "e2"
    with pytest.raises(grpc.aio.AioRpcError) as reused:
        await client.unregister("same", player("bob"), "r-1")
    assert reused.value.code() is grpc.StatusCode.ALREADY_EXISTS
