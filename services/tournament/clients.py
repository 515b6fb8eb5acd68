"""The tournament's port to the wallet (buy-ins, refunds, prizes) and its gRPC adapter.

Every call carries an idempotency key derived from the tournament's log (the tournament id
and the entry or payment id the log gave it), so a retry after a crash repeats nothing; each
has a deadline. A refusal is :class:`Refused` (the wallet's reason kept), an outage is
:class:`Unavailable` (the process manager tries again on its next round).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Protocol

import grpc

from stud.v1 import wallet_pb2 as wpb
from stud.v1 import wallet_pb2_grpc as wpb_grpc
from studkit.grpc_server import rpc_error_reason
from tournament.verdict import Pool, PoolEntry

Metadata = Callable[[], Sequence[tuple[str, str]]]
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                       grpc.StatusCode.ABORTED, grpc.StatusCode.RESOURCE_EXHAUSTED})


class Refused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Unavailable(Exception):
    """The wallet did not answer (the call may or may not have been applied)."""


def key(*parts: object) -> str:
    """An idempotency key from the log's coordinates (1-64 id characters, stable).

    >>> len(key("sng-1", "enter", "e3")), key("a", 1) == key("a", 1) != key("a", 2)
    (43, True)
    """
    return "tk-" + hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:40]


class WalletPort(Protocol):
    async def enter(self, tournament_id: str, entry_id: str, player_id: str, buy_in: int,
                    fee: int) -> None: ...

    async def refund(self, tournament_id: str, entry_id: str, player_id: str) -> None: ...

    async def pay(self, tournament_id: str, payment_id: str, player_id: str, amount: int,
                  place: int) -> None: ...

    async def exclusion(self, player_id: str) -> str:
        """The reason the player is excluded now (``self_excluded``, ``operator_excluded``),
        "" when they are not."""
        ...


class WalletClient:
    """:class:`WalletPort` over the wallet's gRPC API, as ``service:tournament``."""

    def __init__(self, channel: grpc.aio.Channel, metadata: Metadata, timeout_s: float) -> None:
        self._stub = wpb_grpc.WalletServiceStub(channel)  # type: ignore[no-untyped-call]
        self._metadata = metadata
        self._timeout = timeout_s

    async def _call(self, method: Callable[..., object], request: object) -> None:
        try:
            await method(request, metadata=self._metadata(), timeout=self._timeout)  # type: ignore[misc]
        except grpc.aio.AioRpcError as exc:
            if exc.code() in RETRYABLE:
                raise Unavailable(f"wallet: {exc.code().name}") from exc
            raise Refused(rpc_error_reason(exc) or exc.code().name.lower()) from exc

    async def balance(self, player_id: str) -> int | None:
        """The player's balance, None when they have no account (``unknown_account``): what
        ``Register`` checks before it takes an entry. :class:`Unavailable` or
        :class:`Refused` when the wallet does not say."""
        try:
            reply = await self._stub.GetBalance(
                wpb.GetBalanceRequest(account=wpb.AccountRef(player_id=player_id)),
                metadata=self._metadata(), timeout=self._timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in RETRYABLE:
                raise Unavailable(f"wallet: {exc.code().name}") from exc
            reason = rpc_error_reason(exc) or exc.code().name.lower()
            if reason == "unknown_account":
                return None
            raise Refused(reason) from exc
        return int(reply.balance)

    async def exclusion(self, player_id: str) -> str:
        """From ``GetProtection`` (a service may read anyone's): the wallet's reason, as its
        refusal of a buy-in would name it, or "" when the player is not excluded now."""
        try:
            reply = await self._stub.GetProtection(
                wpb.GetProtectionRequest(player_id=player_id),
                metadata=self._metadata(), timeout=self._timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in RETRYABLE:
                raise Unavailable(f"wallet: {exc.code().name}") from exc
            raise Refused(rpc_error_reason(exc) or exc.code().name.lower()) from exc
        if not reply.excluded:
            return ""
        return "operator_excluded" if reply.excluded_by else "self_excluded"

    async def pool(self, tournament_id: str) -> Pool:
        """The wallet's record of the tournament's pool (``GetPool``), for the verdict."""
        try:
            reply = await self._stub.GetPool(wpb.GetPoolRequest(tournament_id=tournament_id),
                                             metadata=self._metadata(), timeout=self._timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in RETRYABLE:
                raise Unavailable(f"wallet: {exc.code().name}") from exc
            raise Refused(rpc_error_reason(exc) or exc.code().name.lower()) from exc
        return Pool(balance=reply.balance, prizes_paid=reply.prizes_paid,
                    entries={e.entry_id: PoolEntry(e.player_id, e.buy_in, e.refunded)
                             for e in reply.entries})

    async def enter(self, tournament_id: str, entry_id: str, player_id: str, buy_in: int,
                    fee: int) -> None:
        await self._call(self._stub.EnterTournament, wpb.EnterTournamentRequest(
            player_id=player_id, tournament_id=tournament_id, entry_id=entry_id,
            buy_in=buy_in, fee=fee, idempotency_key=key(tournament_id, "enter", entry_id)))

    async def refund(self, tournament_id: str, entry_id: str, player_id: str) -> None:
        await self._call(self._stub.RefundEntry, wpb.RefundEntryRequest(
            player_id=player_id, tournament_id=tournament_id, entry_id=entry_id,
            idempotency_key=key(tournament_id, "refund", entry_id)))

    async def pay(self, tournament_id: str, payment_id: str, player_id: str, amount: int,
                  place: int) -> None:
        await self._call(self._stub.PayPrize, wpb.PayPrizeRequest(
            player_id=player_id, tournament_id=tournament_id, amount=amount, place=place,
            idempotency_key=key(tournament_id, payment_id)))
