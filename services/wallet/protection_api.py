"""The protection RPCs' gRPC face (issue 34): proto <-> protection values, pure, and the
servicer methods (a mixin of ``server.WalletServicer``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final, TypeVar

import grpc

from stud.v1 import wallet_pb2 as pb
from studkit.errors import BadRequest
from studkit.grpc_server import current_principal
from wallet.mapping import ident
from wallet.protection import (
    CancelLimitIncrease,
    ExcludePlayer,
    LiftExclusion,
    LimitKind,
    Period,
    ProtectionEvent,
    SelfExclude,
    SetLimit,
    SetRealityCheck,
    SetSessionLimit,
    Window,
    event_to_json,
)
from wallet.protection_app import ProtectionApp, ProtectionView

KINDS: Final = {pb.LIMIT_KIND_DEPOSIT: LimitKind.DEPOSIT, pb.LIMIT_KIND_LOSS: LimitKind.LOSS,
                pb.LIMIT_KIND_WAGER: LimitKind.WAGER}
WINDOWS: Final = {pb.LIMIT_WINDOW_DAY: Window.DAY, pb.LIMIT_WINDOW_WEEK: Window.WEEK,
                  pb.LIMIT_WINDOW_MONTH: Window.MONTH}
PERIODS: Final = {pb.EXCLUSION_PERIOD_DAY: Period.DAY, pb.EXCLUSION_PERIOD_WEEK: Period.WEEK,
                  pb.EXCLUSION_PERIOD_MONTH: Period.MONTH,
                  pb.EXCLUSION_PERIOD_SIX_MONTHS: Period.SIX_MONTHS,
                  pb.EXCLUSION_PERIOD_INDEFINITE: Period.INDEFINITE}
_KIND_PB: Final = {v: k for k, v in KINDS.items()}
_WINDOW_PB: Final = {v: k for k, v in WINDOWS.items()}


T = TypeVar("T")


def _enum(table: Mapping[Any, T], value: int, field: str) -> T:
    try:
        return table[value]
    except KeyError:
        raise BadRequest(field, "unspecified or unknown") from None


def set_limit_from_proto(request: pb.SetLimitRequest) -> SetLimit:
    """The command of a SetLimit request."""
    return SetLimit(player_id=ident(request.player_id, "player_id"),
                    kind=_enum(KINDS, request.kind, "kind"),
                    window=_enum(WINDOWS, request.window, "window"), amount=request.amount)


def view_to_proto(view: ProtectionView) -> pb.ProtectionResponse:
    """A player's protection as the wire has it."""
    exclusion = view.state.exclusion
    excluded = exclusion is not None and exclusion.active(view.now_ms)
    reply = pb.ProtectionResponse(player_id=view.player_id, now_ms=view.now_ms,
                                  excluded=excluded,
                                  reality_check_minutes=view.state.reality_check_minutes)
    if exclusion is not None and excluded:
        reply.excluded_until_ms = exclusion.until_ms
        reply.excluded_by = exclusion.by
        reply.exclusion_reason = exclusion.reason
        reply.lift_effective_ms = exclusion.lift_ms
    for row in view.standings:
        if row.in_force is None:
            continue
        pending = row.limit.settled(view.now_ms) is row.limit and row.limit.pending is not None
        reply.limits.append(pb.LimitStanding(
            kind=_KIND_PB[row.kind], window=_WINDOW_PB[row.window], amount=row.in_force,
            used=row.used, remaining=row.remaining or 0, resets_at_ms=row.resets_at_ms,
            increase_pending=pending,
            pending_amount=(row.limit.pending or 0) if pending else 0,
            pending_effective_ms=row.limit.effective_ms if pending else 0))
    session = view.state.session_limit
    if session is not None:
        reply.session_limit_minutes = session.in_force(view.now_ms) or 0
        if session.settled(view.now_ms) is session and session.pending is not None:
            reply.session_limit_pending = True
            reply.session_limit_pending_minutes = session.pending
            reply.session_limit_effective_ms = session.effective_ms
    reply.session_started_ms = view.session_started_ms
    reply.events.extend(events_to_proto(view.events))
    return reply


