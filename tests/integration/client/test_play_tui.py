"""``stud play`` headless (textual's Pilot) against the in-process room: a whole hand played
through the UI's keys against an SDK bot, on a stacked deck so the showdown is known; the
screen never shows the bot's down cards before the showdown; the countdown, the server's
reason for a bad action, the showdown's values and split, the last hand's history, resizing
and leaving."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import random
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import pytest

from rules.cards import parse_cards
from stud.v1 import common_pb2
from stud.v1 import dealer_pb2 as dpb
from stud.v1 import dealer_pb2_grpc as dpb_grpc
from stud.v1 import table_pb2 as pb
from studclient import Client, Stale
from studclient.bots import station_strategy
from studclient.tui.app import HistoryScreen, PlayApp, PlayOptions, screen_text, wait_until
from studclient.tui.command import Setup
from studkit.mapping import card_to_proto
from studtest.redis import TestRedis
from studtest.rigged_dealer import RiggedDealing
from studtest.table import OPERATOR, Room, fast_settings, player, running_room
from studtools.devkeys import DevKeys

from .conftest import connect

pytestmark = pytest.mark.integration

# Dealt round by round, seat 1 (the UI) then seat 2 (the bot): 3rd street down, down, up;
# 4th to 6th up; 7th down.
UI_DOWN = parse_cards("Ah 2c Qs")
UI_UP = parse_cards("3d 5s 7c Kd")
BOT_DOWN = parse_cards("Kh Qh Ts")
BOT_UP = parse_cards("9h 4h Jc 8h")
DECK = [UI_DOWN[0], BOT_DOWN[0], UI_DOWN[1], BOT_DOWN[1], UI_UP[0], BOT_UP[0],
        UI_UP[1], BOT_UP[1], UI_UP[2], BOT_UP[2], UI_UP[3], BOT_UP[3],
        UI_DOWN[2], BOT_DOWN[2]]


@pytest.fixture
async def stacked_room(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys
                       ) -> AsyncIterator[Room]:
    async with running_room(redis_server, redis_url, dev_keys,
                            rig=RiggedDealing(stacked=True)) as room:
        yield room


def env_for(room: Room, keys: DevKeys) -> dict[str, str]:
    return {"STUD_TABLE_TARGET": f"127.0.0.1:{room.table_port}",
            "STUD_DEALER_TARGET": f"127.0.0.1:{room.dealer.port}",
            "STUD_WALLET_TARGET": f"127.0.0.1:{room.wallet.port}",
            "STUD_ISSUER_KEY": keys.issuer_key.pem()}


async def station_bot(client: Client, table_id: str,
                      turn_shown: Callable[[], Awaitable[None]]) -> int:
    """Checks or calls at each of its turns, once ``turn_shown`` returns (the UI has shown
    whose turn it is), until the first hand is over."""
    actions, acted_at = 0, -1
    rng = random.Random(1)
    async with client.watch(table_id) as watch:
        async for view in watch.views():
            hand = view.hand
            if view.HasField("hand") and hand.phase == pb.HAND_PHASE_COMPLETE:
                return actions
            if (view.version > acted_at and hand.phase == pb.HAND_PHASE_BETTING
                    and hand.to_act == view.viewer_seat and hand.legal_actions.actions):
                acted_at = view.version
                # think until the UI shows whose turn it is (a fixed pause was too short
                # for a loaded machine's screen to be read in it)
                await turn_shown()
                try:
                    await client.act(table_id, station_strategy(view, rng),
                                     expected_sequence=view.version)
                    actions += 1
                except Stale:
                    continue
    return actions


def save_sample(svg: str, text: str) -> None:
    """With ``STUD_PLAY_SAMPLE=DIR``, keep the screen of the UI's last turn (7th street) as
    DIR/play.svg and DIR/play.txt: the samples in docs/ are made this way."""
    folder = os.environ.get("STUD_PLAY_SAMPLE")
    if folder and svg:
        Path(folder, "play.svg").write_text(svg)
        Path(folder, "play.txt").write_text(
            "\n".join(line.rstrip() for line in text.splitlines()).rstrip() + "\n")


async def test_a_whole_hand_through_the_ui(stacked_room: Room, dev_keys: DevKeys) -> None:
    room = stacked_room
    table_id = await room.client.open_table(  # a fresh room: the demo table's name is free
        "demo", settings=fast_settings(next_hand_delay_ms=600_000))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{room.dealer.port}") as channel:
        await dpb_grpc.DealerTestingServiceStub(channel).StackDeck(  # type: ignore[no-untyped-call]
            dpb.StackDeckRequest(table_id=table_id, hand_number=1,
                                 cards=[card_to_proto(c) for c in DECK]),
            metadata=room.client.md(OPERATOR), timeout=10)
    bot = connect(room, player("bob"))
    await room.fund("bob")
    await bot.sit(table_id, 2, 10_000)
    # The UI's player is funded by stud play's own dev deposit (an operator minted from the
    # issuer key, as with make run).
    setup = Setup(env_for(room, dev_keys), "ann")
    app = PlayApp(setup.connect, PlayOptions(table_id, seat=1, buy_in=10_000),
                  fund=setup.fund)
    screens: list[tuple[str, bool]] = []
    """(screen text, whether a hand had been shown at the showdown by then)."""

    def capture() -> str:
        text = screen_text(app)
        view = app.view
        shown = view is not None and any(p.shown or p.mucked for p in view.hand.players)
        screens.append((text, shown or any("shows [" in line for line in app.log_lines)))
        return text

    async def on_screen(text: str) -> None:
        """Until the screen shows ``text`` (each screen read is captured)."""
        await wait_until(lambda: text in capture())

    bot_task: asyncio.Task[int] | None = None
    try:
        async with app.run_test(size=(140, 36)) as pilot:
            # the bot's task reads the screen: started in the running app's context
            bot_task = asyncio.create_task(station_bot(
                bot, table_id, lambda: on_screen("Seat 2 (bob) to act")))
            await wait_until(lambda: app.view is not None and app.view.viewer_seat == 1
                             and app.view.HasField("hand"))
            assert any(line.startswith("Dev deposit") for line in app.log_lines)
            tried_fold = False
            sample = ("", "")
            async with asyncio.timeout(120):
                while True:
                    await pilot.pause(0.05)
                    capture()
                    view = app.view
                    assert view is not None
                    hand = view.hand
                    if hand.phase == pb.HAND_PHASE_COMPLETE:
                        break
                    if hand.phase != pb.HAND_PHASE_BETTING or hand.to_act != 1:
                        continue
                    kinds = {a.kind for a in hand.legal_actions.actions}
                    if not tried_fold and common_pb2.ACTION_KIND_CHECK in kinds:
                        # Folding when a check is possible is refused: the UI says why.
                        tried_fold = True
                        await pilot.press("f")
                        await wait_until(lambda: any("fold_not_allowed" in line
                                                     for line in app.log_lines))
                        # the screen draws the log's line after it is written
                        await on_screen("✗ Fold refused (fold_not_allowed)")
                    await on_screen("Your turn")  # with its countdown, before acting
                    if hand.street == common_pb2.STREET_SEVENTH:
                        sample = (app.export_screenshot(title="stud play"), capture())
                    await pilot.press("c")
                    await wait_until(lambda v=view: app.view is not None  # type: ignore[misc]
                                     and app.view.version > v.version)
            assert tried_fold
            save_sample(*sample)
            # The view says the hand is over; the log's showdown lines and the screen follow.
            await on_screen("Seat 2 wins the high half")
            final = screens[-1][0]
            assert await asyncio.wait_for(bot_task, 10) > 0

            before = [text for text, shown in screens if not shown]
            assert len(before) > 5
            hidden = [str(c) for c in BOT_DOWN]
            for text in before:
                for card in hidden:
                    assert card not in text, f"the bot's down card {card} on screen:\n{text}"
            # The UI's own down cards were there, and so were the countdown and the turn.
            assert any("Ah 2c" in text for text in before)
            assert any("⏱" in text and "left" in text and "Your turn" in text
                       for text in before)
            assert any("Seat 2 (bob) to act" in text for text in before)
            # The showdown: each hand shown with its value, who won which half.
            log = "\n".join(app.log_lines)
            assert "Seat 2 shows [Kh Qh Ts]: a flush, king high; no low" in log
            assert "Seat 1 shows [Ah 2c Qs]: high card, ace; low 7-5-3-2-A" in log
            award = next(line for line in app.log_lines if "wins the high half" in line)
            assert award.startswith("Seat 2 wins the high half (")
            assert "with a flush, king high; seat 1 wins the low half (" in award
            assert award.endswith("with 7-5-3-2-A")
            assert "Seat 2 wins the high half" in final

            # The last hand's history on demand.
            await pilot.press("h")
            await wait_until(lambda: isinstance(app.screen, HistoryScreen)
                             and "Hand #1" in screen_text(app))
            assert isinstance(app.screen, HistoryScreen)
            assert "Hand #1" in screen_text(app)
            history = app.screen.body
            assert "*** Showdown ***" in history and "Seat 2 shows [Kh Qh Ts]" in history
            assert "Seat 2 wins 90 (high) with Flush, king high" in history  # rules.history
            await pilot.press("escape")
            await wait_until(lambda: not isinstance(app.screen, HistoryScreen))

            # Between hands: mucking losing hands, and a top-up to the buy-in.
            await pilot.press("m")
            await room.client.wait_for(table_id, lambda v: v.muck_preference,
                                       who=player("ann"))
            assert "You muck losing hands when the rules allow it" in app.log_lines
            await pilot.press("t")  # the split gave ann her 90 back: nothing to add
            await wait_until(lambda: "Your stack is at 10,000 or more already"
                             in app.log_lines)
            app.buy_in = 10_400  # as if she had sat down with 10,400
            await pilot.press("t")
            await wait_until(lambda: "Seat 1 adds 400" in app.log_lines)
            await wait_until(lambda: app.view is not None
                             and app.view.seats[0].stack == 10_400)

            # Resizing: the layout follows (narrow: the log goes under the table).
            for size in ((80, 30), (200, 50)):
                await pilot.resize_terminal(*size)
                await wait_until(lambda w=size[0]: len(  # type: ignore[misc]
                    screen_text(app).splitlines()[0]) <= w
                    and "*** Hand #1 is over ***" in screen_text(app))
                text = screen_text(app)
                assert len(text.splitlines()[0]) <= size[0]
                assert "Seat" in text and "Dealer" in text and "bob" in text
                assert "*** Hand #1 is over ***" in text  # the log's latest line in sight

            # Leaving: q asks to leave, then quits; the table stands the seat up.
            await pilot.press("q")
        await app.wait_closed()
        view = await room.client.wait_for(
            table_id, lambda v: all(s.seat != 1 for s in v.seats))
        assert [s.player_id for s in view.seats] == ["bob"]
        assert any("You leave the seat" in line for line in app.log_lines)
    finally:
        if bot_task is not None:
            bot_task.cancel()
            await asyncio.gather(bot_task, return_exceptions=True)
        await bot.close()


async def test_q_mid_hand_leaves_at_once_and_the_table_folds_the_seat_at_its_turn(
        stacked_room: Room, dev_keys: DevKeys, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 17: ``q`` pressed mid-hand, while the other player is to act, sends LeaveSeat
    and the app exits without waiting for the answer (the table holds its answer until the
    app is gone). At the leaving seat's turn the table acts for it at once (a fold, facing
    the bring-in), not when its 60 s clock runs out, and stands the seat up when the hand
    ends."""
    room = stacked_room
    action_time_s = 60
    table_id = await room.client.open_table(settings=fast_settings(
        action_time_s=action_time_s, time_bank_s=30, next_hand_delay_ms=600_000))
    # 3rd street, seat 1 (bob) then seat 2 (the UI): down, down, up. Bob's 2c brings in.
    async with grpc.aio.insecure_channel(f"127.0.0.1:{room.dealer.port}") as channel:
        await dpb_grpc.DealerTestingServiceStub(channel).StackDeck(  # type: ignore[no-untyped-call]
            dpb.StackDeckRequest(table_id=table_id, hand_number=1, cards=[
                card_to_proto(c) for c in parse_cards("9h 9d Th Td 2c Kd")]),
            metadata=room.client.md(OPERATOR), timeout=10)
    await room.fund("bob")
    await room.client.call("SitDown", pb.SitDownRequest(table_id=table_id, seat=1,
                                                        buy_in=10_000), player("bob"))
    setup = Setup(env_for(room, dev_keys), "ann")
    app = PlayApp(setup.connect, PlayOptions(table_id, seat=2, buy_in=10_000),
                  fund=setup.fund)
    loop = asyncio.get_running_loop()
    leave_seat = room.table_deps.app.leave_seat
    asked, answer = asyncio.Event(), asyncio.Event()

    async def held_leave_seat(*args: object) -> object:
        asked.set()
        await answer.wait()
        return await leave_seat(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(room.table_deps.app, "leave_seat", held_leave_seat)
    # The app's exit is not timed (a loaded machine's is slow): it must come while the
    # table still holds LeaveSeat's answer (waiting for it, the app would never exit).
    async with asyncio.timeout(30), app.run_test(size=(140, 36)) as pilot:
        await wait_until(lambda: app.view is not None and app.view.viewer_seat == 2
                         and app.view.hand.phase == pb.HAND_PHASE_BETTING
                         and app.view.hand.to_act == 1)
        await pilot.press("q")
    await asyncio.wait_for(asked.wait(), 10)  # the app is gone, its LeaveSeat arrives
    answer.set()
    await app.wait_closed()
    view = await room.client.view(table_id)
    assert [s.leaving for s in view.seats if s.seat == 2] == [True]  # LeaveSeat arrived
    assert any("You leave the seat" in line for line in app.log_lines)

    await room.client.call("PostBringIn", pb.PostBringInRequest(
        table_id=table_id, seat=1, expected_sequence=view.version), player("bob"))
    brought_in = loop.time()
    view = await room.client.wait_for(table_id, lambda v: [s.seat for s in v.seats] == [1],
                                      timeout=action_time_s / 2)
    assert loop.time() - brought_in < action_time_s / 3
    records = (await room.client.stub.GetHandHistory(
        pb.GetHandHistoryRequest(table_id=table_id, hand_number=1),
        metadata=room.client.md(OPERATOR), timeout=10)).events
    kinds = [(r.event.WhichOneof("event"), getattr(r.event, r.event.WhichOneof("event")))
             for r in records]
    turn = [(k, e.seat) for k, e in kinds if k in ("bring_in_posted", "action_timed_out",
                                                   "folded", "checked", "called")]
    # The leaving seat folds at its turn, as a player would: no "runs out of time".
    assert turn == [("bring_in_posted", 1), ("folded", 2)]
    at = {k: r.occurred_at.ToMicroseconds() / 1e6 for (k, _e), r in zip(kinds, records,
                                                                         strict=True)}
    assert at["folded"] - at["bring_in_posted"] < action_time_s / 3  # not its clock


async def test_a_refused_sit_down_is_shown_with_its_reason(stacked_room: Room,
                                                           dev_keys: DevKeys) -> None:
    room = stacked_room
    table_id = await room.client.open_table(
        settings=fast_settings(buy_in_max=5_000))
    await room.fund("cy", 100_000)
    app = PlayApp(lambda: connect(room, player("cy")),
                  PlayOptions(table_id, buy_in=50_000))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_until(lambda: any("Not seated" in line for line in app.log_lines))
        # the screen draws the log's lines after they are written
        await wait_until(lambda: "watching" in screen_text(app) and "✗ sit down refused ("
                         in screen_text(app))
        text = screen_text(app)
        assert "✗ sit down refused (buy_in_out_of_range)" in text, (app.log_lines, text)
        assert "watching" in text
        # An action key without a seat says so rather than calling (once the watch's first
        # view is in: before it, the key does nothing).
        await wait_until(lambda: app.view is not None)
        await pilot.press("c")
        await wait_until(lambda: "You are not seated" in app.log_lines)


async def test_stud_play_in_a_pseudo_terminal(stacked_room: Room, dev_keys: DevKeys) -> None:
    """The real command in a real (pseudo-)terminal: it mints its token from the issuer key,
    funds and seats the player, draws the table, and ``q`` leaves the seat and quits."""
    room = stacked_room
    table_id = await room.client.open_table("demo", settings=fast_settings())
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    env = {**os.environ, **env_for(room, dev_keys), "TERM": "xterm-256color"}
    env.pop("STUD_PLAYER_TOKEN", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "studtools.cli", "play", "--player", "dan", "--seat", "4",
         "--buy-in", "5000"], stdin=slave, stdout=slave, stderr=slave, env=env,
        start_new_session=True)
    os.close(slave)
    output = bytearray()

    def drain() -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(master, 65536):
                output.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        view = await room.client.wait_for(
            table_id, lambda v: any(s.player_id == "dan" for s in v.seats), timeout=60)
        assert [s.seat for s in view.seats if s.player_id == "dan"] == [4]
        await wait_until(lambda: b"Dealer" in output and b"seat 4 (dan)" in output,
                         timeout=60)
        os.write(master, b"q")
        status = await asyncio.to_thread(process.wait, 60)
        assert status == 0, bytes(output[-2000:])
        await room.client.wait_for(table_id, lambda v: not v.seats)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
        reader.join(5)
