"""Property: the real money module (services/table/money.py) carries every saga through any
interleaving of sit-downs, top-ups, leaves and hands, with the process dying after any step
(a record in the log, a move at the wallet): a fresh ``Money`` (as after a restart) carries
the sagas on from the log as the driver does between hands, and in the end every seat's
escrow equals its stack, every empty seat's escrow is paid back, and no chip was created or
lost. The port and the wallet are the unit tests' fakes (tests/unit/table/fakes.py); the
room is the real one. test_room_sagas.py checks the room's saga_step the same way with
money's steps taken by hand."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from rules import TableConfig
from rules.commands import StartHand, VoidHand
from rules.errors import RuleViolation
from stud.v1 import wallet_pb2 as wpb
from studkit.commit import Committed
from studkit.errors import FailedPrecondition
from table.model import TableSettings
from table.money import Money
from table.room import (
    Leave,
    Open,
    Play,
    QueueTopUp,
    RequestBuyIn,
    Room,
    RoomCommand,
    apply,
    decide,
    due_between_hands,
)
from table.status import Status
from tests.unit.table.fakes import NOW, FakePort, FakeWallet, driving

PLAYERS = ("ann", "bob", "cat")
START = 100_000


class Crash(Exception):
    """The table process died here."""


class Budget:
    """The step at which the process dies (None: it does not)."""

    def __init__(self) -> None:
        self.steps = 0
        self.crash_at: int | None = None

    def tick(self) -> None:
        self.steps += 1
        if self.crash_at is not None and self.steps >= self.crash_at:
            self.crash_at = None
            raise Crash


class CrashingPort(FakePort):
    """The log: a record is kept, then the process may die before it goes on."""

    def __init__(self, room: Room, budget: Budget) -> None:
        super().__init__(room)
        self.budget = budget

    async def commit(self, command: RoomCommand, command_id: str, fp: str = "",
                     expected: int | None = None, *, record_empty: bool = True
                     ) -> Committed[Room]:
        done = await super().commit(command, command_id, fp, expected,
                                    record_empty=record_empty)
        self.budget.tick()
        return done


class CrashingWallet(FakeWallet):
    """The wallet: a move is made, then the table process may die before it hears."""

    budget: Budget = Budget()

    async def buy_in(self, player_id: str, table_id: str, seat: int, amount: int,
                     idempotency_key: str, give_up_after: float | None = None,
                     *, sit_down: bool = False) -> wpb.BuyInResponse:
        reply = await super().buy_in(player_id, table_id, seat, amount, idempotency_key,
                                     give_up_after, sit_down=sit_down)
        self.budget.tick()
        return reply

    async def cash_out(self, player_id: str, table_id: str, seat: int, idempotency_key: str,
                       give_up_after: float | None = None, on_wait: object = None
                       ) -> wpb.CashOutResponse:
        reply = await super().cash_out(player_id, table_id, seat, idempotency_key)
        self.budget.tick()
        return reply

    def buy_in_refused_for(self, player: str, amount: int) -> bool:
        return self.accounts.get(player, 0) < amount


class Table:
    """One table process after another over one log and one wallet."""

    def __init__(self) -> None:
        self.budget = Budget()
        decision = decide(Room(), Open("t", TableConfig(), TableSettings(next_hand_delay_ms=0)),
                          NOW)
        room = apply(Room(), decision.events, at=NOW, first_sequence=1, table=decision.table)
        self.port = CrashingPort(room, self.budget)
        self.wallet = CrashingWallet(accounts=dict.fromkeys(PLAYERS, START))
        self.wallet.budget = self.budget
        self.restart()

    def restart(self) -> None:
        """A new process: a fresh Money (nothing carried, not checked yet)."""
        parts = driving(self.wallet)
        self.money = Money(self.port, parts.system, Status("t"), asyncio.Semaphore(1))

    def total(self) -> int:
        return sum(self.wallet.accounts.values()) + sum(
            amount for _player, amount in self.wallet.escrow.values())

    async def try_commit(self, command: RoomCommand, command_id: str) -> bool:
        try:
            await self.port.commit(command, command_id)
        except (RuleViolation, FailedPrecondition):
            return False
        return True

    # --- the use cases, as app.py takes them ----------------------------------------------

    async def sit(self, n: int, seat: int, player: str, amount: int) -> None:
        if self.wallet.buy_in_refused_for(player, amount):
            return  # require_funds refuses it before anything is recorded
        key = f"sit-{n}"
        if not await self.try_commit(RequestBuyIn(seat, player, amount, key, key), key):
            return
        saga = self.port.room.saga(seat)
        assert saga is not None
        async with self.money.carrying(seat):
            with contextlib.suppress(RuleViolation, FailedPrecondition):
                await self.money.buy_in(seat, saga, None)

    async def top_up(self, n: int, seat: int, amount: int) -> None:
        holder = self.port.room.table.seat(seat)
        key = f"top-{n}"
        if holder is None or self.wallet.buy_in_refused_for(holder.player_id, amount) or \
                not await self.try_commit(QueueTopUp(seat, holder.player_id, amount, key, key),
                                          key):
            return
        saga = self.port.room.saga(seat)
        assert saga is not None
        async with self.money.carrying(seat):
            with contextlib.suppress(FailedPrecondition):
                await self.money.top_up(seat, saga, None)

    async def leave(self, n: int, seat: int) -> None:
        holder = self.port.room.table.seat(seat)
        key = f"leave-{n}"
        if holder is None or not await self.try_commit(Leave(seat, holder.player_id, key), key):
            return
        saga = self.port.room.saga(seat)
        if saga is not None and saga.wallet_key == key:
            async with self.money.carrying(seat):
                await self.money.cash_out(seat, saga)

    async def hand(self, n: int) -> None:
        table = self.port.room.table
        if table.hand_in_progress:
            await self.try_commit(Play(VoidHand(reason="test")), f"void-{n}")
        else:
            await self.try_commit(Play(StartHand(hand_number=table.hands_started + 1)),
                                  f"start-{n}")

    # --- the driver between hands ---------------------------------------------------------

    async def carry_on(self) -> None:
        for _round in range(80):
            room = self.port.room
            if room.table.hand_in_progress:
                await self.try_commit(Play(VoidHand(reason="test")), f"void-v{room.version}")
                continue
            hand = room.table.hand
            if hand is not None and hand.is_over and room.settled < hand.hand_number:
                await self.money.settle()
                continue
            if await self.money.check_once():
                continue
            if await self.money.roll_forward():
                continue
            due = due_between_hands(room, NOW)
            if due is None:
                return
            if isinstance(due, Leave):  # keyed by the version, as the driver keys it
                due = replace(due, wallet_key=f"due-{room.version}")
            await self.port.own(due, f"due:{type(due).__name__}:{room.version}")
        raise AssertionError("the sagas never settled")


operation = st.one_of(
    st.tuples(st.just("sit"), st.integers(1, 3), st.sampled_from(PLAYERS),
              st.sampled_from([8_000, 10_000, 40_000])),
    st.tuples(st.just("top_up"), st.integers(1, 3), st.sampled_from([1_000, 5_000])),
    st.tuples(st.just("leave"), st.integers(1, 3)),
    st.tuples(st.just("hand")),
    st.tuples(st.just("restart")),
)


async def play(ops: list[tuple[object, ...]], crashes: list[int]) -> Table:
    table = Table()
    budget = sorted(set(crashes))
    for n, op in enumerate(ops):
        if budget and table.budget.crash_at is None:
            table.budget.crash_at = table.budget.steps + budget.pop(0)
        try:
            match op:
                case ("sit", seat, player, amount):
                    await table.sit(n, seat, player, amount)  # type: ignore[arg-type]
                case ("top_up", seat, amount):
                    await table.top_up(n, seat, amount)  # type: ignore[arg-type]
                case ("leave", seat):
                    await table.leave(n, seat)  # type: ignore[arg-type]
                case ("hand",):
                    await table.hand(n)
                case ("restart",):
                    await table.carry_on()
        except Crash:
            table.restart()  # the process died mid-saga: the log holds what was recorded
        assert table.total() == START * len(PLAYERS)
    table.budget.crash_at = None
    table.restart()
    await table.carry_on()
    return table


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(operation, min_size=1, max_size=20),
       crashes=st.lists(st.integers(1, 30), max_size=4))
def test_the_real_money_strands_no_chip_whatever_crashes(ops: list[tuple[object, ...]],
                                                         crashes: list[int]) -> None:
    table = asyncio.run(play(ops, crashes))
    room, wallet = table.port.room, table.wallet
    assert not room.sagas and not room.stopped, room.stopped
    assert table.total() == START * len(PLAYERS)
    for number, seat in enumerate(room.table.seats, start=1):
        held = wallet.escrow.get(number)
        if seat is None:
            assert held is None, f"seat {number}: {held} stranded in an empty seat"
        else:
            assert held == (seat.player_id, seat.stack), f"seat {number}"
