"""A seat's life at the table as players and the operator rely on it: a seat sitting out too
long is stood up and paid out, the rathole rule, a wallet outage (the hand waits for its
settlement, nothing is dealt, it is settled once when the wallet is back; a buy-in meanwhile
fails and moves nothing), the money saga after a crash (an escrow the table never recorded is
refunded, a top-up paid but not recorded is added) and a stale pre-selected action."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import grpc
import pytest

from stud.v1 import common_pb2 as cpb
from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from stud.v1 import wallet_pb2 as wpb
from studkit.auth import Principal
from studkit.commandwindow import new_id
from studkit.grpc_server import rpc_error_reason
from studtest.redis import TestRedis
from studtest.table import (
    OPERATOR,
    Room,
    TableClient,
    act_once,
    fast_settings,
    player,
    running_room,
    running_table,
    table_settings,
)
from studtools.devkeys import DevKeys
from table.app import command_key
from table.clients import key
from wallet.server import create_server as create_wallet_server

pytestmark = pytest.mark.integration
DEPOSIT = 1_000_000


async def sit(room: Room, table_id: str, seat: int, name: str, buy_in: int = 10_000,
              fund: bool = True) -> pb.CommandReply:
    if fund:
        await room.fund(name, DEPOSIT)
    reply: pb.CommandReply = await room.client.call("SitDown", pb.SitDownRequest(
        table_id=table_id, seat=seat, buy_in=buy_in), player(name))
    return reply


async def refusal(call: Any) -> tuple[grpc.StatusCode, str | None]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value.code(), rpc_error_reason(caught.value)


async def history_kinds(client: TableClient, table_id: str, hand: int,
                        who: Principal = OPERATOR) -> list[str]:
    history = await client.stub.GetHandHistory(
        pb.GetHandHistoryRequest(table_id=table_id, hand_number=hand),
        metadata=client.md(who), timeout=10)
    return [str(r.event.WhichOneof("event")) for r in history.events]


async def records(client: TableClient, table_id: str) -> list[pb.TableEventRecord]:
    """The table's whole record so far, as the operator watches it."""
    upto = (await client.view(table_id)).version
    out: list[pb.TableEventRecord] = []
    call = client.stub.WatchTable(pb.WatchTableRequest(table_id=table_id),
                                  metadata=client.md(OPERATOR))
    async with asyncio.timeout(10):
        async for record in call:
            out.append(record)
            if record.sequence >= upto:
                break
    call.cancel()
    return out


async def statement(room: Room, account: wpb.AccountRef) -> list[wpb.StatementLine]:
    lines: list[wpb.StatementLine] = []
    token = ""
    while True:
        page = await room.wallet.client.stub.GetStatement(
            wpb.GetStatementRequest(account=account, page_size=500, page_token=token),
            metadata=room.wallet.client.metadata(OPERATOR), timeout=10)
        lines.extend(page.lines)
        token = page.next_page_token
        if not token:
            return lines


async def ledger_total(room: Room, table_id: str, names: list[str]) -> int:
    """Players' balances + the table's escrows + the house: all the money deposited."""
    balances = [await room.wallet.client.player_balance(n) for n in names]
    escrows = await room.wallet.client.escrows(table_id)
    house = await room.wallet.client.balance(wpb.AccountRef(
        system=wpb.SYSTEM_ACCOUNT_HOUSE))
    external = await room.wallet.client.balance(wpb.AccountRef(
        system=wpb.SYSTEM_ACCOUNT_EXTERNAL))
    total = sum(balances) + sum(escrows.values()) + house
    assert total == -external  # double entry: every account sums to zero
    return total


async def balance_when_up(room: Room, name: str) -> int | None:
    """``name``'s balance, None while this client cannot reach the wallet yet."""
    try:
        return await room.wallet.client.player_balance(name)
    except grpc.aio.AioRpcError as exc:
        if exc.code() is not grpc.StatusCode.UNAVAILABLE:
            raise
        return None


