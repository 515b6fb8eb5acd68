"""The driver (services/table/driver.py) against a fake port, dealer and wallet: after every
change it asks the log what is pending and does it (a hand to start, cards to deal, a clock
run out, a leaving seat's turn, a hand to settle), and a dealer that stays away voids the
hand. Each test takes one step at a time; no Redis, no gRPC, no timer."""

from __future__ import annotations

import math

from rules import Phase, TableConfig
from rules.commands import StartHand
from table.driver import Driver
from table.model import TableSettings
from table.room import (
    ConfirmBuyIn,
    Leave,
    Open,
    Play,
    RequestBuyIn,
    Room,
    RoomCommand,
    apply,
    decide,
)
from tests.unit.table.fakes import NOW, FakeDealer, FakePort, FakeWallet, driving


def run(room: Room, command: RoomCommand) -> Room:
    decision = decide(room, command, NOW)
    return apply(room, decision.events, at=NOW, first_sequence=room.version + 1,
                 table=decision.table)


def two_players() -> Room:
    room = run(Room(), Open("t1", TableConfig(), TableSettings(next_hand_delay_ms=0)))
    for seat, player in ((1, "ann"), (2, "bob")):
        room = run(room, RequestBuyIn(seat, player, 10_000, f"k-{player}", f"c-{player}"))
        room = run(room, ConfirmBuyIn(seat, f"k-{player}"))
    return room


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def driver_for(room: Room, dealer: FakeDealer | None = None
               ) -> tuple[Driver, FakePort, FakeWallet, FakeDealer, Clock]:
    clock = Clock()
    port = FakePort(room, clock)
    wallet = FakeWallet(escrow={1: ("ann", 10_000), 2: ("bob", 10_000)})
    dealer = dealer or FakeDealer()
    return Driver(port, driving(wallet, dealer, clock)), port, wallet, dealer, clock


async def test_a_loaded_table_is_checked_against_the_wallet_first() -> None:
    """The first step after a load reconciles the table with the wallet; the next one
    starts a hand."""
    driver, port, wallet, dealer, _ = driver_for(two_players())
    assert await driver.step() is None
    assert wallet.calls == ["Reconcile"] and dealer.calls == []
    assert await driver.step() is None
    assert dealer.calls == ["StartHand"]
    assert port.room.table.hand_in_progress
    assert port.commands[-1] == Play(StartHand(hand_number=1, deck_commitment="commitment-1"))


async def test_a_stopped_table_checks_the_wallet_again_and_resumes_once_it_agrees() -> None:
    """A failed reconciliation stops dealing; the stopped table asks the wallet again every
    STOPPED_RECHECK_S (not at every step), stays stopped while an escrow is still wrong, and
    deals again once every escrow equals its stack."""
    from table.driver import STOPPED_RECHECK_S
    driver, port, wallet, dealer, clock = driver_for(two_players())
    wallet.escrow[2] = ("bob", 9_000)
    assert await driver.step() is None  # the load's check fails
    assert "seat 2" in port.room.stopped
    assert await driver.step() == 5.0 and wallet.calls == ["Reconcile"]
    clock.now += STOPPED_RECHECK_S
    assert await driver.step() == 5.0  # asked again: still wrong, still stopped
    assert wallet.calls == ["Reconcile"] * 2 and "seat 2" in port.room.stopped
    clock.now += 10
    assert await driver.step() == 5.0 and wallet.calls == ["Reconcile"] * 2
    wallet.escrow[2] = ("bob", 10_000)  # (an operator put it right at the wallet)
    clock.now += STOPPED_RECHECK_S
    assert await driver.step() is None
    assert port.room.stopped == "" and wallet.calls == ["Reconcile"] * 3
    assert await driver.step() is None and dealer.calls == ["StartHand"]


async def test_a_stopped_table_carries_its_sagas_on_and_resumes_only_on_every_seat_right(
        ) -> None:
    """While stopped, a seat's money can be moving (bob's top-up, queued, its wallet call
    never made): at its re-check the table carries the saga on first, then resumes only if
    it saw every seat right. Seat 2 is still 1,000 short after the top-up: still stopped
    (before, the check passed over the seat whose saga was pending and resumed)."""
    from table.driver import STOPPED_RECHECK_S
    from table.room import QueueTopUp
    driver, port, wallet, dealer, clock = driver_for(two_players())
    wallet.accounts["bob"] = 500
    wallet.escrow[2] = ("bob", 9_000)
    assert await driver.step() is None
    assert "seat 2" in port.room.stopped
    assert await driver.step() == 5.0  # stopped: the next check in STOPPED_RECHECK_S
    await port.commit(QueueTopUp(2, "bob", 500, "k-top", "c-top"), "c-top")
    clock.now += STOPPED_RECHECK_S
    assert await driver.step() == 5.0
    assert not port.room.sagas and wallet.escrow[2] == ("bob", 9_500)  # carried on
    holder = port.room.table.seat(2)
    assert holder is not None and holder.stack == 10_500
    assert "seat 2" in port.room.stopped and dealer.calls == []


