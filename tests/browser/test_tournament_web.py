"""A sit & go registered through the lobby and played to its end in the browser (docs/web.md
"Web client"): alice and bob register with the lobby's buttons, a bot takes the third seat
through the SDK, each page goes to its player's tournament table (level, stakes, clock), the
two play only by clicking the offered buttons, and each page says where its player finished,
as the tournament service does; an observer rails the table."""

from __future__ import annotations

import asyncio
import io
import random
import re

import pytest
from playwright.async_api import expect

from stud.v1 import tournament_pb2 as pb
from studclient import Client
from studclient.bots import Bot, strategy_for
from studclient.sitgo import config as sitgo_config
from studclient.tourney_bots import TourneyBot, TourneyTally
from studtest.table import Room, player
from studtest.tournament_service import RunningTournament

from .conftest import Player, Players, shoot

pytestmark = pytest.mark.integration

TID = "web-sng"
AGGRESSIVE = re.compile(r"^(Raise to |Bet |Complete to )")
PASSIVE = re.compile(r"^(Check|Call |Bring in )")


async def click_any(p: Player) -> bool:
    """Click an offered action in any open table of the page (raise or bet when offered)."""
    group = p.page.get_by_role("group", name="Actions")
    names = [n.strip() for n in await group.get_by_role("button").all_inner_texts()]
    wanted = [n for n in names if AGGRESSIVE.match(n)] or [n for n in names if PASSIVE.match(n)]
    if not wanted:
        return False
    try:
        await group.get_by_role("button", name=wanted[0], exact=True).first.click(timeout=1_000)
    except Exception:
        return False
    return True


async def test_a_sit_and_go_registered_in_the_lobby_and_played_to_its_end(
        room: Room, tournaments: RunningTournament, players: Players) -> None:
    cfg = sitgo_config(level_s=3)
    cfg.seats = 3
    cfg.name = "Web sit & go"
    await tournaments.client.create(TID, cfg, command_id="make-web-sng")
    await room.client.open_table("cash-1")
    for name in ("alice", "bob", "web-bot"):
        await room.fund(name, 100_000)
    alice = await players("alice")
    bob = await players("bob")
    for count, p in enumerate((alice, bob), start=1):
        row = p.page.get_by_role("table", name="Tournaments").locator(
            f"tr[data-tournament={TID}]")
        await expect(row).to_contain_text("Sit & go")
        await expect(row).to_contain_text("1,000 + 100")
        await expect(row).to_contain_text("registering")
        await shoot(p.page, "lobby", full_page=True)
        await row.get_by_role("button", name=re.compile("^Register for")).click()
        await expect(row).to_contain_text(f"{count} entries")
    assert sorted(e.player_id for e in (await tournaments.client.get(TID)).entries) == [
        "alice", "bob"]

    tokens = room.client.tokens
    bot_client = Client.connect(
        f"127.0.0.1:{room.table_port}", f"127.0.0.1:{room.dealer.port}",
        f"127.0.0.1:{room.wallet.port}", lambda: tokens.token(player("web-bot")),
        tournament_addr=f"127.0.0.1:{tournaments.port}")
    await tournaments.client.register(TID, player("web-bot"), "bot-enters")
    strategy_name, strategy = strategy_for("station", 0)
    bot = TourneyBot("web-bot", bot_client, strategy_name,
                     Bot("web-bot", bot_client, "", strategy_name, strategy, random.Random(3)))
    tally = TourneyTally()
    bot_play = asyncio.create_task(bot.play(TID, tally, io.StringIO()))
    try:
        view = await tournaments.client.get(TID)
        async with asyncio.timeout(30):
            while view.phase != pb.TOURNAMENT_PHASE_RUNNING or not view.tables:
                await asyncio.sleep(0.1)
                view = await tournaments.client.get(TID)
        for p in (alice, bob):
            row = p.page.get_by_role("table", name="Tournaments").locator(
                f"tr[data-tournament={TID}]")
            await row.get_by_role("button", name=re.compile("^Go to")).click(timeout=15_000)
        table_id = view.tables[0].table_id
        for p in (alice, bob):
            pane = p.pane(table_id)
            await expect(pane).to_be_visible()
            await expect(pane.locator(".tourney")).to_contain_text(
                re.compile(r"Web sit & go: level \d+, stakes [\d,]+/[\d,]+ ante"))
        railbird = await players("carol", f"/?table={table_id}")
        async with asyncio.timeout(180):
            while True:
                for p in (alice, bob):
                    await click_any(p)
                    if await p.page.locator(".tourney").count():
                        await shoot(p.page, "tournament")
                view = await tournaments.client.get(TID)
                if view.phase == pb.TOURNAMENT_PHASE_FINISHED:
                    break
                await asyncio.sleep(0.05)
        await asyncio.wait_for(bot_play, 30)
        places = {e.player_id: e.place for e in view.entries}
        # one winner; two busted in one hand share a place (2-3)
        assert sorted(places.values())[0] == 1 and sorted(places.values())[1] == 2, places
        assert all(1 <= place <= 3 for place in places.values()), places
        for p in (alice, bob):
            await expect(p.page.locator(".rail .me").first).to_contain_text(
                f"You finished {places[p.name]}", timeout=15_000)
        rail = railbird.pane(table_id)
        await expect(rail.locator(".rail .me")).to_contain_text("You are watching")
        await expect(rail.get_by_role("list", name="Places")).to_contain_text("1. ")
        assert not await rail.get_by_role("region", name="Your cards").locator(
            "[data-card]").count()
    finally:
        bot_play.cancel()
        await asyncio.gather(bot_play, return_exceptions=True)
        await bot_client.close()


async def test_a_tournament_table_goes_to_the_players_seat(
        room: Room, tournaments: RunningTournament, players: Players) -> None:
    """A multi-table tournament of two heads-up tables: alice's page, opened at the table
    she does not sit at, goes to the one the tournament seats her at and says so (the code
    that follows a move: the entry's table is not the one shown). The other table stays
    open to rail."""
    import time

    cfg = sitgo_config(level_s=60)
    cfg.format = pb.TOURNAMENT_FORMAT_MULTI_TABLE
    cfg.seats = 2
    cfg.min_entrants = 4
    cfg.name = "Web multi-table"
    names = ("alice", "bob", "cat", "dan")
    for name in names:
        await room.fund(name, 100_000)
    # The start 5 s from now, the four funded already: their entries are charged before it,
    # on a loaded machine too (it was 2 to 3 s from before the four were funded).
    cfg.start_at.FromNanoseconds(time.time_ns() + 5 * 10**9)
    await tournaments.client.create("web-mtt", cfg, command_id="make-web-mtt")
    for i, name in enumerate(names):
        await tournaments.client.register("web-mtt", player(name), f"reg-{i}")
    async with asyncio.timeout(30):
        while True:
            view = await tournaments.client.get("web-mtt")
            mine = next(e for e in view.entries if e.player_id == "alice")
            if view.phase == pb.TOURNAMENT_PHASE_RUNNING and len(view.tables) == 2 \
                    and mine.table_id:
                break
            await asyncio.sleep(0.1)
    other = next(t.table_id for t in view.tables if t.table_id != mine.table_id)
    alice = await players("alice", f"/?table={other}")
    await expect(alice.pane(mine.table_id)).to_be_visible()
    await expect(alice.page.locator("#notice")).to_contain_text(
        f"The tournament moved you from {other} to {mine.table_id}")
    assert not await alice.pane(other).count()
    seat = alice.pane(mine.table_id).get_by_role("region", name=f"Seat {mine.seat}", exact=True)
    await expect(seat).to_contain_text("alice")