def stacks(view: pb.TableView) -> dict[int, int]:
    return {s.seat: s.stack for s in view.seats if s.stack}


def passive(actions: list[Any]) -> Any:
    """Check, else call, else bring in (never fold): hands reach the showdown."""
    for kind in (6, 5, 1):
        for action in actions:
            if action.kind == kind:
                return action
    return actions[0]


def aggressive(actions: list[Any]) -> Any:
    """Complete, bet or raise when possible, else call (or bring in)."""
    for kind in (2, 3, 4, 5, 1):
        for action in actions:
            if action.kind == kind:
                return action
    return actions[0]


def folding(actions: list[Any]) -> Any:
    """Fold when possible, else as :func:`passive`."""
    return next((a for a in actions if a.kind == 7), None) or passive(actions)


async def play(client: TableClient, table_id: str, until: Callable[[pb.TableView], bool],
               choose: Callable[[list[Any]], Any],
               by_player: dict[str, Callable[[list[Any]], Any]] | None = None,
               timeout: float = 20) -> pb.TableView:
    """Act for whoever is to act until ``until(view)``: as ``by_player`` says for the
    players it names, else as ``choose`` says."""
    async with asyncio.timeout(timeout):
        while True:
            view = await client.view(table_id)
            if until(view):
                return view
            holder = next((s.player_id for s in view.seats if s.seat == view.hand.to_act), "")
            pick = (by_player or {}).get(holder, choose)
            if not await act_once(client, table_id, view, pick):
                await asyncio.sleep(0.01)


def hand_over(view: pb.TableView) -> bool:
    return view.HasField("hand") and view.hand.phase == pb.HAND_PHASE_COMPLETE


# --- sitting out too long ------------------------------------------------------------------


async def test_a_seat_sitting_out_past_the_limit_is_stood_up_and_paid_out(room: Room) -> None:
    """Ann sits out; past the table's sit-out limit she is stood up and her whole stack is
    back in her account. Bob, sitting in, keeps his seat."""
    table_id = await room.client.open_table(settings=fast_settings(sit_out_limit_s=1))
    await sit(room, table_id, 1, "ann")
    await room.client.call("SitOut", pb.SitOutRequest(table_id=table_id, seat=1),
                           player("ann"))
    await sit(room, table_id, 2, "bob")
    view = await room.client.wait_for(
        table_id, lambda v: [s.player_id for s in v.seats] == ["bob"], timeout=20)
    assert view.hands_started == 0
    async with asyncio.timeout(10):
        while await room.wallet.client.player_balance("ann") != DEPOSIT:
            await asyncio.sleep(0.02)
    assert await room.wallet.client.escrows(table_id) == {2: 10_000}
    left = [r.event.player_left for r in await records(room.client, table_id)
            if r.event.WhichOneof("event") == "player_left"]
    assert [(e.seat, e.player_id, e.stack) for e in left] == [(1, "ann", 10_000)]
    assert await ledger_total(room, table_id, ["ann", "bob"]) == 2 * DEPOSIT


# --- the rathole rule ----------------------------------------------------------------------


