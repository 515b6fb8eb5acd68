"""A non-entrant rails a running tournament (issue 29): ``stud play --tournament ID`` as a
player who holds no entry used to show "Waiting for a hand" for ever. Now the screen watches
the chip leader's table as the public sees it (no down card, no seat of the viewer's), its
dealer log telling the hands, and the tournament's end. Over the real room and tournament
service, the sit & go played by ``stud bots --tournament``."""

from __future__ import annotations

import asyncio
import io

import pytest

from stud.v1 import table_pb2
from stud.v1 import tournament_pb2 as pb
from studclient.tui.app import screen_text
from studclient.tui.command import Setup
from studclient.tui.tourney import TournamentPlayApp, chip_leader
from studtest.table import Room
from studtest.tournament_service import RunningTournament
from studtools import cli
from studtools.devkeys import DevKeys
from tests.integration.client.conftest import client_env

pytestmark = pytest.mark.integration

LEVELS = pb.TournamentStructure(starting_stack=1_000, levels=[
    pb.TournamentLevel(ante=10, bring_in=20, small_bet=50, big_bet=100, seconds=4),
    pb.TournamentLevel(ante=50, bring_in=100, small_bet=200, big_bet=400, seconds=4),
    pb.TournamentLevel(ante=300, bring_in=400, small_bet=800, big_bet=1600, seconds=600)])


def public(view: table_pb2.TableView) -> bool:
    """No seat of the viewer's, and no down card's face but of a hand turned up for everyone
    (an all-in's, exposed; one shown at the showdown)."""
    return view.viewer_seat == 0 and not any(
        down.HasField("card") for p in view.hand.players if not (p.exposed or p.shown)
        for down in p.down)


async def test_a_player_not_entered_rails_the_chip_leaders_table_as_the_public_sees_it(
        room: Room, tournaments: RunningTournament, dev_keys: DevKeys,
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = client_env(room, tournaments, dev_keys, monkeypatch)
    await tournaments.client.create("rail-1", pb.TournamentConfig(
        name="Rail", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=100, fee=10, seats=3,
        structure=LEVELS))
    out = io.StringIO()
    bots = asyncio.create_task(asyncio.to_thread(cli.main, [
        "bots", "--tournament", "rail-1", "--players", "3", "--seed", "4", "--prefix", "rb",
        "--strategy", "station", "--timeout", "150"], out))
    app = TournamentPlayApp(Setup(env, "carol").connect, "rail-1")
    views: list[table_pb2.TableView] = []
    hands: set[int] = set()
    async with app.run_test(size=(120, 36)) as pilot:
        async with asyncio.timeout(160):
            while not any(line.startswith("Tournament ") for line in app.log_lines[1:]):
                await pilot.pause(0.05)
                if app.view is not None and app.view.HasField("hand"):
                    views.append(app.view)
                    hands.add(app.view.hand.hand_number)
                if len(hands) == 2 and not any("Hand #" in ln for ln in app.log_lines):
                    pytest.fail("\n".join(app.log_lines))
                if len(hands) == 2:
                    screen = screen_text(app)
        log = list(app.log_lines)
    assert await bots == 0, out.getvalue()
    print("\n".join(log))
    assert log[1].startswith("You are not entered in rail-1: railing it")
    # It watched the table (before: no table, "Waiting for a hand" for ever).
    assert app.options.table_id == "rail-1.1"
    assert any(line.startswith("Watching table rail-1.1 (the chip leader's, rb-")
               for line in log)
    assert len(hands) >= 2 and views, log
    assert all(public(v) for v in views)  # as the public sees it
    assert any(p.down and not (p.exposed or p.shown) for v in views
               for p in v.hand.players)
    assert sum(line.startswith("Hand #") for line in log) >= 2  # the dealer log tells them
    assert "watching" in screen and "rail-1.1" in screen and "Waiting for a hand" not in screen
    final = await tournaments.client.get("rail-1")
    assert final.phase == pb.TOURNAMENT_PHASE_FINISHED
    assert log[-1] == "Tournament finished"
    assert chip_leader(final) is None  # over: nobody is seated
