"""Regressions from the outside hostile test (issue 17), over real gRPC, a real wallet and
a real Redis: every move of a seat's money is serialized per seat and recorded as events,
checks happen before money moves, one idempotency rule for every command, resume points
checked, and a table's state lives in its stream alone."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest

from stud.v1 import room_pb2 as rpb
from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studkit import keys
from studkit.commandwindow import new_id
from studkit.mapping import is_room_event, room_event_from_envelope
from studkit.redis_client import connect
from studtest.table import OPERATOR, Room, act_once, fast_settings, player

pytestmark = pytest.mark.integration
DEPOSIT = 1_000_000


async def refusal(call: object) -> tuple[grpc.StatusCode, str]:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as exc:
        reason = dict(exc.trailing_metadata() or ()).get("stud-reason", "")
        return exc.code(), str(reason)
    raise AssertionError("the call was not refused")


async def sit(room: Room, table_id: str, seat: int, name: str, buy_in: int = 10_000) -> None:
    await room.fund(name, DEPOSIT)
    await room.client.call("SitDown", pb.SitDownRequest(
        table_id=table_id, seat=seat, buy_in=buy_in), player(name))


async def ledger_transactions(room: Room, name: str) -> int:
    reply = await room.wallet.client.stub.GetStatement(
        wpb.GetStatementRequest(account=wpb.AccountRef(player_id=name), page_size=500),
        metadata=room.wallet.client.metadata(OPERATOR), timeout=10)
    return len(reply.lines)


async def table_keys(redis_url: str, table_id: str) -> set[str]:
    """Every key of the table, found by a scan as the admin (the table's user may not)."""
    tag = f"{keys.TABLE_PREFIX}{{{table_id}}}:"
    admin = connect(redis_url)
    try:
        return {k.decode().removeprefix(tag)
                async for k in admin.scan_iter(match=f"{keys.TABLE_PREFIX}{{{table_id}}}:*")}
    finally:
        await admin.aclose()


async def room_events(room: Room, table_id: str) -> list[str]:
    stored = await room.table_deps.events.read(table_id)
    return [s.envelope.event_type for s in stored if is_room_event(s.envelope)]


async def test_f1_leaves_and_top_ups_at_once_never_strand_chips(room: Room) -> None:
    """F1: between hands a seated player sends 20 LeaveSeat and 20 AddChips(1000) at once.
    Whatever wins, the seat ends empty with no chip left in its escrow, another player can
    sit there, and the table deals on (it was stopped by reconciliation before)."""
    table_id = await room.client.open_table(settings=fast_settings(next_hand_delay_ms=600_000))
    for round_ in range(3):
        name = f"p{round_}"
        await sit(room, table_id, 1, name)
        calls = []
        for i in range(20):
            calls.append(room.client.call("LeaveSeat", pb.LeaveSeatRequest(
                table_id=table_id, seat=1, command_id=new_id(f"l{round_}-{i}")), player(name)))
            calls.append(room.client.call("AddChips", pb.AddChipsRequest(
                table_id=table_id, seat=1, amount=1_000, command_id=new_id(f"a{round_}-{i}")),
                player(name)))
        results = await asyncio.gather(*calls, return_exceptions=True)
        for result in results:
            if isinstance(result, grpc.aio.AioRpcError):
                assert result.code() in (grpc.StatusCode.FAILED_PRECONDITION,
                                         grpc.StatusCode.PERMISSION_DENIED), result
            else:
                assert isinstance(result, pb.CommandReply)
        view = await room.client.wait_for(table_id, lambda v: not v.seats, timeout=20)
        assert view.status == pb.TABLE_STATUS_OPEN
        async with asyncio.timeout(20):
            while await room.wallet.client.escrows(table_id) != {}:
                await asyncio.sleep(0.05)
        assert await room.wallet.client.player_balance(name) == DEPOSIT
    await sit(room, table_id, 1, "newcomer")
    assert [s.player_id for s in (await room.client.view(table_id)).seats] == ["newcomer"]


async def test_f6_a_stale_top_up_is_refused_and_moves_nothing(room: Room) -> None:
    table_id = await room.client.open_table()
    await sit(room, table_id, 1, "ann")
    await sit(room, table_id, 2, "bob")
    view = await room.client.view(table_id)
    stale = max(0, view.version - 5)
    balance = await room.wallet.client.player_balance("ann")
    code, reason = await refusal(room.client.call("AddChips", pb.AddChipsRequest(
        table_id=table_id, seat=1, amount=1_000, expected_sequence=stale), player("ann")))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "stale")
    assert await room.wallet.client.player_balance("ann") == balance
    assert "TopUpQueued" not in await room_events(room, table_id)