async def test_rathole_rule(room: Room) -> None:
    """Ann tops up to 15,000 and leaves: within the window she must bring back at least
    15,000 (refused with reason rathole, nothing moved); with 15,000 she sits down, at any
    seat; once the window has passed any buy-in in range is taken."""
    # The window must outlast the refusals' few calls on a busy machine; it is waited out
    # once, at the end.
    table_id = await room.client.open_table(settings=fast_settings(
        rathole_window_s=4, buy_in_max=20_000))
    await sit(room, table_id, 1, "ann")
    await room.client.call("AddChips", pb.AddChipsRequest(table_id=table_id, seat=1,
                                                          amount=5_000), player("ann"))
    await room.client.call("LeaveSeat", pb.LeaveSeatRequest(table_id=table_id, seat=1),
                           player("ann"))
    assert await room.wallet.client.player_balance("ann") == DEPOSIT
    version = (await room.client.view(table_id)).version
    for seat, buy_in in ((1, 10_000), (3, 14_999)):
        code, reason = await refusal(room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=buy_in), player("ann")))
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "rathole")
    assert (await room.client.view(table_id)).version == version
    assert await room.wallet.client.player_balance("ann") == DEPOSIT
    assert await room.wallet.client.escrows(table_id) == {}
    await sit(room, table_id, 3, "ann", buy_in=15_000, fund=False)
    assert stacks(await room.client.view(table_id)) == {3: 15_000}
    # Leave again with 15,000, wait out the window: 10,000 is taken.
    await room.client.call("LeaveSeat", pb.LeaveSeatRequest(table_id=table_id, seat=3),
                           player("ann"))
    await asyncio.sleep(4.2)
    await sit(room, table_id, 1, "ann", buy_in=10_000, fund=False)
    assert stacks(await room.client.view(table_id)) == {1: 10_000}
    assert await room.wallet.client.player_balance("ann") == DEPOSIT - 10_000


async def test_rathole_above_the_maximum_buy_in(room: Room) -> None:
    """A winner leaving with more than the table's maximum buy-in may come back within the
    window: with at least what she left with (the maximum does not keep her out), never
    less."""
    table_id = await room.client.open_table(settings=fast_settings(
        rathole_window_s=600, buy_in_max=10_000, next_hand_delay_ms=600_000))
    await sit(room, table_id, 1, "ann")
    await sit(room, table_id, 2, "bob")
    # Ann bets, Bob folds: ann wins the antes and whatever Bob put in.
    view = await play(room.client, table_id, hand_over, aggressive, {"bob": folding})
    left_with = {s.player_id: s.stack for s in view.seats}["ann"]
    assert left_with > 10_000
    await room.client.wait_for(table_id, lambda v: v.status == pb.TABLE_STATUS_OPEN)
    seat = next(s.seat for s in view.seats if s.player_id == "ann")
    await room.client.call("LeaveSeat", pb.LeaveSeatRequest(table_id=table_id, seat=seat),
                           player("ann"))
    # The seat is free once her cash-out is paid (the saga's next step, later on a busy
    # machine): until then a sit-down there is seat_taken, not the rathole rule.
    async with asyncio.timeout(30):
        while True:
            code, reason = await refusal(room.client.call("SitDown", pb.SitDownRequest(
                table_id=table_id, seat=seat, buy_in=10_000), player("ann")))
            if reason != "seat_taken":
                break
            await asyncio.sleep(0.05)
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "rathole")
    code, reason = await refusal(room.client.call("SitDown", pb.SitDownRequest(
        table_id=table_id, seat=seat, buy_in=left_with + 1), player("ann")))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "buy_in_out_of_range")
    await sit(room, table_id, seat, "ann", buy_in=left_with, fund=False)
    assert {s.player_id: s.stack for s in (await room.client.view(table_id)).seats}[
        "ann"] == left_with


# --- the wallet down -----------------------------------------------------------------------


