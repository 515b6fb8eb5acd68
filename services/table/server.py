"""The table service's gRPC face: a thin servicer (proto -> command -> app -> proto) and
``create_server(settings, deps) -> (server, port)``. Errors are raised, never aborted here:
``errors.TABLE_ERRORS`` maps them in the interceptor."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from rules import Command
from rules.commands import Bet, Call, Check, Complete, Fold, PostBringIn, Raise
from rules.events import PlayerLeft
from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.errors import BadRequest, FailedPrecondition
from studkit.fingerprint import fingerprint
from studkit.grpc_server import GrpcServer, create_grpc_server, current_principal, log_summary
from studkit.limits import CallerKeys, CallRateLimiter, LogSampler, StreamLimiter
from studkit.mapping import config_from_proto, event_from_envelope, is_room_event
from studkit.mapping.common import check_amount, check_ident
from studkit.metrics import Metrics
from studkit.ownership import Ownership, Replica
from table.app import Outcome, TableApp, command_key
from table.bootstrap import TableDeps
from table.config import Settings
from table.errors import TABLE_ERRORS
from table.model import TableSettings, settings_from_proto
from table.play import ACTIONS, Accounting, Played, PlayStreams, resume_point
from table.room_state import Stakes
from table.tournament import (
    AMOUNT_MAX,
    PAUSE_REASON_MAX,
    PauseDealing,
    SeatEntrant,
    SetStakes,
    UnseatEntrant,
)
from table.views import Records, batch_bytes, hand_result_to_proto, record_for

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["TableService"].full_name
_TOKEN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""A page token: the last table id of the previous page."""


def _seat(value: int) -> int:
    if not 1 <= value <= 8:
        raise BadRequest("seat", "must be 1..8")
    return value


def _stack(value: int) -> int:
    if not 0 < value <= AMOUNT_MAX:
        raise BadRequest("stack", f"must be 1..{AMOUNT_MAX}")
    return value


def unseated_stack(envelopes: list[EventEnvelope], seat: int) -> int:
    """The stack an unseat took off the table: its ``PlayerLeft``'s (also on a retry, whose
    envelopes are the recorded ones). A retry after that part of the log was archived is
    refused (``archived``) rather than answered with a stack the table cannot show."""
    for envelope in envelopes:
        if envelope.event_type == "PlayerLeft":
            event = event_from_envelope(envelope)
            if isinstance(event, PlayerLeft) and event.seat == seat:
                return event.stack
    raise FailedPrecondition("the unseat was recorded in a part of the log since archived; "
                             "stud replay reads the archive", reason="archived")


def _expected(request: Any) -> int | None:
    return int(request.expected_sequence) if request.HasField("expected_sequence") else None


def _to(request: Any) -> int | None:
    return check_amount(request.to, "to") if request.HasField("to") else None


_BETTING: dict[str, Callable[[Any], Command]] = {
    "PostBringIn": lambda r: PostBringIn(seat=r.seat),
    "Complete": lambda r: Complete(seat=r.seat, to=_to(r)),
    "Bet": lambda r: Bet(seat=r.seat, to=_to(r)),
    "Raise": lambda r: Raise(seat=r.seat, to=_to(r)),
    "Call": lambda r: Call(seat=r.seat),
    "Check": lambda r: Check(seat=r.seat),
    "Fold": lambda r: Fold(seat=r.seat),
}
"""The rules' command of each betting action's request (by its unary method)."""


def _common(request: Any, method: str) -> tuple[str, str, str]:
    """(table id, command id, fingerprint) of a command request."""
    table_id = check_ident(request.table_id, "table_id")
    command_id = check_ident(request.command_id, "command_id")
    return table_id, command_id, fingerprint(method, request.SerializeToString(
        deterministic=True))


