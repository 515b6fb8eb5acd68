"""make run's demo sit & go waits for people (issue 29): over the real room and tournament
service, the demo (:func:`studclient.sitgo.one`) opens ``sitgo-1`` with a window for people;
``stud play --lobby`` shows the time left before the bots sit; a person registers with ``stud
play --register`` during it (before, the bots had filled the sit & go at once and a person
got ``registration_closed``); the bots then take the seats left and the person plays the sit
& go to its end beside them. A second registration, once it is full, is told when the next
one opens."""

from __future__ import annotations

import asyncio
import io
import random
import re
import time
from typing import Any

import pytest

from stud.v1 import tournament_pb2 as pb
from studclient import Client, sitgo
from studclient.bots import Bot, strategy_for
from studclient.tourney_bots import TourneyBot, TourneyTally
from studclient.tui.command import Setup
from studtest.table import Room
from studtest.tournament_service import RunningTournament
from studtools import cli
from studtools.devkeys import DevKeys
from tests.integration.client.conftest import client_env

pytestmark = pytest.mark.integration

WINDOW_S = 300
"""The demo's window, on the demo's own clock (``sitgo.one(clock=...)``): the test ends it
by moving that clock on, once the person is registered and the bots are seen to wait, so no
check hangs on how fast this machine runs the lobby, the registration and the bots (with 4
real seconds, a busy CI machine could run out of window: no countdown in the lobby, or the
bots in the seats before the person). Long enough never to end on the wall's clock first;
not the default 30 s, so that ``stud play`` is seen to read it."""


async def stud_play(*args: str) -> tuple[int, str, str]:
    """``stud play ARGS`` (its own event loop: in a thread, while the room serves on this
    one): the status, its output and its errors."""
    out, err = io.StringIO(), io.StringIO()

    def call() -> int:
        import contextlib
        with contextlib.redirect_stderr(err):
            return cli.main(["play", *args], out)

    status = await asyncio.to_thread(call)
    return status, out.getvalue(), err.getvalue()


async def test_a_person_takes_a_seat_in_the_demo_sit_and_go_and_plays_it(
        room: Room, tournaments: RunningTournament, dev_keys: DevKeys,
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = client_env(room, tournaments, dev_keys, monkeypatch,
                     **{sitgo.WINDOW_ENV: str(WINDOW_S), sitgo.LEVEL_S_ENV: "2"})
    service = tournaments
    ops = Client.connect(env["STUD_TABLE_TARGET"], env["STUD_DEALER_TARGET"],
                         env["STUD_WALLET_TARGET"], Setup(env, None).operator or "",
                         tournament_addr=env["STUD_TOURNAMENT_TARGET"])
    feed = io.StringIO()
    offset = [0.0]  # the demo's clock: the wall's until the test ends the window

    def clock() -> float:
        return time.time() + offset[0]

    opened = time.time()
    demo = asyncio.create_task(sitgo.one(ops, env, feed, seed=7, clock=clock))
    person: Client | None = None
    try:
        async with asyncio.timeout(10):
            while "sitgo-1" not in feed.getvalue():
                await asyncio.sleep(0.05)
        seen = time.time()
        # The window the demo opened (on its clock), kept as the sit & go's start_at.
        bots_at = sitgo.bots_at((await service.client.get("sitgo-1")).config)
        assert opened + WINDOW_S <= bots_at < seen + WINDOW_S + 1, (bots_at, opened, seen)

        before = time.time()
        status, out, err = await stud_play("--lobby", "--player", "alice")
        after = time.time()
        assert status == 0, err
        line = next(li for li in out.splitlines() if li.startswith("sitgo-1 "))
        assert "registering" in line and "0 entries" in line, line
        left = re.search(r"bots take the seats left in (\d+):(\d\d)", line)
        assert left is not None, line  # the time left, read from the sit & go itself
        secs = 60 * int(left[1]) + int(left[2])  # whole seconds, rounded up
        assert 0 < secs <= WINDOW_S + 1, line
        assert bots_at - after <= secs < bots_at - before + 1, (line, bots_at, before, after)

        status, out, err = await stud_play("--register", "sitgo-1", "--player", "alice")
        assert status == 0, err  # before: FAILED_PRECONDITION registration_closed
        assert "alice registered for sitgo-1" in out
        # The lobby listed after it counts her entry (it counts paid ones: before, it was
        # read before the wallet's charge and said '0 entries' under 'registered').
        listed = next(li for li in out.splitlines() if li.startswith("sitgo-1 "))
        assert "1 entry" in listed, out
        assert clock() < bots_at  # taken within the window, not after it
        # The bots wait: the demo looks at its sit & go every POLL_S and, its window open,
        # leaves alice alone in it (watched over a few of its looks).
        watch_until = time.time() + 2.5 * sitgo.POLL_S
        while True:
            view = await service.client.get("sitgo-1")
            assert [e.player_id for e in view.entries] == ["alice"]  # the bots wait
            assert "the bots take the rest" not in feed.getvalue(), feed.getvalue()
            if time.time() >= watch_until:
                break
            await asyncio.sleep(0.1)
        assert not demo.done()

        # alice plays her seat (through the SDK, calling down as a person might).
        setup = Setup(env, "alice")
        person = setup.connect()
        name, strategy = strategy_for("station", 0)
        alice = TourneyBot("alice", person, name,
                           Bot("alice", person, "", name, strategy, random.Random(1)))
        tally = TourneyTally()
        play = asyncio.create_task(alice.play("sitgo-1", tally, io.StringIO()))

        # The window ends (the demo's clock passes bots_at): the bots take the other seats.
        assert clock() < bots_at
        ended = time.time()
        offset[0] = bots_at - ended + 1
        async with asyncio.timeout(60):
            while len((await service.client.get("sitgo-1")).entries) < sitgo.SEATS:
                await asyncio.sleep(0.1)
        full = await service.client.get("sitgo-1")
        assert clock() >= bots_at
        # They sat on the demo's clock, not the wall's (whose window is far from over).
        assert time.time() < bots_at, "the bots waited for the wall's clock"
        assert sorted(e.player_id for e in full.entries) == [
            "alice", "sitgo-bot-1", "sitgo-bot-2", "sitgo-bot-3"]

        # Full: a second person is told why, and when the next sit & go opens.
        status, out, err = await stud_play("--register", "sitgo-1", "--player", "bob")
        assert status == 1
        assert "no seat to take" in err and "sitgo-2" in err, err
        assert f"{WINDOW_S} s before the bots" in err, err

        async with asyncio.timeout(240):
            await demo
            await play
        assert tally.actions > 0 and not tally.errors, tally.errors
        final = await service.client.get("sitgo-1")
        assert final.phase == pb.TOURNAMENT_PHASE_FINISHED
        mine = next(e for e in final.entries if e.player_id == "alice")
        assert mine.place >= 1
        assert "[sitgo] sitgo-1 over: 1. " in feed.getvalue()
        assert "1 of 4 seats taken; the bots take the rest" in feed.getvalue()
    finally:
        demo.cancel()
        await asyncio.gather(demo, return_exceptions=True)
        if person is not None:
            await person.close()
        await ops.close()


def test_the_window_is_configurable(monkeypatch: Any) -> None:
    assert sitgo.window_s({}) == 30
    assert sitgo.window_s({sitgo.WINDOW_ENV: "5"}) == 5
    assert sitgo.window_s({sitgo.WINDOW_ENV: "0"}) == 0
    assert sitgo.window_s({sitgo.WINDOW_ENV: "soon"}) == 30
