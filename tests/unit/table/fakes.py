"""A fake table port, wallet and dealer for the driver's and money's unit tests: the room is
the real pure model (decided and folded as the actor does it), the commit interface keeps
each command's outcome by its id (a retry is a duplicate), and the wallet is a small model
of the real one's contract (idempotent by key; a seat's escrow belongs to one player)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import grpc

from rules import DealPlan
from rules.cards import parse_cards
from rules.commands import DealStreet, RevealedHand
from rules.errors import RuleViolation
from rules.testing import deal_command
from stud.v1 import wallet_pb2 as wpb
from studkit.commit import Committed
from studkit.errors import FailedPrecondition
from studkit.store import AppendResult
from table.clients import DealerClient, Refused, Unreachable, WalletClient
from table.port import Driving, System
from table.room import Room, RoomCommand, Turn, apply, decide

NOW = 1_000.0


class FakePort:
    """One table as its driver and money see it, in memory."""

    def __init__(self, room: Room, clock: Callable[[], float] = lambda: NOW) -> None:
        self.table_id = "t1"
        self.room = room
        self.epoch: int | None = 1
        self.fenced = False
        self.wake = asyncio.Event()
        self.clock = clock
        self.recorded: dict[str, Committed[Room]] = {}
        self.commands: list[RoomCommand] = []
        """Every command appended, in order."""
        self.snapshots = 0

    @property
    def version(self) -> int:
        return self.room.version

    def fence(self) -> None:
        self.fenced = True

    async def commit(self, command: RoomCommand, command_id: str, fp: str = "",
                     expected: int | None = None, *, record_empty: bool = True
                     ) -> Committed[Room]:
        if command_id in self.recorded:
            done = self.recorded[command_id]
            return Committed(AppendResult(done.result.version, (), True), [], None)
        now = self.clock()
        decision = decide(self.room, command, now)
        if not decision.events and not record_empty:
            return Committed(AppendResult(self.version, ()), [], self.room)
        self.room = apply(self.room, decision.events, at=now,
                          first_sequence=self.version + 1, table=decision.table)
        self.commands.append(command)
        done = Committed(AppendResult(self.version, ("x",) * len(decision.events)), [],
                         self.room)
        self.recorded[command_id] = done
        self.wake.set()
        return done

    async def own(self, command: RoomCommand, command_id: str) -> bool:
        try:
            await self.commit(command, f"s:{command_id}", record_empty=False)
        except (RuleViolation, FailedPrecondition):
            return False
        return True

    async def maybe_snapshot(self) -> None:
        self.snapshots += 1

    def hold_turn(self, turn: Turn) -> None:
        from table.room_state import updated
        self.room = updated(self.room, {"turn": turn})

    def release_held(self) -> None:
        """(The actor's watchers; this port has none.)"""

    def kinds(self) -> list[str]:
        """The names of the commands appended (a ``Play``'s: its rules command's)."""
        return [type(getattr(c, "command", c)).__name__ for c in self.commands]


@dataclass
class FakeWallet:
    """The wallet's table calls, idempotent by key."""

    accounts: dict[str, int] = field(default_factory=dict)
    escrow: dict[int, tuple[str, int]] = field(default_factory=dict)
    done: dict[str, object] = field(default_factory=dict)
    refuse: str = ""
    """A reason to refuse every buy-in with ("" : none)."""
    requests: list[wpb.SettleHandRequest] = field(default_factory=list)
    """Every settlement request, in order."""
    down: bool = False
    """Unreachable: every call raises :class:`Unreachable`."""
    calls: list[str] = field(default_factory=list)
    settled: list[int] = field(default_factory=list)
    report_seats: bool = False
    """Settlement replies carry the table's seats after it (``table_seats``, issue 35)."""
    report_skew: int = 0
    """Added to each reported seat's escrow (a reply that disagrees with Reconcile's)."""

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if self.down:
            raise Unreachable("wallet", 0.0, "down", now=0.0)

    async def balance(self, player_id: str, give_up_after: float | None = None
                      ) -> wpb.GetBalanceResponse:
        self._call("GetBalance")
        return wpb.GetBalanceResponse(balance=self.accounts.get(player_id, 0))

    async def buy_in(self, player_id: str, table_id: str, seat: int, amount: int,
                     idempotency_key: str, give_up_after: float | None = None,
                     *, sit_down: bool = False) -> wpb.BuyInResponse:
        self._call("BuyIn")
        if idempotency_key in self.done:
            return wpb.BuyInResponse(replayed=True)
        if self.refuse:
            raise Refused("wallet", grpc.StatusCode.FAILED_PRECONDITION, self.refuse, "no")
        held = self.escrow.get(seat)
        # The seat rule: a sit-down only on a free seat, a top-up on one no other player holds.
        if held is not None and (sit_down or held[0] != player_id):
            raise Refused("wallet", grpc.StatusCode.FAILED_PRECONDITION, "seat_taken", "held")
        self.accounts[player_id] = self.accounts.get(player_id, 0) - amount
        self.escrow[seat] = (player_id, (held[1] if held else 0) + amount)
        self.done[idempotency_key] = True
        return wpb.BuyInResponse()

    async def cash_out(self, player_id: str, table_id: str, seat: int, idempotency_key: str,
                       give_up_after: float | None = None,
                       on_wait: Callable[[str], None] | None = None) -> wpb.CashOutResponse:
        self._call("CashOut")
        if idempotency_key not in self.done:
            held = self.escrow.pop(seat, None)
            if held is not None:
                self.accounts[held[0]] = self.accounts.get(held[0], 0) + held[1]
            self.done[idempotency_key] = True
        return wpb.CashOutResponse()

    async def settle(self, request: wpb.SettleHandRequest, give_up_after: float | None = None,
                     on_wait: Callable[[str], None] | None = None) -> wpb.SettleHandResponse:
        self._call("SettleHand")
        self.requests.append(request)
        for s in request.seats:
            player, held = self.escrow.get(s.seat, (s.player_id, 0))
            self.escrow[s.seat] = (player, held - s.amount_in + s.amount_won)
        self.settled.append(request.hand_number)
        return wpb.SettleHandResponse(table_seats=[
            wpb.EscrowSeat(seat=seat, player_id=player, balance=balance + self.report_skew)
            for seat, (player, balance) in sorted(self.escrow.items())
            if self.report_seats])

    async def reconcile(self, table_id: str, give_up_after: float | None = None,
                        on_wait: Callable[[str], None] | None = None
                        ) -> wpb.ReconcileResponse:
        self._call("Reconcile")
        return wpb.ReconcileResponse(seats=[
            wpb.EscrowSeat(seat=seat, player_id=player, balance=balance)
            for seat, (player, balance) in sorted(self.escrow.items())])


@dataclass
class FakeDealer:
    """The dealer's table calls: a fixed deck, down cards never sent."""

    deck: str = "2c 9d 3h Kd 5s 7h 4c 8d Ts Jh Qc Ad 6s 6d 5c 4h"
    down: bool = False
    calls: list[str] = field(default_factory=list)

    async def start_hand(self, table_id: str, hand_number: int, give_up_after: float | None,
                         on_wait: Callable[[str], None] | None = None) -> tuple[str, str]:
        self.calls.append("StartHand")
        if self.down:
            raise Unreachable("dealer", 0.0, "down", now=0.0)
        return f"commitment-{hand_number}", ""

    async def deal(self, table_id: str, hand_number: int, plan: DealPlan,
                   give_up_after: float | None,
                   on_wait: Callable[[str], None] | None = None) -> DealStreet:
        self.calls.append(f"Deal:{plan.street.name}")
        if self.down:
            raise Unreachable("dealer", 0.0, "down", now=0.0)
        cards = parse_cards(self.deck)[:len(plan.slots)]
        return deal_command(plan, cards, hide_down=True)

    async def reveal(self, table_id: str, hand_number: int, seats: Sequence[int],
                     give_up_after: float | None,
                     on_wait: Callable[[str], None] | None = None
                     ) -> tuple[RevealedHand, ...]:
        self.calls.append("Reveal")
        raise Unreachable("dealer", 0.0, "not in these tests", now=0.0)


def driving(wallet: FakeWallet, dealer: FakeDealer | None = None,
            clock: Callable[[], float] = lambda: NOW) -> Driving:
    """The drivers' shared parts, with the fakes as the system."""
    return Driving(System(dealer=cast(DealerClient, dealer or FakeDealer()),
                          wallet=cast(WalletClient, wallet), clock=clock))