async def test_f7_a_stale_sit_down_moves_no_money(room: Room) -> None:
    """F7: 25 SitDowns refused as stale wrote 50 ledger transactions; now none."""
    table_id = await room.client.open_table()
    await sit(room, table_id, 1, "ann")
    await room.fund("cat", DEPOSIT)
    before = await ledger_transactions(room, "cat")
    for _ in range(25):
        code, reason = await refusal(room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=3, buy_in=10_000, expected_sequence=1), player("cat")))
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "stale")
    assert await ledger_transactions(room, "cat") == before
    assert await room.wallet.client.player_balance("cat") == DEPOSIT
    assert "BuyInRequested" not in [e for e in await room_events(room, table_id)][2:]


async def test_f8_every_command_has_one_idempotency_rule(room: Room) -> None:
    """F8: AddChips and LeaveSeat refuse a command id used for another command;
    SetMuckPreference and CloseTable honour their command id (a retry is a duplicate)."""
    table_id = await room.client.open_table(settings=fast_settings(next_hand_delay_ms=600_000))
    await sit(room, table_id, 1, "ann")
    ann = player("ann")
    same = new_id("same")
    first = await room.client.call("AddChips", pb.AddChipsRequest(
        table_id=table_id, seat=1, amount=1_000, command_id=same), ann)
    assert not first.duplicate
    code, reason = await refusal(room.client.call("AddChips", pb.AddChipsRequest(
        table_id=table_id, seat=1, amount=2_000, command_id=same), ann))
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "command_id_reused")
    code, reason = await refusal(room.client.call("LeaveSeat", pb.LeaveSeatRequest(
        table_id=table_id, seat=1, command_id=same), ann))
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "command_id_reused")
    muck = pb.SetMuckPreferenceRequest(table_id=table_id, seat=1, muck=True,
                                       command_id=new_id("m1"))
    assert not (await room.client.call("SetMuckPreference", muck, ann)).duplicate
    assert (await room.client.call("SetMuckPreference", muck, ann)).duplicate
    muck.muck = False
    code, reason = await refusal(room.client.call("SetMuckPreference", muck, ann))
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "command_id_reused")
    close = pb.CloseTableRequest(table_id=table_id, command_id="c1")
    assert not (await room.client.call("CloseTable", close, OPERATOR)).duplicate
    assert (await room.client.call("CloseTable", close, OPERATOR)).duplicate
    assert (await room.client.view(table_id)).status == pb.TABLE_STATUS_CLOSED
    # A leave retried after it stood the seat up gets its outcome, not "not your seat".
    await room.client.wait_for(table_id, lambda v: not v.seats, timeout=20)


