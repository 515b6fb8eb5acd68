"""The whole room end to end: Redis, the dealer, the wallet and the table as separate
processes (each service with its own Redis ACL user), random-legal bots playing hands at three
tables through the table's public gRPC API only (``GetTable``, then an action carrying
``expected_sequence``), with random stacks, sit-outs, top-ups, leaves and returns, while the
table process is killed with SIGKILL at random points and started again.

At the end the money and the logs must agree: the wallet's ledger sums to zero (players,
escrows and the house hold exactly the deposits); every seat's escrow equals its stack; every
hand was settled exactly once; and each hand's settlement at the wallet equals what a fold of
the hand's events (the table's stream, read with the event store and folded with the rules)
says, as do the final stacks ``GetTable`` shows.

The short campaign runs in ``make test``; the full one (>= 200 hands, >= 10 kills) is marked
``slow`` and runs with ``make test-room``.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

import rules
from rules import Rake, TableConfig
from rules.events import HandEnded, HandStarted
from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studkit.commandwindow import new_id
from studkit.mapping import event_from_envelope, is_room_event
from studkit.redis_client import connect
from studkit.store import EventStore
from studtest import redis as test_redis_source
from studtest.processes import Clients, RoomProcesses, room_processes
from studtest.table import act_once, fast_settings, player
from studtest.wallet import AUDITOR
from studtools.devkeys import DevKeys
from table.app import command_key
from table.clients import key

pytestmark = pytest.mark.e2e

KEYS = DevKeys.generate()
SEED = int(os.environ.get("ROOM_E2E_SEED", "0"))
"""Another campaign than the default one (the kill points come from it; where they land in
a hand is up to timing, so every run differs anyway)."""
T = TypeVar("T")
RETRY_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                         grpc.StatusCode.ABORTED, grpc.StatusCode.CANCELLED})
DEPOSIT = 1_000_000
BUY_IN_MIN, BUY_IN_MAX = 300, 8_000
TABLE_CONFIGS = (
    TableConfig(),
    TableConfig(rake=Rake(500, 100)),  # the house takes 5 %, at most 100, of each pot
    TableConfig.for_stakes(100),
)


async def retrying(call: Callable[[], Awaitable[T]], limit_s: float = 90.0) -> T:
    """``call()`` again while the table is down or restarting (UNAVAILABLE and kin)."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            return await call()
        except grpc.aio.AioRpcError as exc:
            if exc.code() not in RETRY_CODES or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.05)


@dataclass
class Stats:
    """What the campaign did, for the report and the assertions."""

    actions: int = 0
    idle: int = 0
    """Looks at the table that found nobody to act for, or an action refused as stale."""
    sit_outs: int = 0
    sit_ins: int = 0
    top_ups: int = 0
    leaves: int = 0
    sit_downs: int = 0
    kills: list[tuple[int, float, str]] = field(default_factory=list)
    """(hands started in the room, seconds since the start, each table's hand phase) at
    each kill."""


