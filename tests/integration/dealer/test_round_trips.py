"""What a table's hot calls cost the dealer in Redis round trips, counted on the real Redis
(every request redis-py writes, a pipeline's commands together): a Deal reads the hand and
the table's stream in one MULTI, so a street is two round trips (the hand with the stream,
the record), a per-card hand's first street too (the record freezes the seeds it was drawn
from) when no seed opening is awaited, a repeated Deal one, a Reveal one (issue 35: a street
was three, a Reveal two, the hand read on its own; a hand's first street four, the hand and
the stream read again after the freeze, then three, the freeze a call of its own)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from redis.asyncio.connection import AbstractConnection

from rules import Phase
from rules.commands import DealStreet, DealtCard
from studkit.cardproof import seed_commitment
from studkit.mapping import card_from_proto
from studtest.dealer import MakeTable, RunningDealer, deal_request, player
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
    # The hand with the stream, the record freezing the seeds (whose script this server may
    # run for the first time: EVALSHA refused, SCRIPT LOAD, EVALSHA).
    assert first <= 4
    assert later == [2, 2, 2, 2], streets


async def test_a_hands_first_street_freezes_the_seeds_with_its_record(
    make_table: MakeTable, redis_server: TestRedis, monkeypatch: pytest.MonkeyPatch,
    dealer: RunningDealer) -> None:
    """A per-card hand's first street, no seed opening awaited: the hand with the stream,
    the record, which freezes the seeds; two round trips, the scripts loaded by a hand
    played before (three while the seeds' freeze was a call of its own, four when the hand
    was read again after it)."""
    if redis_server.cluster:
        pytest.skip("a cluster client adds its own requests (slots, redirections)")
    table = await make_table(PLAYERS)
    await table.play_hand()
    await table.start_hand()
    assert table.t.hand.phase == Phase.DEALING and table.t.hand.card_commitment
    with round_trips(monkeypatch, dealer) as count:
        await table.deal()
    assert count[0] == 2
    stored = await dealer.deps.store.load_hand(table.table_id, table.hand_number)
    assert stored is not None and stored.fair is not None and stored.fair.frozen


async def test_a_players_seed_opening_and_proof_read_the_hand_with_the_stream(
    make_table: MakeTable, redis_server: TestRedis, monkeypatch: pytest.MonkeyPatch,
    dealer: RunningDealer) -> None:
    """OpenSeed reads the hand with the table's stream (one round trip) and then takes the
    seed (one); GetHandProof reads them together, one round trip (issue 35: the hand read on
    its own after the stream, three and two)."""
    if redis_server.cluster:
        pytest.skip("a cluster client adds its own requests (slots, redirections)")
    table = await make_table(PLAYERS)
    await table.play_hand()  # the scripts loaded
    seed = bytes(range(32))
    await dealer.client.commit_seed(table.table_id, 2, seed_commitment(
        table.table_id, 2, "ann", seed), player("ann"))
    await table.start_hand()
    with round_trips(monkeypatch, dealer) as count:
        await dealer.client.open_seed(table.table_id, 2, seed, player("ann"))
    assert count[0] == 2
    await table.play_until(Phase.COMPLETE)
    with round_trips(monkeypatch, dealer) as count:
        proof = await dealer.client.hand_proof(table.table_id, 2, player("bob"))
    assert count[0] == 1
    assert proof.complete and [(s.player_id, s.withheld) for s in proof.seeds] == [
        ("ann", False)]


async def test_a_players_cards_read_the_hand_with_the_stream(
    make_table: MakeTable, redis_server: TestRedis, monkeypatch: pytest.MonkeyPatch,
    dealer: RunningDealer) -> None:
    """GetMyCards reads the hand with the table's stream, by its number or as the latest
    (the cached view's): one round trip (issue 35: two); a hand that is no longer the latest
    is read again on its own, and every answer is the player's cards."""
    if redis_server.cluster:
        pytest.skip("a cluster client adds its own requests (slots, redirections)")
    table = await make_table(PLAYERS)
    await table.play_hand()
    await table.start_hand()
    await table.deal()
    answers = []
    for hand in (2, 0, 1):
        with round_trips(monkeypatch, dealer) as count:
            answers.append(await dealer.client.my_cards(table.table_id, player("ann"), hand))
        assert count[0] == 1, hand
    assert answers[0] == answers[1] and answers[0].hand_number == 2
    assert (len(answers[0].down), len(answers[0].up)) == (2, 1)
    assert answers[2].hand_number == 1 and len(answers[2].down) == 3
    await table.play_until(Phase.COMPLETE)
    await table.play_hand()  # hand 3 started and over: the cached view says 3, asked for 0
    with round_trips(monkeypatch, dealer) as count:
        latest = await dealer.client.my_cards(table.table_id, player("ann"))
    assert count[0] == 1 and latest.hand_number == 3 and len(latest.down) == 3