async def test_f9_bad_resume_points_are_refused(room: Room) -> None:
    table_id = await room.client.open_table()
    view = await room.client.view(table_id)
    cases = {
        "9" * 10_000: grpc.StatusCode.INVALID_ARGUMENT,
        "0-" + "9" * 10_000: grpc.StatusCode.INVALID_ARGUMENT,
        "0-١٢": grpc.StatusCode.INVALID_ARGUMENT,  # Arabic-Indic digits
        "0-+1": grpc.StatusCode.INVALID_ARGUMENT,
        f"0-{view.version + 5}": grpc.StatusCode.OUT_OF_RANGE,
    }
    for event_id, code in cases.items():
        call = room.client.stub.WatchTable(
            pb.WatchTableRequest(table_id=table_id, after_event_id=event_id),
            metadata=room.client.md(OPERATOR), timeout=5)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for _record in call:
                pass
        assert info.value.code() == code, event_id
    call = room.client.stub.WatchTable(
        pb.WatchTableRequest(table_id=table_id, after_sequence=view.version + 100),
        metadata=room.client.md(OPERATOR), timeout=5)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        async for _record in call:
            pass
    assert info.value.code() == grpc.StatusCode.OUT_OF_RANGE


async def test_a_table_s_state_lives_in_its_stream_alone(room: Room, redis_url: str) -> None:
    """Opened, played, topped up, sat out, left and closed through the API: the table's only
    keys are the stream, the store's bookkeeping, the lease, a snapshot and the lobby line;
    closes, settlements, buy-ins and cash-outs are events."""
    table_id = await room.client.open_table()
    await sit(room, table_id, 1, "ann")
    await sit(room, table_id, 2, "bob")
    rng = random.Random(3)
    async with asyncio.timeout(60):
        while (view := await room.client.view(table_id)).hands_started < 2:
            if not await act_once(room.client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)
    await room.client.call("AddChips", pb.AddChipsRequest(table_id=table_id, seat=1,
                                                          amount=1_000), player("ann"))
    await room.client.call("SitOut", pb.SitOutRequest(table_id=table_id, seat=2),
                           player("bob"))
    await room.client.call("LeaveSeat", pb.LeaveSeatRequest(table_id=table_id, seat=1),
                           player("ann"))
    await room.client.call("CloseTable", pb.CloseTableRequest(table_id=table_id), OPERATOR)
    async with asyncio.timeout(60):
        while (view := await room.client.view(table_id)).seats:
            if not await act_once(room.client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)
        while await room.wallet.client.escrows(table_id) != {}:
            await asyncio.sleep(0.05)
    await room.table_deps.app.tables.publish_summaries()
    found = await table_keys(redis_url, table_id)
    assert found <= {"events", "commands", "version", "owner", "trimmed", "snapshot",
                     "summary", "chain"}, found  # chain: the stream's head digest
    assert {"events", "commands", "version"} <= found
    kinds = set(await room_events(room, table_id))
    assert {"SettingsSet", "BuyInRequested", "TopUpQueued", "CashOutRequested",
            "CashOutPaid", "HandSettled", "TableClosed"} <= kinds, kinds


async def test_a_table_written_with_side_keys_is_migrated_when_it_loads(
        room: Room, redis_url: str) -> None:
    """A table from before the room events kept intents, settings, settled and closed in
    keys beside the stream: loading it records them as room events and deletes the keys."""
    table_id = await room.client.open_table(settings=fast_settings(next_hand_delay_ms=600_000))
    await sit(room, table_id, 1, "ann")
    app = room.table_deps.app
    client = connect(redis_url)
    settings = pb.TableSettings(action_time_s=20, time_bank_s=30, buy_in_min=5_000,
                                buy_in_max=50_000, next_hand_delay_ms=600_000,
                                next_hand_delay_set=True, timeouts_before_sit_out=2,
                                sit_out_limit_s=600, rathole_window_s=1800, outage_limit_s=60)
    await client.set(keys.legacy_table_key(table_id, "settings"),
                     settings.SerializeToString())
    await client.hset(keys.legacy_table_key(table_id, "intents"), mapping={"muck:1": "1"})
    await client.set(keys.legacy_table_key(table_id, "closed"), "1")
    await app.tables.drop(table_id, release=True)
    await app.tables.take(table_id)
    view = await room.client.view(table_id, player("ann"))
    assert view.status == pb.TABLE_STATUS_CLOSED
    assert view.muck_preference
    assert view.settings.buy_in_min == 5_000
    assert not (await table_keys(redis_url, table_id)) & {"settings", "intents", "settled",
                                                       "closed"}
    stored = await room.table_deps.events.read(table_id)
    migrated = [room_event_from_envelope(s.envelope) for s in stored
                if s.envelope.command_id == "s:migrate:side-keys:v1"]
    assert [type(e) for e in migrated] == [rpb.SettingsSet, rpb.TableClosed,
                                           rpb.MuckPreferenceSet]


