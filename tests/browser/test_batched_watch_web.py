"""The web client's table feed is batched (``WatchTableRequest.batched``, issue 35): its
WatchTable requests ask for it, the wire carries several records in some messages, and the
page applies each record once, in order, exactly the records an unbatched watch gets, so it
shows the table as before across hands (stacks, the deal check of each hand)."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from playwright.async_api import Request

from stud.v1 import table_pb2
from studtest.table import Room, fast_settings, player

from .conftest import Message, Player, Players, network
from .test_table_play import assert_no_foreign_down_card, checked_hands, sit
from .test_web_client import play_until, received

pytestmark = pytest.mark.integration
HANDS = 2


def watch_request(request: Request) -> table_pb2.WatchTableRequest | None:
    """The WatchTableRequest a gRPC-Web request carries (its one frame), if it is one."""
    if not request.url.split("?")[0].endswith("/stud.v1.TableService/WatchTable"):
        return None
    body = request.post_data_buffer or b""
    assert len(body) >= 5 and body[0] == 0, body[:5]  # a data frame, not compressed
    (size,) = struct.unpack(">I", body[1:5])
    message = table_pb2.WatchTableRequest()
    message.ParseFromString(body[5:5 + size])
    return message


async def open_watched(players: Players, gateway: Any, room: Room, name: str, table_id: str
                       ) -> tuple[Player, list[table_pb2.WatchTableRequest]]:
    """``name``'s page on the table, every WatchTable request it sends decoded (listened to
    from before the page opens the table)."""
    p = await players(name, "/")
    requests: list[table_pb2.WatchTableRequest] = []

    def on_request(request: Request) -> None:
        decoded = watch_request(request)
        if decoded is not None:
            requests.append(decoded)

    p.page.on("request", on_request)
    token = room.client.tokens.token(player(name))
    await p.page.goto(f"{gateway.url.rstrip('/')}/?table={table_id}#token={token}")
    return p, requests


async def unbatched(room: Room, table_id: str, name: str, after: int, upto: int
                    ) -> list[int]:
    """The sequences an unbatched watch as ``name`` gets after ``after`` up to ``upto``."""
    out: list[int] = []
    call = room.client.stub.WatchTable(table_pb2.WatchTableRequest(
        table_id=table_id, after_sequence=after), metadata=room.client.md(player(name)))
    try:
        async with asyncio.timeout(30):
            async for record in call:
                assert not record.more
                out.append(record.sequence)
                if record.sequence >= upto:
                    break
    finally:
        call.cancel()
    return out


async def test_a_batched_feed_shows_the_table_as_before(room: Room, players: Players,
                                                       gateway: Any) -> None:
    table_id = await room.client.open_table("web-batched", settings=fast_settings(
        next_hand_delay_ms=300))
    await room.fund("alice", 100_000)
    await room.fund("bob", 100_000)
    alice, alice_asked = await open_watched(players, gateway, room, "alice", table_id)
    bob, bob_asked = await open_watched(players, gateway, room, "bob", table_id)
    await sit(alice, table_id, 1)
    await sit(bob, table_id, 2)
    await play_until(room, [alice, bob], table_id, HANDS)
    version = (await room.client.view(table_id)).version
    for p, asked, seat in ((alice, alice_asked, 1), (bob, bob_asked, 2)):
        async with asyncio.timeout(30):
            while not (got := await received(p, table_id)) or got[-1] < version:
                await asyncio.sleep(0.1)
        # Every WatchTable request of the page asks for batches.
        assert asked and all(r.batched and r.table_id == table_id for r in asked), asked
        # Each record once, in order: the records of an unbatched watch from where it began.
        got = [s for s in got if s <= version]
        assert got == await unbatched(room, table_id, p.name, asked[0].after_sequence,
                                      version)
        # Batched on the wire, and no record in a message's `more` carries a card the player
        # may not see.
        net = await network(p.page)
        feed = [m.message for m in net if isinstance(m.message, table_pb2.TableEventRecord)]
        assert any(m.more for m in feed)
        assert len(feed) < len(got)
        records = [Message("WatchTable more", r) for m in feed for r in m.more]
        assert_no_foreign_down_card([*net, *records], seat)
        # What the page shows: each hand's deal check (run on the hand's end record) and the
        # table's stacks.
        check = await checked_hands(p.page, table_id)
        assert check["outcome"] == "verified" and int(check["hand"]) >= HANDS, check
        async with asyncio.timeout(30):
            while True:
                view = await room.client.view(table_id)
                shown = {}
                for s in view.seats:
                    text = await p.pane(table_id).get_by_role(
                        "region", name=f"Seat {s.seat}", exact=True).get_by_label(
                        "Stack").inner_text()
                    shown[s.seat] = int(text.replace(",", ""))
                if shown == {s.seat: s.stack for s in view.seats}:
                    break
                await asyncio.sleep(0.2)
