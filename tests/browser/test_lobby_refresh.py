"""The lobby keeps itself up to date (docs/web.md "Web client: the lobby"): a cash table and a
sit & go opened after the page loaded appear in it, a table that fills up shows its seats, and
a closed table leaves, all without a reload or a click; a hidden tab does not poll, and is
read again the moment it is shown."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import expect

from stud.v1 import table_pb2
from studkit.auth import Principal, Role
from studkit.commandwindow import new_id
from studtest.table import Room, fast_settings, player
from studtest.tournament_service import RunningTournament

from .conftest import Player, Players

pytestmark = pytest.mark.integration


async def lobby_reads(p: Player) -> int:
    """ListTables calls the page has sent so far (every gRPC-Web answer is recorded)."""
    count: int = await p.page.evaluate(
        "window.__net.filter(e => e.url.endsWith('/stud.v1.TableService/ListTables')).length")
    return count


async def test_what_opens_after_the_page_loaded_appears_without_a_reload(
        room: Room, tournaments: RunningTournament, players: Players) -> None:
    from studclient.sitgo import config as sitgo_config
    await room.fund("bob", 100_000)
    alice = await players("alice")
    cash = alice.page.get_by_role("table", name="Cash tables")
    tourneys = alice.page.get_by_role("table", name="Tournaments")
    await expect(cash).to_contain_text("No cash table is open.")
    loaded_url = alice.page.url
    navigations = await alice.page.evaluate("performance.getEntriesByType('navigation').length")

    table_id = await room.client.open_table("lobby-late", settings=fast_settings())
    await tournaments.client.create("lobby-sng", sitgo_config(), command_id="make-lobby-sng")
    row = cash.locator(f"tr[data-table={table_id}]")
    await expect(row).to_contain_text("0 of 8 taken")
    await expect(row.get_by_role("button", name=f"Open {table_id}")).to_be_visible()
    sng = tourneys.locator("tr[data-tournament=lobby-sng]")
    await expect(sng).to_contain_text("Sit & go")
    await expect(sng.get_by_role("button", name=re.compile("^Register for"))).to_be_visible()

    # Someone sits down elsewhere: the seats and the player show up.
    await room.client.call("SitDown", table_pb2.SitDownRequest(
        table_id=table_id, command_id=new_id("bob-lobby"), seat=3, buy_in=2_000), player("bob"))
    await expect(row).to_contain_text("1 of 8 taken, 7 free")
    await expect(row).to_contain_text("bob")
    assert alice.page.url == loaded_url
    assert await alice.page.evaluate(
        "performance.getEntriesByType('navigation').length") == navigations

    # A hidden tab does not poll; shown again, it reads the lobby at once.
    await alice.page.evaluate("""() => {
        Object.defineProperty(document, 'visibilityState', {configurable: true,
                                                            get: () => 'hidden'});
        document.dispatchEvent(new Event('visibilitychange'));
    }""")
    hidden_at = await lobby_reads(alice)
    await alice.page.wait_for_timeout(12_000)  # two of the lobby's 5 s periods and more
    assert await lobby_reads(alice) <= hidden_at + 1  # one already due may still land
    await room.client.call("CloseTable", table_pb2.CloseTableRequest(
        table_id=table_id, command_id="close-lobby-late"), _operator(room))
    await alice.page.evaluate("""() => {
        Object.defineProperty(document, 'visibilityState', {configurable: true,
                                                            get: () => 'visible'});
        document.dispatchEvent(new Event('visibilitychange'));
    }""")
    await expect(cash.locator(f"tr[data-table={table_id}]")).to_have_count(0, timeout=3_000)


def _operator(room: Room) -> Principal:
    return Principal(role=Role.OPERATOR, name="ops")
