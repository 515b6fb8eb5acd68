"""Stacked decks belong to the test support's rigged dealer (``studtest.rigged_dealer``): the
service's settings refuse the setting (tests/unit/dealer/test_config_and_mapping.py and, for
``python -m dealer``, tests/e2e/dealer/test_test_only_dealer.py), a dealer built without the
rig does not even serve the call, and with it only an operator may stack, and the hand is
dealt as stacked."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from dealer.config import Settings
from rules import TableConfig, parse_cards
from stud.v1 import dealer_pb2 as dpb
from stud.v1 import dealer_pb2_grpc as dpb_grpc
from studkit.auth import Principal, Role
from studkit.mapping import card_from_proto, card_to_proto
from studkit.store import EventStore
from studtest.dealer import RunningDealer, TableRole, running_dealer
from studtest.redis import TestRedis
from studtest.rigged_dealer import RiggedDealing
from studtools.devkeys import DevKeys

from .conftest import service_url

pytestmark = pytest.mark.integration

OPS = Principal(Role.OPERATOR, "ops")


def stack_request(cards: str, table_id: str = "t1") -> dpb.StackDeckRequest:
    return dpb.StackDeckRequest(table_id=table_id, hand_number=1,
                                cards=[card_to_proto(c) for c in parse_cards(cards)])


async def test_a_dealer_without_the_rig_does_not_serve_stack_deck(
        dealer: RunningDealer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{dealer.port}") as channel:
        stub = dpb_grpc.DealerTestingServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.StackDeck(stack_request("As Ks"),
                                 metadata=dealer.client.metadata(OPS), timeout=5)
    assert caught.value.code() is grpc.StatusCode.UNIMPLEMENTED


@pytest.fixture
async def rigged(redis_server: TestRedis, redis_url: str,
                 dev_keys: DevKeys) -> AsyncIterator[RunningDealer]:
    settings = Settings(addr="127.0.0.1:0", auth_keys=dev_keys.key_set(),
                        redis_url=service_url(redis_server, redis_url, "dealer"))
    async with running_dealer(settings, dev_keys, RiggedDealing(stacked=True)) as running:
        yield running


async def test_with_the_rig_an_operator_stacks_a_hand_dealt_as_stacked(
        rigged: RunningDealer, table_events: EventStore) -> None:
    table = TableRole(table_events, rigged.client, "stacked-1", TableConfig(),
                      {1: "ann", 2: "bob"})
    await table.open()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{rigged.port}") as channel:
        stub = dpb_grpc.DealerTestingServiceStub(channel)
        for who, code in ((Principal(Role.PLAYER, "ann"), grpc.StatusCode.PERMISSION_DENIED),
                          (Principal(Role.SERVICE, "table"),
                           grpc.StatusCode.PERMISSION_DENIED)):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.StackDeck(stack_request("As Ks", "stacked-1"),
                                     metadata=rigged.client.metadata(who), timeout=5)
            assert caught.value.code() is code
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.StackDeck(stack_request("As As", "stacked-1"),
                                 metadata=rigged.client.metadata(OPS), timeout=5)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        await stub.StackDeck(stack_request("2c 3c 4c 5c 6c 7c", "stacked-1"),
                             metadata=rigged.client.metadata(OPS), timeout=5)
    await table.start_hand()
    assert table.t.hand.card_commitment == ""  # a stacked deck is not committed card by card
    reply = await table.deal()  # 3rd street: down, down, up to seats 1 and 2 in turn
    up = {c.seat: card_from_proto(c.card) for c in reply.cards if c.up}
    assert up == dict(zip((1, 2), parse_cards("6c 7c"), strict=True))
    ann = await rigged.client.my_cards("stacked-1", Principal(Role.PLAYER, "ann"))
    assert [card_from_proto(c) for c in ann.down] == list(parse_cards("2c 4c"))
