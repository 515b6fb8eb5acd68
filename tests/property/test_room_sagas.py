"""Property: for any interleaving of sit-downs, top-ups, leaves, sit-outs and hands, with a
crash after any step of a buy-in, a top-up or a cash-out, carrying the sagas on from the log
(the room's ``saga_step``, as the table's driver does after a restart) ends with every
seat's escrow equal to its stack and every empty seat's escrow paid back: no chip stranded,
created or lost.

The room model is the real one (services/table/room.py); the wallet is a small model of the
real one's contract (idempotent by key; a seat's escrow belongs to one player at a time), and
each saga's steps are taken in the order services/table/money.py takes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from rules import TableConfig
from rules.commands import SitIn, SitOut, StartHand, VoidHand
from rules.errors import RuleViolation
from studkit.errors import FailedPrecondition
from table.model import TableSettings
from table.room import (
    BUY_IN,
    WALLET_BUY_IN,
    WALLET_CASH_OUT,
    WALLET_REFUND,
    ApplyTopUp,
    ConfirmBuyIn,
    DropTopUp,
    EndBuyIn,
    Leave,
    Open,
    PayCashOut,
    Play,
    QueueTopUp,
    RequestBuyIn,
    Room,
    RoomCommand,
    Settle,
    apply,
    decide,
    due_between_hands,
    saga_step,
)

PLAYERS = ("ann", "bob", "cat")
START = 100_000


class Crash(Exception):
    """The table process died here."""


@dataclass
class Wallet:
    """The wallet's contract: every call idempotent by its key."""

    accounts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PLAYERS, START))
    escrow: dict[int, tuple[str, int]] = field(default_factory=dict)
    done: dict[str, bool] = field(default_factory=dict)

    def buy_in(self, key: str, player: str, seat: int, amount: int,
               sit_down: bool = False) -> bool:
        """A sit-down's (``sit_down``) only on a free seat, a top-up's on one no other
        player holds."""
        if key in self.done:
            return self.done[key]
        held = self.escrow.get(seat)
        free = held is None or (not sit_down and held[0] == player)
        ok = free and self.accounts[player] >= amount
        if ok:
            self.accounts[player] -= amount
            self.escrow[seat] = (player, (held[1] if held else 0) + amount)
        self.done[key] = ok
        return ok

    def cash_out(self, key: str, player: str, seat: int) -> None:
        if key in self.done:
            return
        held = self.escrow.get(seat)
        if held is not None and held[0] == player:
            self.accounts[player] += held[1]
            del self.escrow[seat]
        self.done[key] = True

    def total(self) -> int:
        return sum(self.accounts.values()) + sum(a for _p, a in self.escrow.values())