async def test_a_hand_waits_for_the_wallet_and_is_settled_once(room: Room) -> None:
    """The wallet goes down mid-hand: the completed hand waits for its settlement (the view
    says the table waits for the wallet), no card is dealt meanwhile, a SitDown fails with
    UNAVAILABLE and moves nothing; once the wallet is back the hand is settled once and play
    resumes."""
    table_id = await room.client.open_table()
    await sit(room, table_id, 1, "ann")
    await sit(room, table_id, 2, "bob")
    await room.fund("cat", DEPOSIT)
    await room.client.wait_for(table_id, lambda v: v.HasField("hand") and v.hand.to_act != 0)
    wallet = room.wallet
    assert wallet.server is not None
    await wallet.server.stop(None)
    # The hand is played out (fold at once) while the wallet is away.
    view = await play(room.client, table_id, hand_over, folding)
    assert view.hands_started == 1
    view = await room.client.wait_for(table_id, lambda v: v.status == pb.TABLE_STATUS_WAITING)
    assert "wallet" in view.status_reason
    code, _reason = await refusal(room.client.call("SitDown", pb.SitDownRequest(
        table_id=table_id, seat=3, buy_in=10_000), player("cat")))
    assert code is grpc.StatusCode.UNAVAILABLE
    await asyncio.sleep(1.0)
    still = await room.client.view(table_id)
    assert (still.hands_started, still.version) == (1, view.version)
    assert [s.player_id for s in still.seats] == ["ann", "bob"]
    # The wallet comes back on the same address.
    server, _port = create_wallet_server(
        replace(wallet.settings, addr=f"127.0.0.1:{wallet.port}"), wallet.deps)
    await server.start()
    try:
        view = await room.client.wait_for(table_id, lambda v: v.hands_started >= 2, timeout=20)
        assert view.status == pb.TABLE_STATUS_OPEN
        settlements = set()
        for seat in (1, 2):
            for line in await statement(room, wpb.AccountRef(
                    seat=wpb.SeatAccount(table_id=table_id, seat=seat))):
                if line.kind == wpb.TRANSACTION_KIND_SETTLEMENT:
                    assert line.hand_number == 1
                    settlements.add(line.transaction_id)
        assert len(settlements) == 1
        # Nothing moved for cat's SitDown while the wallet was down.
        assert await wallet.client.player_balance("cat") == DEPOSIT
        assert set(await wallet.client.escrows(table_id)) == {1, 2}
        assert await ledger_total(room, table_id, ["ann", "bob", "cat"]) == 3 * DEPOSIT
    finally:
        await server.stop(None)


async def test_leaving_while_the_wallet_is_down_pays_out_when_it_is_back(room: Room) -> None:
    """Ann leaves while the wallet is down: her seat is free at once (the answer does not
    wait for the wallet), her chips go back to her account once the wallet is back, without
    a restart, and the table keeps dealing (no escrow is left without its seat)."""
    table_id = await room.client.open_table()
    await sit(room, table_id, 1, "ann")
    wallet = room.wallet
    assert wallet.server is not None
    await wallet.server.stop(None)
    await room.client.stub.LeaveSeat(
        pb.LeaveSeatRequest(table_id=table_id, seat=1, command_id=new_id()),
        metadata=room.client.md(player("ann")), timeout=8)
    assert not (await room.client.view(table_id)).seats
    server, _port = create_wallet_server(
        replace(wallet.settings, addr=f"127.0.0.1:{wallet.port}"), wallet.deps)
    await server.start()
    try:
        async with asyncio.timeout(20):
            while await balance_when_up(room, "ann") != DEPOSIT:
                await asyncio.sleep(0.05)
        assert await wallet.client.escrows(table_id) == {}
        await sit(room, table_id, 2, "bob")
        await sit(room, table_id, 3, "cat")
        view = await play(room.client, table_id, lambda v: v.hands_started >= 2, passive)
        assert view.status != pb.TABLE_STATUS_STOPPED, view.status_reason
        assert await ledger_total(room, table_id, ["ann", "bob", "cat"]) == 3 * DEPOSIT
    finally:
        await server.stop(None)


