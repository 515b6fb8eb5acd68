"""The dealer's gRPC face: a thin servicer (proto -> app -> proto) and
``create_server(settings, deps) -> (server, port)``. Errors are raised, never aborted here:
``errors.DEALER_ERRORS`` maps them in the interceptor.

``WatchMyCards`` is bounded: at most ``DEALER_MAX_STREAMS_PER_PLAYER`` open per player and
``DEALER_MAX_STREAMS_PER_CONNECTION`` per client connection (then ``RESOURCE_EXHAUSTED``,
``too_many_streams``), only on tables with a public record (else ``NOT_FOUND``
``unknown_table``) where the caller has a seat or a place in the hand being played (else, at
once or as soon as they leave, ``FAILED_PRECONDITION`` ``not_seated``), and it tails
the table through ``deps.tailer``, which has a Redis pool of its own, so watchers never hold
the connections that dealing needs. Like every stream it ends with ``UNAUTHENTICATED``
(``token_expired``) when the caller's token expires."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Final

import grpc

from dealer import mapping
from dealer.bootstrap import DealerDeps
from dealer.config import Settings
from dealer.errors import DEALER_ERRORS
from rules.events import DownCardDealt, HandEnded, HandStarted, PlayerLeft, UpCardDealt
from stud.v1 import dealer_pb2 as pb
from stud.v1 import dealer_pb2_grpc as pb_grpc
from studkit.grpc_server import (
    GrpcServer,
    ServiceRegistration,
    create_grpc_server,
    current_principal,
)
from studkit.limits import StreamLimiter
from studkit.store import EventStore, parse_stream_id
from studkit.tailer import StreamTailer

SERVICE_NAME: Final = pb.DESCRIPTOR.services_by_name["DealerService"].full_name
CARD_EVENTS: Final = frozenset(
    cls.__name__ for cls in (HandStarted, DownCardDealt, UpCardDealt)
)
"""Event types (envelope ``event_type``) after which a player's own cards may have changed."""
WATCH_EVENTS: Final = CARD_EVENTS | frozenset(
    cls.__name__ for cls in (PlayerLeft, HandEnded)
)
"""... or after which the watcher may have no seat and no hand left (the stream then ends,
``FAILED_PRECONDITION`` ``not_seated``)."""


class DealerServicer(pb_grpc.DealerServiceServicer):
    """One method per RPC, each a translation around one app call."""

    def __init__(self, deps: DealerDeps, limiter: StreamLimiter) -> None:
        self._app = deps.app
        self._events: EventStore = deps.events
        self._tailer: StreamTailer = deps.tailer
        self.limiter = limiter

    async def StartHand(
        self, request: pb.StartHandRequest, context: grpc.aio.ServicerContext
    ) -> pb.StartHandResponse:
        started = await self._app.start_hand(
            current_principal(), mapping.table_id(request.table_id),
            mapping.hand_number(request.hand_number))
        return pb.StartHandResponse(commitment=started.commitment,
                                    card_commitment=started.card_commitment)

    async def Deal(
        self, request: pb.DealRequest, context: grpc.aio.ServicerContext
    ) -> pb.DealResponse:
        first = request.card_index_start if request.HasField("card_index_start") else None
        deal = await self._app.deal(
            current_principal(), mapping.table_id(request.table_id),
            mapping.hand_number(request.hand_number), mapping.plan_from_proto(request), first)
        return mapping.deal_to_proto(deal)

    async def GetMyCards(
        self, request: pb.GetMyCardsRequest, context: grpc.aio.ServicerContext
    ) -> pb.MyCards:
        cards = await self._app.own_cards(
            current_principal(), mapping.table_id(request.table_id),
            mapping.hand_number(request.hand_number, latest_ok=True))
        return mapping.own_cards_to_proto(cards)

    async def WatchMyCards(
        self, request: pb.WatchMyCardsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.MyCards]:
        table_id = mapping.table_id(request.table_id)
        principal = current_principal()
        async with self.limiter.hold(principal, context.peer()):
            version = await self._events.version(table_id)

            async def changes() -> AsyncIterator[int | None]:
                yield None  # the cards as they are now
                async with self._tailer.subscribe(table_id, after_id=f"0-{version}") as events:
                    async for stored in events:
                        if stored.envelope.event_type in WATCH_EVENTS:
                            yield parse_stream_id(stored.stream_id)[1]  # its version

            async for cards in self._app.watch_own_cards(principal, table_id, changes()):
                yield mapping.own_cards_to_proto(cards)

    async def Reveal(
        self, request: pb.RevealRequest, context: grpc.aio.ServicerContext
    ) -> pb.RevealResponse:
        hands = await self._app.reveal(
            current_principal(), mapping.table_id(request.table_id),
            mapping.hand_number(request.hand_number), mapping.seats(request.seats))
        return mapping.reveal_to_proto(hands)

    async def CommitSeed(
        self, request: pb.CommitSeedRequest, context: grpc.aio.ServicerContext
    ) -> pb.CommitSeedResponse:
        await self._app.commit_seed(
            current_principal(), mapping.table_id(request.table_id),
            mapping.hand_number(request.hand_number), mapping.commitment(request.commitment))
        return pb.CommitSeedResponse()

    async def OpenSeed(
        self, request: pb.OpenSeedRequest, context: grpc.aio.ServicerContext
    ) -> pb.OpenSeedResponse:
        await self._app.open_seed(
            current_principal(), mapping.table_id(request.table_id),
            mapping.hand_number(request.hand_number), mapping.seed(request.seed))
        return pb.OpenSeedResponse()

    async def GetHandProof(
        self, request: pb.GetHandProofRequest, context: grpc.aio.ServicerContext
    ) -> pb.HandProof:
        table = mapping.table_id(request.table_id)
        number = mapping.hand_number(request.hand_number)
        proof = await self._app.hand_proof(current_principal(), table, number)
        return mapping.hand_proof_to_proto(table, number, proof)

    async def GetAudit(
        self, request: pb.GetAuditRequest, context: grpc.aio.ServicerContext
    ) -> pb.HandAudit:
        audit = await self._app.audit(
            current_principal(), mapping.table_id(request.table_id),
            mapping.hand_number(request.hand_number))
        return mapping.audit_to_proto(audit)


    async def ReleaseHands(
        self, request: pb.ReleaseHandsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReleaseHandsResponse:
        released, deleted = await self._app.release_hands(
            current_principal(), mapping.table_id(request.table_id),
            mapping.hand_number(request.through_hand, "through_hand"))
        return pb.ReleaseHandsResponse(released_through=released, deleted=deleted)


def create_server(settings: Settings, deps: DealerDeps,
                  extra_services: Sequence[ServiceRegistration] = ()
                  ) -> tuple[GrpcServer, int]:
    """The dealer server bound to ``settings.addr`` (not started) and its port; calls are
    counted in ``deps.metrics`` (served by ``__main__`` on ``settings.metrics_port``).
    ``python -m dealer`` registers the ``DealerService`` alone; ``extra_services`` are the
    test support's (``DealerTestingService``, in ``studtest/rigged_dealer.py``)."""
    limiter = StreamLimiter(per_principal=settings.max_streams_per_player,
                            per_peer=settings.max_streams_per_connection)
    servicer = DealerServicer(deps, limiter)
    services: list[ServiceRegistration] = [
        (pb_grpc.add_DealerServiceServicer_to_server, servicer, SERVICE_NAME),
        *extra_services]
    server = create_grpc_server(
        settings.addr,
        services,
        verifier=deps.verifier,
        errors=DEALER_ERRORS,
        metrics=deps.metrics,
    )
    return server, server.port
