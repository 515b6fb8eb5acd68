"""``stud replay list|show|verify|export`` against hands played in the in-process room."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest
from pokerkit.notation import HandHistory

from rules.phh import parse_phh, parse_phhs
from stud.v1 import table_pb2 as pb
from studtest.table import OPERATOR, play_until, player
from table.clients import key

from .conftest import HANDS, NAMES, Played, run_cli, seeded_random

pytestmark = pytest.mark.integration


async def test_list_shows_every_hand(replay_env: Played) -> None:
    status, out = await run_cli(["replay", "list", "--table", replay_env.table_id, "--json"])
    assert status == 0
    rows = json.loads(out)["hands"]
    assert [r["hand"] for r in rows][:HANDS] == list(range(1, HANDS + 1))
    first = rows[0]
    assert set(first["players"].values()) <= set(NAMES.values())
    assert first["complete"] and first["pot"] > 0 and first["winners"]
    status, text = await run_cli(["replay", "list", "--table", replay_env.table_id])
    assert status == 0 and "hand" in text.splitlines()[0]


async def test_verify_all_passes(replay_env: Played) -> None:
    status, out = await run_cli(["replay", "verify", "--all", "--no-progress"])
    last = out.strip().splitlines()[-1]
    assert status == 0, out
    hands = int(last.split()[0].split("=")[1])
    assert hands >= HANDS and last == f"hands={hands} verified={hands} failed=0"
    status, out = await run_cli(["replay", "verify", "--table", replay_env.table_id,
                                 "--hand", "2", "--json"])
    report = json.loads(out)
    assert status == 0 and report["hands"] == 1 and report["failed"] == 0
    assert not any("cards not checked" in n for n in report["notes"])


async def test_observer_and_seat_views_hide_down_cards(replay_env: Played,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    table = replay_env.table_id
    status, out = await run_cli(["replay", "show", "--table", table, "--hand", "1", "--json"])
    shown = json.loads(out)
    assert status == 0 and shown["viewer"] == "observer"
    assert any("is dealt a down card" in line for line in shown["history"])
    assert not any("is dealt [" in line for line in shown["history"])
    # A seat's view without any token, then with another player's token: no down cards.
    status, out = await run_cli(["replay", "show", "--table", table, "--hand", "1",
                                 "--as-seat", "1", "--json"])
    view = json.loads(out)
    assert status == 0 and not any("Seat 1 is dealt [" in x for x in view["history"])
    assert view["notes"]
    tokens = replay_env.room.client.tokens
    monkeypatch.setenv("STUD_REPLAY_TOKEN", tokens.token(player("bob")))
    status, out = await run_cli(["replay", "show", "--table", table, "--hand", "1",
                                 "--as-seat", "1", "--json"])
    view = json.loads(out)
    assert status == 0 and not any("Seat 1 is dealt [" in x for x in view["history"])
    # With the seat's own player's token: that seat's down cards, nobody else's.
    monkeypatch.setenv("STUD_REPLAY_TOKEN", tokens.token(player("ann")))
    status, out = await run_cli(["replay", "show", "--table", table, "--hand", "1",
                                 "--as-seat", "1", "--json"])
    view = json.loads(out)
    assert status == 0
    assert sum("Seat 1 is dealt [" in x for x in view["history"]) >= 2
    assert not any("Seat 3 is dealt [" in x or "Seat 6 is dealt [" in x
                   for x in view["history"])


async def test_auditor_view_has_every_card_and_checks_the_commitment(
        replay_env: Played) -> None:
    status, out = await run_cli(["replay", "show", "--table", replay_env.table_id,
                                 "--hand", "1", "--auditor", "--json"])
    view = json.loads(out)
    assert status == 0
    assert view["commitment"]["ok"] and view["commitment"]["draws"] > 0
    assert not any("a down card" in line for line in view["history"])
    status, text = await run_cli(["replay", "show", "--table", replay_env.table_id,
                                  "--hand", "1", "--auditor"])
    assert status == 0 and "Deck commitment" in text and "verified" in text


def pokerkit_stacks(text: str) -> list[int]:
    """The finishing stacks PokerKit reads from one hand's PHH."""
    with seeded_random(0):
        state = list(HandHistory.loads(text))[-1]
    return [int(s) for s in state.stacks]


async def test_export_phh_reads_back_through_check_and_pokerkit(
        replay_env: Played, tmp_path: Path) -> None:
    status, phh = await run_cli(["replay", "export", "--table", replay_env.table_id,
                                 "--format", "phh", "--auditor"])
    assert status == 0
    path = tmp_path / "table.phhs"
    path.write_text(phh)
    status, out = await run_cli(["replay", "check", str(path)])
    assert status == 0, out
    hands = parse_phhs(phh)
    assert len(hands) >= HANDS
    for number in range(1, HANDS + 1):
        status, one = await run_cli(["replay", "export", "--table", replay_env.table_id,
                                     "--hand", str(number), "--format", "phh", "--auditor"])
        assert status == 0 and "??" not in one
        finishing = parse_phh(one).finishing_stacks
        assert finishing is not None
        assert pokerkit_stacks(one) == list(finishing), one
    # The public export (down cards as ??) still reads back in `stud replay check`.
    status, one = await run_cli(["replay", "export", "--table", replay_env.table_id,
                                 "--hand", "2", "--format", "phh"])
    assert status == 0 and 'table = "' in one


