"""Money (services/table/money.py) against a fake port and a model wallet: each saga's step
is recorded before or after the wallet moves, a refusal moves nothing, a crash between two
steps is carried on from the log with the same key, and reconciliation compares every escrow
with its stack. No Redis, no gRPC."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rules import TableConfig
from rules.commands import StartHand, VoidHand
from rules.settlement import Settlement, SettlementSeat
from rules.streets import Street
from stud.v1 import wallet_pb2 as wpb
from studkit.errors import FailedPrecondition, Unavailable
from table import money as money_module
from table.model import TableSettings
from table.money import Money, settle_request
from table.room import (
    BUY_IN,
    ConfirmBuyIn,
    EndBuyIn,
    Leave,
    Open,
    Play,
    QueueTopUp,
    RequestBuyIn,
    Room,
    RoomCommand,
    Settle,
    apply,
    decide,
)
from table.status import Status
from tests.unit.table.fakes import NOW, FakePort, FakeWallet, driving


def run(room: Room, command: RoomCommand) -> Room:
    decision = decide(room, command, NOW)
    return apply(room, decision.events, at=NOW, first_sequence=room.version + 1,
                 table=decision.table)


def opened(tournament_id: str = "") -> Room:
    return run(Room(), Open("t1", TableConfig(), TableSettings(), tournament_id))


async def spin(times: int = 50) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


def gated(wallet: FakeWallet, call: str, after: bool = False) -> asyncio.Event:
    """The wallet's ``call`` waits for the returned event before it acts (``after``: acts at
    once, and its answer reaches the table when the event is set)."""
    inner = getattr(wallet, call)
    gate = asyncio.Event()

    async def held(*args: Any, **kwargs: Any) -> Any:
        if not after:
            await gate.wait()
        reply = await inner(*args, **kwargs)
        await gate.wait()
        return reply

    setattr(wallet, call, held)
    return gate


async def sitting_down_while_refunded(wallet: FakeWallet, key: str) -> tuple[
        FakePort, asyncio.Task[bool], asyncio.Event, asyncio.Task[Any]]:
    """The load's check has recorded seat 4's escrow an orphan and its refund is paying (held
    until the returned event is set) when ann's sit-down there, wallet key ``key``, starts;
    the port, the check, the refund's gate and the sit-down."""
    paying = gated(wallet, "cash_out")
    money, port = money_for(opened(), wallet)
    check = asyncio.create_task(money.check_once())
    async with asyncio.timeout(5):
        while "RefundOrphan" not in port.kinds():
            await asyncio.sleep(0)
    command_id = key.replace("k-", "c-")
    await port.commit(RequestBuyIn(4, "ann", 10_000, key, command_id), command_id)
    saga = port.room.saga(4)
    assert saga is not None
    sit = asyncio.create_task(money.buy_in(4, saga, None))
    await spin()
    return port, check, paying, sit


async def rolling_a_buy_in_forward(wallet: FakeWallet) -> tuple[
        Money, FakePort, asyncio.Event, asyncio.Task[bool]]:
    """Ann's sit-down at seat 3 (key k-ann) recorded and nobody carrying it: the driver's roll
    forward has read the wallet, its answer held until the returned event is set."""
    money, port = money_for(opened(), wallet)
    await port.commit(RequestBuyIn(3, "ann", 10_000, "k-ann", "c-ann"), "c-ann")
    answered = gated(wallet, "reconcile", after=True)
    step = asyncio.create_task(money.roll_forward())
    await spin()
    return money, port, answered, step


def money_for(room: Room, wallet: FakeWallet) -> tuple[Money, FakePort]:
    port = FakePort(room)
    parts = driving(wallet)
    return Money(port, parts.system, Status("t1"), asyncio.Semaphore(1)), port


async def seat(money: Money, port: FakePort, number: int, player: str,
               amount: int = 10_000) -> None:
    key = f"k-{player}"
    await port.commit(RequestBuyIn(number, player, amount, key, f"c-{player}"), f"c-{player}")
    saga = port.room.saga(number)
    assert saga is not None
    await money.buy_in(number, saga, None)


