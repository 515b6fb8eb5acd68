"""The dealer's metrics over real gRPC and Redis: calls counted per method and status code,
hands started and cards dealt by face, nothing counted twice on a repeated request, and no
label value that is a card, a player id, a table id or a token."""

from __future__ import annotations

import asyncio
import re

import grpc
import pytest

from stud.v1 import dealer_pb2 as pb
from studkit.mapping import card_from_proto
from studkit.metrics import metrics_endpoint, scrape
from studtest.dealer import MakeTable, RunningDealer, deal_request, player
from studtools.redis_server import free_port

pytestmark = pytest.mark.integration

PLAYERS = {1: "ann", 4: "bob", 6: "cat"}
SERVICE = "stud.v1.DealerService"
CARD_TEXT = re.compile(r"(?<![A-Za-z0-9])[2-9TJQKA][cdhs](?![A-Za-z0-9])")
LABELS = {"service", "method", "code", "face", "le",
          "command", "error"}  # stud_redis_*: a closed set of Redis command names (telemetry)


def calls(dealer: RunningDealer, method: str, code: str) -> float:
    return dealer.deps.metrics.sample("stud_grpc_requests_total", service=SERVICE,
                                      method=method, code=code)


async def test_calls_hands_and_cards_are_counted(
    dealer: RunningDealer, make_table: MakeTable
) -> None:
    """A hand started twice and a street dealt twice count one hand and one street's cards
    (three up, six down); each call lands under its code; /metrics shows it all and no label
    value names a card, a player, the table or a token."""
    table = await make_table(PLAYERS)
    metrics = dealer.deps.metrics
    assert metrics.sample("stud_dealer_cards_dealt_total", face="up") == 0
    await table.start_hand()
    await table.dealer.start_hand(table.table_id, 1)  # a retry: the same deck
    request = deal_request(table.table_id, table.hand_number, table.t)
    first = await table.deal()
    again = await table.dealer.deal(request)  # a retry: the same cards
    assert again == first
    cards = {str(card_from_proto(c.card)) for c in first.cards if c.up}
    for name in PLAYERS.values():
        mine = await table.dealer.my_cards(table.table_id, player(name))
        cards |= {str(card_from_proto(c)) for c in (*mine.down, *mine.up)}
    assert len(cards) == 9
    with pytest.raises(grpc.aio.AioRpcError):
        await table.dealer.my_cards(table.table_id, player("eve"))
    with pytest.raises(grpc.aio.AioRpcError):
        await table.dealer.start_hand("t-nowhere", 1)
    with pytest.raises(grpc.aio.AioRpcError):
        await dealer.client.stub.GetMyCards(pb.GetMyCardsRequest(table_id=table.table_id),
                                            timeout=5)

    assert metrics.sample("stud_dealer_hands_started_total") == 1
    assert metrics.sample("stud_dealer_cards_dealt_total", face="up") == 3
    assert metrics.sample("stud_dealer_cards_dealt_total", face="down") == 6
    assert calls(dealer, "StartHand", "OK") == 2
    assert calls(dealer, "StartHand", "NOT_FOUND") == 1
    assert calls(dealer, "Deal", "OK") == 2
    assert calls(dealer, "GetMyCards", "OK") == 3
    assert calls(dealer, "GetMyCards", "PERMISSION_DENIED") == 1
    assert calls(dealer, "GetMyCards", "UNAUTHENTICATED") == 1

    with metrics_endpoint(metrics.registry, free_port(), "127.0.0.1") as endpoint:
        assert endpoint is not None
        samples = await asyncio.to_thread(scrape, endpoint.port)
    scraped = {s.name: s.value for s in samples if not s.labels}
    assert scraped["stud_dealer_hands_started_total"] == 1
    tokens = {table.dealer.metadata(player(n))[0][1] for n in PLAYERS.values()}
    forbidden = cards | set(PLAYERS.values()) | {"eve", table.table_id, "t-nowhere"} | tokens
    for sample in samples:
        assert set(sample.labels) <= LABELS, sample
        for value in sample.labels.values():
            assert value not in forbidden and not CARD_TEXT.search(value), sample
            assert not any(secret in value for secret in tokens), sample


async def test_a_watch_the_client_cancels_counts_as_cancelled(
    dealer: RunningDealer, make_table: MakeTable
) -> None:
    """WatchMyCards is counted when it ends: a client that walks away is CANCELLED."""
    table = await make_table(PLAYERS)
    await table.start_hand()
    await table.deal()
    watch = dealer.client.stub.WatchMyCards(
        pb.WatchMyCardsRequest(table_id=table.table_id),
        metadata=dealer.client.metadata(player("ann")), timeout=10)
    first = await watch.read()
    assert len(first.down) == 2
    # Cancel once the watch waits for new events: a cancel that lands inside a Redis call
    # can be lost on Python 3.11 (asyncio.wait_for), which would leave the watch running
    # until the table's next event.
    for _ in range(100):
        if table.table_id in dealer.deps.tailer.tailed_tables():
            break
        await asyncio.sleep(0.02)
    watch.cancel()
    for _ in range(100):
        if calls(dealer, "WatchMyCards", "CANCELLED") >= 1:
            break
        await asyncio.sleep(0.03)
    assert calls(dealer, "WatchMyCards", "CANCELLED") == 1
    assert calls(dealer, "WatchMyCards", "OK") == 0
