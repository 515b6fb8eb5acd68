"""The tournament's port to the table service and its gRPC adapter (as ``service:tournament``):
open a tournament table, seat and unseat entrants, set the stakes, pause or resume dealing,
close, and read what the tournament needs (whether a hand is in progress, whether dealing is
paused, the last hand started, each finished hand's stacks at its start and end).

Every command carries a command id the caller derived from the tournament's log
(``clients.key``), so a retry after a crash is answered from the table's log.

With several table replicas, a call that reaches a replica not owning the table is refused
``not_owner`` naming the owner's address (ErrorInfo metadata ``owner``); the client sends the
same request there (the same command id) and remembers where each table answered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc

from rules import TableConfig
from stud.v1 import table_pb2 as tpb
from stud.v1 import table_pb2_grpc as tpb_grpc
from studkit.grpc_errors import rpc_error_info
from studkit.grpc_server import rpc_error_reason
from studkit.mapping import config_to_proto
from tournament.clients import RETRYABLE, Refused, Unavailable
from tournament.events import Pace
from tournament.structure import Level

Metadata = Callable[[], Sequence[tuple[str, str]]]
Connect = Callable[[str], grpc.aio.Channel]
NO_PACE = Pace()
"""A tournament that names no pace: the service's settings."""
REDIRECTS = 3
"""How many ``not_owner`` redirects one call follows (tables change hands while replicas
come and go); past them the refusal is an outage, tried again on the next round."""


@dataclass(frozen=True, slots=True)
class TableState:
    exists: bool
    hand_in_progress: bool
    paused: bool
    hands_started: int
    seats: dict[int, tuple[str, int]]


@dataclass(frozen=True, slots=True)
class HandStacks:
    hand_number: int
    start: tuple[tuple[int, int], ...]
    end: tuple[tuple[int, int], ...]


