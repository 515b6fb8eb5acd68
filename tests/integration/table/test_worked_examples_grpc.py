"""Every worked example of RULES §16 that plays a whole hand, played again through the whole
stack: the unit tests' hands (tests/unit/rules/test_worked_examples.py) are recorded, their
cards stacked in the test support's rigged dealer (studtest.rigged_dealer), players seated over gRPC
with the same stacks, each recorded action sent by that seat's player through the table's
API, muck wishes given as muck preferences. The table then deals, shows down, awards, settles
and reconciles by itself; its public record must tell the same hand (every event but the
down cards' values) and end with the same stacks, and the wallet must hold them."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import pytest

from rules import Card, TableConfig
from rules.events import (
    ActionTimedOut,
    BetMade,
    BringInPosted,
    BurnsReshuffled,
    Called,
    CardBurned,
    Checked,
    CommunityCardDealt,
    Completed,
    DownCardDealt,
    Event,
    Folded,
    HandEnded,
    HandMucked,
    HandStarted,
    PlayerSeated,
    PotAwarded,
    Raised,
    TableOpened,
    UpCardDealt,
)
from rules.testing import TableDriver
from rules.views import public_event
from stud.v1 import dealer_pb2 as dpb
from stud.v1 import dealer_pb2_grpc as dpb_grpc
from stud.v1 import table_pb2 as pb
from studkit.mapping import card_to_proto, event_from_proto
from studtest.redis import TestRedis
from studtest.rigged_dealer import RiggedDealing
from studtest.table import OPERATOR, Room, fast_settings, player, running_room
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "unit" / "rules" / "test_worked_examples.py"


@dataclass(frozen=True)
class Recorded:
    """One whole hand an example played."""

    name: str
    config: TableConfig
    stacks: dict[int, int]
    deck: tuple[Card, ...]
    actions: tuple[Event, ...]
    mucks: frozenset[int]
    events: tuple[Event, ...]


def _record_examples() -> list[Recorded]:
    """Run every example test, keeping each driver that played one whole hand."""
    spec = importlib.util.spec_from_file_location("worked_examples_for_grpc", EXAMPLES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    drivers: list[tuple[str, TableDriver]] = []
    original = TableDriver.__init__

    def recording(self: TableDriver, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        drivers.append((current, self))

    TableDriver.__init__ = recording  # type: ignore[method-assign]
    try:
        for class_name, cls in inspect.getmembers(module, inspect.isclass):
            if not class_name.startswith("Test"):
                continue
            for name, method in inspect.getmembers(cls, inspect.isfunction):
                if not name.startswith("test_") or len(inspect.signature(method).parameters) > 1:
                    continue
                current = f"{class_name}.{name}"
                method(cls())
    finally:
        TableDriver.__init__ = original  # type: ignore[method-assign]
    return [r for name, driver in drivers if (r := _whole_hand(name, driver)) is not None]


def _whole_hand(name: str, driver: TableDriver) -> Recorded | None:
    events = list(driver.events)
    ends = [i for i, e in enumerate(events) if isinstance(e, HandEnded)]
    starts = [i for i, e in enumerate(events) if isinstance(e, HandStarted)]
    if len(starts) != 1 or not ends or starts[0] > ends[0]:
        return None
    before, hand = events[:starts[0]], events[starts[0]:ends[0] + 1]
    if any(isinstance(e, CardBurned | BurnsReshuffled | ActionTimedOut) for e in hand):
        return None  # burns need the dealer's reshuffle key; time-outs need a clock
    opened = next(e for e in before if isinstance(e, TableOpened))
    seated = {e.seat: e.stack for e in before if isinstance(e, PlayerSeated)}
    if len(seated) != len([e for e in before if isinstance(e, PlayerSeated)]):
        return None
    deck: list[Card] = []
    for e in hand:
        if isinstance(e, DownCardDealt | UpCardDealt | CommunityCardDealt):
            if e.card is None:
                return None
            deck.append(e.card)
    started = next(e for e in hand if isinstance(e, HandStarted))
    config = replace(opened.config, min_players=len(started.seats))
    actions = tuple(e for e in hand if isinstance(
        e, BringInPosted | Completed | BetMade | Raised | Called | Checked | Folded))
    mucks = frozenset(e.seat for e in hand if isinstance(e, HandMucked))
    dealt_in = {s: seated[s] for s in started.seats}
    return Recorded(name, config, dealt_in, tuple(deck), actions, mucks, tuple(hand))


RECORDED = _record_examples()


def test_the_examples_include_whole_hands() -> None:
    """The recording found the hands (and would fail if the unit tests changed shape)."""
    assert len(RECORDED) >= 9, [r.name for r in RECORDED]


def _request(event: Event, table_id: str) -> tuple[str, Any]:
    seat = event.seat  # type: ignore[union-attr]
    match event:
        case BringInPosted():
            return "PostBringIn", pb.PostBringInRequest(table_id=table_id, seat=seat)
        case Completed(to=to):
            return "Complete", pb.CompleteRequest(table_id=table_id, seat=seat, to=to)
        case BetMade(to=to):
            return "Bet", pb.BetRequest(table_id=table_id, seat=seat, to=to)
        case Raised(to=to):
            return "Raise", pb.RaiseRequest(table_id=table_id, seat=seat, to=to)
        case Called():
            return "Call", pb.CallRequest(table_id=table_id, seat=seat)
        case Checked():
            return "Check", pb.CheckRequest(table_id=table_id, seat=seat)
        case Folded():
            return "Fold", pb.FoldRequest(table_id=table_id, seat=seat)
    raise AssertionError(event)


def _comparable(event: Event) -> Event:
    """An event as the public stream holds it (down cards as "a down card")."""
    return public_event(event)


@pytest.fixture
async def stacked_room(redis_server: TestRedis, redis_url: str,
                       dev_keys: DevKeys) -> Iterator[Room]:
    async with running_room(redis_server, redis_url, dev_keys,
                            rig=RiggedDealing(stacked=True)) as room:
        yield room  # type: ignore[misc]


@pytest.mark.parametrize("example", RECORDED, ids=[r.name for r in RECORDED])
async def test_example_through_the_whole_stack(stacked_room: Room, example: Recorded) -> None:
    room = stacked_room
    table_id = await room.client.open_table(
        config=example.config,
        settings=fast_settings(next_hand_delay_ms=600_000))
    async with grpc.aio.insecure_channel(
            f"127.0.0.1:{room.dealer.port}") as channel:
        testing = dpb_grpc.DealerTestingServiceStub(channel)
        await testing.StackDeck(dpb.StackDeckRequest(
            table_id=table_id, hand_number=1,
            cards=[card_to_proto(c) for c in example.deck]),
            metadata=room.client.md(OPERATOR), timeout=10)
    for seat, stack in sorted(example.stacks.items()):
        name = f"p{seat}-{table_id}"
        await room.fund(name, stack)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=stack), player(name))
        if seat in example.mucks:
            await room.client.call("SetMuckPreference", pb.SetMuckPreferenceRequest(
                table_id=table_id, seat=seat, muck=True), player(name))
    for action in example.actions:
        async with asyncio.timeout(10):
            while (view := await room.client.view(table_id)).hand.to_act != action.seat:
                await asyncio.sleep(0.005)
        method, request = _request(action, table_id)
        await room.client.call(method, request, player(f"p{action.seat}-{table_id}"))
    view = await room.client.wait_for(
        table_id, lambda v: v.hand.phase == pb.HAND_PHASE_COMPLETE)
    # The history as a player dealt in reads it: hands mucked at the showdown are in it
    # (RULES 11.7, history_reveals_mucked), as in the rules' public record.
    first = min(example.stacks)
    history = await room.client.stub.GetHandHistory(
        pb.GetHandHistoryRequest(table_id=table_id, hand_number=1),
        metadata=room.client.md(player(f"p{first}-{table_id}")))
    played = [event_from_proto(r.event) for r in history.events]
    expected = [_comparable(e) for e in example.events]
    strip = [e if not isinstance(e, HandStarted) else replace(e, deck_commitment="")
             for e in played]
    assert strip == [e if not isinstance(e, HandStarted) else replace(e, deck_commitment="")
                     for e in expected]
    awards = [e for e in played if isinstance(e, PotAwarded)]
    assert awards == [e for e in expected if isinstance(e, PotAwarded)]
    final = {s.seat: s.stack for s in view.seats}
    async with asyncio.timeout(10):
        while True:
            escrows = {k: v for k, v in (await room.wallet.client.escrows(table_id)).items()}
            if {k: v for k, v in escrows.items() if v} == {k: v for k, v in final.items() if v}:
                break
            await asyncio.sleep(0.02)