@dataclass
class TableBot:
    """Random-legal players of one table, through the public API only."""

    clients: Clients
    table_id: str
    rng: random.Random
    stats: Stats
    stop: asyncio.Event
    players: dict[int, str] = field(default_factory=dict)

    async def view(self) -> pb.TableView:
        return await retrying(lambda: self.clients.table.view(self.table_id))

    async def command(self, method: str, request: Any, name: str) -> bool:
        """Send a seat command (retried with the same command id across outages); False if
        the table refused it as illegal now."""
        try:
            await retrying(lambda: self.clients.table.call(method, request, player(name)))
        except grpc.aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.FAILED_PRECONDITION:
                return False
            if exc.code() is grpc.StatusCode.PERMISSION_DENIED and method != "SitDown":
                # The seat was emptied after the view this command was chosen from: a leave
                # asked for during a hand takes effect once the hand is settled. Refused so
                # only if the log no longer seats ``name`` there.
                view = await self.view()
                holder = next((s.player_id for s in view.seats if s.seat == request.seat), None)
                if holder != name:
                    return False
            raise
        return True

    async def act(self, view: pb.TableView) -> bool:
        try:
            acted = await act_once(self.clients.table, self.table_id, view, self.rng.choice)
        except grpc.aio.AioRpcError as exc:
            if exc.code() not in RETRY_CODES:
                raise
            await asyncio.sleep(0.05)
            return False
        if acted:
            self.stats.actions += 1
        else:
            self.stats.idle += 1
        return acted

    async def chores(self, view: pb.TableView) -> None:
        """Now and then a player sits out or back in, tops up, leaves, or comes back."""
        seat_no = self.rng.choice(sorted(self.players))
        name = self.players[seat_no]
        seated = {s.seat: s for s in view.seats}
        in_play = sum(1 for s in view.seats if not s.sitting_out)
        roll = self.rng.random()
        seat = seated.get(seat_no)
        if seat is None:  # left earlier: sit down again (the rathole rule may want more)
            if roll < 0.5:
                for buy_in in (self.rng.randint(BUY_IN_MIN, BUY_IN_MAX), BUY_IN_MAX):
                    if await self.command("SitDown", pb.SitDownRequest(
                            table_id=self.table_id, seat=seat_no, buy_in=buy_in), name):
                        self.stats.sit_downs += 1
                        break
        elif seat.sitting_out:
            if roll < 0.5 and await self.command("SitIn", pb.SitInRequest(
                    table_id=self.table_id, seat=seat_no), name):
                self.stats.sit_ins += 1
        elif roll < 0.25:
            if in_play > 2 and await self.command("SitOut", pb.SitOutRequest(
                    table_id=self.table_id, seat=seat_no), name):
                self.stats.sit_outs += 1
        elif roll < 0.45:
            if seat.stack < BUY_IN_MAX - 100 and await self.command("AddChips", pb.AddChipsRequest(
                    table_id=self.table_id, seat=seat_no,
                    amount=self.rng.randint(1, BUY_IN_MAX - seat.stack)), name):
                self.stats.top_ups += 1
        elif roll < 0.55 and len(seated) > 2 and await self.command(
                "LeaveSeat", pb.LeaveSeatRequest(table_id=self.table_id, seat=seat_no), name):
            self.stats.leaves += 1

    async def run(self) -> None:
        """Play until told to stop."""
        while not self.stop.is_set():
            view = await self.view()
            if self.rng.random() < 0.05:
                await self.chores(view)
                continue
            if not await self.act(view):
                await asyncio.sleep(0.01)

    async def wind_down(self, timeout: float = 120.0) -> pb.TableView:
        """Everyone sits out; play the hand in progress out; wait until the hand is settled
        and the table stands still."""
        async with asyncio.timeout(timeout):
            while True:
                view = await self.view()
                for seat in view.seats:
                    if not seat.sitting_out and not seat.leaving:  # a leaver goes after the hand
                        await self.command("SitOut", pb.SitOutRequest(
                            table_id=self.table_id, seat=seat.seat), seat.player_id)
                view = await self.view()
                in_hand = view.HasField("hand") and view.hand.phase != pb.HAND_PHASE_COMPLETE
                if in_hand:
                    if not await self.act(view):
                        await asyncio.sleep(0.02)
                    continue
                settled = await retrying(lambda: self.clients.wallet.stub.Reconcile(
                    wpb.ReconcileRequest(table_id=self.table_id),
                    metadata=self.clients.wallet.metadata(AUDITOR), timeout=10))
                # Settled: the last hand's settlement has landed, and the money steps the
                # table takes after a hand without a game event (a leaver's cash-out, a
                # queued top-up) too: every escrow is its seat's stack. Then still.
                escrows = {s.seat: s.balance for s in settled.seats if s.balance}
                stacks = {s.seat: s.stack for s in view.seats if s.stack}
                if ((view.hands_started and settled.last_hand_id != f"h{view.hands_started}")
                        or escrows != stacks):
                    await asyncio.sleep(0.05)
                    continue
                again = await self.view()
                if again.version == view.version and all(s.sitting_out for s in again.seats):
                    return again
                await asyncio.sleep(0.05)