class Table:
    """The room, its log folded as the actor keeps it, and a crash budget."""

    def __init__(self, crash_at: int | None) -> None:
        self.room = Room()
        self.wallet = Wallet()
        self.steps = 0
        self.crash_at = crash_at
        self.commit(Open("t", TableConfig(), TableSettings(next_hand_delay_ms=0)))

    def step(self) -> None:
        self.steps += 1
        if self.crash_at is not None and self.steps == self.crash_at:
            self.crash_at = None
            raise Crash

    def commit(self, command: RoomCommand) -> bool:
        try:
            decision = decide(self.room, command, 0.0)
        except (RuleViolation, FailedPrecondition):
            return False
        self.room = apply(self.room, decision.events, at=0.0,
                          first_sequence=self.room.version + 1, table=decision.table)
        return True

    def sagas_seat(self, seat: int, kind: str, key: str) -> bool:
        saga = self.room.saga(seat)
        return saga is not None and saga.kind == kind and saga.wallet_key == key

    # --- the steps of each use case, in money.py's order ------------------------------------

    def refund(self, seat: int, player: str, key: str) -> None:
        self.commit(EndBuyIn(seat, key, "refund_due"))
        saga = self.room.saga(seat)
        if saga is None or saga.wallet_key != key or not saga.refund_due:
            return
        self.step()
        self.wallet.cash_out(f"{key}:refund", player, seat)
        self.step()
        self.commit(EndBuyIn(seat, key, "refunded"))

    def sit(self, n: int, seat: int, player: str, amount: int) -> None:
        key = f"sit-{n}"
        if not self.commit(RequestBuyIn(seat, player, amount, key, key)):
            return
        self.step()
        if not self.wallet.buy_in(key, player, seat, amount, sit_down=True):
            self.commit(EndBuyIn(seat, key, "failed"))
            return
        self.step()
        try:
            decision = decide(self.room, ConfirmBuyIn(seat, key), 0.0)
        except RuleViolation:
            self.refund(seat, player, key)
            return
        except FailedPrecondition:
            return
        self.room = apply(self.room, decision.events, at=0.0,
                          first_sequence=self.room.version + 1, table=decision.table)

    def top_up(self, n: int, seat: int, amount: int) -> None:
        holder = self.room.table.seat(seat)
        key = f"top-{n}"
        if holder is None or not self.commit(QueueTopUp(seat, holder.player_id, amount, key,
                                                        key)):
            return
        self.step()
        if saga_step(self.room, seat, None) is None:
            return  # in the hand: between hands
        if not self.wallet.buy_in(key, holder.player_id, seat, amount):
            self.commit(DropTopUp(seat, key, "refused"))
            return
        self.step()
        self.commit(ApplyTopUp(seat, key))

    def leave(self, n: int | str, seat: int) -> None:
        holder = self.room.table.seat(seat)
        key = f"leave-{n}"
        if holder is None or not self.commit(Leave(seat, holder.player_id, key)):
            return
        if self.sagas_seat(seat, "cash_out", key):
            self.step()
            self.wallet.cash_out(key, holder.player_id, seat)
            self.step()
            self.commit(PayCashOut(seat, key))

    def hand(self, n: int) -> None:
        table = self.room.table
        if table.hand_in_progress:
            self.commit(Play(VoidHand(reason="test")))
        else:
            self.commit(Play(StartHand(hand_number=table.hands_started + 1)))

    # --- the driver after a restart ---------------------------------------------------------

    def carry_on(self) -> None:
        """What the driver does between hands: every saga carried on, then what is due."""
        for _round in range(50):
            if self.room.table.hand_in_progress:
                self.commit(Play(VoidHand(reason="test")))
                continue
            hand = self.room.table.hand
            if hand is not None and hand.is_over and self.room.settled < hand.hand_number:
                # settled first, as the driver does (a void moves no escrow at the wallet)
                self.commit(Settle(hand.hand_number, 0))
                continue
            pending = sorted(self.room.sagas)
            if pending:
                seat = pending[0]
                saga = self.room.sagas[seat]
                step = saga_step(self.room, seat, self.wallet.escrow.get(seat))
                assert step is not None
                wallet, command = step
                if wallet == WALLET_CASH_OUT:
                    self.wallet.cash_out(saga.wallet_key, saga.player_id, seat)
                elif wallet == WALLET_REFUND:
                    self.wallet.cash_out(f"{saga.wallet_key}:refund", saga.player_id, seat)
                elif wallet == WALLET_BUY_IN and not self.wallet.buy_in(
                        saga.wallet_key, saga.player_id, seat, saga.amount):
                    command = DropTopUp(seat, saga.wallet_key, "refused")
                if not self.commit(command) and saga.kind == BUY_IN:
                    self.refund(seat, saga.player_id, saga.wallet_key)
                continue
            due = due_between_hands(self.room, 0.0)
            if due is None:
                return
            if isinstance(due, Leave):
                # keyed by the room's version, as the driver keys it: a round number
                # repeats from one carry-on to the next, and a wallet call keyed like an
                # earlier leave's would be answered as that one (paying nothing)
                self.leave(f"due-{self.room.version}", due.seat)
            else:
                self.commit(due)
        raise AssertionError("the sagas never settled")


operation = st.one_of(
    st.tuples(st.just("sit"), st.integers(1, 3), st.sampled_from(PLAYERS),
              st.sampled_from([8_000, 10_000, 40_000])),
    st.tuples(st.just("top_up"), st.integers(1, 3), st.sampled_from([1_000, 5_000])),
    st.tuples(st.just("leave"), st.integers(1, 3)),
    st.tuples(st.just("sit_out"), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("hand")),
    st.tuples(st.just("restart")),
)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(operation, min_size=1, max_size=25),
       crashes=st.lists(st.integers(1, 40), max_size=4))
def test_no_interleaving_of_crashes_strands_chips(ops: list[tuple[object, ...]],
                                                  crashes: list[int]) -> None:
    table = Table(crash_at=None)
    budget = sorted(set(crashes))
    for n, op in enumerate(ops):
        if budget and table.crash_at is None:
            table.crash_at = table.steps + budget.pop(0)
        try:
            match op:
                case ("sit", seat, player, amount):
                    table.sit(n, seat, player, amount)  # type: ignore[arg-type]
                case ("top_up", seat, amount):
                    table.top_up(n, seat, amount)  # type: ignore[arg-type]
                case ("leave", seat):
                    table.leave(n, seat)  # type: ignore[arg-type]
                case ("sit_out", seat, out):
                    table.commit(Play(SitOut(seat=seat) if out else SitIn(seat=seat)))  # type: ignore[arg-type]
                case ("hand",):
                    table.hand(n)
                case ("restart",):
                    table.carry_on()
        except Crash:
            continue  # the process died mid-saga: the log holds what was recorded
        assert table.wallet.total() == START * len(PLAYERS)
    table.crash_at = None
    table.carry_on()
    room, wallet = table.room, table.wallet
    assert not room.sagas
    assert wallet.total() == START * len(PLAYERS)
    for number, seat in enumerate(room.table.seats, start=1):
        held = wallet.escrow.get(number)
        if seat is None:
            assert held is None, f"seat {number}: {held} stranded in an empty seat"
        else:
            assert held == (seat.player_id, seat.stack), f"seat {number}"
