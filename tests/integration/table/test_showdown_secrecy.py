"""What each viewer may see of the down cards, through the whole stack: muck preferences at
a showdown (RULES 11.4, 11.7) with a stacked deck, and over several randomly played hands no
observer's or other player's view (WatchTable, GetTable, GetHandHistory) carries a down card
before its legitimate reveal, checked against the dealer's audit; folded hands never leave
the auditor's view."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from rules import TableConfig
from rules.cards import parse_cards
from stud.v1 import dealer_pb2 as dpb
from stud.v1 import dealer_pb2_grpc as dpb_grpc
from stud.v1 import table_pb2 as pb
from studkit.auth import Principal
from studkit.mapping import card_to_proto
from studtest.redis import TestRedis
from studtest.rigged_dealer import RiggedDealing
from studtest.table import AUDITOR, OPERATOR, Room, act_once, fast_settings, player, running_room
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration
DEPOSIT = 1_000_000
CardKey = tuple[int, int]
"""A card as (rank, suit) of its wire form."""


def cards_in(message: Message) -> set[CardKey]:
    """Every card a message carries, wherever it is."""
    found: set[CardKey] = set()
    if message.DESCRIPTOR.full_name == "stud.v1.Card":
        rank, suit = message.rank, message.suit
        if rank:
            found.add((rank, suit))
        return found
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None:
            continue
        if descriptor.is_repeated:
            for item in value:
                if isinstance(item, Message):
                    found |= cards_in(item)
        elif isinstance(value, Message):
            found |= cards_in(value)
    return found


def card_keys(text: str) -> list[CardKey]:
    return [(c.rank, c.suit) for c in (card_to_proto(x) for x in parse_cards(text))]


async def history(room: Room, table_id: str, hand: int, who: Principal) -> pb.HandHistory:
    reply: pb.HandHistory = await room.client.stub.GetHandHistory(
        pb.GetHandHistoryRequest(table_id=table_id, hand_number=hand),
        metadata=room.client.md(who), timeout=10)
    return reply


def events_of(records: Iterable[pb.TableEventRecord], kind: str) -> list[Any]:
    return [getattr(r.event, kind) for r in records if r.event.WhichOneof("event") == kind]


async def watch_all(room: Room, table_id: str, who: Principal) -> list[pb.TableEventRecord]:
    """``who``'s watch of the table from its start up to its version now."""
    upto = (await room.client.view(table_id)).version
    out: list[pb.TableEventRecord] = []
    call = room.client.stub.WatchTable(pb.WatchTableRequest(table_id=table_id),
                                       metadata=room.client.md(who))
    async with asyncio.timeout(10):
        async for record in call:
            out.append(record)
            if record.sequence >= upto:
                break
    call.cancel()
    return out


@contextlib.asynccontextmanager
async def stacked_room(redis_server: TestRedis, redis_url: str,
                       dev_keys: DevKeys) -> AsyncIterator[Room]:
    async with running_room(redis_server, redis_url, dev_keys,
                            rig=RiggedDealing(stacked=True)) as room:
        yield room


async def stack_deck(room: Room, table_id: str, hand: int, text: str) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{room.dealer.port}") as channel:
        testing = dpb_grpc.DealerTestingServiceStub(channel)  # type: ignore[no-untyped-call]
        await testing.StackDeck(dpb.StackDeckRequest(
            table_id=table_id, hand_number=hand,
            cards=[card_to_proto(c) for c in parse_cards(text)]),
            metadata=room.client.md(OPERATOR), timeout=10)


# Seats 1-3 (ann, bob, cat), dealt in order: 3rd street two down cards then one up card per
# seat, 4th-6th one up each, 7th one down each. Ann brings in (2c) and, with no wager after,
# shows first (RULES 11.2): kings. Bob (ace high, no low) is beaten and may muck. Cat (three
# eights) beats the kings and must show (11.4).
MUCK_DECK = ("Kd Ah 8s  Kh Qh 8d  2c 9c Tc  Js Ts 8h  Qs Jd 3d  5h 7s 5c  6d 4d Kc")
ANN_DOWN, BOB_DOWN, CAT_DOWN = "Kd Kh 6d", "Ah Qh 4d", "8s 8d Kc"


def passive(actions: list[Any]) -> Any:
    """Check, else call, else bring in: everyone goes to the showdown."""
    for kind in (6, 5, 1):
        for action in actions:
            if action.kind == kind:
                return action
    return actions[0]


async def play_muck_hand(room: Room, reveals_mucked: bool = True) -> str:
    """A table where ann, bob and cat (seats 1-3, all muck losing hands) play MUCK_DECK's
    hand to its end, passively (the next hand waits ten minutes); its id."""
    table_id = await room.client.open_table(
        config=TableConfig(history_reveals_mucked=reveals_mucked, min_players=3),
        settings=fast_settings(next_hand_delay_ms=600_000))
    await stack_deck(room, table_id, 1, MUCK_DECK)
    names = {1: "ann", 2: "bob", 3: "cat"}
    for seat, name in names.items():
        await room.fund(name, DEPOSIT)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=10_000), player(name))
        await room.client.call("SetMuckPreference", pb.SetMuckPreferenceRequest(
            table_id=table_id, seat=seat, muck=True), player(name))
        view = await room.client.view(table_id, player(name))
        assert view.muck_preference
    async with asyncio.timeout(20):
        while not ((view := await room.client.view(table_id)).HasField("hand")
                   and view.hand.phase == pb.HAND_PHASE_COMPLETE):
            if not await act_once(room.client, table_id, view, passive):
                await asyncio.sleep(0.01)
    return table_id