def events_to_proto(events: Sequence[tuple[str, ProtectionEvent]]) -> list[pb.ProtectionEvent]:
    """A player's protection events on the wire (GetProtection's and GetStatement's)."""
    return [pb.ProtectionEvent(event_id=event_id, type=type(event).__name__,
                               at_ms=event.at_ms, json=event_to_json(event))
            for event_id, event in events]


class ProtectionMethods:
    """The protection RPCs; ``_protection`` is set by the servicer."""

    _protection: ProtectionApp

    async def SetLimit(self, request: pb.SetLimitRequest, context: grpc.aio.ServicerContext
                       ) -> pb.ProtectionResponse:
        command = set_limit_from_proto(request)
        return view_to_proto(await self._protection.set_limit(current_principal(), command))

    async def CancelLimitIncrease(self, request: pb.CancelLimitIncreaseRequest,
                                  context: grpc.aio.ServicerContext) -> pb.ProtectionResponse:
        command = CancelLimitIncrease(player_id=ident(request.player_id, "player_id"),
                                      kind=_enum(KINDS, request.kind, "kind"),
                                      window=_enum(WINDOWS, request.window, "window"))
        return view_to_proto(await self._protection.cancel_increase(current_principal(),
                                                                    command))

    async def SelfExclude(self, request: pb.SelfExcludeRequest,
                          context: grpc.aio.ServicerContext) -> pb.ProtectionResponse:
        command = SelfExclude(player_id=ident(request.player_id, "player_id"),
                              period=_enum(PERIODS, request.period, "period"))
        return view_to_proto(await self._protection.self_exclude(current_principal(), command))

    async def GetProtection(self, request: pb.GetProtectionRequest,
                            context: grpc.aio.ServicerContext) -> pb.ProtectionResponse:
        player_id = ident(request.player_id, "player_id")
        return view_to_proto(await self._protection.read(current_principal(), player_id))

    async def ExcludePlayer(self, request: pb.ExcludePlayerRequest,
                            context: grpc.aio.ServicerContext) -> pb.ProtectionResponse:
        principal = current_principal()
        command = ExcludePlayer(player_id=ident(request.player_id, "player_id"),
                                period=_enum(PERIODS, request.period, "period"),
                                reason=request.reason, operator=principal.subject)
        return view_to_proto(await self._protection.exclude(principal, command))

    async def LiftExclusion(self, request: pb.LiftExclusionRequest,
                            context: grpc.aio.ServicerContext) -> pb.ProtectionResponse:
        principal = current_principal()
        command = LiftExclusion(player_id=ident(request.player_id, "player_id"),
                                reason=request.reason, operator=principal.subject)
        return view_to_proto(await self._protection.lift(principal, command))

    async def SetRealityCheck(self, request: pb.SetRealityCheckRequest,
                              context: grpc.aio.ServicerContext) -> pb.ProtectionResponse:
        command = SetRealityCheck(player_id=ident(request.player_id, "player_id"),
                                  minutes=request.interval_minutes)
        return view_to_proto(await self._protection.set_reality_check(current_principal(),
                                                                      command))

    async def SetSessionLimit(self, request: pb.SetSessionLimitRequest,
                              context: grpc.aio.ServicerContext) -> pb.ProtectionResponse:
        command = SetSessionLimit(player_id=ident(request.player_id, "player_id"),
                                  minutes=request.minutes)
        return view_to_proto(await self._protection.set_session_limit(current_principal(),
                                                                      command))

    async def WatchRealityChecks(self, request: pb.WatchRealityChecksRequest,
                                 context: grpc.aio.ServicerContext
                                 ) -> AsyncIterator[pb.RealityCheck]:
        player_id = ident(request.player_id, "player_id")
        async for check in self._protection.reality_checks(current_principal(), player_id):
            yield pb.RealityCheck(at_ms=check.at_ms, session_ms=check.session_ms,
                                  net_result=check.net_result,
                                  interval_minutes=check.interval_minutes)
