"""The table's calls to the dealer and the wallet: each with a deadline, retried with backoff
while the other service is unreachable, and carrying an idempotency key derived from the log
(table, hand, step) so that a retry after a crash repeats nothing (DESIGN 5a).

A refusal (any status but UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED or RESOURCE_EXHAUSTED) is
raised at once as :class:`Refused`; an outage is retried until ``give_up_after`` and then raised
as :class:`Unreachable`, which the table turns into a waiting status, then a void (RULES 9.8).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

import grpc
import structlog

from rules import DealPlan
from rules.commands import DealStreet, DealtCard, RevealedHand
from stud.v1 import dealer_pb2 as dpb
from stud.v1 import dealer_pb2_grpc as dpb_grpc
from stud.v1 import wallet_pb2 as wpb
from stud.v1 import wallet_pb2_grpc as wpb_grpc
from studkit.grpc_server import rpc_error_info, rpc_error_reason
from studkit.mapping import card_from_proto, street_to_proto
from studkit.mapping.common import cards_from_proto

log = structlog.get_logger("table.clients")

T = TypeVar("T")
Metadata = Callable[[], Sequence[tuple[str, str]]]

RETRYABLE: Final = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
})
PLAYER_WAIT_S: Final = 3.0
"""How long a call a player waits on (a buy-in) retries an unreachable service before the
player is answered UNAVAILABLE (retry with the same command id): well within any caller's
deadline, so the answer says why rather than the caller's deadline running out."""


class Unreachable(Exception):
    """Raised when a service stayed unreachable for longer than the caller allows."""

    def __init__(self, service: str, since: float, detail: str,
                 now: float | None = None) -> None:
        waited = (time.monotonic() if now is None else now) - since
        super().__init__(f"{service} unreachable for {waited:.1f}s: {detail}")
        self.service = service
        self.since = since


class Refused(Exception):
    """Raised when a service refused a call (the status and its ``stud-reason``)."""

    def __init__(self, service: str, code: grpc.StatusCode, reason: str | None,
                 detail: str, metadata: dict[str, str] | None = None) -> None:
        super().__init__(f"{service} refused: {code.name} {reason or ''} {detail}".strip())
        self.service = service
        self.code = code
        self.reason = reason
        self.metadata = metadata or {}
        """The refusal's ErrorInfo metadata (a limit's ``remaining``, ``resets_at_ms``...)."""


def key(*parts: object) -> str:
    """An idempotency key from the log's coordinates: 1-64 id characters, stable.

    >>> key("t1", 3, "settle")
    'k-de8f762749234e54034556223c93b4e62b3fdbaa'
    """
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()[:40]
    return f"k-{digest}"


@dataclass
class Retry:
    """How calls are retried: per-attempt deadline, backoff bounds, and for how long."""

    deadline_s: float = 3.0
    backoff_min_s: float = 0.05
    backoff_max_s: float = 2.0
    jitter: Callable[[], float] = field(default=random.random)
    """A number in [0, 1) drawn per backoff (the simulator gives one from its seed)."""

    async def call(self, service: str, attempt: Callable[[float], Awaitable[T]],
                   give_up_after: float | None, on_wait: Callable[[str], None] | None = None
                   ) -> T:
        loop = asyncio.get_running_loop()  # its time is the monotonic clock (or simulated)
        since = loop.time()
        delay = self.backoff_min_s
        while True:
            try:
                return await attempt(self.deadline_s)
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                if code not in RETRYABLE:
                    info = rpc_error_info(exc)
                    raise Refused(service, code, rpc_error_reason(exc), exc.details() or "",
                                  dict(info.metadata) if info is not None else {}) from None
                detail = f"{code.name}: {exc.details()}"
            if on_wait is not None:
                on_wait(f"waiting for the {service} ({detail})")
            if give_up_after is not None and loop.time() - since >= give_up_after:
                raise Unreachable(service, since, detail, loop.time())
            log.warning("call_retried", service=service, detail=detail, delay_s=round(delay, 3))
            await asyncio.sleep(delay * (0.5 + self.jitter() / 2))
            delay = min(self.backoff_max_s, delay * 2)


