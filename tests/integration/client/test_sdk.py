"""The client SDK against the in-process room: bots play whole hands through it, its live
view follows the table (own down cards merged in, never another player's), its errors are
typed and carry the server's reason, and its retries reuse the command id."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest

from stud.v1 import table_pb2 as pb
from studclient import Client, Stale, TableWatch
from studkit.auth import Principal
from studtest.table import OPERATOR, Room, fast_settings, player

ClientFor = Callable[[Principal], Client]

pytestmark = pytest.mark.integration
DEPOSIT = 1_000_000


def hand_over(view: pb.TableView) -> bool:
    return not view.HasField("hand") or view.hand.phase == pb.HAND_PHASE_COMPLETE


async def random_bot(client: Client, watch: TableWatch, table_id: str, hands: int,
                     seed: int) -> int:
    """Acts randomly whenever it is this seat's turn, until ``hands`` hands are over."""
    rng = random.Random(seed)
    actions = 0
    acted_at = -1
    async for view in watch.views():
        if view.hands_started >= hands and hand_over(view):
            return actions
        hand = view.hand
        if (view.version > acted_at and view.HasField("hand")
                and hand.phase == pb.HAND_PHASE_BETTING
                and hand.to_act == view.viewer_seat and hand.legal_actions.actions):
            acted_at = view.version
            try:
                await client.act(table_id, rng.choice(list(hand.legal_actions.actions)),
                                 expected_sequence=view.version)
            except Stale:
                continue  # the table moved on (the clock): decide again on the new view
            actions += 1
    return actions


async def test_bots_play_hands_through_the_sdk(room: Room, client_for: ClientFor) -> None:
    ops = client_for(OPERATOR)
    table_id = await ops.open_table(settings=fast_settings())
    names = ["ann", "bob", "cat"]
    clients = [client_for(player(n)) for n in names]
    for name, client in zip(names, clients, strict=True):
        await ops.create_account(name)
        await ops.deposit(name, DEPOSIT)
        assert await client.balance() == DEPOSIT
    for seat, client in enumerate(clients, start=1):
        await client.sit(table_id, seat, 10_000)
    watches = [client.watch(table_id) for client in clients]
    for watch in watches:
        await watch.start()
    saw_own_card = False

    async def spy(watch: TableWatch, seat: int) -> None:
        nonlocal saw_own_card
        async for view in watch.views():
            for p in view.hand.players:
                for down in p.down:
                    if down.HasField("card") and p.seat == seat and not p.shown \
                            and not p.exposed:
                        saw_own_card = True
                    if down.HasField("card") and p.seat != seat:
                        assert p.shown or p.exposed, "another player's down card"

    spies = [asyncio.create_task(spy(w, i)) for i, w in enumerate(watches, start=1)]
    async with asyncio.timeout(90):
        counts = await asyncio.gather(*(
            random_bot(c, w, table_id, 4, seed) for seed, (c, w)
            in enumerate(zip(clients, watches, strict=True))))
    assert sum(counts) > 0
    assert saw_own_card
    for watch in watches:
        await watch.close()
    for task in spies:
        task.cancel()
    for client in clients:
        await client.sit_out(table_id)
    tables = await ops.list_tables()
    assert [t.table_id for t in tables] == [table_id]
    statement = await clients[0].statement()
    assert statement[0].amount == DEPOSIT
    assert statement[-1].balance_after == await clients[0].balance()


async def test_the_example_bot_plays(room: Room, client_for: ClientFor) -> None:
    """``examples/random_bot.py``: two of them sit, play three hands and leave."""
    import importlib.util
    from pathlib import Path

    import studclient
    path = Path(studclient.__file__).parent / "examples" / "random_bot.py"
    spec = importlib.util.spec_from_file_location("random_bot_example", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    ops = client_for(OPERATOR)
    table_id = await ops.open_table(settings=fast_settings())
    for name in ("ann", "bob"):
        await ops.create_account(name)
        await ops.deposit(name, DEPOSIT)
    ann, bob = client_for(player("ann")), client_for(player("bob"))
    async with asyncio.timeout(60):
        actions = await asyncio.gather(example.play(ann, table_id, 1, 3),
                                       example.play(bob, table_id, 2, 3))
    assert sum(actions) > 0
    view = await room.client.wait_for(table_id, lambda v: not v.seats)
    assert view.hands_started >= 3
    assert await ann.balance() + await bob.balance() == 2 * DEPOSIT


async def test_a_watch_opened_before_sitting_down_follows_the_cards_once_seated(
        room: Room, client_for: ClientFor) -> None:
    """The dealer refuses a card watch by a player with no seat (``not_seated``, issue 17
    F9); the SDK's live view waits that out: it follows the table as an observer, and once
    the player sits and a hand is dealt, their own down cards appear in it."""
    ops = client_for(OPERATOR)
    table_id = await ops.open_table(settings=fast_settings())
    names = ["ann", "bob"]
    clients = [client_for(player(n)) for n in names]
    for name in names:
        await ops.create_account(name)
        await ops.deposit(name, DEPOSIT)
    async with clients[0].watch(table_id) as watch:
        await asyncio.sleep(0.5)  # the card watch is refused meanwhile
        assert watch.error is None
        for seat, client in enumerate(clients, start=1):
            await client.sit(table_id, seat, 10_000)

        def own_cards(view: pb.TableView) -> bool:
            return view.viewer_seat == 1 and any(
                p.seat == 1 and any(d.HasField("card") for d in p.down)
                for p in view.hand.players)

        view = await watch.wait_for(own_cards, timeout=30)
        assert watch.error is None and view.viewer_seat == 1