@pytest.mark.parametrize("reveals_mucked", [True, False], ids=["history_reveals_mucked",
                                                               "mucked_stay_hidden"])
async def test_muck_preference_at_the_showdown(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        reveals_mucked: bool) -> None:
    """All three ask to muck losing hands. Ann shows first (always shown), Bob's beaten hand
    is mucked, Cat's winning hand must be shown. Bob's cards reach nobody but the players
    dealt in, and them only with history_reveals_mucked: not an observer, not a player who
    takes a seat after the hand."""
    async with stacked_room(redis_server, redis_url, dev_keys) as room:
        table_id = await play_muck_hand(room, reveals_mucked)
        records = (await history(room, table_id, 1, OPERATOR)).events
        kinds = [r.event.WhichOneof("event") for r in records]
        assert kinds.count("hand_shown") == 2 and kinds.count("hand_mucked") == 1
        shown = {e.seat: e for e in events_of(records, "hand_shown")}
        assert sorted(shown) == [1, 3]
        assert cards_in(shown[1]) == set(card_keys(ANN_DOWN))
        assert cards_in(shown[3]) == set(card_keys(CAT_DOWN))
        assert [e.seat for e in events_of(records, "hand_mucked")] == [2]
        assert {a.seat for a in events_of(records, "pot_awarded")} == {3}

        # Bob's cards, as each viewer may see them afterwards.
        bob = set(card_keys(BOB_DOWN))
        for who in (OPERATOR, player("zed")):
            assert not cards_in(await history(room, table_id, 1, who)) & bob
            assert not cards_in(await room.client.view(table_id, who)) & bob
            for record in await watch_all(room, table_id, who):
                assert not cards_in(record) & bob, record
        for name in ("ann", "cat"):
            dealt_in = await history(room, table_id, 1, player(name))
            mucked = events_of(dealt_in.events, "hand_mucked")
            assert cards_in(mucked[0]) == (bob if reveals_mucked else set())
            assert not cards_in(await room.client.view(table_id, player(name))) & bob
            watched = events_of(await watch_all(room, table_id, player(name)), "hand_mucked")
            assert cards_in(watched[0]) == (bob if reveals_mucked else set())

        # Ann leaves; Yan takes her seat: he was not dealt in, so he never sees Bob's hand.
        await room.client.call("LeaveSeat", pb.LeaveSeatRequest(table_id=table_id, seat=1),
                               player("ann"))
        await room.fund("yan", DEPOSIT)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=1, buy_in=10_000), player("yan"))
        assert not cards_in(await history(room, table_id, 1, player("yan"))) & bob
        for record in await watch_all(room, table_id, player("yan")):
            assert not cards_in(record) & bob, record


async def test_a_newcomer_in_a_mucked_seat_sees_none_of_its_cards(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys) -> None:
    """Issue 17, F4: Bob (seat 2) mucks at the showdown and leaves between hands; Yan, not
    dealt in, sits down in seat 2. GetTable shows Yan the last hand with no down card but
    the ones shown (Ann's and Cat's), and viewer_seat 2; Bob, gone from the table, still sees
    his own cards of the hand he was dealt into."""
    async with stacked_room(redis_server, redis_url, dev_keys) as room:
        table_id = await play_muck_hand(room)
        bob = set(card_keys(BOB_DOWN))
        assert cards_in(await room.client.view(table_id, player("bob"))) >= bob
        await room.client.call("LeaveSeat", pb.LeaveSeatRequest(table_id=table_id, seat=2),
                               player("bob"))
        await room.fund("yan", DEPOSIT)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=2, buy_in=10_000), player("yan"))

        view = await room.client.view(table_id, player("yan"))
        assert view.viewer_seat == 2
        assert [s.player_id for s in view.seats if s.seat == 2] == ["yan"]
        assert view.hand.hand_number == 1 and view.hand.phase == pb.HAND_PHASE_COMPLETE
        assert not cards_in(view) & bob
        for p in view.hand.players:
            if not p.shown:
                assert not any(d.HasField("card") for d in p.down), p
        shown = {p.seat for p in view.hand.players if p.shown}
        assert shown == {1, 3}

        # Bob, no longer seated, is still the player who held seat 2's cards in hand 1.
        gone = await room.client.view(table_id, player("bob"))
        assert gone.viewer_seat == 0
        assert cards_in(gone) >= bob


# --- secrecy over several hands ------------------------------------------------------------


