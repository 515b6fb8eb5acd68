"""``python -m studclient.demo``: the demo room ``make run`` starts, bots and a live feed.

It opens the table ``demo`` (operator; $2/$4, ``rules.TableConfig()``) unless it exists,
funds the dev players ``alice`` and ``bob`` (play money, so ``stud play`` can sit down at
once), seats a few bots (SDK only, the strategies of :mod:`studclient.bots`) and plays
forever at a human pace: each bot thinks 0.5-1.5 s, the table waits a few seconds between
hands. At least :data:`FREE_SEATS` seats stay free for people. Bots already seated (a
restarted ``make run``: the table service rebuilds the table from its log) just carry on;
a bot sat out (it timed out while the room was down) sits in again; a short stack is topped
up between hands (the operator deposits more play money when the wallet runs low).

The feed watches the table as an observer (``WatchTable``) and prints one line per action
and a summary per hand, in the text of the hand history (:func:`rules.history.render_history`
over the rules' events), e.g.::

    [demo] Hand #7: seats 1, 3, 5, 7 dealt in (1 bot-ada, 3 bot-ben, 5 bot-cleo, 7 bot-dex)
    [demo] *** 3rd street *** Seat 1 is dealt 2c up, Seat 3 is dealt 9s up, ...
    [demo] Seat 3 brings in for 50
    [demo] Seat 5 completes to 200
    ...
    [demo] Hand #7: Seat 1 (bot-ada) wins 1,210 (high) with two pair, kings and sevens
    [demo] Hand #7: Seat 5 (bot-cleo) wins 1,210 (low) with 8-6-4-2-A

Addresses and credentials come from the environment of :mod:`studclient.bots`
(``STUD_TABLE_TARGET``, ``STUD_DEALER_TARGET``, ``STUD_WALLET_TARGET``, ``STUD_ISSUER_KEY``);
the pace from ``STUD_DEMO_THINK`` (seconds, ``MIN-MAX``) and ``STUD_DEMO_HAND_DELAY_MS`` (only
when the table is opened). Diagnostics go to stderr (``make run``: ``.run/logs/demo.log``).
It stops on SIGTERM, SIGINT or SIGHUP.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TextIO

from rules import TableConfig
from rules.events import (
    Event,
    HandEnded,
    HandStarted,
    HandVoided,
    PlayerLeft,
    PlayerSeated,
    PotAwarded,
    RakeTaken,
)
from rules.history import render_history
from stud.v1 import table_pb2
from studclient.bots import (
    DEALER_TARGET_ENV,
    DEFAULT_ISSUER_KEY_FILE,
    DEFAULT_TARGETS,
    ISSUER_KEY_ENV,
    TABLE_TARGET_ENV,
    WALLET_TARGET_ENV,
    Strategy,
    hand_over,
    strategy_for,
)
from studclient.client import Client, TokenProvider
from studclient.errors import (
    AlreadyExists,
    FailedPrecondition,
    InsufficientFunds,
    NotFound,
    NotYourTurn,
    Stale,
    StudError,
)
from studclient.watch import TableWatch

DEMO_TABLE: Final = "demo"
BOT_NAMES: Final = ("bot-ada", "bot-ben", "bot-cleo", "bot-dex", "bot-eve", "bot-finn")
DEFAULT_BOTS: Final = 4
FREE_SEATS: Final = 2
"""Seats the bots always leave free for people."""
DEV_PLAYERS: Final = ("alice", "bob")
"""The players whose tokens ``make run`` prints: funded so they can sit down."""
PLAYER_FUNDS: Final = 100_000
"""Play money a dev player's account is brought back to when it cannot buy in ($1,000)."""
THINK_ENV: Final = "STUD_DEMO_THINK"
HAND_DELAY_ENV: Final = "STUD_DEMO_HAND_DELAY_MS"
DEFAULT_THINK: Final = (0.5, 1.5)
DEFAULT_HAND_DELAY_MS: Final = 4000
RETRY_S: Final = 2.0
"""Pause before a bot or the feed starts over after an error (a service restarting)."""
READY_TIMEOUT_S: Final = 60.0
SEAT_ORDER: Final = (1, 3, 5, 7, 2, 4, 6, 8)
"""The bots spread out round the table."""
PREFIX: Final = "[demo] "