async def open_tables(clients: Clients, rng: random.Random,
                      ) -> dict[str, dict[int, tuple[str, int]]]:
    """Three tables with 2-6 players each, random seats and random buy-ins; table id ->
    seat -> (player, buy-in)."""
    tables: dict[str, dict[int, tuple[str, int]]] = {}
    for index, config in enumerate(TABLE_CONFIGS, start=1):
        table_id = await clients.table.open_table(
            f"room-{index}", config=config,
            settings=fast_settings(buy_in_min=BUY_IN_MIN, buy_in_max=BUY_IN_MAX))
        seats = sorted(rng.sample(range(1, 9), rng.randint(3, 6)))
        tables[table_id] = {}
        for seat in seats:
            name = f"p{index}{seat}"
            await clients.wallet.create_account(name)
            await clients.wallet.deposit(name, DEPOSIT, f"dep-{name}")
            buy_in = rng.randint(BUY_IN_MIN, BUY_IN_MAX)
            await clients.table.call("SitDown", pb.SitDownRequest(
                table_id=table_id, seat=seat, buy_in=buy_in), player(name))
            tables[table_id][seat] = (name, buy_in)
    return tables


async def hands_started(clients: Clients, table_ids: list[str]) -> int:
    views = [await retrying(lambda t=t: clients.table.view(t)) for t in table_ids]
    return sum(v.hands_started for v in views)


async def run_campaign(room: RoomProcesses, clients: Clients, hands: int, kills: int,
                       seed: int) -> tuple[dict[str, pb.TableView], list[str], Stats]:
    """Play ``hands`` hands across the tables, killing the table process ``kills`` times at
    random points; return the final views, the players and what happened."""
    rng = random.Random(seed)
    stats = Stats()
    tables = await open_tables(clients, rng)
    table_ids = sorted(tables)
    stop = asyncio.Event()
    bots = [TableBot(clients, t, random.Random(rng.random()), stats, stop,
                     {seat: name for seat, (name, _) in tables[t].items()})
            for t in table_ids]
    tasks = [asyncio.create_task(bot.run()) for bot in bots]
    # Kill points: after a random number of hands, then a random moment into the play.
    points = sorted(rng.sample(range(1, hands - 1), kills))
    started = time.monotonic()
    try:
        for point in points:
            while await hands_started(clients, table_ids) < point:
                assert not any(t.done() for t in tasks), [t.exception() for t in tasks]
                await asyncio.sleep(0.05)
            await asyncio.sleep(rng.uniform(0.0, 0.6))
            views = [await retrying(lambda t=t: clients.table.view(t)) for t in table_ids]
            stats.kills.append((sum(v.hands_started for v in views),
                                round(time.monotonic() - started, 1),
                                "/".join(pb.HandPhase.Name(v.hand.phase)[11:].lower()
                                         for v in views)))
            await room.crash_table()
        while await hands_started(clients, table_ids) < hands:
            assert not any(t.done() for t in tasks), [t.exception() for t in tasks]
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    finals = await asyncio.gather(*(bot.wind_down() for bot in bots))
    players = [name for seats in tables.values() for name, _ in seats.values()]
    return dict(zip(table_ids, finals, strict=True)), players, stats


async def statement(clients: Clients, account: wpb.AccountRef) -> list[wpb.StatementLine]:
    lines: list[wpb.StatementLine] = []
    token = ""
    while True:
        reply = await clients.wallet.stub.GetStatement(
            wpb.GetStatementRequest(account=account, page_size=500, page_token=token),
            metadata=clients.wallet.metadata(AUDITOR), timeout=10)
        lines.extend(reply.lines)
        token = reply.next_page_token
        if not token:
            return lines


async def check_ledger(clients: Clients, views: dict[str, pb.TableView],
                       players: list[str]) -> int:
    """The ledger sums to zero; players, escrows and the house hold exactly the deposits;
    every escrow equals its seat's stack. Returns the house's rake."""
    balance = clients.wallet.balance
    player_total = sum([await balance(wpb.AccountRef(player_id=p), AUDITOR) for p in players])
    escrow_total = 0
    for table_id, view in views.items():
        seat_balances = {n: await balance(wpb.AccountRef(
            seat=wpb.SeatAccount(table_id=table_id, seat=n)), AUDITOR) for n in range(1, 9)}
        escrow_total += sum(seat_balances.values())
        stacks = {s.seat: s.stack for s in view.seats}
        escrows = {n: b for n, b in seat_balances.items() if b}
        assert escrows == {n: s for n, s in stacks.items() if s}, \
            f"{table_id}: escrows {escrows} differ from stacks {stacks}"
        reconcile = await clients.wallet.stub.Reconcile(
            wpb.ReconcileRequest(table_id=table_id),
            metadata=clients.wallet.metadata(AUDITOR), timeout=10)
        assert {s.seat: (s.player_id, s.balance) for s in reconcile.seats if s.balance} == \
            {s.seat: (s.player_id, s.stack) for s in view.seats if s.stack}
        assert view.status == pb.TABLE_STATUS_OPEN, (table_id, view.status_reason)
    house = await balance(wpb.AccountRef(system=wpb.SYSTEM_ACCOUNT_HOUSE), AUDITOR)
    external = await balance(wpb.AccountRef(system=wpb.SYSTEM_ACCOUNT_EXTERNAL), AUDITOR)
    deposits = DEPOSIT * len(players)
    assert external == -deposits
    assert player_total + escrow_total + house + external == 0, "the ledger does not sum to 0"
    assert player_total + escrow_total + house == deposits
    return house


