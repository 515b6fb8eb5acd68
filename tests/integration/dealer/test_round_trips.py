"""What a table's hot calls cost the dealer in Redis round trips, counted on the real Redis
(every request redis-py writes, a pipeline's commands together): a Deal reads the hand and
the table's stream in one MULTI, so a street is two round trips (the hand with the stream,
the record), a per-card hand's first street three (the hand with the stream, the seeds'
freeze, which answers the hand as frozen, the record), a repeated Deal one, a Reveal one
(issue 35: a street was three, a Reveal two, the hand read on its own; a hand's first street
four, the hand and the stream read again after the freeze)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from redis.asyncio.connection import AbstractConnection

from rules import Phase
from rules.commands import DealStreet, DealtCard
from studkit.mapping import card_from_proto
from studtest.dealer import MakeTable, RunningDealer, deal_request
from studtest.redis import TestRedis

pytestmark = pytest.mark.integration

PLAYERS = {1: "ann", 3: "bob", 8: "cat"}


@contextlib.contextmanager
def round_trips(monkeypatch: pytest.MonkeyPatch, dealer: RunningDealer
                ) -> Iterator[list[int]]:
    """Count the requests the dealer's own Redis clients write inside the block (its store's
    and its event store's; not another fixture's background reads in this process, which
    made a repeated Deal count 2 once in a loaded CI run)."""
    count = [0]
    send = AbstractConnection.send_packed_command
    pools = [dealer.deps.store._redis.connection_pool,
             dealer.deps.events._client.connection_pool]

    async def counted(self: AbstractConnection, command: Any, check_health: bool = True
                      ) -> None:
        if any(self in pool._in_use_connections for pool in pools):
            count[0] += 1
        await send(self, command, check_health)

    with monkeypatch.context() as patch:
        patch.setattr(AbstractConnection, "send_packed_command", counted)
        yield count


async def test_a_deal_reads_the_hand_and_the_stream_in_one_round_trip(
    make_table: MakeTable, redis_server: TestRedis, monkeypatch: pytest.MonkeyPatch,
    dealer: RunningDealer) -> None:
    if redis_server.cluster:
        pytest.skip("a cluster client adds its own requests (slots, redirections)")
    table = await make_table(PLAYERS)
    await table.start_hand()
    streets: list[int] = []
    while not table.t.hand.is_over:
        phase = table.t.hand.phase
        if phase == Phase.DEALING:
            request = deal_request(table.table_id, table.hand_number, table.t)
            with round_trips(monkeypatch, dealer) as count:
                reply = await table.dealer.deal(request)
            streets.append(count[0])
            with round_trips(monkeypatch, dealer) as count:
                again = await table.dealer.deal(request)  # a repeat: the cards recorded
            assert count[0] == 1 and again == reply
            await table.apply(DealStreet(
                cards=tuple(DealtCard(seat=c.seat, up=c.up,
                                      card=card_from_proto(c.card) if c.up else None)
                            for c in reply.cards),
                burned=reply.burned, reshuffled_burns=reply.reshuffled_burns))
        elif phase == Phase.SHOWDOWN:
            with round_trips(monkeypatch, dealer) as count:
                await table.revealed()
            assert count[0] == 1
            await table.step()
        else:
            await table.step()
    assert len(streets) == 5
    first, *later = streets
    # The hand with the stream, the freeze (answering the hand as frozen), the record (whose
    # script this server may run for the first time: EVALSHA refused, SCRIPT LOAD, EVALSHA).
    assert first <= 5
    assert later == [2, 2, 2, 2], streets


async def test_a_hands_first_street_reads_the_frozen_hand_with_the_freeze(
    make_table: MakeTable, redis_server: TestRedis, monkeypatch: pytest.MonkeyPatch,
    dealer: RunningDealer) -> None:
    """A per-card hand's first street: the hand with the stream, the seeds' freeze (which
    answers the hand as frozen), the record; three round trips, the scripts loaded by a
    hand played before (four when the hand was read again after the freeze)."""
    if redis_server.cluster:
        pytest.skip("a cluster client adds its own requests (slots, redirections)")
    table = await make_table(PLAYERS)
    await table.play_hand()
    await table.start_hand()
    assert table.t.hand.phase == Phase.DEALING and table.t.hand.card_commitment
    with round_trips(monkeypatch, dealer) as count:
        await table.deal()
    assert count[0] == 3