Write = Callable[[str], None]


def log(message: str) -> None:
    """A diagnostic line (stderr: ``make run`` sends it to ``.run/logs/demo.log``)."""
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} demo: {message}", file=sys.stderr, flush=True)


# --- the feed --------------------------------------------------------------------------------

_DROPPED: Final = re.compile(r"^(Seat \d+ is dealt a down card|A card is burned)$")
_GROUPS: Final = (
    ("ante", re.compile(r"^Seat \d+ antes ")),
    ("up", re.compile(r"^(\*\*\* .+ street \*\*\*|Seat \d+ is dealt \S+ up)$")),
)
_WINS: Final = re.compile(r"^Seat (\d+) wins ")
_SUMMARY_EVENTS: Final = (PotAwarded, RakeTaken, HandVoided)


def _group(line: str) -> str | None:
    for name, pattern in _GROUPS:
        if pattern.match(line):
            return name
    return None


@dataclass
class Feed:
    """Turns the table's events into feed lines: the hand history's text, one line per
    action; deals of a street and antes on one line each; down cards (hidden from an
    observer anyway) and burns left out; the awards held back until the hand ends and then
    printed together as the hand's summary, with the winners' names."""

    write: Write
    names: dict[int, str] = field(default_factory=dict)
    hand: list[Event] = field(default_factory=list)
    hand_number: int = 0
    printed: int = 0
    holding: bool = False
    pending: list[str] = field(default_factory=list)
    pending_group: str | None = None

    def seed(self, events: Sequence[Event]) -> None:
        """Events already past (a hand in progress when the feed starts): context only."""
        for event in events:
            self._track(event)
            self.hand.append(event)
        self.printed = len(self._lines())
        self.holding = any(isinstance(e, _SUMMARY_EVENTS) for e in self.hand)

    def event(self, event: Event) -> None:
        """One new event of the table."""
        self._track(event)
        self.hand.append(event)
        if isinstance(event, _SUMMARY_EVENTS):
            self.holding = True
        if isinstance(event, HandEnded):
            self._flush_pending()
            lines = self._lines()
            summary, self.printed, self.holding = lines[self.printed:], len(lines), False
            for line in summary:
                if line.startswith("***"):
                    continue
                wins = _WINS.match(line)
                if wins and int(wins.group(1)) in self.names:
                    seat = int(wins.group(1))
                    line = f"Seat {seat} ({self.names[seat]}) wins " + line[wins.end():]
                self.write(line if line.startswith("Hand #")
                           else f"Hand #{event.hand_number}: {line}")
            return
        if self.holding:
            return
        lines = self._lines()
        new, self.printed = lines[self.printed:], len(lines)
        for line in new:
            self._emit(line)

    def idle(self) -> None:
        """Nothing arrived for a moment: print a group still being collected."""
        self._flush_pending()

    def _track(self, event: Event) -> None:
        match event:
            case PlayerSeated(seat=seat, player_id=player):
                self.names[seat] = player
            case PlayerLeft(seat=seat):
                self.names.pop(seat, None)
            case HandStarted(hand_number=n):
                self.hand, self.printed, self.holding, self.hand_number = [], 0, False, n
                self._flush_pending()

    def _lines(self) -> list[str]:
        text = render_history(self.hand)
        return text.splitlines() if text else []

    def _emit(self, line: str) -> None:
        if _DROPPED.match(line):
            return
        group = _group(line)
        if group is not None and group == self.pending_group:
            if line.startswith("***"):  # a new street: a new line
                self._flush_pending()
                self.pending_group = group
            self.pending.append(line)
            return
        self._flush_pending()
        if group is not None:
            self.pending, self.pending_group = [line], group
            return
        if line.startswith("Hand #") and "dealt in" in line:
            seats = [int(s) for s in re.findall(r"\d+", line.split(":", 1)[1])]
            who = ", ".join(f"{s} {self.names[s]}" for s in seats if s in self.names)
            line = f"{line} ({who})" if who else line
        self.write(line)

    def _flush_pending(self) -> None:
        if not self.pending:
            return
        head, rest = self.pending[0], self.pending[1:]
        if head.startswith("***"):
            self.write(f"{head} {', '.join(rest)}" if rest else head)
        else:
            self.write(", ".join(self.pending))
        self.pending, self.pending_group = [], None


