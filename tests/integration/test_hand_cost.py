"""What one hand costs the room, counted from outside the services (``studtest.handcost``:
taps on each service's Redis connection and on the table's calls to the dealer and the
wallet, and the watchers' own streams), for one stacked-deck hand of three players who only
check, call and bring in: a regression in round trips, appends or calls fails here, not as a
slower benchmark (``bench/bench_hand_cost.py`` prints the same counts averaged over random
hands). Counts, not times.

The counted cycle runs from hand 2 waiting for its bring-in to hand 3 waiting for its own
(hand 1 starts as soon as two players sit): hand 2's actions, its showdown and settlement,
and hand 3's start and deal; each end of the window waits for a second with nothing moving.
The replica's ownership round runs every third of its lease, made long here so that it
stays out of the window (a cost of time, not of the hand); the wallet's ledger sum runs at
its start and then every 30 s."""

from __future__ import annotations

import random

import grpc
import pytest

from rules import Card
from stud.v1 import dealer_pb2 as dpb
from stud.v1 import dealer_pb2_grpc as dpb_grpc
from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from studkit.auth import TokenBook
from studkit.mapping import card_to_proto
from studtest.handcost import (
    APPEND_SHA,
    HandCost,
    RedisCounts,
    RespRequests,
    Watchers,
    measure_table,
    passive,
    tapped_room,
)
from studtest.redis import TestRedis
from studtest.rigged_dealer import RiggedDealing
from studtest.table import OPERATOR, TableClient, fast_settings, player
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration

SEATS = {1: "ann", 3: "bob", 6: "cat"}
DECK = [Card.parse(c) for c in (
    # third street: two down and one up for each seat in order (1, 3, 6)
    "As", "Kd", "2c",  "Ah", "Kc", "3d", "Ad", "Qs", "4h",
    "7c", "7d", "7h", "8c", "8d", "8h", "9c", "9d", "9h", "Tc", "Td", "Th", "Jc", "Jd", "Jh")]


async def _one_hand(redis_server: TestRedis, redis_url: str, keys: DevKeys,
                    play: bool = False) -> HandCost:
    if redis_server.server is None or redis_server.cluster:
        pytest.skip("counts a single redis-server's users' traffic")
    server = redis_server.server
    # The replica's ownership round (every third of the lease) is time's cost, not the hand's.
    async with tapped_room(server.url_for, keys, rig=RiggedDealing(stacked=True),
                           lease_ms=60_000) as room, \
            grpc.aio.insecure_channel(room.table_target) as channel, \
            grpc.aio.insecure_channel(f"127.0.0.1:{room.dealer_port}") as dealer_channel, \
            Watchers(room.table_target, TokenBook(keys), batched=True) as watchers:
        stub = pb_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
        client = TableClient(stub, TokenBook(keys))
        table_id = await client.open_table("cost-1", settings=fast_settings(
            action_time_s=3600))
        testing = dpb_grpc.DealerTestingServiceStub(dealer_channel)  # type: ignore[no-untyped-call]
        for hand in (1, 2, 3):
            await testing.StackDeck(dpb.StackDeckRequest(
                table_id=table_id, hand_number=hand, cards=[card_to_proto(c) for c in DECK]),
                metadata=client.md(OPERATOR), timeout=10)
        for seat, name in SEATS.items():
            await room.wallet.client.create_account(name)
            await room.wallet.client.deposit(name, 100_000, f"dep-{name}")
            await client.call("SitDown", pb.SitDownRequest(
                table_id=table_id, seat=seat, buy_in=10_000), player(name))
        return await measure_table(stub, client.tokens, room.taps, watchers, table_id,
                                   SEATS, 1, passive, random.Random(1), quiet_s=1.0,
                                   play=play)


