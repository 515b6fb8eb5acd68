"""The ``stud play`` terminal client: a textual app over the SDK (:mod:`studclient`).

The app connects, sits down (a free seat, or the one asked for, with the buy-in asked for or
the table's minimum), then follows the table with a :class:`~studclient.TableWatch` (own
down cards merged in from the dealer) and redraws on every new view. Keys (and buttons)
act; the server is the referee: a key whose action is not legal now is still sent (with the
view's version as ``expected_sequence``) and the server's refusal is written to the dealer
log with its reason. See docs/play.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from rich.console import Console
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, RichLog, Static

from stud.v1 import table_pb2
from studclient.client import Client
from studclient.errors import StudError
from studclient.protection import reality_check_text
from studclient.tui import text as t
from studclient.watch import TableWatch
from studkit.cardcheck import Outcome, Verdict

VERIFIED_MARK: Final = "✓"
FAILED_MARK: Final = "⚠"
SUIT_STYLES: Final = {"h": "bold red", "d": "bold blue", "c": "bold green", "s": "bold"}
TICK_S: Final = 0.25
LOG_KEEP: Final = 2000
"""Dealer log lines kept on screen."""
QUIT_WAIT_S: Final = 10.0
"""After ``q``, how long the LeaveSeat sent may take to be answered once the screen is gone
(:meth:`PlayApp.wait_closed`) before the connection is closed anyway."""

Funder = Callable[[Client, int], Awaitable[str | None]]
"""Makes sure the player's wallet holds ``amount`` (dev rooms: an operator deposit); returns
a line for the log, or None."""


@dataclass(frozen=True)
class PlayOptions:
    """What ``stud play`` was asked for."""

    table_id: str = "demo"
    seat: int = 0
    """0: the first free seat."""
    buy_in: int = 0
    """0: the table's minimum."""


def default_buy_in(view: table_pb2.TableView) -> int:
    """The table's minimum buy-in (20 big bets when the table leaves it to the default)."""
    return view.settings.buy_in_min or 20 * view.config.big_bet


def free_seat(view: table_pb2.TableView) -> int:
    """The first free seat, 0 when the table is full."""
    taken = {s.seat for s in view.seats}
    return next((s for s in range(1, view.config.seats + 1) if s not in taken), 0)


def cards_markup(cards: list[str]) -> Text:
    """Cards, coloured by suit (four-colour deck); hidden ones dimmed."""
    out = Text()
    for i, card in enumerate(cards):
        if i:
            out.append(" ")
        style = "dim" if card == t.HIDDEN else SUIT_STYLES.get(card[-1], "")
        out.append(card, style=style)
    return out