async def test_a_resumed_former_owner_changes_nothing(room: Room) -> None:
    """An owner holding a pending top-up (queued during a hand) pauses; another owner takes
    the table over, sees the top-up in the log and changes it (the player leaves); the old
    owner resumes and tries to write its own view of the seat's money: the fence refuses
    it, and the new owner's table is unchanged (the side-key hole: intents written outside
    the fence, gone with the keys)."""
    table_id = await room.client.open_table()
    await sit(room, table_id, 1, "ann")
    await sit(room, table_id, 2, "bob")
    await room.client.wait_for(table_id, lambda v: v.HasField("hand") and v.hand.to_act != 0)
    await room.client.call("AddChips", pb.AddChipsRequest(
        table_id=table_id, seat=1, amount=1_000, command_id=new_id("top")), player("ann"))
    tables = room.table_deps.app.tables
    old = tables.drivers[table_id].actor
    saga = old.room.saga(1)
    assert saga is not None and saga.kind == "top_up"
    # The old owner pauses (its driver stops, as a frozen process's would); the lease goes.
    await tables.drop(table_id, release=True)
    new = await tables.take(table_id)
    assert new is not None and new.actor.epoch != old.epoch
    assert new.actor.room.saga(1) == saga  # the new owner found the intent in the log
    await room.client.call("LeaveSeat", pb.LeaveSeatRequest(
        table_id=table_id, seat=1, command_id=new_id("bye")), player("ann"))
    # The old owner resumes and acts on what it believed: every write is refused.
    from studkit.store import NotOwner
    from table.room import DropTopUp, SetMuck
    with pytest.raises(NotOwner):
        await old.commit(DropTopUp(1, saga.wallet_key, "stale owner"), "s:old-owner-drop")
    with pytest.raises(NotOwner):
        await old.commit(SetMuck(1, "ann", True), "s:old-owner-muck")
    assert old.fenced
    stored = await room.table_deps.events.read(table_id)
    assert not [s for s in stored if s.envelope.command_id.startswith("s:old-owner")]
    assert await room.table_deps.events.recorded(table_id, "s:old-owner-drop") is None
    # The new owner's table is what its own log says: the leave it took, the top-up kept.
    assert new.actor.room.leaving.get(1) == "ann" or new.actor.room.table.seat(1) is None
    dropped = [room_event_from_envelope(s.envelope) for s in stored
               if s.envelope.event_type == "TopUpDropped"]
    assert not dropped
    assert 1 not in new.actor.room.muck


async def test_f9_the_lobby_comes_in_pages(room: Room) -> None:
    """F9: ListTables pages (about 60,000 tables reached the 4 MB message limit): every
    table exactly once across pages, in id order; a bad page size or token is refused."""
    made = sorted([await room.client.open_table(table_id=f"lobby-{n:02d}") for n in range(7)])
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        page = await room.client.call("ListTables", pb.ListTablesRequest(
            page_size=3, page_token=token), OPERATOR)
        assert len(page.tables) <= 3
        seen.extend(t.table_id for t in page.tables)
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert seen == made and pages == 3
    for bad in (pb.ListTablesRequest(page_size=1001),
                pb.ListTablesRequest(page_token="not a token\n")):
        code, _reason = await refusal(room.client.call("ListTables", bad, OPERATOR))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