async def follow(client: Client, table_id: str, write: Write) -> None:
    """Print the feed of ``table_id`` until cancelled, starting over after an error."""
    while True:
        try:
            await _follow_once(client, table_id, write)
        except StudError as exc:
            log(f"feed: {type(exc).__name__}: {exc}; starting over")
        await asyncio.sleep(RETRY_S)


async def _follow_once(client: Client, table_id: str, write: Write) -> None:
    """Watch the table (events in order, each once) until the watch fails."""
    from studkit.mapping.events import event_from_proto

    feed = Feed(write)
    queue: list[table_pb2.TableEventRecord] = []
    arrived = asyncio.Event()

    def on_record(record: table_pb2.TableEventRecord) -> None:
        queue.append(record)
        arrived.set()

    async with TableWatch(client, table_id, cards=False, on_event=on_record) as watch:
        view = watch.view
        assert view is not None
        last = watch.last_sequence
        feed.names = {s.seat: s.player_id for s in view.seats}
        if view.HasField("hand") and not hand_over(view):
            history = await client.hand_history(table_id, view.hand.hand_number)
            feed.seed([event_from_proto(r.event) for r in history.events
                       if r.sequence <= last])
        views = asyncio.create_task(_drain(watch))
        try:
            while not views.done():
                try:
                    async with asyncio.timeout(0.3):
                        await arrived.wait()
                except TimeoutError:
                    feed.idle()
                    continue
                arrived.clear()
                while queue:
                    record = queue.pop(0)
                    if record.sequence > last:
                        last = record.sequence
                        feed.event(event_from_proto(record.event))
            views.result()
        finally:
            views.cancel()
            with contextlib.suppress(asyncio.CancelledError, StudError):
                await views


async def _drain(watch: TableWatch) -> None:
    """Consume the watch's views (its errors surface here)."""
    async for _ in watch.views():
        pass


# --- the bots --------------------------------------------------------------------------------

