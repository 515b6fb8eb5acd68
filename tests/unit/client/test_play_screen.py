"""``stud play``'s screen without a room (issue 17): the dealer log stays scrolled to its
newest line when the table above it grows, and ``q`` sends LeaveSeat and exits without
waiting for the answer. The SDK client is a stand-in here (the app only calls its
``leave`` and ``close``); tests/integration/client/test_play_tui.py plays the same keys
against the real room."""

from __future__ import annotations

import asyncio
from typing import Any

from stud.v1 import table_pb2 as pb
from studclient.tui.app import PlayApp, PlayOptions, screen_text


def no_room() -> Any:
    raise ConnectionRefusedError("no room in a unit test")


def a_view(players: int) -> pb.TableView:
    """A hand in progress with ``players`` players, two down cards each."""
    view = pb.TableView(table_id="demo", version=5, viewer_seat=1)
    view.config.small_bet, view.config.big_bet, view.config.seats = 200, 400, 8
    for seat in range(1, players + 1):
        view.seats.append(pb.SeatView(seat=seat, player_id=f"p{seat}", stack=10_000))
    view.hand.hand_number, view.hand.phase, view.hand.to_act = 1, pb.HAND_PHASE_BETTING, 2
    for seat in range(1, players + 1):
        player = view.hand.players.add(seat=seat, stack=9_000)
        player.down.add()
        player.down.add()
    return view


async def test_the_dealer_log_keeps_its_newest_line_in_sight() -> None:
    """Narrow screen (the log under the table): lines written while two players sit, then
    six more sit down and the table grows by six rows, shrinking the log. The newest line
    is still on screen (it used to fall six lines below the log's bottom edge)."""
    app = PlayApp(no_room, PlayOptions("demo"))
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.pause(0.1)
        app.show(a_view(2))
        await pilot.pause(0.1)
        for i in range(40):
            app.say(f"dealer line {i:02d}")
        await pilot.pause(0.2)
        assert "dealer line 39" in screen_text(app)
        app.show(a_view(8))
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "p8" in text
        shown = [line for line in text.splitlines() if "dealer line" in line]
        assert shown and "dealer line 39" in shown[-1], text


class SlowTable:
    """An SDK client whose LeaveSeat is answered only when the test says so."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int | None]] = []
        self.answer = asyncio.Event()
        self.closed = False

    async def leave(self, table_id: str, *, seat: int | None = None,
                    **_: Any) -> pb.CommandReply:
        self.asked.append((table_id, seat))
        await self.answer.wait()
        return pb.CommandReply(version=9)

    async def close(self) -> None:
        self.closed = True


async def test_q_sends_leave_seat_and_exits_without_waiting_for_the_answer() -> None:
    table = SlowTable()
    app = PlayApp(no_room, PlayOptions("demo"))
    async with asyncio.timeout(10):  # the old q waited for the answer: it never came
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause(0.1)
            app.client, app.seat = table, 3  # type: ignore[assignment]
            await pilot.press("q")
    assert table.asked == [("demo", 3)]  # sent before the app stopped
    assert not table.closed  # the call still needs the connection
    table.answer.set()
    await app.wait_closed()
    assert table.closed
    assert any("You leave the seat" in line for line in app.log_lines)


async def test_a_leave_never_answered_does_not_hold_the_exit() -> None:
    table = SlowTable()
    app = PlayApp(no_room, PlayOptions("demo"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.1)
        app.client, app.seat = table, 3  # type: ignore[assignment]
        await pilot.press("q")
    await asyncio.wait_for(app.wait_closed(timeout=0.2), 5)
    assert table.asked == [("demo", 3)] and table.closed


def test_a_hand_without_a_commitment_or_without_your_seed_is_a_warning() -> None:
    """A hand with no per-card commitment (a production dealer always commits) and one whose
    order rests on the dealer after it refused your seed are warnings in the dealer log and
    the title, never the dim mark or the green verified one."""
    from studkit.cardcheck import Outcome, Verdict

    app = PlayApp(no_room, PlayOptions("demo"))
    app._on_verdict(Verdict(table_id="demo", hand_number=1, outcome=Outcome.UNVERIFIABLE,
                            problems=("the hand has no per-card commitment",)))
    assert app.log_lines[-1] == ("⚠ WARNING: hand 1: not verifiable (the hand has no "
                                 "per-card commitment)")
    assert app._fair_mark() == "#1 ⚠ NOT VERIFIABLE"
    app._on_verdict(Verdict(table_id="demo", hand_number=2,
                            outcome=Outcome.WITHOUT_YOUR_SEED, seed_note="refused"))
    assert app.log_lines[-1].startswith("⚠ WARNING: hand 2: verified WITHOUT YOUR SEED")
    assert app._fair_mark() == "#2 ⚠ WITHOUT YOUR SEED"
    assert all("yellow" in style for _line, style in app._styled[-2:])


def panel_rows(text: str) -> list[str]:
    """The dealer panel's rows on screen (inside its border), narrow or wide layout."""
    rows = text.splitlines()
    top = next(i for i, row in enumerate(rows) if "╭─ Dealer" in row)
    col = rows[top].index("╭─ Dealer")
    out = []
    for row in rows[top + 1:]:
        cell = row[col:]
        if cell.startswith("╰"):
            break
        out.append(cell[1:].rstrip(" │▁▂▃▄▅▆▇█").strip())
    return [r for r in out if r]