async def test_export_text_and_jsonl(replay_env: Played) -> None:
    status, text = await run_cli(["replay", "export", "--table", replay_env.table_id,
                                  "--hand", "1", "--format", "text"])
    assert status == 0 and text.startswith("Hand #1")
    status, lines = await run_cli(["replay", "export", "--table", replay_env.table_id,
                                   "--format", "jsonl"])
    rows = [json.loads(line) for line in lines.splitlines()]
    assert status == 0 and rows[0]["type"] == "HandStarted"
    assert all(r["table"] == replay_env.table_id for r in rows)
    assert [r["sequence"] for r in rows] == sorted(r["sequence"] for r in rows)
    status, out = await run_cli(["replay", "export", "--table", replay_env.table_id,
                                 "--hand", "1", "--format", "text", "--json"])
    assert status == 0 and json.loads(out)["text"].startswith("Hand #1")


async def test_unknown_table_or_hand_is_exit_2(replay_env: Played) -> None:
    status, _ = await run_cli(["replay", "show", "--table", "nope", "--hand", "1"])
    assert status == 2
    status, _ = await run_cli(["replay", "show", "--table", replay_env.table_id,
                               "--hand", "999"])
    assert status == 2


async def test_replay_room_shows_a_cash_tables_money_settlement_and_close(
        replay_env: Played) -> None:
    """A cash table of its own in the same room: dan and eve sit down; during the first hand
    dan tops up, eve leaves, and an escrow the log never recorded (fay's, seat 3) appears in
    the wallet; the hand settles (the orphan is paid back then), eve is paid out and the
    table is closed. ``stud replay room`` (and its ``--json``) shows each of them."""
    room = replay_env.room
    client = room.client
    table_id = await client.open_table()
    for seat, name in ((1, "dan"), (2, "eve")):
        await room.fund(name)
        await client.call("SitDown", pb.SitDownRequest(table_id=table_id, seat=seat,
                                                       buy_in=5_000), player(name))
    await room.fund("fay")
    await client.wait_for(table_id, lambda v: v.HasField("hand") and v.hand.to_act != 0)
    await client.call("AddChips", pb.AddChipsRequest(table_id=table_id, seat=1, amount=1_000),
                      player("dan"))
    await client.call("LeaveSeat", pb.LeaveSeatRequest(table_id=table_id, seat=2),
                      player("eve"))
    wallet = room.wallet.client
    await wallet.buy_in("fay", table_id, 3, 2_000, key(table_id, "c:player:fay:lost"))
    assert await wallet.player_balance("fay") == 1_000_000 - 2_000
    await play_until(client, table_id, 1, random.Random(3).choice, timeout=60)
    # Eve's leave and the orphan's refund follow the hand's settlement.
    async with asyncio.timeout(30):
        while (await wallet.player_balance("fay") != 1_000_000
               or [s.seat for s in (await client.view(table_id)).seats] != [1]):
            await asyncio.sleep(0.05)
    await client.call("CloseTable", pb.CloseTableRequest(table_id=table_id), OPERATOR)
    async with asyncio.timeout(30):  # closing pays dan out
        while any((await wallet.escrows(table_id)).values()):
            await asyncio.sleep(0.05)

    status, out = await run_cli(["replay", "room", "--table", table_id, "--json"])
    assert status == 0, out
    events = json.loads(out)["events"]
    lines: dict[str, list[str]] = {}
    for e in events:
        lines.setdefault(e["type"], []).append(e["line"])
    assert lines["SettingsSet"][0].startswith("Settings: buy-in ")
    assert [x.split(" asks")[0] for x in lines["BuyInRequested"]] == ["Seat 1: dan",
                                                                      "Seat 2: eve"]
    assert lines["TopUpQueued"] == ["Seat 1: dan adds 1,000 (queued)"]
    assert lines["LeaveRequested"] == ["Seat 2: eve leaves after the hand"]
    assert lines["HandSettled"][0].startswith("Hand #1 settled (rake ")
    assert lines["OrphanEscrowRefunded"] == [
        "Seat 3: an escrow of 2,000 the log did not know was paid back to fay"]
    assert [x.split(" cashes")[0] for x in lines["CashOutRequested"]] == ["Seat 2: eve",
                                                                          "Seat 1: dan"]
    assert lines["CashOutPaid"] == ["Seat 2: eve's cash-out paid",
                                    "Seat 1: dan's cash-out paid"]
    assert lines["TableClosed"] == [f"Table closed by {OPERATOR.name}"]
    types = [e["type"] for e in events]
    assert types.index("OrphanEscrowRefunded") > types.index("HandSettled")
    assert types.index("TableClosed") < len(types) - 1  # dan's cash-out follows the close
    assert [e["sequence"] for e in events] == sorted(e["sequence"] for e in events)
    status, text = await run_cli(["replay", "room", "--table", table_id])
    assert status == 0
    for line in (x for group in lines.values() for x in group):
        assert line in text
    assert text.strip().splitlines()[-1].startswith(f"{len(events)} room events at table ")
    # The hand's own room lines come with ``stud replay show``: its settlement.
    status, out = await run_cli(["replay", "show", "--table", table_id, "--hand", "1",
                                 "--json"])
    assert status == 0 and lines["HandSettled"][0] in json.loads(out)["room"]