PINNED = {
    # Hand 2's 15 actions (bring-in, calls, checks to the river) and the room's own work.
    "actions": 15,
    "appends": 23,  # 8 beyond the actions: 5 streets, the showdown, the end, the next start
    "events": 47,
    # The table's one round trip to Redis per append, nothing else.
    "table round trips": 23, "table EVALSHA append": 23,
    # A street is 2 round trips (the hand and the stream in one read, the record), StartHand
    # 2 (the same read, the deck's script: a stacked deck has no seeds to close or freeze),
    # Reveal 1 (tests/integration/dealer/test_round_trips.py counts them one by one); 20
    # while the hand's record was read on its own (issue 35). The read is one read-only
    # script call (dealer.store.TableReader), where it was a MULTI of GET, GET, XRANGE and
    # HGETALL (issue 35).
    "dealer round trips": 13,
    "dealer EVALSHA create_hand": 1, "dealer EVALSHA record_deal": 5,
    "dealer EVALSHA_RO read_table": 7,
    # The settlement's script alone, which also reads which settled players are excluded now
    # (issue 34) and the table's seats and escrows after it, which the reply carries
    # (table_seats). 3 round trips from ca82450 (Reconcile's MULTI, the script, an HMGET of
    # the exclusions), 2 with the exclusions in the script, 1 with the seats (issue 35).
    "wallet round trips": 1,
    "wallet EVALSHA apply": 1,
    "store round trips": 37,
    "dealer calls": 7, "dealer StartHand": 1, "dealer Deal": 5, "dealer Reveal": 1,
    # The settlement's reply carries the table's escrows after it: no Reconcile call while
    # they agree with the stacks (2 calls, SettleHand and Reconcile, until issue 35).
    "wallet calls": 1, "wallet SettleHand": 1,
    # Every game event to each of the four watchers (the room events are never sent).
    "watch records": 184, "watch records rail": 46, "watch records seat 1": 46,
    "watch records seat 3": 46, "watch records seat 6": 46,
    # ... in one message per append that has game events in it, on watches that ask for
    # batches (WatchTableRequest.batched): 46 messages each before it (issue 35). An append
    # the driver follows at once (the dealer's cards, the showdown) rides with that next one:
    # the 4 street-closing actions, the river's last with the showdown; never a hand's start
    # (the players open their seeds when they see it) (22 each before that, issue 35).
    "watch messages": 68, "watch messages rail": 17, "watch messages seat 1": 17,
    "watch messages seat 3": 17, "watch messages seat 6": 17,
}
"""What the counted cycle cost on 2026-12-05 (issue 35's starting point). A cut lowers a
figure here in the same commit; a rise is a regression unless its commit says why (here:
the comments)."""


async def test_one_stacked_hand_costs_what_it_cost(redis_server: TestRedis, redis_url: str,
                                                   dev_keys: DevKeys) -> None:
    cost = await _one_hand(redis_server, redis_url, dev_keys)
    totals = cost.totals()
    assert 40 * totals["events"] < totals.pop("bytes appended") < 400 * totals["events"]
    assert totals == PINNED


async def test_the_same_hand_over_play_streams(redis_server: TestRedis, redis_url: str,
                                               dev_keys: DevKeys) -> None:
    """The same hand with each player on a Play stream, the driver acting over the seat's
    (issue 35): the room does the same work (every count pinned above but the players'
    messages), each player gets every record (its own actions' in their replies) and fewer
    messages with the replies than its watch and its unary replies together."""
    cost = await _one_hand(redis_server, redis_url, dev_keys, play=True)
    totals = cost.totals()
    totals.pop("bytes appended")
    messages = {k: totals.pop(k) for k in list(totals) if k.startswith("watch messages")}
    assert totals == {k: v for k, v in PINNED.items() if not k.startswith("watch messages")}
    assert messages == PLAY_MESSAGES
    seats = [f"watch messages seat {seat}" for seat in SEATS]
    assert sum(messages[k] for k in seats) < sum(PINNED[k] for k in seats) + PINNED["actions"]


PLAY_MESSAGES = {
    # The rail watches as before. A player's stream carries its records and its replies (a
    # message each): 56 messages to the three players, where their watches and the unary
    # replies were 51 + 15 = 66 (the same in three runs: 2026-12-06, issue 35's Play).
    "watch messages": 73, "watch messages rail": 17, "watch messages seat 1": 17,
    "watch messages seat 3": 18, "watch messages seat 6": 21,
}


def test_the_tap_reads_requests_split_anywhere() -> None:
    """A request may arrive in any number of pieces; each command is counted once, whole."""
    wire = (b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
            b"*3\r\n$7\r\nEVALSHA\r\n$40\r\n" + APPEND_SHA + b"\r\n$1\r\n0\r\n")
    for cut in range(1, len(wire)):
        requests = RespRequests()
        commands = requests.feed(wire[:cut]) + requests.feed(wire[cut:])
        assert commands == [[b"GET", b"k"], [b"EVALSHA", APPEND_SHA, b"0"]]
    counts = RedisCounts()
    envelopes = [b"e1", b"env2"]
    counts.count([b"evalsha", APPEND_SHA, b"6", *[b"k"] * 6, *[b"a"] * 7, *envelopes])
    counts.count([b"GET", b"k"])
    assert (counts.appends, counts.events, counts.bytes_appended) == (1, 2, 6)
    assert counts.commands == {"EVALSHA append": 1, "GET": 1}