async def test_a_buy_in_that_landed_after_the_table_gave_up_is_seated(room: Room) -> None:
    """Cat's SitDown is answered UNAVAILABLE (the wallet is down), but its last try did
    reach the wallet (simulated: the same BuyIn, same key, once the wallet is back). The
    live table must not stop on that escrow: it seats Cat with it, once, and his retry with
    the same command id gets that outcome."""
    table_id = await room.client.open_table(settings=fast_settings(next_hand_delay_ms=200))
    await sit(room, table_id, 1, "ann")
    await sit(room, table_id, 2, "bob")
    await room.fund("cat", DEPOSIT)
    wallet = room.wallet
    assert wallet.server is not None
    await wallet.server.stop(None)
    command_id = new_id()
    code, _reason = await refusal(room.client.call("SitDown", pb.SitDownRequest(
        table_id=table_id, seat=3, buy_in=7_000, command_id=command_id), player("cat")))
    assert code is grpc.StatusCode.UNAVAILABLE
    server, _port = create_wallet_server(
        replace(wallet.settings, addr=f"127.0.0.1:{wallet.port}"), wallet.deps)
    await server.start()
    try:
        async with asyncio.timeout(20):
            while await balance_when_up(room, "cat") is None:
                await asyncio.sleep(0.05)
        await wallet.client.buy_in("cat", table_id, 3, 7_000,
                                   key(table_id, command_key(player("cat"), command_id)))
        view = await play(room.client, table_id, lambda v: v.hands_started >= 3 or (
            v.status == pb.TABLE_STATUS_STOPPED), passive, timeout=30)
        assert view.status != pb.TABLE_STATUS_STOPPED, view.status_reason
        assert {s.seat: s.player_id for s in view.seats}[3] == "cat"
        again = await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=3, buy_in=7_000, command_id=command_id), player("cat"))
        assert again.duplicate
        assert await wallet.client.player_balance("cat") == DEPOSIT - 7_000
    finally:
        await server.stop(None)


async def test_a_top_up_retried_with_its_command_id_applies_once(room: Room) -> None:
    """A client retries AddChips with the same command id, as the SDK does on UNAVAILABLE:
    while the wallet is down the retry is UNAVAILABLE again (not "a top-up is pending"); once
    it is back the retry succeeds, and a retry after that answers the recorded outcome (not
    "above the maximum" for the stack it already made). The chips move once."""
    table_id = await room.client.open_table(settings=fast_settings(buy_in_max=15_000))
    await sit(room, table_id, 1, "ann")
    wallet = room.wallet
    assert wallet.server is not None
    await wallet.server.stop(None)
    request = pb.AddChipsRequest(table_id=table_id, seat=1, amount=5_000,
                                 command_id=new_id())
    for _ in range(2):
        code, _reason = await refusal(room.client.call("AddChips", request, player("ann")))
        assert code is grpc.StatusCode.UNAVAILABLE
    server, _port = create_wallet_server(
        replace(wallet.settings, addr=f"127.0.0.1:{wallet.port}"), wallet.deps)
    await server.start()
    try:
        async with asyncio.timeout(20):
            while True:
                try:
                    await room.client.call("AddChips", request, player("ann"))
                    break
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() is grpc.StatusCode.UNAVAILABLE, exc
        again = await room.client.call("AddChips", request, player("ann"))
        assert again.duplicate
        assert stacks(await room.client.view(table_id)) == {1: 15_000}
        assert await wallet.client.escrows(table_id) == {1: 15_000}
        assert await wallet.client.player_balance("ann") == DEPOSIT - 15_000
    finally:
        await server.stop(None)


# --- the money saga after a crash ----------------------------------------------------------