class TestBuyIn:
    async def test_a_buy_in_moves_the_money_then_seats_the_player(self) -> None:
        """The wallet moves the buy-in into the seat's escrow, then the seat is recorded
        and the saga ends."""
        wallet = FakeWallet(accounts={"ann": 50_000})
        money, port = money_for(opened(), wallet)
        await seat(money, port, 1, "ann")
        assert wallet.escrow == {1: ("ann", 10_000)}
        holder = port.room.table.seat(1)
        assert holder is not None and holder.stack == 10_000 and not port.room.sagas

    async def test_a_buy_in_the_wallet_refuses_ends_the_saga_and_seats_nobody(self) -> None:
        """A refusal is recorded (the saga ends, the seat is free) and answered with the
        wallet's reason; no money moved."""
        wallet = FakeWallet(accounts={"ann": 50_000}, refuse="insufficient_funds")
        money, port = money_for(opened(), wallet)
        with pytest.raises(FailedPrecondition) as info:
            await seat(money, port, 1, "ann")
        assert info.value.reason == "insufficient_funds"
        assert port.room.table.seat(1) is None and not port.room.sagas
        assert wallet.escrow == {} and wallet.accounts == {"ann": 50_000}

    async def test_funds_are_checked_before_anything_is_recorded(self) -> None:
        """A buy-in the account cannot pay is refused before the log or the wallet moves."""
        wallet = FakeWallet(accounts={"ann": 5_000})
        money, port = money_for(opened(), wallet)
        with pytest.raises(FailedPrecondition) as info:
            await money.require_funds("ann", 10_000)
        assert info.value.reason == "insufficient_funds" and port.commands == []