async def test_cards_due_are_dealt_as_the_rules_plan_them() -> None:
    """With the hand started, the dealer is asked for third street and the deal is
    committed; then a player is to act."""
    driver, port, _, dealer, _ = driver_for(two_players())
    await driver.step()  # reconcile
    await driver.step()  # start
    assert port.room.table.hand is not None and port.room.table.hand.phase == Phase.DEALING
    assert await driver.step() is None
    assert dealer.calls[-1] == "Deal:THIRD"
    hand = port.room.table.hand
    assert hand is not None and hand.phase == Phase.BETTING and hand.to_act


async def test_a_turn_whose_clock_ran_out_is_timed_out() -> None:
    """A turn waits as long as its clock (action time, then the time bank); past its final
    deadline the seat is timed out (RULES 6.12: its bring-in posted)."""
    driver, port, _, _, clock = driver_for(two_players())
    for _ in range(3):
        await driver.step()  # reconcile, start, deal
    wait = await driver.step()
    assert wait is not None and 0 < wait < math.inf
    assert port.room.turn is not None  # the clock held from now (none in this log)
    clock.now += wait + 1
    assert await driver.step() is None
    assert port.kinds()[-1] == "TimeOut"


async def test_a_leaving_seat_acts_passively_at_its_turn_without_a_clock() -> None:
    """A seat that asked to leave during the hand is checked or folded (a bring-in posted)
    at once when its turn comes."""
    driver, port, _, _, _ = driver_for(two_players())
    for _ in range(3):
        await driver.step()
    hand = port.room.table.hand
    assert hand is not None and hand.to_act
    seat = hand.to_act
    player = port.room.table.seat(seat).player_id  # type: ignore[union-attr]
    await port.commit(Leave(seat, player, "bye"), "c-bye")
    assert await driver.step() is None
    assert port.kinds()[-1] in ("Check", "Fold", "TimeOut")
    assert port.room.table.hand is not None and port.room.table.hand.to_act != seat


async def test_a_dealer_that_stays_away_voids_the_hand() -> None:
    """Mid-deal, a dealer still unreachable past the outage limit voids the hand (RULES
    9.8), and the next step settles it at the wallet."""
    dealer = FakeDealer()
    driver, port, wallet, _, _ = driver_for(two_players(), dealer)
    await driver.step()
    await driver.step()
    dealer.down = True
    assert await driver.step() is None
    hand = port.room.table.hand
    assert hand is not None and hand.voided and not port.room.table.hand_in_progress
    assert await driver.step() is None
    assert wallet.settled == [1] and port.room.settled == 1


async def test_a_closed_table_waits_for_a_change_only() -> None:
    """A closed table's seats are stood up and cashed out; then, with nothing to start, the
    driver sets no alarm: only a change wakes it."""
    from table.room import Close
    driver, port, wallet, dealer, _ = driver_for(run(two_players(), Close(by="op")))
    waits = [await driver.step() for _ in range(8)]
    assert waits[-1] == math.inf and dealer.calls == []
    assert port.room.table.seat(1) is None and port.room.table.seat(2) is None
    assert wallet.escrow == {} and not port.room.sagas


async def test_a_void_whose_append_is_lost_never_reaches_the_wallet() -> None:
    """The hand's end is recorded on the fenced stream before the wallet settles it. A void
    decided while the dealer is away, whose append is lost with its owner, leaves the wallet
    untouched; the next owner, with the dealer back, plays the hand on, and the wallet
    settles the end the table records. (When the wallet settled first, the wallet held a void
    the stream never got: the next owner's own end was refused ALREADY_EXISTS at every step,
    the stacks no longer matched and no hand was dealt again.)"""
    dealer = FakeDealer()
    driver, port, wallet, _, clock = driver_for(two_players(), dealer)
    await driver.step()
    await driver.step()
    dealer.down = True

    async def crash(command: RoomCommand, command_id: str) -> bool:
        raise ConnectionError("the table died")

    port.own = crash  # type: ignore[method-assign]
    for _ in range(20):
        try:
            await driver.step()
        except ConnectionError:
            break
        clock.now += 100
    assert wallet.settled == [] and wallet.requests == []
    dealer.down = False
    again = FakePort(port.room, clock)
    next_owner = Driver(again, driving(wallet, dealer, clock))
    for _ in range(60):
        await next_owner.step()
        clock.now += 100
        if again.room.settled >= 2:
            break
    assert again.room.settled >= 2, again.kinds()
    assert wallet.settled[:2] == [1, 2]