class HistoryScreen(ModalScreen[None]):
    """The last hand's history (``h``; escape closes it)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"), Binding("h", "dismiss", "Close"),
        Binding("q", "dismiss", "Close")]
    DEFAULT_CSS = """
    HistoryScreen { align: center middle; }
    HistoryScreen > VerticalScroll { width: 90%; height: 90%; border: round $accent;
                                     background: $surface; padding: 0 1; }
    """

    def __init__(self, title: str, body: str) -> None:
        super().__init__()
        self._title = title
        self.body = body

    def compose(self) -> ComposeResult:
        with VerticalScroll() as scroll:
            scroll.border_title = self._title
            scroll.border_subtitle = "escape to close"
            yield Static(self.body, id="history-text", markup=False)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)


class PlayApp(App[None]):
    """The table, your cards, the pots, the turn with its countdown, the actions and the
    dealer log."""

    TITLE = "stud play"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012
    CSS = """
    #main { height: 1fr; }
    #left { width: 3fr; }
    #log { width: 2fr; min-width: 30; border: round $primary; border-title-align: left; }
    #title { height: auto; background: $boost; padding: 0 1; text-style: bold; }
    #table { height: auto; padding: 0 1; }
    #pots, #turn, #you { height: auto; padding: 0 1; }
    #turn { text-style: bold; }
    #actions { height: auto; padding: 0 1; }
    #actions Button { margin: 0 1 0 0; width: auto; min-width: 12; }
    Screen.-narrow #main { layout: vertical; }
    Screen.-narrow #left { width: 1fr; height: auto; }
    Screen.-narrow #log { width: 1fr; height: 1fr; min-height: 6; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "act('f')", "Fold"),
        Binding("c", "act('c')", "Check/call"),
        Binding("b", "act('b')", "Bet/raise"),
        Binding("h", "history", "Last hand"),
        Binding("s", "sit_out", "Sit out/in"),
        Binding("t", "top_up", "Top up"),
        Binding("m", "muck", "Muck/show"),
        Binding("l", "leave", "Leave seat"),
        Binding("q", "quit_table", "Leave and quit"),
    ]

    def __init__(self, connect: Callable[[], Client], options: PlayOptions, *,
                 fund: Funder | None = None, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.options = options
        self._connect = connect
        self._fund = fund
        self._clock = clock
        self.client: Client | None = None
        self.table_watch: TableWatch | None = None
        self.view: table_pb2.TableView | None = None
        self.dealer_log = t.DealerLog()
        self.log_lines: list[str] = []
        """Every line written to the dealer log (plain text)."""
        self.player_id = ""
        self._left = False
        self.seat = 0
        self.buy_in = 0
        """What the player sat down with: ``t`` tops the stack up to it."""
        """The seat taken (0: none), as soon as the table said yes (before any view)."""
        self._styled: list[tuple[str, str]] = []
        self._quitting: asyncio.Task[bool] | None = None
        """The LeaveSeat sent by ``q``, still being answered while the app exits."""
        self.verdicts: dict[int, Verdict] = {}
        """Each hand's own check (docs/fairness.md), by hand number."""
        self.reality_checks = 0
        """How many reality checks the screen has shown (issue 34)."""

    # --- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static("connecting…", id="title")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield Static("", id="table")
                yield Static("", id="pots")
                yield Static("", id="you")
                yield Static("", id="turn")
                with Horizontal(id="actions"):
                    yield Button("Fold (f)", id="act-f", variant="error", disabled=True)
                    yield Button("Check (c)", id="act-c", variant="primary", disabled=True)
                    yield Button("Bet (b)", id="act-b", variant="warning", disabled=True)
                    yield Button("History (h)", id="history")
                    yield Button("Leave (l)", id="leave")
            log = RichLog(id="log", wrap=True, markup=False, highlight=False, min_width=20,
                          max_lines=LOG_KEEP)
            log.border_title = "Dealer"
            yield log
        yield Footer()

    async def on_mount(self) -> None:
        # Anchored: the dealer log stays scrolled to its newest line when lines are added
        # and when it is resized (a redraw that makes the table taller shrinks the log; the
        # scroll offset alone would then leave the newest lines below its bottom edge),
        # until the player scrolls up to read back; scrolling to the bottom anchors it again.
        self.query_one("#log", RichLog).anchor()
        self.set_interval(TICK_S, self._tick)
        self.run_worker(self._session(), name="session", exit_on_error=False)

    def on_resize(self) -> None:
        """Keep the dealer log's latest lines in sight after a resize."""
        # A RichLog wraps a line once, when written: write them again at the new width.
        self.set_timer(0.05, self._rewrap_log)

    def _rewrap_log(self) -> None:
        with contextlib.suppress(Exception):
            log = self.query_one("#log", RichLog)
            log.clear()
            for line, style in self._styled[-LOG_KEEP:]:
                log.write(Text(line, style=style))
            log.scroll_end(animate=False)

    async def on_unmount(self) -> None:
        if self.table_watch is not None:
            await self.table_watch.close()
        if self.client is not None and self._quitting is None:
            await self.client.close()
        # else the LeaveSeat in flight needs the connection: wait_closed closes it

    async def wait_closed(self, timeout: float = QUIT_WAIT_S) -> None:
        """Once the app has exited: let the LeaveSeat that ``q`` sent be answered (at most
        ``timeout`` seconds), then close the connection. ``stud play`` calls it after the
        screen is gone, so quitting never waits for the table."""
        quitting, self._quitting = self._quitting, None
        if quitting is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(quitting, timeout)
            if self.client is not None:
                await self.client.close()

    # --- the session -----------------------------------------------------------------------

    async def _session(self) -> None:
        table_id = self.options.table_id
        try:
            self.client = client = self._connect()
            self.player_id = await client.player_id()
            view = await client.get_table(table_id)
            self.say(f"Table {table_id}: you are {self.player_id}")
            if not view.viewer_seat:
                await self._sit(client, view)
            else:
                self.seat = view.viewer_seat
                self.say(f"You are already at seat {view.viewer_seat}")
            self.run_worker(self.watch_reality_checks(client), name="reality-checks",
                            exit_on_error=False)
            self.table_watch = TableWatch(client, table_id, on_event=self._on_event,
                                          on_verdict=self._on_verdict)
            await self.table_watch.start()
            if self.table_watch.view is not None:
                self.dealer_log.seed_up_cards(self.table_watch.view)
            async for view in self.table_watch.views():
                self.show(view)
        except StudError as exc:
            self.refused("connect", exc)
        except Exception as exc:  # shown, not raised: the screen stays up to read it
            self.say(f"✗ {type(exc).__name__}: {exc}", style="bold red")

    async def watch_reality_checks(self, client: Client) -> None:
        """Show each reality check the wallet sends (``stud play --reality-check``; issue
        34): the session's time and net result, highlighted, with a bell. None set: nothing
        to show; the stream failing is one line, the table plays on."""
        try:
            async for check in client.reality_checks():
                self.reality_checks += 1
                self.say(f"⏰ {reality_check_text(check)}", style="bold black on cyan")
                with contextlib.suppress(Exception):
                    self.bell()
        except StudError as exc:
            if exc.reason != "reality_check_off":
                self.refused("reality checks", exc)
        except ValueError:
            return  # a client without a wallet address: no reminders to watch

    async def _sit(self, client: Client, view: table_pb2.TableView) -> None:
        seat = self.options.seat or free_seat(view)
        if not seat:
            self.say("The table is full: watching")
            return
        buy_in = self.options.buy_in or default_buy_in(view)
        try:
            if self._fund is not None:
                line = await self._fund(client, buy_in)
                if line:
                    self.say(line)
            self.say(f"Sitting down at seat {seat} with {t.chips(buy_in)}")
            await client.sit(self.options.table_id, seat, buy_in)
            self.seat, self.buy_in = seat, buy_in
        except StudError as exc:
            self.refused("sit down", exc)
            self.say("Not seated: watching")

    def _on_event(self, record: table_pb2.TableEventRecord) -> None:
        for line in self.dealer_log.feed(record):
            self.say(line)

    # --- fairness (docs/fairness.md): each hand checked alone, a mark per hand -------------

    def _on_verdict(self, verdict: Verdict) -> None:
        self.verdicts[verdict.hand_number] = verdict
        if verdict.outcome is Outcome.VERIFIED:
            self.say(f"{VERIFIED_MARK} {verdict.summary()}", style="green")
        elif verdict.outcome in (Outcome.UNVERIFIABLE, Outcome.WITHOUT_YOUR_SEED):
            # No commitment (a production dealer always commits), or an order resting on the
            # dealer alone after it refused your seed: a warning, not a verified mark.
            self.say(f"{FAILED_MARK} WARNING: {verdict.summary()}", style="bold black on yellow")
        else:
            self.say(f"{FAILED_MARK} WARNING: {verdict.summary()}", style="bold white on red")
            for problem in verdict.problems[1:4]:
                self.say(f"{FAILED_MARK}   {problem}", style="bold red")
            self.bell()
        if self.view is not None:
            with contextlib.suppress(Exception):  # before the screen is up / after it is gone
                self.show(self.view)

    def _fair_mark(self) -> str:
        """The last checked hand's mark for the title bar."""
        if not self.verdicts:
            return ""
        number = max(self.verdicts)
        verdict = self.verdicts[number]
        mark = {Outcome.VERIFIED: VERIFIED_MARK, Outcome.FAILED: f"{FAILED_MARK} CHECK FAILED",
                Outcome.WITHOUT_YOUR_SEED: f"{FAILED_MARK} WITHOUT YOUR SEED",
                Outcome.UNVERIFIABLE: f"{FAILED_MARK} NOT VERIFIABLE"}[verdict.outcome]
        return f"#{number} {mark}"

    # --- drawing ---------------------------------------------------------------------------

    def say(self, line: str, style: str = "") -> None:
        """Write a line to the dealer log."""
        self.log_lines.append(line)
        self._styled.append((line, style))
        with contextlib.suppress(Exception):  # before the log is mounted / after unmount
            self.query_one("#log", RichLog).write(Text(line, style=style))

    def refused(self, what: str, exc: StudError) -> None:
        """Write the server's refusal, with its reason, to the dealer log."""
        reason = exc.reason or exc.code.name.lower()
        message = exc.message.removeprefix(f"{exc.reason}: ") if exc.reason else exc.message
        detail = f": {message}" if message and message != reason else ""
        self.say(f"✗ {what} refused ({reason}){detail}", style="bold red")

    def show(self, view: table_pb2.TableView) -> None:
        """Redraw for ``view``."""
        self.view = view
        self.seat = view.viewer_seat  # every view follows the sit-down (the watch does)
        self.query_one("#title", Static).update(self._title_text(view))
        self.query_one("#table", Static).update(self._table(view))
        self.query_one("#pots", Static).update(t.pots_text(view))
        self.query_one("#you", Static).update(self._you(view))
        for key in t.KEYS:
            button = self.query_one(f"#act-{key}", Button)
            action = t.action_for(key, view)
            button.disabled = action is None
            label = f"{t.action_label(action)} ({key})" if action is not None else \
                {"f": "Fold (f)", "c": "Check/call (c)", "b": "Bet/raise (b)"}[key]
            if str(button.label) != label:
                button.label = label
                button.refresh(layout=True)  # the button's width follows its label
        self._tick()

    def _title_text(self, view: table_pb2.TableView) -> str:
        c = view.config
        parts = [f"Table {view.table_id}",
                 f"Stud Hi/Lo {t.chips(c.small_bet)}/{t.chips(c.big_bet)}, "
                 f"ante {t.chips(c.ante)}, bring-in {t.chips(c.bring_in)}"]
        if view.HasField("hand"):
            hand = view.hand
            street = t.STREETS.get(hand.street, "")
            phase = t.PHASES.get(hand.phase, "")
            parts.append(f"Hand #{hand.hand_number}" + (f" {street}" if street else "")
                         + (f" ({phase})" if phase else ""))
        if view.viewer_seat:
            parts.append(f"you: seat {view.viewer_seat} ({self.player_id})")
        elif self.player_id:
            parts.append(f"you: {self.player_id}, watching")
        if view.status_reason:
            parts.append(view.status_reason)
        if self._fair_mark():
            parts.append(self._fair_mark())
        return " · ".join(parts)

    def _table(self, view: table_pb2.TableView) -> Table:
        table = Table(expand=True, box=None, pad_edge=False, header_style="bold")
        for column in ("", "Seat", "Player", "Stack", "Wager", "Down", "Up", "Status"):
            table.add_column(column, no_wrap=column in ("Down", "Up"),
                             justify="right" if column in ("Seat", "Stack", "Wager")
                             else "left")
        players = {p.seat: p for p in view.hand.players} if view.HasField("hand") else {}
        to_act = view.hand.to_act if view.HasField("hand") and view.hand.phase != \
            table_pb2.HAND_PHASE_COMPLETE else 0
        for seat in view.seats:
            player = players.get(seat.seat)
            down = t.down_text(player.down) if player is not None else []
            up = [t.card_text(c) for c in player.up] if player is not None else []
            wager = t.chips(player.street_total) if player and player.street_total else ""
            mine = seat.seat == view.viewer_seat
            marker = "▶" if seat.seat == to_act else ""
            who = Text(seat.player_id + (" (you)" if mine else ""),
                        style="bold" if mine else "")
            table.add_row(marker, str(seat.seat), who, t.chips(seat.stack), wager,
                          cards_markup(down), cards_markup(up),
                          t.seat_status(view, seat, player),
                          style="dim" if player is not None and player.folded else "")
        return table

    def _you(self, view: table_pb2.TableView) -> Text:
        if not view.viewer_seat:
            return Text("You are not seated", style="dim")
        me = next((p for p in view.hand.players if p.seat == view.viewer_seat), None) \
            if view.HasField("hand") else None
        if me is None:
            return Text("Your cards: none this hand", style="dim")
        out = Text("Your cards: ")
        out.append_text(cards_markup(t.down_text(me.down)))
        if me.up:
            out.append("  |  ")
            out.append_text(cards_markup([t.card_text(c) for c in me.up]))
        if view.hand.HasField("community_card"):
            out.append("  community: ")
            out.append_text(cards_markup([t.card_text(view.hand.community_card)]))
        return out

    def turn_text(self, view: table_pb2.TableView | None = None) -> str:
        """Whose turn it is, with the time left."""
        view = view or self.view
        if view is None or not view.HasField("hand"):
            return "Waiting for a hand"
        hand = view.hand
        if hand.phase == table_pb2.HAND_PHASE_COMPLETE:
            return "Hand over: waiting for the next hand"
        if not hand.to_act:
            return t.PHASES.get(hand.phase, "").capitalize()
        who = next((s.player_id for s in view.seats if s.seat == hand.to_act), "")
        head = ("Your turn" if hand.to_act == view.viewer_seat
                else f"Seat {hand.to_act} ({who}) to act")
        if hand.HasField("turn_deadline"):
            deadline = hand.turn_deadline.seconds + hand.turn_deadline.nanos / 1e9
            left = deadline - self._clock()
            bank = hand.time_bank_ms / 1000
            head += f" · ⏱ {t.countdown(left)} left"
            if bank:
                head += f" (time bank {t.countdown(bank)})"
        legal = [f"{key}={t.action_label(a)}" for key in t.KEYS
                 if (a := t.action_for(key, view)) is not None]
        if legal:
            head += " · " + ", ".join(legal)
        return head

    def _tick(self) -> None:
        with contextlib.suppress(Exception):
            self.query_one("#turn", Static).update(self.turn_text())

    # --- actions ---------------------------------------------------------------------------

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        button = event.button.id or ""
        if button.startswith("act-"):
            await self.action_act(button[4:])
        elif button == "history":
            await self.action_history()
        elif button == "leave":
            await self.action_leave()

    async def action_act(self, key: str) -> None:
        """Take the action ``key`` stands for (f, c, b); when none is legal, ask anyway and
        show the server's reason."""
        client, view = self.client, self.view
        if client is None or view is None:
            return
        if not view.viewer_seat:
            self.say("You are not seated", style="bold red")
            return
        table_id = self.options.table_id
        action = t.action_for(key, view)
        try:
            if action is not None:
                await client.act(table_id, action, expected_sequence=view.version)
                return
            # Not legal now as far as this view knows: the server says why.
            kinds = {"f": client.fold, "c": client.check, "b": client.bet}
            await kinds[key](table_id, expected_sequence=view.version)
        except StudError as exc:
            label = t.action_label(action) if action is not None else \
                {"f": "Fold", "c": "Check", "b": "Bet"}[key]
            self.refused(label, exc)

    async def action_history(self) -> None:
        """Open the last finished hand's history."""
        client, view = self.client, self.view
        if client is None or view is None or not view.HasField("hand"):
            self.say("No hand yet")
            return
        hand = view.hand
        number = hand.hand_number if hand.phase == table_pb2.HAND_PHASE_COMPLETE \
            else hand.hand_number - 1
        if number < 1:
            self.say("No hand has finished yet")
            return
        try:
            history = await client.hand_history(self.options.table_id, number)
        except StudError as exc:
            self.refused("hand history", exc)
            return
        await self.push_screen(HistoryScreen(f"Hand #{number}", t.history_text(history)))

    async def action_sit_out(self) -> None:
        client, view = self.client, self.view
        if client is None or view is None or not view.viewer_seat:
            return
        me = next((s for s in view.seats if s.seat == view.viewer_seat), None)
        try:
            if me is not None and me.sitting_out:
                await client.sit_in(self.options.table_id)
                self.say("You sit in from the next hand")
            else:
                await client.sit_out(self.options.table_id)
                self.say("You sit out from the next hand")
        except StudError as exc:
            self.refused("sit out/in", exc)

    async def action_top_up(self) -> None:
        """Top the stack up to the buy-in (between hands; asked during one, when it ends)."""
        client, view = self.client, self.view
        if client is None or view is None or not view.viewer_seat:
            return
        me = next((s for s in view.seats if s.seat == view.viewer_seat), None)
        target = self.buy_in or default_buy_in(view)
        if me is None or me.stack >= target:
            self.say(f"Your stack is at {t.chips(target)} or more already")
            return
        try:
            await client.top_up(self.options.table_id, target - me.stack,
                                seat=view.viewer_seat)
        except StudError as exc:
            self.refused("top-up", exc)
            return
        self.say(f"Top-up of {t.chips(target - me.stack)} asked")

    async def action_muck(self) -> None:
        """Toggle mucking losing hands at the showdown where the rules allow it."""
        client, view = self.client, self.view
        if client is None or view is None or not view.viewer_seat:
            return
        muck = not view.muck_preference
        try:
            await client.set_muck(self.options.table_id, muck, seat=view.viewer_seat)
        except StudError as exc:
            self.refused("muck preference", exc)
            return
        self.say("You muck losing hands when the rules allow it" if muck
                 else "You show your hand at the showdown")

    async def action_leave(self) -> bool:
        """Leave the seat (when the hand in progress ends); True when asked or not seated."""
        client, seat = self.client, self.seat
        if client is None or not seat or self._left:
            return True
        try:
            await client.leave(self.options.table_id, seat=seat)
        except StudError as exc:
            self.refused("leave", exc)
            return False
        self._left = True
        self.say("You leave the seat (at the end of the hand in progress); "
                 "your stack goes back to your wallet")
        return True

    async def action_quit_table(self) -> None:
        """Leave the seat and quit at once: LeaveSeat is sent and the app exits without
        waiting for the answer (:meth:`wait_closed` lets it arrive). Mid-hand the table then
        checks or folds the seat at its turn without waiting for its clock, and stands it
        up when the hand ends."""
        if self.client is not None and self.seat and not self._left \
                and self._quitting is None:
            self._quitting = asyncio.create_task(self.action_leave())
            await asyncio.sleep(0)  # the call is under way before the app stops
        self.exit()


def screen_text(app: App[Any]) -> str:
    """The text on the app's screen now, line by line (for tests and samples)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True,
                      force_terminal=True, color_system=None, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


async def wait_until(predicate: Callable[[], bool], timeout: float = 20.0,
                     step: float = 0.05) -> None:
    """Poll ``predicate`` until it holds (``TimeoutError`` after ``timeout`` s)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(step)


__all__ = ["HistoryScreen", "PlayApp", "PlayOptions", "default_buy_in",
           "free_seat", "screen_text", "wait_until"]
