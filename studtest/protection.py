"""Player protection at a cash table, for tests (issue 34): three players seated and dealt
in, the hands played on until a seat is stood up, the hands dealt since read from their
histories, and the chips counted. The room is :mod:`studtest.table`'s.

How to use it::

    table_id, hand = await three_seated(room, {1: "ann", 2: "bob", 3: "cat"}, DEPOSIT)
    ...                                  # bob excluded, or past his session limit
    view = await play_until_stood_up(room, table_id, 2, after_hand=hand)
    assert 2 not in await seats_dealt(room, table_id, range(hand + 1, view.hands_started + 1))
    assert await chips(room, table_id, names) == 3 * DEPOSIT
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping

from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studtest.table import OPERATOR, Room, act_once, player

BUY_IN = 5_000


async def three_seated(room: Room, names: Mapping[int, str], deposit: int, *,
                       before_sitting: Callable[[], Awaitable[None]] | None = None
                       ) -> tuple[str, int]:
    """A new table with each of ``names`` (seat -> player) funded with ``deposit`` and
    seated with :data:`BUY_IN` (``before_sitting`` awaited once all are funded); the table
    and the number of the hand dealt to them, once someone is to act in it."""
    table_id = await room.client.open_table()
    for name in names.values():
        await room.fund(name, deposit)
    if before_sitting is not None:
        await before_sitting()
    for seat, name in names.items():
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=BUY_IN), player(name))
    view = await room.client.wait_for(table_id,
                                      lambda v: v.HasField("hand") and v.hand.to_act != 0)
    return table_id, view.hand.hand_number


async def play_until_stood_up(room: Room, table_id: str, seat: int, after_hand: int,
                              timeout: float = 60.0) -> pb.TableView:
    """Everyone plays on with random legal actions (``seat`` too, while it is dealt in)
    until ``seat`` is empty and two hands have started after ``after_hand``; that view."""
    rng = random.Random(34)
    async with asyncio.timeout(timeout):
        while True:
            view = await room.client.view(table_id)
            if not any(s.seat == seat for s in view.seats) and \
                    view.hands_started >= after_hand + 2:
                return view
            if not await act_once(room.client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)


async def seats_dealt(room: Room, table_id: str, hands: Iterable[int]) -> dict[int, set[int]]:
    """For each hand of ``hands``, the seats its history's events name."""
    out: dict[int, set[int]] = {}
    for n in hands:
        history = await room.client.stub.GetHandHistory(
            pb.GetHandHistoryRequest(table_id=table_id, hand_number=n),
            metadata=room.client.md(OPERATOR), timeout=10)
        seats = {getattr(getattr(r.event, r.event.WhichOneof("event")), "seat", None)
                 for r in history.events}
        out[n] = {int(s) for s in seats if s is not None}
    return out


async def chips(room: Room, table_id: str, names: Iterable[str]) -> int:
    """The players' balances, the table's escrows and the house's account, summed (what
    was deposited, when no chip was created or lost)."""
    wallet = room.wallet.client
    balances = sum([await wallet.player_balance(n) for n in names])
    held = sum((await wallet.escrows(table_id)).values())
    house = await wallet.balance(wpb.AccountRef(system=wpb.SYSTEM_ACCOUNT_HOUSE))
    return int(balances + held + house)