@dataclass
class Room:
    """What the bots share: the operator's client, the table, the pace."""

    ops: Client
    table_id: str
    think: tuple[float, float]
    seat_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class DemoBot:
    """One bot playing forever."""

    name: str
    client: Client
    strategy: Strategy
    rng: random.Random

    async def live(self, room: Room) -> None:
        """Play until cancelled; start over after an error (a service restarting)."""
        while True:
            try:
                await self._play(room)
            except StudError as exc:
                log(f"{self.name}: {type(exc).__name__}: {exc}; starting over")
            await asyncio.sleep(RETRY_S)

    async def _play(self, room: Room) -> None:
        acted_at = -1
        sat_in_for = topped_up_for = sat_down_for = -1
        async with self.client.watch(room.table_id) as watch:
            async for view in watch.views():
                between = hand_over(view)
                me = next((s for s in view.seats if s.seat == view.viewer_seat), None)
                if me is None:
                    if between and sat_down_for < view.version:
                        sat_down_for = view.version
                        await self._sit(room, view)
                    continue
                buy_in = _buy_in(view)
                if me.sitting_out and sat_in_for < view.hands_started:
                    sat_in_for = view.hands_started
                    await self._command("sit_in", self.client.sit_in(room.table_id))
                if (between and me.stack < 5 * view.config.big_bet and me.stack < buy_in
                        and topped_up_for < view.hands_started and not me.leaving):
                    topped_up_for = view.hands_started
                    await _fund(room.ops, self.name, buy_in - me.stack)
                    await self._command("top_up", self.client.top_up(
                        room.table_id, buy_in - me.stack))
                hand = view.hand
                if (view.version > acted_at and not between
                        and hand.phase == table_pb2.HAND_PHASE_BETTING
                        and hand.to_act == view.viewer_seat and hand.legal_actions.actions):
                    acted_at = view.version
                    await asyncio.sleep(self.rng.uniform(*room.think))
                    action = self.strategy(view, self.rng)
                    await self._command("act", self.client.act(
                        room.table_id, action, expected_sequence=view.version))

    async def _sit(self, room: Room, view: table_pb2.TableView) -> None:
        """Take a free seat if that leaves :data:`FREE_SEATS` free."""
        async with room.seat_lock:
            view = await self.client.get_table(room.table_id)
            if view.viewer_seat:
                return
            taken = {s.seat for s in view.seats}
            free = [s for s in SEAT_ORDER if s <= view.config.seats and s not in taken]
            if len(free) <= FREE_SEATS:
                return
            buy_in = _buy_in(view)
            await _fund(room.ops, self.name, buy_in)
            if await self._command("sit", self.client.sit(room.table_id, free[0], buy_in)):
                log(f"{self.name} sits at seat {free[0]} with {buy_in}")

    async def _command(self, what: str, call: Awaitable[object]) -> bool:
        try:
            await call
            return True
        except (Stale, NotYourTurn, InsufficientFunds):
            return False
        except FailedPrecondition as exc:
            log(f"{self.name} {what}: refused ({exc.reason})")
            return False
        except StudError as exc:
            log(f"{self.name} {what}: {type(exc).__name__}: {exc}")
            return False


def _buy_in(view: table_pb2.TableView) -> int:
    return min(view.settings.buy_in_max,
               max(view.settings.buy_in_min, 50 * view.config.big_bet))


async def _fund(ops: Client, player: str, needed: int) -> None:
    """Make sure ``player``'s account holds ``needed`` (play money from the operator)."""
    await ops.create_account(player)
    balance = await ops.balance(player)
    if balance < needed:
        await ops.deposit(player, 3 * needed - balance)


# --- the room --------------------------------------------------------------------------------

