"""The web client's Limits section (docs/web.md "Web client: limits", docs/player-protection.md)
in a real browser through the gateway: a daily wager limit set in the page, a buy-in beyond what
is left refused in words with the amount left, a raise shown as waiting 24 hours and cancelled,
a self-exclusion that needs its confirmation, and reality checks as the page's notice."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from playwright.async_api import expect

from stud.v1 import wallet_pb2
from studtest.gateway import web_call
from studtest.table import Room, fast_settings, player

from .conftest import Players
from .test_table_play import sit

pytestmark = pytest.mark.integration

UTC_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d UTC"


async def protection(room: Room, gateway: Any, name: str) -> wallet_pb2.ProtectionResponse:
    """The wallet's own answer, through the gateway as the player (so it is routed)."""
    token = room.client.tokens.token(player(name))
    reply = await asyncio.to_thread(web_call, gateway.url, "/stud.v1.WalletService/GetProtection",
                                    wallet_pb2.GetProtectionRequest(player_id=name), token=token)
    assert reply.metadata.get("grpc-status", "0") == "0", reply.metadata
    return wallet_pb2.ProtectionResponse.FromString(reply.messages[0])


async def test_limits_in_the_page(room: Room, players: Players, gateway: Any) -> None:
    table_id = await room.client.open_table("web-wager", settings=fast_settings())
    await room.fund("dora", 5_000)
    p = await players("dora", f"/?table={table_id}")
    page = p.page
    limits = page.get_by_role("region", name="Limits", exact=True)
    await expect(limits).to_be_hidden()
    await page.get_by_role("button", name="Limits", exact=True).click()
    await expect(limits).to_be_visible()
    await expect(limits.get_by_role("status", name="Exclusion")).to_have_text(
        "You are not excluded from play.")
    await expect(limits.get_by_role("table", name="Your limits")).to_contain_text("No limits set.")

    # A daily wager limit of 1,000, at once.
    await limits.get_by_label("Limit kind").select_option(label="wager")
    await limits.get_by_label("Limit window").select_option(label="day")
    await limits.get_by_label("Limit amount").fill("1000")
    await limits.get_by_role("button", name="Set limit").click()
    row = limits.locator('tr[data-limit="wager:day"]')
    await expect(row).to_contain_text("wager per day")
    await expect(row.locator("td").nth(0)).to_have_text("1,000")
    (standing,) = (await protection(room, gateway, "dora")).limits
    assert (standing.kind, standing.window, standing.amount) == (
        wallet_pb2.LIMIT_KIND_WAGER, wallet_pb2.LIMIT_WINDOW_DAY, 1_000)

    # 600 in, out again; a second 600 passes the limit: refused in words with the 400 left.
    await sit(p, table_id, 1, buy_in=600)
    pane = p.pane(table_id)
    await pane.get_by_role("button", name="Leave seat").click()
    await expect(pane.get_by_role("button", name="Sit down")).to_be_visible()
    await pane.get_by_label("Buy-in").fill("600")
    await pane.get_by_role("button", name="Sit down").click()
    alert = pane.get_by_role("alert")
    await expect(alert).to_contain_text(re.compile(
        r"Sit down refused: Your day wager limit of 1,000 has 400 left; "
        rf"more frees at {UTC_TIME}\."))
    assert not (await room.client.view(table_id)).seats
    await page.get_by_role("button", name="Limits", exact=True).click()  # closed
    await expect(limits).to_be_hidden()
    await page.get_by_role("button", name="Limits", exact=True).click()
    await expect(row.locator("td").nth(1)).to_have_text("600")
    await expect(row.locator("td").nth(2)).to_have_text("400")
    await expect(row.locator("td").nth(3)).to_have_text(re.compile(UTC_TIME))

    # A raise waits 24 hours: shown pending, the limit in force unchanged; then cancelled.
    await limits.get_by_label("Limit amount").fill("5000")
    await limits.get_by_role("button", name="Set limit").click()
    await expect(row.locator("td").nth(4)).to_have_text(
        re.compile(rf"^Raise to 5,000 waiting 24 h: from {UTC_TIME}$"))
    await expect(row.locator("td").nth(0)).to_have_text("1,000")
    (standing,) = (await protection(room, gateway, "dora")).limits
    assert standing.increase_pending and standing.pending_amount == 5_000
    assert standing.amount == 1_000
    await limits.get_by_role("button", name="Cancel the raise of the wager per day limit").click()
    await expect(row.locator("td").nth(4)).to_have_text("")
    assert not (await protection(room, gateway, "dora")).limits[0].increase_pending

    # Self-exclusion asks first: "Keep playing" leaves the player in play.
    await limits.get_by_label("Exclusion period").select_option(label="a day")
    await limits.get_by_role("button", name="Self-exclude").click()
    confirm = limits.get_by_role("group", name="Confirm self-exclusion")
    await expect(confirm).to_contain_text("Exclude yourself from play for a day?")
    await confirm.get_by_role("button", name="Keep playing").click()
    await expect(confirm).to_be_hidden()
    assert not (await protection(room, gateway, "dora")).excluded
    await limits.get_by_role("button", name="Self-exclude").click()
    await confirm.get_by_role("button", name="Confirm self-exclusion").click()
    await expect(limits.get_by_role("status", name="Exclusion")).to_have_text(re.compile(
        rf"^You are excluded from play until {UTC_TIME} \(self-excluded\)\.$"))
    assert (await protection(room, gateway, "dora")).excluded

    # Excluded, a buy-in (within the limit, at a table not left) is refused in words too.
    other = await room.client.open_table("web-wager-2", settings=fast_settings())
    await page.evaluate("id => window.stud.openTable(id)", other)
    pane = p.pane(other)
    await pane.get_by_label("Buy-in").fill("100")
    await pane.get_by_role("button", name="Sit down").click()
    await expect(pane.get_by_role("alert")).to_contain_text(re.compile(
        rf"Sit down refused: You are excluded from play until {UTC_TIME}\."))


async def test_reality_checks_appear_as_a_notice(room: Room, players: Players,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Reality checks set in the page come as the page's notice, with the session's time and
    net result. The wallet's wait between reminders is cut to a fraction of a second (its
    ``sleep``; the interval is minutes), its clock is the real one."""
    async def fast(seconds: float) -> None:
        await asyncio.sleep(0.3)

    monkeypatch.setattr(room.wallet.deps.protection, "_sleep", fast)
    table_id = await room.client.open_table("web-reminded", settings=fast_settings())
    await room.fund("erin", 5_000)
    p = await players("erin", f"/?table={table_id}")
    page = p.page
    await page.get_by_role("button", name="Limits", exact=True).click()
    limits = page.get_by_role("region", name="Limits", exact=True)
    await limits.get_by_label("Reality check every (minutes)").fill("1")
    await limits.get_by_role("button", name="Set reality check").click()
    await expect(limits).to_contain_text("a reality check every 1 minutes of play")
    notice = page.locator("#notice")
    await expect(notice).to_have_text(
        "Reality check: you have played 0 h 00 min this session; net result 0.")
    await sit(p, table_id, 1, buy_in=300)
    await expect(notice).to_have_text(
        "Reality check: you have played 0 h 00 min this session; net result -300.")
