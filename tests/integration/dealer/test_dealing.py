"""Starting hands and dealing, over real gRPC and Redis: the commitment is made once per hand,
each street is exactly the rules' pending deal of the public stream, up cards come with their
values and down cards without, and a repeated request never draws a new card."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from dealer.store import hand_key
from rules import Phase
from studkit.auth import Principal, Role
from studkit.grpc_server import rpc_error_reason
from studkit.mapping import card_from_proto
from studkit.redis_client import connect
from studtest.dealer import TABLE, MakeTable, RunningDealer, deal_request, player

pytestmark = pytest.mark.integration

PLAYERS = {1: "ann", 3: "bob", 8: "cat"}


async def refused(call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    return info.value


class TestServer:
    async def test_health_and_reflection_answer_without_a_token(
        self, dealer: RunningDealer
    ) -> None:
        """Probes need no token; reflection lists the dealer service."""
        async with grpc.aio.insecure_channel(f"127.0.0.1:{dealer.port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            reply = await health.Check(health_pb2.HealthCheckRequest(
                service="stud.v1.DealerService"), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            request = reflection_pb2.ServerReflectionRequest(list_services="")
            names: set[str] = set()
            async for answer in stub.ServerReflectionInfo(iter([request])):
                names |= {s.name for s in answer.list_services_response.service}
            assert "stud.v1.DealerService" in names

    async def test_every_call_needs_a_token(self, dealer: RunningDealer) -> None:
        """A call without a token is UNAUTHENTICATED."""
        from stud.v1 import dealer_pb2 as pb

        error = await refused(dealer.client.stub.StartHand(
            pb.StartHandRequest(table_id="t1", hand_number=1), timeout=5))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED


class TestStartHand:
    async def test_commits_once_per_hand(self, make_table: MakeTable) -> None:
        """The commitment is 64 hex digits; asking again for the same hand returns it
        unchanged (one deck per hand)."""
        table = await make_table(PLAYERS)
        first = await table.dealer.start_hand(table.table_id, 1)
        again = await table.dealer.start_hand(table.table_id, 1)
        assert first == again and len(first) == 64 and int(first, 16) >= 0

    async def test_only_the_next_hand_of_a_known_table(self, make_table: MakeTable) -> None:
        """A hand number that is not the table's next, or an unknown table, is refused."""
        table = await make_table(PLAYERS)
        error = await refused(table.dealer.start_hand(table.table_id, 2))
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert rpc_error_reason(error) == "not_next_hand"
        error = await refused(table.dealer.start_hand("t-nowhere", 1))
        assert error.code() == grpc.StatusCode.NOT_FOUND

    @pytest.mark.parametrize("who", [player("ann"), Principal(Role.SERVICE, "wallet"),
                                     Principal(Role.AUDITOR, "audit")])
    async def test_only_the_table_service_starts_hands(
        self, make_table: MakeTable, who: Principal
    ) -> None:
        """Players, other services and auditors may not start a hand."""
        table = await make_table(PLAYERS)
        error = await refused(table.dealer.start_hand(table.table_id, 1, who=who))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED


class TestDeal:
    async def test_third_street_shows_up_cards_and_hides_down_cards(
        self, make_table: MakeTable
    ) -> None:
        """Two passes of down cards without values, then one pass of up cards with values,
        from the lowest seat round."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        reply = await table.deal()
        assert [(c.seat, c.up) for c in reply.cards] == [
            (1, False), (3, False), (8, False), (1, False), (3, False), (8, False),
            (1, True), (3, True), (8, True)]
        assert [c.HasField("card") for c in reply.cards] == [False] * 6 + [True] * 3
        assert reply.card_index_start == 0 and reply.burned == 0
        assert table.t.hand.phase == Phase.BETTING

    async def test_a_repeated_request_returns_the_same_cards(
        self, make_table: MakeTable, redis_url: str
    ) -> None:
        """Asking again for a street (before or after the table recorded it, or twice at
        once) returns the same cards and draws nothing new."""

        table = await make_table(PLAYERS)
        await table.start_hand()
        request = deal_request(table.table_id, 1, table.t)
        replies = await asyncio.gather(*(table.dealer.deal(request) for _ in range(5)))
        assert all(r == replies[0] for r in replies)
        reply = await table.deal()
        assert reply == replies[0]
        assert await table.dealer.deal(request) == reply
        admin = connect(redis_url)
        try:
            assert await admin.hget(hand_key(table.table_id, 1), "deals") == b"1"
        finally:
            await admin.aclose()

    async def test_the_deal_must_be_the_rules_pending_deal(self, make_table: MakeTable) -> None:
        """Other seats, faces, streets or a wrong starting index are refused: the dealer
        decides from the public stream, not from the caller's word."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        good = deal_request(table.table_id, 1, table.t)
        cases = []
        wrong_seats = type(good)()
        wrong_seats.CopyFrom(good)
        wrong_seats.slots[0].seat = 2
        cases.append(wrong_seats)
        wrong_face = type(good)()
        wrong_face.CopyFrom(good)
        wrong_face.slots[0].up = True
        cases.append(wrong_face)
        wrong_index = type(good)()
        wrong_index.CopyFrom(good)
        wrong_index.card_index_start = 3
        cases.append(wrong_index)
        for request in cases:
            error = await refused(table.dealer.deal(request))
            assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert rpc_error_reason(error) == "wrong_deal"
        await table.deal()
        fourth = type(good)(table_id=table.table_id, hand_number=1, street=4)
        for seat in PLAYERS:
            fourth.slots.add(seat=seat, up=True)
        error = await refused(table.dealer.deal(fourth))  # still betting on 3rd street
        assert rpc_error_reason(error) == "wrong_deal"

    async def test_no_cards_before_the_hand_is_public(self, make_table: MakeTable) -> None:
        """A deck whose hand the table has not started (no HandStarted with its
        commitment) deals nothing."""
        table = await make_table(PLAYERS)
        await table.dealer.start_hand(table.table_id, 1)
        from stud.v1 import dealer_pb2 as pb

        request = pb.DealRequest(table_id=table.table_id, hand_number=1, street=3,
                                 slots=[pb.DealSlot(seat=1)])
        error = await refused(table.dealer.deal(request))
        assert rpc_error_reason(error) == "not_current_hand"

    @pytest.mark.parametrize("who", [player("ann"), Principal(Role.SERVICE, "wallet"),
                                     Principal(Role.SERVICE, "dealer")])
    async def test_only_the_table_service_deals(self, make_table: MakeTable,
                                                who: Principal) -> None:
        """Neither a player's token nor another service's (each signed with its own valid
        key) can draw cards or turn hands up."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        request = deal_request(table.table_id, 1, table.t)
        error = await refused(table.dealer.deal(request, who=who))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        error = await refused(table.dealer.reveal(table.table_id, 1, who=who))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED

    async def test_a_whole_hand_deals_fifty_two_distinct_cards_at_most(
        self, make_table: MakeTable
    ) -> None:
        """Eight players to 7th street: 48 own cards and one community card, all distinct,
        as the public record shows them."""
        players = {s: f"p{s}" for s in range(1, 9)}
        table = await make_table(players)
        await table.play_hand()
        up = [card_from_proto(c.card) for r in table.replies for c in r.cards if c.up]
        assert len(up) == len(set(up)) == 8 * 4 + 1
        assert table.t.hand.community is not None
        assert table.t.hand.is_over
        assert TABLE.name == "table"