class TableClient:
    def __init__(self, channel: grpc.aio.Channel, metadata: Metadata, timeout_s: float,
                 settings: tpb.TableSettings | None = None,
                 connect: Connect | None = None) -> None:
        self._stub = tpb_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
        self._metadata = metadata
        self._timeout = timeout_s
        self._settings = settings
        # Looked up at each call (not bound at import): traced channels when tracing is on.
        self._connect: Connect = connect or (lambda target: grpc.aio.insecure_channel(target))
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, tpb_grpc.TableServiceStub] = {}
        self._routes: dict[str, str] = {}
        """table id -> the owner's address a ``not_owner`` refusal named."""

    def _stub_for(self, table_id: str) -> tpb_grpc.TableServiceStub:
        address = self._routes.get(table_id, "")
        if not address:
            return self._stub
        if address not in self._stubs:
            self._channels[address] = self._connect(address)
            self._stubs[address] = tpb_grpc.TableServiceStub(  # type: ignore[no-untyped-call]
                self._channels[address])
        return self._stubs[address]

    async def aclose(self) -> None:
        """Close the channels opened for redirects (the first one is the caller's)."""
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
        self._stubs.clear()

    async def _call(self, method: str, request: object) -> object:
        table_id = str(getattr(request, "table_id", ""))
        for _attempt in range(REDIRECTS + 1):
            try:
                return await getattr(self._stub_for(table_id), method)(
                    request, metadata=self._metadata(), timeout=self._timeout)
            except grpc.aio.AioRpcError as exc:
                if exc.code() in RETRYABLE:
                    self._routes.pop(table_id, None)  # the owner may be gone: ask anew
                    raise Unavailable(f"table: {exc.code().name}") from exc
                reason = rpc_error_reason(exc) or exc.code().name.lower()
                if reason != "not_owner":
                    raise Refused(reason) from exc
                info = rpc_error_info(exc)
                owner = info.metadata.get("owner", "") if info is not None else ""
                if not owner or owner == self._routes.get(table_id):
                    self._routes.pop(table_id, None)
                    raise Unavailable(f"table {table_id}: no owner to go to") from exc
                self._routes[table_id] = owner
        raise Unavailable(f"table {table_id}: redirected {REDIRECTS} times")

    async def open(self, tournament_id: str, table_id: str, seats: int, level: Level,
                   command_id: str, pace: Pace = NO_PACE) -> None:
        """Open a tournament table with the service's settings, the tournament's ``pace``
        over them (a field of it 0: the service's)."""
        config = TableConfig(seats=seats, min_players=2, ante=level.ante,
                             bring_in=level.bring_in, small_bet=level.small_bet,
                             big_bet=level.big_bet)
        request = tpb.OpenTableRequest(table_id=table_id, command_id=command_id,
                                       config=config_to_proto(config),
                                       tournament_id=tournament_id)
        if self._settings is not None:
            request.settings.CopyFrom(self._settings)
        if pace.action_time_s:
            request.settings.action_time_s = pace.action_time_s
        if pace.time_bank_s:
            request.settings.time_bank_s = pace.time_bank_s
        if pace.next_hand_delay_ms:
            request.settings.next_hand_delay_ms = pace.next_hand_delay_ms
            request.settings.next_hand_delay_set = True
        try:
            await self._call("OpenTable", request)
        except Refused as refused:
            if refused.reason != "already_exists" and refused.reason != "table_exists":
                raise

    async def seat(self, table_id: str, seat: int, player_id: str, stack: int,
                   command_id: str) -> None:
        await self._call("SeatEntrant", tpb.SeatEntrantRequest(
            table_id=table_id, seat=seat, player_id=player_id, stack=stack,
            command_id=command_id))

    async def unseat(self, table_id: str, seat: int, player_id: str, command_id: str) -> int:
        reply = await self._call("UnseatEntrant", tpb.UnseatEntrantRequest(
            table_id=table_id, seat=seat, player_id=player_id, command_id=command_id))
        assert isinstance(reply, tpb.UnseatEntrantReply)
        return int(reply.stack)

    async def stakes(self, table_id: str, level: Level, command_id: str) -> None:
        await self._call("SetStakes", tpb.SetStakesRequest(
            table_id=table_id, command_id=command_id, ante=level.ante,
            bring_in=level.bring_in, small_bet=level.small_bet, big_bet=level.big_bet))

    async def pause(self, table_id: str, paused: bool, reason: str, command_id: str,
                    one_hand: bool = False) -> None:
        await self._call("PauseDealing", tpb.PauseDealingRequest(
            table_id=table_id, command_id=command_id, paused=paused, reason=reason[:64],
            one_hand=one_hand))

    async def close(self, table_id: str, command_id: str) -> None:
        await self._call("CloseTable", tpb.CloseTableRequest(table_id=table_id,
                                                             command_id=command_id))

    async def state(self, table_id: str) -> TableState:
        try:
            view = await self._call("GetTable", tpb.GetTableRequest(table_id=table_id))
        except Refused as refused:
            if refused.reason in ("not_found", "no_table", "unknown_table"):
                return TableState(False, False, False, 0, {})
            raise
        assert isinstance(view, tpb.TableView)
        return TableState(True, view.hand_in_progress, view.dealing_paused,
                          view.hands_started,
                          {s.seat: (s.player_id, s.stack) for s in view.seats})

    async def hand(self, table_id: str, hand_number: int) -> HandStacks | None:
        """A finished hand's stacks (None while it is not finished)."""
        history = await self._call("GetHandHistory", tpb.GetHandHistoryRequest(
            table_id=table_id, hand_number=hand_number))
        assert isinstance(history, tpb.HandHistory)
        if not history.complete or not history.HasField("result"):
            return None
        seats = history.result.seats
        return HandStacks(hand_number, tuple((s.seat, s.stack_start) for s in seats),
                          tuple((s.seat, s.stack_end) for s in seats))