async def _ready(ops: Client) -> None:
    """Wait until the table service answers (it rebuilds its tables first)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            await ops.list_tables()
            return
        except StudError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def ensure_table(ops: Client, table_id: str, hand_delay_ms: int
                       ) -> tuple[table_pb2.TableView, bool]:
    """The table, opened with $2/$4 defaults unless it exists; (view, opened now)."""
    try:
        return await ops.get_table(table_id), False
    except NotFound:
        pass
    settings = table_pb2.TableSettings(next_hand_delay_ms=hand_delay_ms,
                                       next_hand_delay_set=True)
    opened = True
    try:
        await ops.open_table(table_id, TableConfig(), settings)
    except AlreadyExists:
        opened = False
    return await ops.get_table(table_id), opened


def _think(text: str) -> tuple[float, float]:
    low, _, high = text.partition("-")
    pace = (float(low), float(high or low))
    if not 0 <= pace[0] <= pace[1]:
        raise argparse.ArgumentTypeError("need 0 <= MIN <= MAX")
    return pace


def _money(cents: int) -> str:
    return f"${cents / 100:,.2f}".replace(".00", "")


async def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """The demo room until cancelled."""
    from studkit.auth import Principal, Role, TokenBook, issuer_from_env

    def write(line: str) -> None:
        print(f"{PREFIX}{line}", file=out, flush=True)

    key = env.get(ISSUER_KEY_ENV, "").strip()
    if not key and DEFAULT_ISSUER_KEY_FILE.exists():
        key = str(DEFAULT_ISSUER_KEY_FILE)
    if not key:
        print(f"studclient.demo: set {ISSUER_KEY_ENV} (make run writes .run/keys/issuer.pem)",
              file=sys.stderr)
        return 2
    book = TokenBook(issuer_from_env({ISSUER_KEY_ENV: key}))

    def as_(role: Role, name: str) -> TokenProvider:
        who = Principal(role, name)
        return lambda: book.token(who)

    targets = {k: env.get(k) or v for k, v in DEFAULT_TARGETS.items()}

    def connect(token: TokenProvider) -> Client:
        return Client.connect(targets[TABLE_TARGET_ENV], targets[DEALER_TARGET_ENV],
                              targets[WALLET_TARGET_ENV], token)

    ops = connect(as_(Role.OPERATOR, "demo"))
    observer = connect(as_(Role.AUDITOR, "demo-feed"))
    bots = [DemoBot(name, connect(as_(Role.PLAYER, name)), strategy_for(args.strategy, i)[1],
                    random.Random(f"{args.seed}-{name}"))
            for i, name in enumerate(BOT_NAMES[:args.bots])]
    try:
        await _ready(ops)
        view, opened = await ensure_table(ops, args.table, args.hand_delay_ms)
        c = view.config
        write(f"table {args.table} ({_money(c.small_bet)}/{_money(c.big_bet)} stud hi/lo, "
              f"{c.seats} seats): {'opened' if opened else 'found'}, "
              f"{view.hands_started} hands dealt so far")
        for player in DEV_PLAYERS:
            await ops.create_account(player)
            balance = await ops.balance(player)
            if balance < view.settings.buy_in_max:
                await ops.deposit(player, PLAYER_FUNDS - balance)
        room = Room(ops, args.table, args.think)
        seated = {s.player_id: s.seat for s in view.seats}
        back = [f"{b.name} (seat {seated[b.name]})" for b in bots if b.name in seated]
        if back:
            write(f"bots back at the table: {', '.join(back)}")
        tasks = [asyncio.create_task(b.live(room)) for b in bots]
        if not args.no_feed:
            tasks.append(asyncio.create_task(follow(observer, args.table, write)))
        await asyncio.gather(*tasks)
        return 0
    except StudError as exc:
        log(f"{type(exc).__name__}: {exc}")
        print(f"{PREFIX}the demo room could not start: {exc} (see the demo log)",
              file=out, flush=True)
        return 1
    finally:
        for client in (ops, observer, *(b.client for b in bots)):
            with contextlib.suppress(Exception):
                await client.close()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m studclient.demo",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--table", default=DEMO_TABLE, help=f"table id (default {DEMO_TABLE})")
    p.add_argument("--bots", type=int, choices=range(1, len(BOT_NAMES) + 1),
                   default=DEFAULT_BOTS, metavar=f"1..{len(BOT_NAMES)}",
                   help=f"bots (default {DEFAULT_BOTS}; {FREE_SEATS} seats always stay free)")
    p.add_argument("--strategy", choices=("random", "tight", "station", "mixed"),
                   default="mixed", help="how the bots play (default mixed)")
    p.add_argument("--think", type=_think,
                   default=_think(os.environ.get(THINK_ENV, "")) if os.environ.get(THINK_ENV)
                   else DEFAULT_THINK, metavar="MIN-MAX",
                   help=f"seconds a bot thinks before acting (default 0.5-1.5; ${THINK_ENV})")
    p.add_argument("--hand-delay-ms", type=int,
                   default=int(os.environ.get(HAND_DELAY_ENV) or DEFAULT_HAND_DELAY_MS),
                   help=f"pause between hands when the table is opened (default "
                        f"{DEFAULT_HAND_DELAY_MS}; ${HAND_DELAY_ENV})")
    p.add_argument("--seed", default="demo", help="random seed of the bots")
    p.add_argument("--no-feed", action="store_true", help="bots only, no feed")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo room until SIGTERM, SIGINT or SIGHUP."""
    args = parser().parse_args(argv)

    async def guarded() -> int:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(signum, task.cancel)
        try:
            return await run(args, os.environ, sys.stdout)
        except asyncio.CancelledError:
            return 0

    return asyncio.run(guarded())


if __name__ == "__main__":
    sys.exit(main())
