"""The money saga of a table's seats, its repair and reconciliation (DESIGN 5a, §5b).

Each step is recorded before or after the wallet moves, as the room model says: a buy-in is
requested (the seat reserved) before the wallet is called, and confirmed by the seat's record
after; a cash-out is requested with the seat's leave, and paid after. A crash between two
steps leaves the saga in the log, and :meth:`Money.roll_forward` carries it on with the same
wallet keys (every wallet call is idempotent by its key), so nothing is paid twice or lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence

import structlog

from rules.config import Rake
from rules.errors import RuleViolation
from rules.settlement import Settlement
from rules.settlement import settlement as settle_query
from stud.v1 import wallet_pb2 as wpb
from studkit.commit import Committed
from studkit.errors import FailedPrecondition
from table.clients import Refused, Unreachable, WalletClient, key
from table.port import System, TablePort
from table.room import (
    WALLET_BUY_IN,
    WALLET_CASH_OUT,
    WALLET_REFUND,
    ApplyTopUp,
    BuyInEnd,
    ConfirmBuyIn,
    DropTopUp,
    EndBuyIn,
    Leave,
    PayCashOut,
    Reconciled,
    RefundOrphan,
    Room,
    Saga,
    Settle,
    saga_step,
)
from table.seat_money import SeatMoney
from table.status import Status

log = structlog.get_logger("table")


def step_id(command: object, wallet_key: str) -> str:
    """The command id of a saga's step: the same whichever call records it (the seat's RPC
    or the driver), so a race between them is a duplicate, never a second step."""
    name = type(command).__name__
    stage = getattr(command, "stage", "")
    return f"s:{name}{':' + stage if stage else ''}:{wallet_key}"


def _refusal(what: str, exc: Refused) -> FailedPrecondition:
    """The wallet's refusal passed on to the player, its ErrorInfo details with it (a limit's
    ``remaining`` and ``resets_at_ms``: docs/player-protection.md)."""
    error = FailedPrecondition(f"{what}: {exc.reason}", reason=exc.reason or "buy_in_refused")
    error.error_metadata = dict(exc.metadata)  # type: ignore[attr-defined]
    return error


def _holding(room: Room, number: int) -> tuple[str, int] | None:
    seat = room.table.seat(number) if number <= len(room.table.seats) else None
    return None if seat is None else (seat.player_id, seat.stack)


def _own(room: Room, seat: int, wallet_key: str, kind: str | None) -> Saga | None:
    saga = room.saga(seat)
    if saga is None or saga.wallet_key != wallet_key or kind not in (None, saga.kind):
        return None
    return saga


def escrow_problems(room: Room, escrows: dict[int, tuple[str, int]],
                    moving: Callable[[int], bool], read_over: Room | None = None,
                    passed_over: list[int] | None = None) -> str:
    """What is wrong between the wallet's escrows and ``room``'s stacks ("" if nothing). A
    seat with a saga in flight, or whose money a caller is ``moving`` now, is passed over. So
    is, when the escrows were read over the room ``read_over``, a seat whose saga or holding
    has changed since (a sit-down, top-up or cash-out that landed during the read: the
    wallet's answer is older than the stack it would be compared with). The seats passed
    over are added to ``passed_over``."""
    wrong = []
    skipped = [] if passed_over is None else passed_over
    for number in range(1, len(room.table.seats) + 1):
        want = _holding(room, number)
        if number in room.sagas or moving(number) or (read_over is not None and (
                number in read_over.sagas or _holding(read_over, number) != want)):
            skipped.append(number)
            continue
        held = escrows.get(number)
        if held != want and not (held is None and want is not None and want[1] == 0):
            wrong.append(f"seat {number}: escrow {held} vs table {want}")
    return "; ".join(wrong)


def settle_request(table_id: str, settlement: Settlement,
                   rake: Rake | None) -> wpb.SettleHandRequest | None:
    """The wallet's request for a hand's settlement, naming the street the hand really ended
    on: unspecified when it has none (a voided hand, which moves nothing and pays no rake;
    the wallet accepts no street only then). None for a settlement with no seats: it moves
    nothing, and the wallet refuses an unspecified street with no seats."""
    if not settlement.seats:
        return None
    street = (wpb.SettleHandRequest.STREET_UNSPECIFIED if settlement.ended_on is None
              else wpb.SettleHandRequest.Street.Value(f"STREET_{settlement.ended_on.name}"))
    request = wpb.SettleHandRequest(
        table_id=table_id, hand_number=settlement.hand_number, rake=settlement.rake,
        ended_on_street=street,
        seats=[wpb.SettlementSeat(seat=s.seat, player_id=s.player_id,
                                  amount_in=s.amount_in, amount_won=s.amount_won)
               for s in settlement.seats])
    if rake is not None:
        request.rake_policy.percent_bps = rake.percent_bps
        request.rake_policy.cap = rake.cap
    return request


class Money:
    """One table's wallet calls, each beside the log's record of it."""

    def __init__(self, actor: TablePort, system: System, status: Status,
                 checks: asyncio.Semaphore) -> None:
        self.actor = actor
        self.status = status
        self._wallet: WalletClient = system.wallet
        self._checks = checks
        self.seats = SeatMoney()
        """Who moves each seat's money now (the seat's one serialized path)."""
        self.carrying, self.carried = self.seats.carrying, self.seats.carried
        self.repaired = False
        """Whether the table was checked against the wallet since it was loaded."""

    @contextlib.asynccontextmanager
    async def carrying_own(self, seat: int, wallet_key: str, kind: str | None,
                           wait_s: float | None) -> AsyncIterator[Saga | None]:
        """A caller carries its own saga on (``wallet_key``'s, of ``kind`` if given): read
        again once the seat is carried (a roll forward may have ended it), else None."""
        if _own(self.actor.room, seat, wallet_key, kind) is None:
            yield None
            return
        async with self.seats.carrying(seat, wait_s):
            yield _own(self.actor.room, seat, wallet_key, kind)

    # --- the saga's steps ----------------------------------------------------------------

    async def require_funds(self, player_id: str, amount: int) -> None:
        """Refuse, before anything is recorded, a buy-in or top-up the player's account
        cannot pay (the wallet still decides: a balance spent meanwhile fails the saga; an
        unreachable wallet is left to the saga's own call)."""
        try:
            reply = await self._wallet.balance(player_id, give_up_after=1.0)
        except Unreachable:
            return  # the buy-in's own call will wait for the wallet (and say so)
        except Refused as exc:
            raise FailedPrecondition(f"the wallet refused: {exc.reason}",
                                     reason=exc.reason or "buy_in_refused") from None
        if reply.balance < amount:
            raise FailedPrecondition(f"your account holds {reply.balance}, not {amount}",
                                     reason="insufficient_funds")

    async def buy_in(self, seat: int, saga: Saga, wait_s: float | None
                     ) -> Committed[Room]:
        """Move the buy-in, then seat the player; a refusal ends the saga (raised)."""
        table_id = self.actor.table_id
        # An orphan's refund in flight on this seat empties the seat's whole escrow when it
        # lands: the buy-in moves after it, not into it (a new sit-down's saga is recorded
        # while the refund pays; the orphan's record was decided before it).
        await self.seats.refund_done(seat)
        try:
            # A sit-down: the wallet takes only a free seat, never adding to an escrow there
            # (an orphan of this player's, its refund still to come, would else be seated
            # under a stack of half of it and stop the table: review finding F3). Refused
            # seat_taken, the saga ends and the next check pays the orphan back.
            bought = await self._wallet.buy_in(saga.player_id, table_id, seat, saga.amount,
                                               saga.wallet_key, give_up_after=wait_s,
                                               sit_down=True)
        except Refused as exc:
            end = EndBuyIn(seat, saga.wallet_key, BuyInEnd.FAILED, exc.reason or "")
            await self.actor.commit(end, step_id(end, saga.wallet_key))
            if exc.reason == "seat_taken" and self.actor.room.table.seat(seat) is None:
                # An escrow the log knows nothing of holds the seat (a buy-in that landed
                # after its saga ended): the driver checks the table again at its next step,
                # which pays it back, not at the next hand's end (an idle table has none).
                self.repaired = False
            raise _refusal("the wallet refused the buy-in", exc) from None
        if bought.replayed:
            # The wallet answered a retry of a buy-in made before: its escrow may be one a
            # repair took for an orphan (its refund started during the call); decided once
            # that is paid.
            await self.seats.refund_done(seat)
        if bought.replayed and not await self._holds(seat, saga):
            # A replay whose chips went back meanwhile (an orphan's refund): the wallet moved
            # nothing now, so nothing may be seated on it.
            end = EndBuyIn(seat, saga.wallet_key, BuyInEnd.FAILED, "buy_in_refunded")
            await self.actor.commit(end, step_id(end, saga.wallet_key))
            raise FailedPrecondition("this sit-down's buy-in was refunded; sit down again with "
                                     "a new command id", reason="buy_in_refunded")
        confirm = ConfirmBuyIn(seat, saga.wallet_key)
        try:
            return await self.actor.commit(confirm, step_id(confirm, saga.wallet_key))
        except RuleViolation as exc:  # the rules refuse the seat: the buy-in goes back
            log.warning("sit_down_refunded", seat=seat, amount=saga.amount)
            await self.refund(seat, saga, exc.reason.value)
            raise

    async def _holds(self, seat: int, saga: Saga) -> bool:
        reply = await self._wallet.reconcile(self.actor.table_id, on_wait=self.status.waiting)
        return any(s.seat == seat and s.player_id == saga.player_id and s.balance >= saga.amount
                   for s in reply.seats)

    async def refund(self, seat: int, saga: Saga, reason: str) -> None:
        """Give a buy-in back whose seat cannot be recorded: due first (so the seat is never
        recorded after), then paid, then recorded as refunded. Nothing is paid unless the
        refund is due in the log: a saga another call ended meanwhile is left alone."""
        wallet_key = saga.wallet_key
        due = EndBuyIn(seat, wallet_key, BuyInEnd.REFUND_DUE, reason)
        try:
            await self.actor.commit(due, step_id(due, wallet_key))
        except (RuleViolation, FailedPrecondition):
            return
        pending = self.actor.room.saga(seat)
        if pending is None or pending.wallet_key != wallet_key or not pending.refund_due:
            return
        await self._wallet.cash_out(saga.player_id, self.actor.table_id, seat,
                                    key(self.actor.table_id, wallet_key, "refund"),
                                    on_wait=self.status.waiting)
        done = EndBuyIn(seat, wallet_key, BuyInEnd.REFUNDED)
        await self.actor.commit(done, step_id(done, wallet_key))

    async def top_up(self, seat: int, saga: Saga, wait_s: float | None
                     ) -> Committed[Room] | None:
        """Move a queued top-up and add it, unless the seat is in a hand (then later)."""
        table = self.actor.room.table
        if table.hand_in_progress and table.hand is not None and table.hand.has_player(seat):
            return None
        try:
            await self._wallet.buy_in(saga.player_id, self.actor.table_id, seat, saga.amount,
                                      saga.wallet_key, give_up_after=wait_s)
        except Refused as exc:
            log.info("topup_refused", seat=seat, reason=exc.reason)
            drop = DropTopUp(seat, saga.wallet_key, exc.reason or "refused")
            await self.actor.commit(drop, step_id(drop, saga.wallet_key))
            raise _refusal("the wallet refused the top-up", exc) from None
        apply_ = ApplyTopUp(seat, saga.wallet_key)
        try:
            return await self.actor.commit(apply_, step_id(apply_, saga.wallet_key))
        except RuleViolation:
            return None  # a hand started meanwhile: added when it ends

    async def cash_out(self, seat: int, saga: Saga, wait_s: float | None = None) -> bool:
        """Pay a stood-up seat's escrow back; False if the wallet is unreachable (later)."""
        try:
            await self._wallet.cash_out(saga.player_id, self.actor.table_id, seat,
                                        saga.wallet_key, give_up_after=wait_s,
                                        on_wait=self.status.waiting)
        except Unreachable as exc:
            log.warning("cash_out_pending", seat=seat, detail=str(exc))
            return False
        except Refused as exc:  # the seat is no longer the player's at the wallet: paid
            log.warning("cash_out_refused", seat=seat, reason=exc.reason)
        self.status.resumed()
        paid = PayCashOut(seat, saga.wallet_key)
        with contextlib.suppress(RuleViolation, FailedPrecondition):  # recorded meanwhile
            await self.actor.commit(paid, step_id(paid, saga.wallet_key))
        return True

    async def roll_forward(self) -> bool:
        """Carry on one saga that no call of this process carries (the room's
        :func:`~table.room.saga_step` says how); True if one was."""
        room = self.actor.room
        pending = self.seats.free(room.sagas)
        if not pending or room.tournament:  # a tournament table has no money sagas
            return False
        async with self.seats.holding(pending):
            return await self._roll_forward(pending, {s: room.sagas[s] for s in pending})

    async def _roll_forward(self, pending: list[int], read_over: dict[int, Saga]) -> bool:
        reply = await self._wallet.reconcile(self.actor.table_id, on_wait=self.status.waiting)
        held = {s.seat: (s.player_id, s.balance) for s in reply.seats}
        room = self.actor.room
        for seat in pending:
            saga = room.sagas.get(seat)
            if saga is None or saga != read_over[seat]:
                continue  # moved on meanwhile (the read is older than it)
            step = saga_step(room, seat, held.get(seat))
            if step is None:
                continue
            wallet, command = step
            log.info("saga_carried_on", seat=seat, kind=saga.kind, wallet=wallet,
                     command=type(command).__name__)
            try:
                if wallet == WALLET_CASH_OUT:
                    return await self.cash_out(seat, saga)
                if wallet == WALLET_REFUND:
                    await self.refund(seat, saga, "refund due")
                    return True
                if wallet == WALLET_BUY_IN:  # a top-up's (a sit-down's is never re-sent)
                    await self._wallet.buy_in(saga.player_id, self.actor.table_id, seat,
                                              saga.amount, saga.wallet_key, give_up_after=None)
                await self.actor.commit(command, step_id(command, saga.wallet_key))
            except Refused as exc:  # a top-up the wallet refuses now: dropped
                drop = DropTopUp(seat, saga.wallet_key, exc.reason or "refused")
                with contextlib.suppress(RuleViolation, FailedPrecondition):
                    await self.actor.commit(drop, step_id(drop, saga.wallet_key))
            except RuleViolation as exc:
                if isinstance(command, ConfirmBuyIn):  # the rules refuse the seat
                    await self.refund(seat, saga, exc.reason.value)
                else:
                    log.info("saga_step_refused", seat=seat, reason=exc.reason.value)
            except FailedPrecondition as exc:  # the saga moved on meanwhile
                log.info("saga_step_refused", seat=seat, reason=exc.reason)
            return True
        return False

    # --- settlement and reconciliation ---------------------------------------------------

    async def settle(self) -> None:
        """Settle the hand that ended, record it, then reconcile (repairing first after a
        restart)."""
        state = self.actor.room.table
        settlement = settle_query(state)
        assert settlement is not None and state.config is not None
        if self.actor.room.tournament:  # tournament chips: no wallet, no rake (DESIGN 5c)
            await self.actor.own(Settle(settlement.hand_number, 0),
                                    f"h{settlement.hand_number}:settled")
            await self.actor.maybe_snapshot()
            return
        request = settle_request(self.actor.table_id, settlement, state.config.rake)
        if request is None:  # nobody's money moved: nothing to tell the wallet
            await self.actor.own(Settle(settlement.hand_number, 0),
                                 f"h{settlement.hand_number}:settled")
            await self.actor.maybe_snapshot()
            return
        table_id = self.actor.table_id
        settled = await self._wallet.settle(request, on_wait=self.status.waiting)
        self.status.resumed()
        await self.actor.own(Settle(settlement.hand_number, settlement.rake),
                                f"h{settlement.hand_number}:settled")
        log.info("hand_settled", hand_number=settlement.hand_number, rake=settlement.rake)
        # Issue 34: a player the wallet says is excluded is stood up after this hand, their
        # escrow cashed out (the driver carries the cash-out on like any leave).
        players = {s.seat: s.player_id for s in settlement.seats}
        for seat in settled.excluded_seats:
            if seat in players:
                wallet_key = key(table_id, "excluded", seat, settlement.hand_number)
                await self.actor.own(Leave(seat, players[seat], wallet_key), wallet_key)
        if await self.check(settled.table_seats):
            await self.actor.maybe_snapshot()

    async def check_once(self) -> bool:
        """Check the table against the wallet once after it was loaded (:meth:`check`);
        True if it did now, False if it had already."""
        if self.repaired:
            return False
        await self.check()
        return True

    async def check(self, settled: Sequence[wpb.EscrowSeat] = (), whole: bool = False
                    ) -> bool:
        """Repair (an escrow the log knows nothing of is paid back) and reconcile, on one
        read of the wallet's escrows; True when every escrow is right. A tournament table
        holds no escrow: nothing to ask the wallet. ``settled``: the escrows a settlement's
        reply carries (``table_seats``, the table's seats right after it); when they agree
        with the stacks they are the check and the wallet is not asked again (issue 35),
        otherwise (or before the first check after a load, or from a wallet that sends none)
        the wallet's Reconcile decides. ``whole`` (a stopped table's check): right only if
        no seat was passed over either (a seat whose money is moving is not yet shown
        right, so the stop stays until a check sees every seat)."""
        if self.actor.room.tournament:
            self.repaired = True
            return True
        if settled and self.repaired:
            escrows = {s.seat: (s.player_id, s.balance) for s in settled}
            if not escrow_problems(self.actor.room, escrows, self.seats.carried):
                await self.actor.own(Reconciled(""), f"reconciled:{self.actor.version}")
                return True
        async with self._checks:
            read_over = self.actor.room
            reply = await self._wallet.reconcile(self.actor.table_id,
                                                 on_wait=self.status.waiting)
        escrows = {s.seat: (s.player_id, s.balance) for s in reply.seats}
        for seat in await self.repair(escrows):
            escrows.pop(seat, None)
        self.repaired = True
        passed_over: list[int] = []
        problem = escrow_problems(self.actor.room, escrows, self.seats.carried, read_over,
                                  passed_over)
        if whole and passed_over and not problem:
            log.info("reconciliation_incomplete", passed_over=passed_over)
            return False  # nothing shown wrong, not everything shown right: still stopped
        await self.actor.own(Reconciled(problem), f"reconciled:{self.actor.version}")
        if problem:
            log.error("reconciliation_failed", detail=problem)
        return not problem

    async def repair(self, escrows: dict[int, tuple[str, int]]) -> list[int]:
        """An escrow the log has neither a seat nor a saga for (left by code older than the
        room events) is paid back to its player, and recorded; the seats repaired."""
        room = self.actor.room
        repaired = []
        for number, (player, balance) in sorted(escrows.items()):
            if number in room.sagas or self.seats.carried(number):
                continue
            seat = room.table.seat(number) if number <= len(room.table.seats) else None
            if seat is not None and seat.player_id == player:
                continue
            wallet_key = key(self.actor.table_id, "orphan", number, player, room.version)
            # Marked before the first await: a sit-down retried meanwhile whose wallet call
            # is a replay (the same key as the orphan's) waits for this refund before it
            # asks the wallet whether the escrow is still there.
            async with self.seats.refunding(number):
                # Recorded (fenced) before the wallet moves: a former owner resumed with a
                # stale room would take a seat's escrow for an orphan; its append is refused
                # first (NotOwner), so it pays nothing (found by the simulator,
                # docs/reliability.md). Refused too if a saga took the seat meanwhile.
                if not await self.actor.own(RefundOrphan(number, player, balance),
                                            f"orphan:{wallet_key}"):
                    continue
                log.warning("orphan_escrow_refunded", seat=number, amount=balance)
                await self._wallet.cash_out(player, self.actor.table_id, number, wallet_key,
                                            on_wait=self.status.waiting)
            repaired.append(number)
        return repaired
