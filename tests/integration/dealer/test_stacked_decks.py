"""Stacked decks are a test setting: a production configuration refuses to start with it, a
dealer without it does not even serve the call, and with it only an operator may stack."""

from __future__ import annotations

import grpc
import pytest

from dealer.config import Settings
from rules import parse_cards
from stud.v1 import dealer_pb2 as dpb
from stud.v1 import dealer_pb2_grpc as dpb_grpc
from studkit.auth import Principal, Role
from studkit.mapping import card_to_proto
from studtest.dealer import RunningDealer
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration


def test_production_configuration_refuses_stacked_decks(dev_keys: DevKeys) -> None:
    env = {**dev_keys.env("dealer"), "DEALER_STACKED_DECKS": "1"}
    for stud_env in ("", "prod", "dev", "production"):
        with pytest.raises(RuntimeError, match="STUD_ENV=test"):
            Settings.from_env({**env, "STUD_ENV": stud_env})
    assert Settings.from_env({**env, "STUD_ENV": "test"}).stacked_decks
    assert not Settings.from_env(dev_keys.env("dealer")).stacked_decks


async def test_a_dealer_without_the_setting_does_not_serve_stack_deck(
        dealer: RunningDealer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{dealer.port}") as channel:
        stub = dpb_grpc.DealerTestingServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.StackDeck(dpb.StackDeckRequest(
                table_id="t1", hand_number=1,
                cards=[card_to_proto(c) for c in parse_cards("As Ks")]),
                metadata=dealer.client.metadata(Principal(Role.OPERATOR, "ops")), timeout=5)
    assert caught.value.code() is grpc.StatusCode.UNIMPLEMENTED