@dataclass
class Seen:
    """Everything a viewer was shown: (hand, sequence, cards) per message."""

    seat: int | None
    items: list[tuple[int, int, set[CardKey], str]] = field(default_factory=list)

    def add(self, hand: int, sequence: int, cards: set[CardKey], what: str) -> None:
        if hand and cards:
            self.items.append((hand, sequence, cards, what))


async def keep_watching(room: Room, table_id: str, who: Principal, seen: Seen) -> None:
    call = room.client.stub.WatchTable(pb.WatchTableRequest(table_id=table_id),
                                       metadata=room.client.md(who))
    try:
        async for record in call:
            seen.add(record.hand_number, record.sequence, cards_in(record),
                     f"watch {record.event.WhichOneof('event')}")
    finally:
        call.cancel()


async def test_no_down_card_leaks_before_its_reveal(room: Room) -> None:
    """Three bots play random legal hands while an observer, the operator and every player
    watch, poll the table and read the histories. After each hand the dealer's audit says
    which card went down to whom: none of them may be in a viewer's message before the
    event that legitimately reveals it (shown, exposed in a runout, or mucked into the
    history of the players dealt in); a folded hand's cards never appear anywhere but to
    its own seat."""
    table_id = await room.client.open_table()
    names = {1: "ann", 2: "bob", 3: "cat"}
    viewers: dict[str, tuple[Principal, Seen]] = {
        "zed": (player("zed"), Seen(None)), "ops": (OPERATOR, Seen(None)),
        **{n: (player(n), Seen(s)) for s, n in names.items()}}
    tasks = [asyncio.create_task(keep_watching(room, table_id, who, seen))
             for who, seen in viewers.values()]
    for seat, name in names.items():
        await room.fund(name, DEPOSIT)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=10_000), player(name))
    rng = random.Random(17)
    folded_hands = showdowns = 0
    hand = 1
    audits: dict[int, dpb.HandAudit] = {}
    try:
        async with asyncio.timeout(60):
            while hand <= 8 and not (hand > 4 and folded_hands and showdowns):
                view = await room.client.view(table_id)
                for name, (who, seen) in viewers.items():
                    polled = await room.client.view(table_id, who)
                    seen.add(polled.hand.hand_number, polled.version, cards_in(polled),
                             "GetTable")
                    if name in ("zed", "bob") and polled.hand.hand_number:
                        # The hand's history so far, read while it is played.
                        for record in (await history(room, table_id, polled.hand.hand_number,
                                                     who)).events:
                            seen.add(record.hand_number, record.sequence, cards_in(record),
                                     "history (live)")
                if view.hands_started > hand or (
                        view.hands_started == hand and view.hand.phase
                        == pb.HAND_PHASE_COMPLETE):
                    audits[hand] = await room.dealer.client.stub.GetAudit(
                        dpb.GetAuditRequest(table_id=table_id, hand_number=hand),
                        metadata=room.dealer.client.metadata(AUDITOR), timeout=10)
                    records = (await history(room, table_id, hand, OPERATOR)).events
                    kinds = {r.event.WhichOneof("event") for r in records}
                    folded_hands += "folded" in kinds
                    showdowns += "hand_shown" in kinds
                    for who, seen in viewers.values():
                        for record in (await history(room, table_id, hand, who)).events:
                            seen.add(hand, record.sequence, cards_in(record), "history")
                    hand += 1
                    continue
                if not await act_once(room.client, table_id, view,
                                      lambda actions: rng.choice(actions)):
                    await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # the watchers catch up
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert folded_hands and showdowns
    legitimately_seen = 0
    for number, audit in audits.items():
        down = {(d.card.rank, d.card.suit): d.seat for street in audit.streets
                for d in street.cards if not d.up and d.seat}
        assert all(list(down.values()).count(s) >= 2 for s in down.values())
        records = (await history(room, table_id, number, OPERATOR)).events
        revealed: dict[int, int] = {}
        mucked: dict[int, int] = {}
        folded: set[int] = set()
        for r in records:
            kind = r.event.WhichOneof("event")
            event = getattr(r.event, kind)
            if kind in ("hand_shown", "hand_exposed"):
                revealed.setdefault(event.seat, r.sequence)
            elif kind == "hand_mucked":
                mucked[event.seat] = r.sequence
            elif kind == "folded":
                folded.add(event.seat)
        assert not folded & (set(revealed) | set(mucked))
        for name, (_who, seen) in viewers.items():
            for hand_number, sequence, cards, what in seen.items:
                if hand_number != number:
                    continue
                for card in cards & set(down):
                    owner = down[card]
                    allowed = owner == seen.seat or sequence >= revealed.get(owner, 1 << 62) or (
                        seen.seat is not None and sequence >= mucked.get(owner, 1 << 62))
                    assert allowed, (f"{name} saw seat {owner}'s down card {card} in hand "
                                     f"{number} at sequence {sequence} ({what})")
                    assert owner not in folded or owner == seen.seat
                    legitimately_seen += owner != seen.seat
    assert legitimately_seen  # the check saw shown hands: it is not vacuous