class DealerClient:
    """The dealer's table calls (StartHand, Deal, Reveal)."""

    def __init__(self, channel: grpc.aio.Channel, metadata: Metadata, retry: Retry) -> None:
        self._stub = dpb_grpc.DealerServiceStub(channel)  # type: ignore[no-untyped-call]
        self._metadata = metadata
        self._retry = retry

    async def start_hand(self, table_id: str, hand_number: int, give_up_after: float | None,
                         on_wait: Callable[[str], None] | None = None) -> tuple[str, str]:
        """The hand's commitments: the deck's and the per-card one ('' from an older dealer
        or for a stacked test deck)."""
        request = dpb.StartHandRequest(table_id=table_id, hand_number=hand_number)

        async def attempt(timeout: float) -> tuple[str, str]:
            reply = await self._stub.StartHand(request, metadata=self._metadata(),
                                               timeout=timeout)
            return str(reply.commitment), str(reply.card_commitment)

        return await self._retry.call("dealer", attempt, give_up_after, on_wait)

    async def deal(self, table_id: str, hand_number: int, plan: DealPlan,
                   give_up_after: float | None,
                   on_wait: Callable[[str], None] | None = None) -> DealStreet:
        request = dpb.DealRequest(
            table_id=table_id, hand_number=hand_number, street=street_to_proto(plan.street),
            slots=[dpb.DealSlot(seat=s.seat, up=s.up) for s in plan.slots], burn=plan.burn,
            reshuffle_burns=plan.reshuffle_burns)

        async def attempt(timeout: float) -> DealStreet:
            reply = await self._stub.Deal(request, metadata=self._metadata(), timeout=timeout)
            cards = tuple(
                # A down card's value never reaches the table: only "dealt to seat N".
                DealtCard(seat=c.seat, up=c.up,
                          card=card_from_proto(c.card) if c.up else None)
                for c in reply.cards)
            return DealStreet(cards=cards, burned=reply.burned,
                              reshuffled_burns=reply.reshuffled_burns)

        return await self._retry.call("dealer", attempt, give_up_after, on_wait)

    async def reveal(self, table_id: str, hand_number: int, seats: Sequence[int],
                     give_up_after: float | None,
                     on_wait: Callable[[str], None] | None = None
                     ) -> tuple[RevealedHand, ...]:
        request = dpb.RevealRequest(table_id=table_id, hand_number=hand_number,
                                    seats=list(seats))

        async def attempt(timeout: float) -> tuple[RevealedHand, ...]:
            reply = await self._stub.Reveal(request, metadata=self._metadata(),
                                            timeout=timeout)
            return tuple(RevealedHand(seat=h.seat, down=cards_from_proto(h.down, "down"))
                         for h in reply.hands)

        return await self._retry.call("dealer", attempt, give_up_after, on_wait)


class WalletClient:
    """The wallet's table calls (BuyIn, SettleHand, CashOut, Reconcile)."""

    def __init__(self, channel: grpc.aio.Channel, metadata: Metadata, retry: Retry) -> None:
        self._stub = wpb_grpc.WalletServiceStub(channel)  # type: ignore[no-untyped-call]
        self._metadata = metadata
        self._retry = retry

    async def _call(self, method: str, request: object, give_up_after: float | None,
                    on_wait: Callable[[str], None] | None = None) -> object:
        rpc = getattr(self._stub, method)

        async def attempt(timeout: float) -> object:
            return await rpc(request, metadata=self._metadata(), timeout=timeout)

        return await self._retry.call("wallet", attempt, give_up_after, on_wait)

    async def buy_in(self, player_id: str, table_id: str, seat: int, amount: int,
                     idempotency_key: str, give_up_after: float | None = PLAYER_WAIT_S,
                     *, sit_down: bool = False) -> wpb.BuyInResponse:
        """Move a buy-in to the seat's escrow. ``sit_down``: a sit-down's, which the wallet
        puts only on a free seat (``seat_taken`` on any escrow there, the player's own
        orphan too: review finding F3); a top-up's (False) adds to the player's escrow."""
        request = wpb.BuyInRequest(player_id=player_id, table_id=table_id, seat=seat,
                                   amount=amount, command_id=idempotency_key,
                                   sit_down=sit_down)
        reply = await self._call("BuyIn", request, give_up_after)
        assert isinstance(reply, wpb.BuyInResponse)
        return reply

    async def cash_out(self, player_id: str, table_id: str, seat: int, idempotency_key: str,
                       give_up_after: float | None = None,
                       on_wait: Callable[[str], None] | None = None) -> wpb.CashOutResponse:
        request = wpb.CashOutRequest(player_id=player_id, table_id=table_id, seat=seat,
                                     command_id=idempotency_key)
        reply = await self._call("CashOut", request, give_up_after, on_wait)
        assert isinstance(reply, wpb.CashOutResponse)
        return reply

    async def balance(self, player_id: str, give_up_after: float | None = PLAYER_WAIT_S
                      ) -> wpb.GetBalanceResponse:
        """A player's balance (the table checks it before a buy-in is recorded)."""
        request = wpb.GetBalanceRequest(account=wpb.AccountRef(player_id=player_id))
        reply = await self._call("GetBalance", request, give_up_after)
        assert isinstance(reply, wpb.GetBalanceResponse)
        return reply

    async def settle(self, request: wpb.SettleHandRequest, give_up_after: float | None = None,
                     on_wait: Callable[[str], None] | None = None) -> wpb.SettleHandResponse:
        reply = await self._call("SettleHand", request, give_up_after, on_wait)
        assert isinstance(reply, wpb.SettleHandResponse)
        return reply

    async def reconcile(self, table_id: str, give_up_after: float | None = None,
                        on_wait: Callable[[str], None] | None = None
                        ) -> wpb.ReconcileResponse:
        reply = await self._call("Reconcile", wpb.ReconcileRequest(table_id=table_id),
                                 give_up_after, on_wait)
        assert isinstance(reply, wpb.ReconcileResponse)
        return reply