class TestTopUpAndCashOut:
    async def test_a_top_up_waits_while_its_seat_is_in_a_hand(self) -> None:
        """Queued during a hand the seat plays, the top-up is not moved until the hand
        ends (no wallet call)."""
        wallet = FakeWallet(accounts={"ann": 50_000, "bob": 50_000})
        money, port = money_for(opened(), wallet)
        await seat(money, port, 1, "ann")
        await seat(money, port, 2, "bob")
        await port.commit(Play(StartHand(hand_number=1, deck_commitment="c")), "start")
        await port.commit(QueueTopUp(1, "ann", 1_000, "top", "c-top"), "c-top")
        saga = port.room.saga(1)
        assert saga is not None
        calls = len(wallet.calls)
        assert await money.top_up(1, saga, None) is None
        assert wallet.calls[calls:] == [] and port.room.saga(1) == saga

    async def test_a_cash_out_the_wallet_cannot_reach_is_carried_on_later(self) -> None:
        """The leave is recorded; the cash-out waits for the wallet, and the driver's roll
        forward pays it with the same key once the wallet answers."""
        wallet = FakeWallet(accounts={"ann": 50_000})
        money, port = money_for(opened(), wallet)
        await seat(money, port, 1, "ann")
        await port.commit(Leave(1, "ann", "bye"), "c-bye")
        saga = port.room.saga(1)
        assert saga is not None
        wallet.down = True
        assert await money.cash_out(1, saga) is False
        assert port.room.saga(1) == saga and wallet.escrow == {1: ("ann", 10_000)}
        wallet.down = False
        assert await money.roll_forward() is True
        assert not port.room.sagas and wallet.escrow == {}
        assert wallet.accounts["ann"] == 50_000

    async def test_the_driver_leaves_a_saga_a_call_carries_on(self) -> None:
        """While a caller's request carries a seat's saga on, the roll forward leaves it."""
        wallet = FakeWallet(accounts={"ann": 50_000})
        money, port = money_for(opened(), wallet)
        await port.commit(RequestBuyIn(1, "ann", 10_000, "k", "c"), "c")
        async with money.carrying(1):
            assert money.carried(1)
            assert await money.roll_forward() is False
        assert not money.carried(1)
        assert await money.roll_forward() is True  # a buy-in that never reached the wallet
        assert port.room.saga(1) is None or port.room.saga(1).kind != BUY_IN  # type: ignore[union-attr]

    async def test_a_retry_waits_for_the_roll_forward_of_its_seat_and_reads_its_saga_again(
            self) -> None:
        """The driver rolls a buy-in whose caller gave up forward: it reads the wallet (no
        escrow yet). The player's retry (the same key) waits until that step is recorded
        (the buy-in ended, 'abandoned'), reads its saga again, finds it ended and moves
        nothing (before, it moved the buy-in meanwhile, its seat was refused, and the escrow
        was left an orphan)."""
        wallet = FakeWallet(accounts={"ann": 10_000})
        money, port, answered, step = await rolling_a_buy_in_forward(wallet)
        assert wallet.calls == ["Reconcile"]  # read: seat 3 holds nothing
        moved = []

        async def retry() -> None:  # what TableApp.sit_down does with a retry
            async with money.carrying_own(3, "k-ann", BUY_IN, 5.0) as saga:
                if saga is not None:
                    moved.append(await money.buy_in(3, saga, None))

        sit = asyncio.create_task(retry())
        await spin()
        assert not sit.done() and wallet.escrow == {}  # waits for the driver's step
        answered.set()
        assert await step is True
        await sit
        assert moved == [] and port.room.saga(3) is None and port.room.table.seat(3) is None
        async with money.carrying_own(3, "k-ann", BUY_IN, 0.0) as saga:  # ended: nothing held
            assert saga is None and not money.carried(3)
        assert wallet.escrow == {} and wallet.accounts == {"ann": 10_000}

    async def test_a_call_that_cannot_wait_for_the_seat_is_told_to_retry(self) -> None:
        """A caller waits for a roll forward of its seat only so long, then is answered
        UNAVAILABLE (retry with the same id), having moved nothing."""
        wallet = FakeWallet(accounts={"ann": 10_000})
        money, _, answered, step = await rolling_a_buy_in_forward(wallet)
        with pytest.raises(Unavailable) as busy:
            async with money.carrying(3, 0.05):
                raise AssertionError("carried while the driver holds the seat")
        assert busy.value.reason == "seat_busy" and not money.carried(3)
        answered.set()
        assert await step is True
        async with money.carrying(3, 0.05):  # free again
            assert money.carried(3)