async def check_hands(clients: Clients, events_store: EventStore, table_id: str,
                      view: pb.TableView) -> tuple[int, int]:
    """Every hand of the table's log was settled once, as a fold of its events says; the
    final folded stacks are the table's. Returns (hands, voided hands)."""
    # The wallet's settlements: hand id -> transaction ids, and seat -> hand id -> amount.
    transactions: dict[str, set[str]] = defaultdict(set)
    posted: dict[str, dict[int, int]] = defaultdict(dict)
    for number in range(1, 9):
        lines = await statement(clients, wpb.AccountRef(
            seat=wpb.SeatAccount(table_id=table_id, seat=number)))
        for line in lines:
            if line.kind != wpb.TRANSACTION_KIND_SETTLEMENT:
                continue
            transactions[line.hand_id].add(line.transaction_id)
            assert number not in posted[line.hand_id], \
                f"{table_id} {line.hand_id}: seat {number} settled twice"
            posted[line.hand_id][number] = line.amount
    raked: dict[str, int] = defaultdict(int)
    for line in await statement(clients, wpb.AccountRef(system=wpb.SYSTEM_ACCOUNT_HOUSE)):
        if line.table_id == table_id:
            raked[line.hand_id] += line.amount
    doubled = {h: t for h, t in transactions.items() if len(t) != 1}
    assert not doubled, f"{table_id}: hands settled more than once: {doubled}"

    # Fold the stream, hand by hand.
    state = rules.initial_state()
    numbers: list[int] = []
    ended: list[int] = []
    voided = 0
    before: dict[int, int] = {}
    for stored in await events_store.read(table_id):
        if is_room_event(stored.envelope):
            continue  # the room's own events: not the game's
        event = event_from_envelope(stored.envelope)
        if isinstance(event, HandStarted):
            numbers.append(event.hand_number)
            before = {n: state.stack(n) for n in range(1, 9) if state.seat(n) is not None}
        state = rules.evolve(state, event)
        if not isinstance(event, HandEnded):
            continue
        ended.append(event.hand_number)
        result = rules.settlement(state)
        assert result is not None and result.hand_number == event.hand_number
        hand_id = f"h{event.hand_number}"
        nets = {s.seat: s.net for s in result.seats if s.net}
        assert posted.get(hand_id, {}) == nets, (table_id, hand_id, posted.get(hand_id), nets)
        assert raked.get(hand_id, 0) == result.rake, (table_id, hand_id)
        assert sum(s.amount_won for s in result.seats) + result.rake == result.amount_in
        for s in result.seats:
            assert state.stack(s.seat) == before[s.seat] + s.net, (table_id, hand_id, s)
        voided += result.voided
    assert numbers == list(range(1, len(numbers) + 1)), f"{table_id}: hand numbers {numbers}"
    assert ended == numbers, f"{table_id}: every hand started once and ended once"
    assert len(numbers) == view.hands_started
    settled = {h for h, seats in posted.items() if seats}
    assert settled <= {f"h{n}" for n in ended}, f"{table_id}: a settlement of no hand"
    # The final stacks: GetTable's are the fold's.
    assert {s.seat: (s.player_id, s.stack) for s in view.seats} == {
        n: (seat.player_id, seat.stack) for n in range(1, 9)
        if (seat := state.seat(n)) is not None}
    # The view's version is its last game event's (the room's own events are not shown).
    stored = await events_store.read(table_id)
    assert view.version == max(s.envelope.sequence for s in stored
                               if not is_room_event(s.envelope))
    return len(numbers), voided


