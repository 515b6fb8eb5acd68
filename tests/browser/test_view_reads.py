"""The page reads the table's view (GetTable) only when the feed says something the view it
holds does not have (docs/web.md "Web client: reading the view"): a record at or below the
view's version is already in it, at most one GetTable is in flight, and the records of a burst
(an action and the street it deals) are read once. Over a few hands clicked by two pages, each
page's GetTable calls are far fewer than the records it received, and what it shows is still
the table's."""

from __future__ import annotations

import asyncio

import pytest
from playwright.async_api import expect

from stud.v1 import table_pb2
from studtest.table import Room, fast_settings, player

from .conftest import Player, Players
from .test_table_play import click_one, sit

pytestmark = pytest.mark.integration

HANDS = 3

# The page's GetTable calls: how many were sent, and the most ever in flight at once (fetch
# is wrapped before the app loads; only calls whose path ends /GetTable are counted).
COUNT_READS = """
(() => {
  const orig = window.fetch.bind(window);
  window.__reads = { sent: 0, inFlight: 0, most: 0 };
  window.fetch = async (input, init) => {
    const url = typeof input === "string" ? input : input.url;
    if (!url.endsWith("/stud.v1.TableService/GetTable")) return orig(input, init);
    const r = window.__reads;
    r.sent += 1; r.inFlight += 1; r.most = Math.max(r.most, r.inFlight);
    try {
      const resp = await orig(input, init);
      await resp.clone().arrayBuffer();  // the whole answer, trailers included
      return resp;
    } finally {
      r.inFlight -= 1;
    }
  };
})();
"""


async def reads(p: Player) -> dict[str, int]:
    out: dict[str, int] = await p.page.evaluate("({...window.__reads})")
    return out


async def test_the_view_is_read_far_less_often_than_the_feed_delivers(
        room: Room, players: Players) -> None:
    table_id = await room.client.open_table("web-reads", settings=fast_settings(
        next_hand_delay_ms=200))
    for name in ("alice", "bob"):
        await room.fund(name, 100_000)
    pages: list[Player] = []
    for name in ("alice", "bob"):
        p = await players(name, f"/?table={table_id}")
        await p.context.add_init_script(COUNT_READS)
        await p.page.reload()  # the counter is in place before the app's first read
        pages.append(p)
    alice, bob = pages
    await sit(alice, table_id, 1)
    await sit(bob, table_id, 2)
    turn = 0
    async with asyncio.timeout(120):
        while (await room.client.view(table_id)).last_hand_result.hand_number < HANDS:
            for p in pages:
                if await click_one(p, table_id, turn):
                    turn += 1
            await asyncio.sleep(0.05)
    # Hand HANDS + 1 waits for a player (a 30 s clock): the table is quiet. Each page shows
    # the table's state: its view is the table's version, the seats' stacks, whose turn, and
    # the buttons only at the page of the player to act.
    await room.client.wait_for(table_id, lambda v: v.hand.hand_number == HANDS + 1
                               and v.hand.phase == table_pb2.HAND_PHASE_BETTING
                               and v.hand.to_act != 0)
    server = await room.client.view(table_id, player("alice"))
    for p in pages:
        pane = p.pane(table_id)
        await expect(pane.locator("p.status")).to_contain_text(f"Hand {HANDS + 1}")
        async with asyncio.timeout(20):
            while True:
                version = await p.page.evaluate(
                    "id => Number(window.stud.panes.get(id).current.version)", table_id)
                if version >= server.version:
                    break
                await asyncio.sleep(0.1)
        for seat in server.seats:
            await expect(pane.get_by_role("region", name=f"Seat {seat.seat}", exact=True)
                         .get_by_label("Stack")).to_have_text(f"{seat.stack:,}")
        buttons = pane.get_by_role("group", name="Actions").get_by_role("button")
        mine = {"alice": 1, "bob": 2}[p.name]
        if server.hand.to_act == mine:
            await expect(buttons).to_have_count(len(server.hand.legal_actions.actions))
        else:
            await expect(buttons).to_have_count(0)
        await expect(pane.locator("p.status")).to_contain_text(
            f"Seat {server.hand.to_act} ({'alice' if server.hand.to_act == 1 else 'bob'}) to act")
    for p in pages:
        records = await p.page.evaluate(
            "id => window.stud.panes.get(id).received.length", table_id)
        counted = await reads(p)
        print(f"{p.name}: {records} records received, {counted['sent']} GetTable calls, "
              f"at most {counted['most']} in flight")
        assert counted["most"] == 1, counted
        assert records >= 60, records  # three hands' worth of feed
        # Far fewer reads than records: about one per decision (an action and the street
        # dealt after it are one read), where the page read once per burst before (58%).
        assert counted["sent"] * 2 <= records, (p.name, counted, records)