async def test_the_dealer_panel_shows_each_action_when_the_table_does() -> None:
    """Issue 29 (the panel 'about a hand behind'): the public records of four whole hands
    fed to the app one at a time, the table redrawn after each, with the last hand's history
    opened after a showdown and closed during the next hand: after every record, the panel's
    last row is the line that record made (narrow and wide screens)."""
    import random

    from rules import DECK, TableConfig
    from rules.testing import StackedDeck, TableDriver
    from studclient.tui.app import HistoryScreen
    from tests.unit.client.test_play_text import aggressive_seat_two, records

    driver = TableDriver(TableConfig(), stacks={1: 20_000, 2: 20_000, 3: 20_000})
    for seed in range(4):
        cards = list(DECK)
        random.Random(seed).shuffle(cards)
        driver.play_hand(StackedDeck(cards), aggressive_seat_two)
    feed = records(driver, 0)
    for size in ((80, 24), (130, 40)):
        app = PlayApp(no_room, PlayOptions("demo"))
        async with app.run_test(size=size) as pilot:
            await pilot.pause(0.1)
            hand, checked = 0, 0
            for record in feed:
                kind = record.event.WhichOneof("event")
                if kind == "hand_started":
                    hand = record.event.hand_started.hand_number
                said = len(app.log_lines)
                app._on_event(record)
                view = a_view(3)
                view.hand.hand_number = max(hand, 1)
                app.show(view)
                if kind == "hand_ended" and hand == 2:
                    await app.push_screen(HistoryScreen("Hand #2", "the last hand"))
                if kind == "hand_started" and hand == 3:
                    await pilot.press("escape")  # read during hand 3's deal, then closed
                await pilot.pause(0.02)
                if len(app.log_lines) == said or isinstance(app.screen, HistoryScreen):
                    continue
                shown = panel_rows(screen_text(app))
                newest = app.log_lines[-1]
                # its last row ends the newest line (wrapped or not), and its first is there
                assert shown and newest.replace(" ", "").endswith(
                    shown[-1].replace(" ", "")), (size, newest, shown)
                assert any(newest.startswith(row[:30]) for row in shown[-3:]), (newest, shown)
                checked += 1
            assert hand == 4 and checked > 100


class Reminders:
    """An SDK client whose reality-check stream yields ``checks`` then ends, or is refused
    with ``reason``."""

    def __init__(self, checks: list[Any], reason: str = "") -> None:
        self.checks, self.reason = checks, reason

    async def reality_checks(self) -> Any:
        for check in self.checks:
            yield check
        if self.reason:
            import grpc

            from studclient.errors import FailedPrecondition
            raise FailedPrecondition(grpc.StatusCode.FAILED_PRECONDITION, self.reason, "no")


async def test_the_table_screen_shows_each_reality_check_with_the_session_and_net() -> None:
    """Issue 34: every reminder of the wallet's stream is a line of the dealer log with the
    session's time and its net result; with none set (reality_check_off) nothing is shown;
    another refusal is one line."""
    from stud.v1 import wallet_pb2 as wpb
    app = PlayApp(no_room, PlayOptions("demo"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.1)
        await app.watch_reality_checks(Reminders([  # type: ignore[arg-type]
            wpb.RealityCheck(session_ms=30 * 60_000, net_result=-300, interval_minutes=30),
            wpb.RealityCheck(session_ms=95 * 60_000, net_result=1_250, interval_minutes=30)]))
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "you have played 0 h 30 min this session; net result -300" in text
        assert "you have played 1 h 35 min this session; net result +1,250" in text
        assert app.reality_checks == 2
        before = list(app.log_lines)
        await app.watch_reality_checks(Reminders([], "reality_check_off"))  # type: ignore[arg-type]
        assert app.log_lines == before
        await app.watch_reality_checks(Reminders([], "unavailable"))  # type: ignore[arg-type]
        assert app.log_lines[-1].startswith("✗ reality checks refused (unavailable)")