class TableServicer(pb_grpc.TableServiceServicer):
    """One method per RPC, each a translation around one app call."""

    def __init__(self, app: TableApp, limiter: StreamLimiter,
                 accounting: Accounting | None = None) -> None:
        self._app = app
        self._limiter = limiter
        self._records = Records()
        self.play = PlayStreams(app, limiter, self._records,
                                {kind: functools.partial(self._played, name)
                                 for kind, name in ACTIONS.items()},
                                accounting or Accounting(TABLE_ERRORS, Metrics()))
        """``Play``'s handler (registered by :func:`add_table_service`)."""

    def _records_of(self, table_id: str, outcome: Outcome) -> list[bytes]:
        """The bytes of each record of an applied command's reply: the watchers' bytes of
        the same envelopes (kept for them: issue 35)."""
        principal = current_principal()
        # The command is applied: answer it even if the table changed hands since (then
        # the events are shown as to an observer).
        actor = self._app.actor_of(table_id)
        records = []
        for envelope in outcome.envelopes:
            if is_room_event(envelope):
                continue  # the room's own state: shown by the views, not as events
            viewer = (self._app.hand_viewer(principal, actor, envelope.hand_number)
                      if actor is not None else (None, False))
            records.append(self._records.record_bytes(envelope, *viewer))
        return records

    def _reply(self, table_id: str, outcome: Outcome) -> pb.CommandReply:
        reply = pb.CommandReply(version=outcome.version, duplicate=outcome.duplicate)
        for record in self._records_of(table_id, outcome):
            reply.events.add().MergeFromString(record)
        return reply

    # --- lobby ---------------------------------------------------------------------------

    async def OpenTable(self, request: pb.OpenTableRequest,
                        context: grpc.aio.ServicerContext) -> pb.CommandReply:
        table_id, command_id, fp = _common(request, "OpenTable")
        if not request.HasField("config"):
            raise BadRequest("config", "required")
        config = config_from_proto(request.config, defaults=True)  # unset: RULES 2.1-2.2
        settings = (settings_from_proto(request.settings) if request.HasField("settings")
                    else TableSettings())
        tournament_id = (check_ident(request.tournament_id, "tournament_id")
                         if request.tournament_id else "")
        outcome = await self._app.open_table(current_principal(), table_id, command_id,
                                             config, settings, fp, tournament_id)
        return self._reply(table_id, outcome)

    async def CloseTable(self, request: pb.CloseTableRequest,
                         context: grpc.aio.ServicerContext) -> pb.CommandReply:
        table_id, command_id, fp = _common(request, "CloseTable")
        outcome = await self._app.close_table(current_principal(), table_id, command_id, fp)
        return self._reply(table_id, outcome)

    async def ListTables(self, request: pb.ListTablesRequest,
                         context: grpc.aio.ServicerContext) -> pb.ListTablesResponse:
        current_principal()
        size = request.page_size or 500
        if size > 1000:
            raise BadRequest("page_size", "at most 1000")
        if request.page_token and not _TOKEN.fullmatch(request.page_token):
            raise BadRequest("page_token", "not a page token of ListTables")
        tables, next_token = await self._app.list_tables(request.page_token, size)
        return pb.ListTablesResponse(tables=tables, next_page_token=next_token)

    async def SetMuckPreference(self, request: pb.SetMuckPreferenceRequest,
                                context: grpc.aio.ServicerContext) -> pb.CommandReply:
        table_id, command_id, fp = _common(request, "SetMuckPreference")
        outcome = await self._app.set_muck(current_principal(), table_id, command_id,
                                           _seat(request.seat), request.muck, fp)
        return self._reply(table_id, outcome)

    # --- seats ---------------------------------------------------------------------------

    async def SitDown(self, request: pb.SitDownRequest,
                      context: grpc.aio.ServicerContext) -> pb.CommandReply:
        table_id, command_id, fp = _common(request, "SitDown")
        outcome = await self._app.sit_down(
            current_principal(), table_id, command_id, _seat(request.seat),
            check_amount(request.buy_in, "buy_in"), fp, _expected(request))
        return self._reply(table_id, outcome)

    async def LeaveSeat(self, request: pb.LeaveSeatRequest,
                        context: grpc.aio.ServicerContext) -> pb.CommandReply:
        table_id, command_id, fp = _common(request, "LeaveSeat")
        outcome = await self._app.leave_seat(current_principal(), table_id, command_id,
                                             _seat(request.seat), fp, _expected(request))
        return self._reply(table_id, outcome)

    async def SitOut(self, request: pb.SitOutRequest,
                     context: grpc.aio.ServicerContext) -> pb.CommandReply:
        table_id, command_id, fp = _common(request, "SitOut")
        outcome = await self._app.sit_out(current_principal(), table_id, command_id,
                                          _seat(request.seat), fp, _expected(request))
        return self._reply(table_id, outcome)

    async def SitIn(self, request: pb.SitInRequest,
                    context: grpc.aio.ServicerContext) -> pb.CommandReply:
        table_id, command_id, fp = _common(request, "SitIn")
        outcome = await self._app.sit_out(current_principal(), table_id, command_id,
                                          _seat(request.seat), fp, _expected(request),
                                          sit_in=True)
        return self._reply(table_id, outcome)

    async def AddChips(self, request: pb.AddChipsRequest,
                       context: grpc.aio.ServicerContext) -> pb.CommandReply:
        table_id, command_id, fp = _common(request, "AddChips")
        if request.amount <= 0:
            raise BadRequest("amount", "must be > 0")
        outcome = await self._app.add_chips(
            current_principal(), table_id, command_id, _seat(request.seat),
            check_amount(request.amount, "amount"), fp, _expected(request))
        return self._reply(table_id, outcome)

    # --- betting -------------------------------------------------------------------------

    async def _applied(self, request: Any, method: str) -> tuple[str, Outcome]:
        command = _BETTING[method](request)
        table_id, command_id, fp = _common(request, method)
        outcome = await self._app.act(current_principal(), table_id, command_id,
                                      _seat(request.seat), command, fp, _expected(request))
        return table_id, outcome

    async def _act(self, request: Any, method: str) -> pb.CommandReply:
        return self._reply(*await self._applied(request, method))

    async def _played(self, method: str, request: Any) -> Played:
        """A betting action of a Play stream, as its unary call (``method``) but answered
        as its reply's parts: the version after it, whether a retry, its records' bytes
        (:func:`table.play.reply_message` makes the message of them, never parsed)."""
        table_id, outcome = await self._applied(request, method)
        return outcome.version, outcome.duplicate, self._records_of(table_id, outcome)

    async def PostBringIn(self, request: pb.PostBringInRequest,
                          context: grpc.aio.ServicerContext) -> pb.CommandReply:
        return await self._act(request, "PostBringIn")

    async def Complete(self, request: pb.CompleteRequest,
                       context: grpc.aio.ServicerContext) -> pb.CommandReply:
        return await self._act(request, "Complete")

    async def Bet(self, request: pb.BetRequest,
                  context: grpc.aio.ServicerContext) -> pb.CommandReply:
        return await self._act(request, "Bet")

    async def Raise(self, request: pb.RaiseRequest,
                    context: grpc.aio.ServicerContext) -> pb.CommandReply:
        return await self._act(request, "Raise")

    async def Call(self, request: pb.CallRequest,
                   context: grpc.aio.ServicerContext) -> pb.CommandReply:
        return await self._act(request, "Call")

    async def Check(self, request: pb.CheckRequest,
                    context: grpc.aio.ServicerContext) -> pb.CommandReply:
        return await self._act(request, "Check")

    async def Fold(self, request: pb.FoldRequest,
                   context: grpc.aio.ServicerContext) -> pb.CommandReply:
        return await self._act(request, "Fold")

    # --- tournament tables ---------------------------------------------------------------

    async def SeatEntrant(self, request: pb.SeatEntrantRequest,
                          context: grpc.aio.ServicerContext) -> pb.CommandReply:
        table_id, command_id, fp = _common(request, "SeatEntrant")
        command = SeatEntrant(_seat(request.seat), check_ident(request.player_id, "player_id"),
                              _stack(request.stack))
        outcome = await self._app.tournament_command(current_principal(), table_id,
                                                     command_id, fp, command)
        return self._reply(table_id, outcome)

    async def UnseatEntrant(self, request: pb.UnseatEntrantRequest,
                            context: grpc.aio.ServicerContext) -> pb.UnseatEntrantReply:
        table_id, command_id, fp = _common(request, "UnseatEntrant")
        seat, player_id = _seat(request.seat), check_ident(request.player_id, "player_id")
        outcome = await self._app.tournament_command(current_principal(), table_id,
                                                     command_id, fp,
                                                     UnseatEntrant(seat, player_id))
        return pb.UnseatEntrantReply(reply=self._reply(table_id, outcome),
                                     stack=unseated_stack(outcome.envelopes, seat))

    async def SetStakes(self, request: pb.SetStakesRequest,
                        context: grpc.aio.ServicerContext) -> pb.CommandReply:
        table_id, command_id, fp = _common(request, "SetStakes")
        stakes = Stakes(small_bet=check_amount(request.small_bet, "small_bet"),
                        big_bet=check_amount(request.big_bet, "big_bet"),
                        ante=check_amount(request.ante, "ante"),
                        bring_in=check_amount(request.bring_in, "bring_in"))
        outcome = await self._app.tournament_command(current_principal(), table_id,
                                                     command_id, fp, SetStakes(stakes))
        return self._reply(table_id, outcome)

    async def PauseDealing(self, request: pb.PauseDealingRequest,
                           context: grpc.aio.ServicerContext) -> pb.CommandReply:
        table_id, command_id, fp = _common(request, "PauseDealing")
        reason = request.reason
        if len(reason) > PAUSE_REASON_MAX or not reason.isprintable():
            raise BadRequest("reason", f"at most {PAUSE_REASON_MAX} printable characters")
        outcome = await self._app.tournament_command(
            current_principal(), table_id, command_id, fp,
            PauseDealing(request.paused, reason, request.one_hand))
        return self._reply(table_id, outcome)

    # --- viewing -------------------------------------------------------------------------

    async def GetTable(self, request: pb.GetTableRequest,
                       context: grpc.aio.ServicerContext) -> pb.TableView:
        table_id = check_ident(request.table_id, "table_id")
        return await self._app.table_view(current_principal(), table_id)

    async def WatchTable(self, request: pb.WatchTableRequest,
                         context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        """The records, each message as bytes (:func:`add_table_service` registers a
        serializer that sends them as they are): every viewer's record of an envelope is
        serialized once for all those who may see it alike (:class:`table.views.Records`)."""
        table_id, after = resume_point(request)
        principal = current_principal()
        actor = (await self._app.routed(table_id)).actor
        viewer = self._app.hand_viewer
        record = self._records.record_bytes
        # Opt-in (issue 35): the records of the caller's own commands written after the watch
        # began are left out (their replies carry them; the envelopes their commands wrote
        # carry the stored id of the command). What was written before comes whole: a client
        # that lost its replies (a restart, another device) catches up on its own actions.
        own = command_key(principal, "") if request.skip_own else None
        live_from = actor.version
        async with self._limiter.hold(principal, context.peer()):
            if not request.batched:
                async for envelope in self._app.watch(principal, table_id, after):
                    if own is None or envelope.sequence <= live_from \
                            or not envelope.command_id.startswith(own):
                        yield record(envelope, *viewer(principal, actor, envelope.hand_number))
                return
            # Opt-in (issue 35): what is ready in one message, the first record's `more`
            # holding the rest; each record as this caller may see it, as above.
            async for batch in self._app.watch_batches(principal, table_id, after):
                if own is not None:
                    batch = [e for e in batch if e.sequence <= live_from
                             or not e.command_id.startswith(own)]
                    if not batch:
                        continue
                yield batch_bytes([record(e, *viewer(principal, actor, e.hand_number))
                                   for e in batch])

    async def GetHandHistory(self, request: pb.GetHandHistoryRequest,
                             context: grpc.aio.ServicerContext) -> pb.HandHistory:
        table_id = check_ident(request.table_id, "table_id")
        principal = current_principal()
        actor = (await self._app.routed(table_id)).actor
        envelopes, complete = await self._app.hand_events(table_id, int(request.hand_number))
        hand = int(request.hand_number)
        viewer, dealt_in = self._app.hand_viewer(principal, actor, hand)
        history = pb.HandHistory(
            table_id=table_id, hand_number=hand, complete=complete,
            events=[record_for(e, viewer, dealt_in) for e in envelopes])
        result = actor.room.results.get(hand)
        if complete and result is not None:
            history.result.CopyFrom(hand_result_to_proto(hand, result))
        return history


    async def ListMyHands(self, request: pb.ListMyHandsRequest,
                          context: grpc.aio.ServicerContext) -> pb.ListMyHandsResponse:
        rows, token = await self._app.my_hands(current_principal(), request.page_token,
                                               request.page_size)
        out = pb.ListMyHandsResponse(next_page_token=token)
        for table_id, hand, ended_at, seat, net, pot in rows:
            line = out.hands.add(table_id=table_id, hand_number=hand, seat=seat, net=net,
                                 pot=pot)
            line.ended_at.FromDatetime(ended_at)
        return out


def _as_sent(message: Any) -> bytes:
    """A response's bytes: a message serialized, bytes as they are."""
    return message if type(message) is bytes else message.SerializeToString()


class _Registrar:
    """Takes what the generated ``add_TableServiceServicer_to_server`` registers."""

    def __init__(self) -> None:
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, _handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, _service: str,
                                       handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self.handlers = handlers


def add_table_service(servicer: TableServicer, server: Any) -> None:
    """The generated registration, but ``WatchTable``'s messages may be given as bytes (the
    records serialized once for all watchers: :class:`table.views.Records`), and ``Play``
    is :class:`table.play.PlayStreams` (its messages as bytes, built from the same)."""
    taken = _Registrar()
    pb_grpc.add_TableServiceServicer_to_server(servicer, taken)  # type: ignore[no-untyped-call]
    handlers = dict(taken.handlers)
    watch = handlers["WatchTable"]
    handlers["WatchTable"] = grpc.unary_stream_rpc_method_handler(
        watch.unary_stream, request_deserializer=watch.request_deserializer,
        response_serializer=_as_sent)
    play = handlers["Play"]
    handlers["Play"] = grpc.stream_stream_rpc_method_handler(
        servicer.play.serve, request_deserializer=play.request_deserializer,
        response_serializer=_as_sent)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME,
                                                                          handlers),))
    server.add_registered_method_handlers(SERVICE_NAME, handlers)


def create_server(settings: Settings, deps: TableDeps) -> tuple[GrpcServer, int]:
    """The table server bound to ``settings.addr`` (not started) and its port."""
    # The interceptors' own rates, callers, metrics and refusal log, shared with each action
    # of a Play stream (counted, logged and limited as a call).
    accounting = Accounting(TABLE_ERRORS, deps.metrics, LogSampler(log_summary),
                            CallRateLimiter.from_env(os.environ),
                            CallerKeys.from_env(os.environ))
    server = create_grpc_server(
        settings.addr,
        [(add_table_service,
          TableServicer(deps.app, StreamLimiter(per_principal=settings.watches_per_player,
                                                per_peer=settings.watches_per_connection),
                        accounting),
          SERVICE_NAME)],
        verifier=deps.verifier,
        errors=TABLE_ERRORS,
        metrics=deps.metrics,
        rates=accounting.rates,
        log_sampler=accounting.sampler,
        callers=accounting.callers,
    )
    address = settings.advertise_addr or f"127.0.0.1:{server.port}"
    deps.app.bind(Ownership(deps.redis, Replica(settings.replica_id or address, address),
                            lease_ms=settings.lease_ms))
    return server, server.port