async def play_room(redis_server: test_redis_source.TestRedis, redis_url: str, tmp_path: Path,
                    hands: int, kills: int, seed: int) -> None:
    def url_for(service: str) -> str:
        return redis_server.server.url_for(service) if redis_server.server else redis_url

    async with room_processes(url_for, KEYS, tmp_path) as room, room.clients() as clients:
        began = time.monotonic()
        views, players, stats = await run_campaign(room, clients, hands, kills, seed)
        assert room.table.starts == kills + 1
        house = await check_ledger(clients, views, players)
        assert house > 0, "the raked table took no rake: the rake checks checked nothing"
        reader = connect(url_for("auditor"))
        try:
            store = EventStore(reader)
            totals = [await check_hands(clients, store, t, v) for t, v in views.items()]
        finally:
            await reader.aclose()
        played = sum(n for n, _ in totals)
        assert played >= hands
        print(f"\nroom e2e (seed {seed}): {played} hands at {len(views)} tables "
              f"({sum(v for _, v in totals)} voided, {house} raked) in "
              f"{time.monotonic() - began:.1f} s; "
              f"{stats.actions} actions ({stats.idle} idle or stale looks), "
              f"{stats.sit_outs} sit-outs, {stats.sit_ins} sit-ins, {stats.top_ups} top-ups, "
              f"{stats.leaves} leaves, {stats.sit_downs} returns; "
              f"table killed at (hands, s, phases) {stats.kills}")
    logs = room.table.logs()
    assert "eyJ" not in logs, "a token reached the table's log"


async def test_room_with_table_crashes(redis_server: test_redis_source.TestRedis,
                                       redis_url: str, tmp_path: Path) -> None:
    """30 hands at three tables, the table process killed three times."""
    await play_room(redis_server, redis_url, tmp_path, hands=30, kills=3, seed=SEED or 2026)


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_room_campaign(redis_server: test_redis_source.TestRedis, redis_url: str,
                             tmp_path: Path) -> None:
    """The full campaign: 300 hands at three tables, the table process killed 15 times."""
    await play_room(redis_server, redis_url, tmp_path, hands=300, kills=15,
                    seed=SEED or 20261201)


async def test_sit_down_retried_after_a_crash_between_the_wallet_and_the_table(
        redis_server: test_redis_source.TestRedis, redis_url: str, tmp_path: Path) -> None:
    """The table dies after the wallet moved a sit-down's buy-in but before the seat was
    recorded (the wallet's BuyIn is made here, as the table would have, with the table's
    key for that command); it restarts (and finds the orphan escrow), and the player's client
    retries the same SitDown. Whatever the table decides, no chip is stranded or invented:
    escrows equal stacks, and the player's account plus escrow is the deposit."""
    def url_for(service: str) -> str:
        return redis_server.server.url_for(service) if redis_server.server else redis_url

    async with room_processes(url_for, KEYS, tmp_path) as room, room.clients() as clients:
        table_id = await clients.table.open_table(
            "crash-sit", settings=fast_settings(buy_in_min=BUY_IN_MIN, buy_in_max=BUY_IN_MAX))
        await clients.wallet.create_account("ann")
        await clients.wallet.deposit("ann", DEPOSIT, "dep-ann")
        sit = new_id("sit-once")
        request = pb.SitDownRequest(table_id=table_id, seat=4, buy_in=5_000, command_id=sit)
        await clients.wallet.buy_in("ann", table_id, 4, 5_000,
                                    key(table_id, command_key(player("ann"), sit)))
        await room.crash_table()
        await asyncio.sleep(1.0)  # the restarted table repairs what it finds
        try:
            await retrying(lambda: clients.table.call("SitDown", request, player("ann")))
        except grpc.aio.AioRpcError as exc:
            assert exc.code() is grpc.StatusCode.FAILED_PRECONDITION, exc
        await asyncio.sleep(1.0)
        view = await clients.table.view(table_id)
        escrows = await clients.wallet.escrows(table_id)
        stacks = {s.seat: s.stack for s in view.seats}
        assert escrows == stacks, (escrows, stacks)
        assert view.status == pb.TABLE_STATUS_OPEN, view.status_reason
        assert await clients.wallet.player_balance("ann") + sum(escrows.values()) == DEPOSIT