class TestSettlementAndReconciliation:
    async def _played_hand(self) -> tuple[Money, FakePort, FakeWallet]:
        wallet = FakeWallet(accounts={"ann": 50_000, "bob": 50_000})
        money, port = money_for(opened(), wallet)
        await seat(money, port, 1, "ann")
        await seat(money, port, 2, "bob")
        await port.commit(Play(StartHand(hand_number=1, deck_commitment="c")), "start")
        await port.commit(Play(VoidHand(reason="test")), "void")
        return money, port, wallet

    async def test_a_finished_hand_is_settled_at_the_wallet_then_recorded(self) -> None:
        """The wallet settles the hand, the table records it settled, then reconciles: every
        escrow equals its stack, so dealing goes on."""
        money, port, wallet = await self._played_hand()
        await money.settle()
        assert wallet.settled == [1] and port.room.settled == 1
        assert wallet.calls[-2:] == ["SettleHand", "Reconcile"]
        assert not port.room.stopped and port.kinds()[-1] == "Settle"
        assert port.snapshots == 1  # a hand boundary with every escrow right

    async def test_a_settlement_that_carries_the_escrows_is_the_check(self) -> None:
        """A settlement's reply with the table's seats after it (issue 35) that agree with
        the stacks is the reconciliation: recorded, dealing goes on, no Reconcile call."""
        money, port, wallet = await self._played_hand()
        await money.check_once()
        wallet.report_seats = True
        calls = len(wallet.calls)
        await money.settle()
        assert wallet.calls[calls:] == ["SettleHand"]
        assert port.room.settled == 1 and not port.room.stopped
        assert port.kinds()[-1] == "Settle" and port.snapshots == 1  # the check passed

    async def test_escrows_in_a_settlement_that_disagree_ask_the_wallet(self) -> None:
        """Escrows in the reply unlike the stacks are not trusted to stop the table: the
        wallet's Reconcile decides (here it agrees, so dealing goes on)."""
        money, port, wallet = await self._played_hand()
        await money.check_once()
        wallet.report_seats, wallet.report_skew = True, 1
        calls = len(wallet.calls)
        await money.settle()
        assert wallet.calls[calls:] == ["SettleHand", "Reconcile"]
        assert port.room.settled == 1 and not port.room.stopped

    async def test_a_voided_hand_names_no_street(self) -> None:
        """A voided hand dealt no street the rake could be taken on: the request leaves the
        street unspecified (the wallet accepts that only for a settlement that moves
        nothing), never a made-up 3rd street."""
        money, _port, wallet = await self._played_hand()
        await money.settle()
        (request,) = wallet.requests
        assert request.ended_on_street == wpb.SettleHandRequest.STREET_UNSPECIFIED
        assert [s.amount_in - s.amount_won for s in request.seats] == [0, 0]

    async def test_a_settlement_with_no_seats_moves_nothing_and_skips_the_wallet(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A settlement with no seats and no street has nothing to move, and the wallet
        refuses it (an unspecified street with no seats): the hand is recorded settled,
        rake 0, without a call."""
        money, port, wallet = await self._played_hand()
        monkeypatch.setattr(money_module, "settle_query", lambda state: Settlement(
            hand_number=1, seats=(), rake=0, ended_on=None, voided=True))
        await money.settle()
        assert wallet.requests == [] and "SettleHand" not in wallet.calls
        assert port.room.settled == 1 and Settle(1, 0) in port.commands

    async def test_a_tournament_hand_is_settled_without_the_wallet(self) -> None:
        """Tournament chips never reach the wallet: the hand is recorded settled, rake 0."""
        wallet = FakeWallet()
        money, port = money_for(opened("cup"), wallet)
        assert port.room.tournament
        from table.tournament import SeatEntrant
        await port.commit(SeatEntrant(1, "ann", 1_000), "s1")
        await port.commit(SeatEntrant(2, "bob", 1_000), "s2")
        await port.commit(Play(StartHand(hand_number=1, deck_commitment="c")), "start")
        await port.commit(Play(VoidHand(reason="test")), "void")
        await money.settle()
        assert wallet.calls == [] and port.room.settled == 1
        assert port.commands[-1] == Settle(1, 0)

    async def test_an_escrow_that_differs_from_its_stack_stops_dealing(self) -> None:
        """A reconciliation that finds an escrow unlike its seat's stack stops the table,
        with the seat named in the reason."""
        money, port, wallet = await self._played_hand()
        wallet.escrow[2] = ("bob", 1)
        assert await money.check() is False
        assert "seat 2" in port.room.stopped

    async def test_an_escrow_the_log_knows_nothing_of_is_recorded_then_paid_back(self) -> None:
        """An orphan escrow (no seat, no saga) is recorded first (fenced), then cashed out
        to its player; the reconciliation then passes."""
        wallet = FakeWallet(accounts={"cat": 0}, escrow={3: ("cat", 700)})
        money, port = money_for(opened(), wallet)
        assert await money.check_once() is True
        assert wallet.escrow == {} and wallet.accounts["cat"] == 700
        assert port.kinds()[:1] == ["RefundOrphan"] and not port.room.stopped
        assert await money.check_once() is False  # once per load

    async def test_a_sit_down_retried_while_its_escrow_is_refunded_seats_nobody_on_it(
            self) -> None:
        """The table died after the wallet moved ann's buy-in (key k-ann) and before her
        seat was recorded: on its load the escrow is an orphan, recorded and being paid back
        when her client retries the sit-down. The wallet answers the retry as a replay;
        the buy-in waits for the refund, finds the escrow gone and seats nobody: no chip is
        invented (before, it found the escrow still there, seated 10,000, and the refund
        then emptied the escrow under the stack)."""
        wallet = FakeWallet(accounts={"ann": 0}, escrow={4: ("ann", 10_000)},
                            done={"k-ann": True})
        port, check, paying, sit = await sitting_down_while_refunded(wallet, "k-ann")
        assert not sit.done()  # waits for the refund in flight
        paying.set()
        assert await check is True
        with pytest.raises(FailedPrecondition) as refused:
            await sit
        assert refused.value.reason == "buy_in_refunded"
        assert port.room.table.seat(4) is None and not port.room.sagas
        assert wallet.escrow == {} and wallet.accounts == {"ann": 10_000}

    async def test_a_new_sit_down_on_a_seat_whose_orphan_is_being_refunded_moves_after_it(
            self) -> None:
        """The orphan's refund is recorded and paying when ann sits down at that seat again
        with a new command id (as the table tells her to): her buy-in moves once the refund
        has emptied the seat, so her escrow is her stack (before, it moved into the orphan's
        escrow, she was seated, and the refund drained both: 10,000 invented)."""
        wallet = FakeWallet(accounts={"ann": 10_000}, escrow={4: ("ann", 10_000)},
                            done={"k-old": True})
        port, check, paying, sit = await sitting_down_while_refunded(wallet, "k-new")
        assert not sit.done() and wallet.escrow == {4: ("ann", 10_000)}
        paying.set()
        await check
        await sit
        holder = port.room.table.seat(4)
        assert holder is not None and holder.stack == 10_000
        assert wallet.escrow == {4: ("ann", 10_000)} and wallet.accounts == {"ann": 10_000}
        assert not port.room.stopped

    async def test_a_new_sit_down_on_an_orphan_escrow_before_the_check_is_refused(
            self) -> None:
        """Review finding F3: the table died after the wallet moved ann's buy-in (10,000 into
        seat 4's escrow, key k-old) and before her seat was recorded; before the check after
        the load finds that orphan, she sits down at seat 4 again with a new command id. The
        wallet takes a sit-down's buy-in only on a free seat: refused seat_taken, nothing
        moved, nobody seated, the saga ended. The check then pays the orphan back and the
        table deals on; her next sit-down is seated. (Before, the buy-in was added to the
        orphan, escrow 20,000 under a stack of 10,000: the table stopped until she left.)"""
        wallet = FakeWallet(accounts={"ann": 10_000}, escrow={4: ("ann", 10_000)},
                            done={"k-old": True})
        money, port = money_for(opened(), wallet)
        await port.commit(RequestBuyIn(4, "ann", 10_000, "k-new", "c-new"), "c-new")
        saga = port.room.saga(4)
        assert saga is not None
        with pytest.raises(FailedPrecondition) as refused:
            await money.buy_in(4, saga, None)
        assert refused.value.reason == "seat_taken"
        assert port.room.table.seat(4) is None and not port.room.sagas
        assert port.kinds()[-1] == "EndBuyIn"
        assert wallet.escrow == {4: ("ann", 10_000)} and wallet.accounts == {"ann": 10_000}
        assert await money.check_once() is True
        assert "RefundOrphan" in port.kinds() and not port.room.stopped
        assert wallet.escrow == {} and wallet.accounts == {"ann": 20_000}
        await seat(money, port, 4, "ann")
        holder = port.room.table.seat(4)
        assert holder is not None and holder.stack == 10_000
        assert wallet.escrow == {4: ("ann", 10_000)} and await money.check() is True

    async def test_an_orphan_a_sit_down_finds_at_an_idle_table_is_paid_back_at_once(
            self) -> None:
        """The table was checked after its load; then a buy-in of ann's that had given up
        lands late at the wallet (her saga already ended): an orphan on an idle table, where
        no hand's end will check again. Her next sit-down there is refused seat_taken, and
        that refusal has the driver check the table at its next step, which pays the orphan
        back (before, it waited for a hand that an idle table never deals)."""
        wallet = FakeWallet(accounts={"ann": 20_000})
        money, port = money_for(opened(), wallet)
        assert await money.check_once() is True  # the load's check: nothing there
        wallet.escrow[4] = ("ann", 10_000)  # the late buy-in
        wallet.accounts["ann"] = 10_000
        await port.commit(RequestBuyIn(4, "ann", 10_000, "k-new", "c-new"), "c-new")
        saga = port.room.saga(4)
        assert saga is not None
        with pytest.raises(FailedPrecondition):
            await money.buy_in(4, saga, None)
        assert await money.check_once() is True  # checked again, at the driver's next step
        assert "RefundOrphan" in port.kinds() and not port.room.stopped
        assert wallet.escrow == {} and wallet.accounts == {"ann": 20_000}
        assert await money.check_once() is False  # and only once

    async def test_a_sit_down_that_lands_while_the_wallet_is_read_does_not_stop_dealing(
            self) -> None:
        """The check reads the escrows; cat's sit-down moves her buy-in and is seated before
        that answer is compared with the room: her seat is passed over this time (the answer
        is older than her stack), not taken for a wrong escrow that stops dealing."""
        room = opened()
        for number, player in ((1, "ann"), (2, "bob")):
            room = run(room, RequestBuyIn(number, player, 10_000, f"k-{player}",
                                          f"c-{player}"))
            room = run(room, ConfirmBuyIn(number, f"k-{player}"))
        wallet = FakeWallet(accounts={"cat": 10_000},
                            escrow={1: ("ann", 10_000), 2: ("bob", 10_000)})
        answered = gated(wallet, "reconcile", after=True)
        money, port = money_for(room, wallet)
        check = asyncio.create_task(money.check_once())
        await spin()
        assert wallet.calls == ["Reconcile"]  # read; the answer not yet back
        await seat(money, port, 3, "cat")
        answered.set()
        assert await check is True and not port.room.stopped
        # a wrong escrow on a seat that did not move is still found
        wallet.escrow[1] = ("ann", 9_000)
        assert await money.check() is False and "seat 1" in port.room.stopped


@pytest.mark.parametrize("street", list(Street))
def test_the_request_names_the_street_the_hand_ended_on(street: Street) -> None:
    """The hand's own street reaches the wallet (its rake depends on it, RULES 2.4)."""
    seats = (SettlementSeat(seat=1, player_id="ann", amount_in=10, amount_won=19),
             SettlementSeat(seat=2, player_id="bob", amount_in=10, amount_won=0))
    request = settle_request("t1", Settlement(hand_number=3, seats=seats, rake=1,
                                              ended_on=street, voided=False), None)
    assert request is not None
    assert request.ended_on_street == int(street)
    assert request.hand_number == 3 and request.rake == 1 and len(request.seats) == 2


def test_a_settlement_with_no_seats_has_no_request() -> None:
    assert settle_request("t1", Settlement(hand_number=3, seats=(), rake=0, ended_on=None,
                                           voided=True), None) is None


def test_a_confirm_of_an_unknown_saga_is_refused() -> None:
    """(The room, not money, refuses a step of a saga the log does not hold.)"""
    with pytest.raises(FailedPrecondition):
        decide(opened(), ConfirmBuyIn(1, "nope"), NOW)


def test_a_steps_command_id_is_the_one_older_tables_recorded() -> None:
    """A saga step's command id spells its stage as before the stages were an enum, so a
    step recorded by older code is a duplicate, not a second step."""
    from table.money import step_id
    from table.room import BuyInEnd
    assert step_id(EndBuyIn(1, "k", BuyInEnd.REFUND_DUE), "k") == "s:EndBuyIn:refund_due:k"
    assert step_id(ConfirmBuyIn(1, "k"), "k") == "s:ConfirmBuyIn:k"