async def test_money_moved_but_not_recorded_is_repaired_on_restart(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys) -> None:
    """The table crashes after the wallet moved money it never recorded: cat's buy-in for
    seat 3 (refunded on restart) and ann's top-up asked for during the hand (added when the
    hand ends, once). Afterwards every escrow equals its stack and the ledger balances."""
    async with running_room(redis_server, redis_url, dev_keys) as room:
        table_id = await room.client.open_table()
        await sit(room, table_id, 1, "ann")
        await sit(room, table_id, 2, "bob")
        await room.fund("cat", DEPOSIT)
        await room.client.wait_for(table_id,
                                   lambda v: v.HasField("hand") and v.hand.to_act != 0)
        topup_id = new_id()
        await room.client.call("AddChips", pb.AddChipsRequest(
            table_id=table_id, seat=1, amount=5_000, command_id=topup_id), player("ann"))
        await room.table_deps.app.stop()  # the table "crashes" ...
        # ... right after the wallet moved: ann's top-up (the table's own key for it) and
        # cat's buy-in for seat 3, which the table never recorded.
        wallet = room.wallet.client
        await wallet.buy_in("ann", table_id, 1, 5_000,
                            key(table_id, command_key(player("ann"), topup_id)))
        await wallet.buy_in("cat", table_id, 3, 7_000, key(table_id, "c:player:cat:lost"))
        assert await wallet.player_balance("cat") == DEPOSIT - 7_000
        settings = table_settings(redis_server, redis_url, dev_keys, room.dealer.port,
                                  room.wallet.port)
        async with running_table(settings) as (_deps, port), \
                grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            client = TableClient(pb_grpc.TableServiceStub(channel),  # type: ignore[no-untyped-call]
                                 room.client.tokens)
            await play(client, table_id, hand_over, random.Random(2).choice)
            # Stop play to compare: both sit out (the next hand may have started).
            for seat in (await client.view(table_id)).seats:
                await client.call("SitOut", pb.SitOutRequest(table_id=table_id,
                                                             seat=seat.seat),
                                  player(seat.player_id))
            await play(client, table_id, lambda v: not v.HasField("hand") or (
                v.hand.phase == pb.HAND_PHASE_COMPLETE), random.Random(3).choice)
            async with asyncio.timeout(15):
                while True:
                    view = await client.view(table_id)
                    escrows = {k: v for k, v in (await wallet.escrows(table_id)).items() if v}
                    if escrows == stacks(view) and sum(escrows.values()) == 25_000:
                        break
                    await asyncio.sleep(0.05)
            assert view.status != pb.TABLE_STATUS_STOPPED, view.status_reason
            # Cat's buy-in is back in his account; ann's top-up was added once (her
            # account paid it once; the stacks hold both buy-ins and it).
            assert await wallet.player_balance("cat") == DEPOSIT
            assert [s.seat for s in view.seats] == [1, 2]
            assert await wallet.player_balance("ann") == DEPOSIT - 15_000
            added = [r.event.chips_added for r in await records(client, table_id)
                     if r.event.WhichOneof("event") == "chips_added"]
            assert [(a.seat, a.amount) for a in added] == [(1, 5_000)]
            assert await ledger_total(room, table_id, ["ann", "bob", "cat"]) == 3 * DEPOSIT


# --- a stale pre-selected action -----------------------------------------------------------


async def test_a_stale_preselected_action_is_refused(room: Room) -> None:
    """A check/fold pre-selected on 3rd street (its expected_sequence from then) arrives on
    4th street: refused as stale, nothing appended; the seat then acts with a fresh one."""
    table_id = await room.client.open_table()
    await sit(room, table_id, 1, "ann")
    await sit(room, table_id, 2, "bob")
    third = await room.client.wait_for(
        table_id, lambda v: v.HasField("hand") and v.hand.to_act != 0)
    view = await play(room.client, table_id,
                      lambda v: v.hand.street == cpb.STREET_FOURTH and v.hand.to_act != 0,
                      passive)
    seat = view.hand.to_act
    name = next(s.player_id for s in view.seats if s.seat == seat)
    code, reason = await refusal(room.client.call("Check", pb.CheckRequest(
        table_id=table_id, seat=seat, expected_sequence=third.version), player(name)))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "stale")
    again = await room.client.view(table_id)
    assert again.version == view.version and again.hand.to_act == seat
    reply = await room.client.call("Check", pb.CheckRequest(
        table_id=table_id, seat=seat, expected_sequence=again.version), player(name))
    assert [r.event.WhichOneof("event") for r in reply.events][:1] == ["checked"]
    # A fold pre-selected in this hand reaches the next one: stale too.
    view = await play(room.client, table_id,
                      lambda v: v.hands_started == 2 and v.hand.to_act != 0, passive)
    seat = view.hand.to_act
    name = next(s.player_id for s in view.seats if s.seat == seat)
    code, reason = await refusal(room.client.call("Fold", pb.FoldRequest(
        table_id=table_id, seat=seat, expected_sequence=again.version), player(name)))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "stale")
    assert (await room.client.view(table_id)).version == view.version
