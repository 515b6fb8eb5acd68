"""The SDK's play session (``Client.play``, ``TableService.Play``, issue 35) against the
in-process room: players play whole hands over it, each session's records are every record
a watch shows the player (its own actions' from their replies), in order and each once; a
refused action raises the same typed error as its unary call; an action whose stream is cut
before its reply is sent again on the next stream with its command id and answered once."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest

import rules
from rules import Phase
from stud.v1 import table_pb2 as pb
from studclient import Client, IllegalAction, NotYourTurn, PlaySession, RetryPolicy, Stale
from studclient.client import new_command_id
from studkit.auth import Principal
from studkit.mapping.events import event_from_proto
from studtest.redis import TestRedis
from studtest.table import (
    OPERATOR,
    Room,
    fast_settings,
    player,
    running_table,
    slow_watch,
    table_settings,
)
from studtools.devkeys import DevKeys
from studtools.redis_server import free_port

ClientFor = Callable[[Principal], Client]

pytestmark = pytest.mark.integration
DEPOSIT = 1_000_000


async def seated(client_for: ClientFor, names: list[str]) -> tuple[str, list[Client]]:
    ops = client_for(OPERATOR)
    table_id = await ops.open_table(settings=fast_settings())
    clients = [client_for(player(n)) for n in names]
    for seat, (name, client) in enumerate(zip(names, clients, strict=True), start=1):
        await ops.create_account(name)
        await ops.deposit(name, DEPOSIT)
        await client.sit(table_id, seat, 10_000)
    return table_id, clients


async def watched(client: Client, table_id: str, upto: int) -> list[bytes]:
    """The client's own WatchTable records from the start to ``upto``, serialized."""
    out: list[bytes] = []
    async with asyncio.timeout(30):
        async for record in client.watch_records(table_id):
            out.append(record.SerializeToString())
            if record.sequence >= upto:
                return out
    return out


async def play(session: PlaySession, seat: int, hands: int, rng: random.Random,
               got: list[pb.TableEventRecord]) -> int:
    """Folds the session's records with the rules and acts at random on the seat's turn
    until ``hands`` hands have ended; the records read into ``got``; the actions taken."""
    state, acted_at, actions, ended = rules.initial_state(), -1, 0, 0
    async for record in session.records():
        got.append(record)
        state = rules.evolve(state, event_from_proto(record.event))
        if record.event.WhichOneof("event") == "hand_ended":
            ended += 1
            if ended >= hands:
                return actions
        hand = state.hand
        if (hand is None or hand.phase != Phase.BETTING or hand.to_act != seat
                or acted_at == record.sequence):
            continue
        legal = rules.legal_actions(state)
        assert legal is not None
        acted_at = record.sequence
        action = rng.choice(list(legal.actions))
        method = {"bring_in": session.bring_in, "call": session.call,
                  "check": session.check, "fold": session.fold}.get(action.kind.value)
        try:
            if method is not None:
                reply = await method(expected_sequence=record.sequence)
            else:
                reply = await {"complete": session.complete, "bet": session.bet,
                               "raise": session.raise_}[action.kind.value](
                    action.to, expected_sequence=record.sequence)
        except Stale:
            continue  # the table moved on: the next record says how
        assert reply.events and not reply.duplicate
        actions += 1
    return actions


async def test_players_play_hands_over_play_sessions(client_for: ClientFor) -> None:
    names = ["ann", "bob", "cat"]
    table_id, clients = await seated(client_for, names)
    got: dict[str, list[pb.TableEventRecord]] = {n: [] for n in names}
    sessions = [client.play(table_id) for client in clients]
    for session in sessions:
        session.start()
    try:
        async with asyncio.timeout(120):
            counts = await asyncio.gather(*(
                play(s, seat, 3, random.Random(seat), got[name]) for seat, (name, s)
                in enumerate(zip(names, sessions, strict=True), start=1)))
    finally:
        for session in sessions:
            await session.close()
    # Each player dealt into a hand acts in it at least once (the hand may start before the
    # last one sits: then that player is dealt in from the next hand).
    dealt = [r.event.hand_started for r in got[names[0]]
             if r.event.WhichOneof("event") == "hand_started"]
    assert sum(counts) >= sum(len(started.seats) for started in dealt[:3]) >= 3 * 2
    for name, client in zip(names, clients, strict=True):
        records = got[name]
        sequences = [r.sequence for r in records]
        assert sequences == sorted(set(sequences)), name  # in order, each once
        # Every record the player's own watch shows, byte for byte, the session's own
        # actions' records (from their replies) included.
        assert [r.SerializeToString() for r in records] == await watched(
            client, table_id, sequences[-1]), name


async def test_a_refused_action_raises_the_unary_calls_error(client_for: ClientFor) -> None:
    table_id, (ann, bob) = await seated(client_for, ["ann", "bob"])
    view = await betting(ann, table_id)
    to_act = view.hand.to_act
    acting, waiting = (ann, bob) if to_act == 1 else (bob, ann)
    async with acting.play(table_id) as mine, waiting.play(table_id) as theirs:
        # Not the waiting player's turn: NotYourTurn, as the unary call raises it.
        with pytest.raises(NotYourTurn) as streamed:
            await theirs.fold(expected_sequence=None)
        with pytest.raises(NotYourTurn) as unary:
            await waiting.fold(table_id, expected_sequence=None)
        assert (streamed.value.code, streamed.value.reason) == (
            unary.value.code, unary.value.reason)
        # A session not started yet opens its stream for its first action.
        unstarted = waiting.play(table_id)
        try:
            with pytest.raises(NotYourTurn):
                await unstarted.fold(expected_sequence=None)
        finally:
            await unstarted.close()
        # An amount that is not legal: IllegalAction (wrong_amount or the like).
        with pytest.raises(IllegalAction):
            await mine.complete(1, expected_sequence=None)
        # A view the table has moved on from: Stale.
        with pytest.raises(Stale):
            await mine.act(view.hand.legal_actions.actions[0], expected_sequence=1)
        # The turn's player acts: the reply is the unary call's (its events, the version).
        reply = await mine.act(view.hand.legal_actions.actions[0],
                               expected_sequence=view.version)
        assert reply.version > view.version and reply.events
        assert acting.known_version(table_id) == reply.version


async def records_through(session: PlaySession, last: int) -> list[pb.TableEventRecord]:
    """The session's records handed over, up to the first at or past ``last``."""
    records: list[pb.TableEventRecord] = []
    async with asyncio.timeout(20):
        async for record in session.records():
            records.append(record)
            if record.sequence >= last:
                break
    return records


async def betting(client: Client, table_id: str) -> pb.TableView:
    """The table's view once a hand waits for a betting action."""
    view = await client.get_table(table_id)
    async with asyncio.timeout(30):
        while not (view.HasField("hand") and view.hand.phase == pb.HAND_PHASE_BETTING):
            await asyncio.sleep(0.02)
            view = await client.get_table(table_id)
    return view


async def test_an_action_cut_off_before_its_reply_is_answered_on_the_next_stream(
        client_for: ClientFor) -> None:
    table_id, (ann, bob) = await seated(client_for, ["ann", "bob"])
    view = await betting(ann, table_id)
    acting = ann if view.hand.to_act == 1 else bob
    async with acting.play(table_id, after_sequence=view.version) as session:
        while session._call is None:  # the stream is open
            await asyncio.sleep(0.01)
        first = session._call
        act = asyncio.create_task(session.act(view.hand.legal_actions.actions[0],
                                              expected_sequence=view.version))
        while not session._waiting:
            await asyncio.sleep(0)  # sent ...
        first.cancel()  # ... and the stream cut before its reply is read
        async with asyncio.timeout(20):
            reply = await act
        assert session.resumes >= 1
        assert reply.events[0].sequence > view.version
        records = await records_through(session, reply.events[-1].sequence)
        # Nothing lost, nothing twice: the resumed stream's records and the reply's events
        # handed over once each, in order.
        sequences = [r.sequence for r in records]
        assert sequences == sorted(set(sequences))
        assert {e.sequence for e in reply.events} <= set(sequences)
    again = await acting.get_table(table_id)
    assert again.version >= reply.version


async def test_a_session_waits_out_a_table_restart_and_sends_its_action_again(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys, room: Room,
        connector: Callable[..., Client]) -> None:
    """The table service goes away with a hand waiting for the session's player: the action
    made meanwhile waits, the session opens its stream again on the new service (on the same
    address) from its last record and sends the action with its command id: applied once,
    its events handed over after the records before them."""
    await room.table_deps.app.stop()  # our own table services drive from here on
    port = free_port()
    settings = table_settings(redis_server, redis_url, dev_keys, room.dealer.port,
                              room.wallet.port, addr=f"127.0.0.1:{port}")
    retry = RetryPolicy(attempts=40, initial_backoff_s=0.05, max_backoff_s=0.2, timeout_s=2)
    clients = {name: connector(room, who, table_port=port, retry=retry) for name, who in
               (("ops", OPERATOR), ("ann", player("ann")), ("bob", player("bob")))}
    try:
        async with running_table(settings):
            table_id = await clients["ops"].open_table(settings=fast_settings())
            for seat, name in ((1, "ann"), (2, "bob")):
                await clients["ops"].create_account(name)
                await clients["ops"].deposit(name, DEPOSIT)
                await clients[name].sit(table_id, seat, 10_000)
            view = await betting(clients["ann"], table_id)
            acting = clients["ann" if view.hand.to_act == 1 else "bob"]
            session = acting.play(table_id)
            session.start()
            records: list[pb.TableEventRecord] = []
            async with asyncio.timeout(20):
                async for record in session.records():
                    records.append(record)
                    if record.sequence >= view.version:
                        break
        act = asyncio.create_task(session.act(view.hand.legal_actions.actions[0],
                                              expected_sequence=view.version))
        await asyncio.sleep(0.6)
        assert not act.done()
        async with running_table(settings):
            async with asyncio.timeout(30):
                reply = await act
                async for record in session.records():
                    records.append(record)
                    if record.sequence >= reply.events[-1].sequence:
                        break
            assert session.resumes >= 1 and not reply.duplicate
            sequences = [r.sequence for r in records]
            assert sequences == sorted(set(sequences))
            assert [e.sequence for e in reply.events] == sequences[-len(reply.events):]
            # The table's stream has the action once (a second would be refused stale).
            after = await clients["ops"].get_table(table_id)
            assert after.version >= reply.version
            await session.close()
    finally:
        for client in clients.values():
            await client.close()


async def test_an_action_on_top_of_a_record_not_handed_over_yet_loses_no_record(
        client_for: ClientFor) -> None:
    """A session opened behind the table (its stream's catch-up still to come) acts with no
    expected_sequence: the action applies on top of the records the session has not handed
    over; they come while it waits, its events in the reply after them. Every record is
    handed over, once and in order, the table's own record before the action's events."""
    table_id, (ann, bob) = await seated(client_for, ["ann", "bob"])
    view = await betting(ann, table_id)
    acting = ann if view.hand.to_act == 1 else bob
    before = [pb.TableEventRecord.FromString(r)
              for r in await watched(acting, table_id, view.version)]
    behind = before[-2].sequence  # the table's last record not handed over yet
    session = acting.play(table_id, after_sequence=behind)
    try:
        # The session's first action opens the stream: its catch-up and the reply race.
        async with asyncio.timeout(20):
            reply = await session.act(view.hand.legal_actions.actions[0],
                                      expected_sequence=None)
        assert reply.events[0].sequence > view.version
        records = await records_through(session, reply.events[-1].sequence)
    finally:
        await session.close()
    sequences = [r.sequence for r in records]
    assert sequences == sorted(set(sequences))
    assert before[-1].sequence in sequences  # the record the action applied on top of
    watch = await watched(acting, table_id, sequences[-1])
    assert [r.SerializeToString() for r in records] == watch[len(before) - 1:]


async def test_an_action_sent_again_on_a_session_behind_the_table_loses_no_record(
        client_for: ClientFor, monkeypatch: pytest.MonkeyPatch) -> None:
    """An action applied already (its first attempt's reply lost) sent again with its
    command id on a session opened behind the table, the watch's batches slowed: the
    duplicate's reply comes after the catch-up records written before the action, and the
    session hands every one of them over (it drops what is at or below a reply's events)."""
    table_id, (ann, bob) = await seated(client_for, ["ann", "bob"])
    view = await betting(ann, table_id)
    acting = ann if view.hand.to_act == 1 else bob
    before = [pb.TableEventRecord.FromString(r)
              for r in await watched(acting, table_id, view.version)]
    behind = before[-2].sequence  # the table's last record not handed over yet
    cid = new_command_id()
    first = await acting.act(table_id, view.hand.legal_actions.actions[0],
                             expected_sequence=None, command_id=cid)
    slow_watch(monkeypatch)
    session = acting.play(table_id, after_sequence=behind)
    try:
        async with asyncio.timeout(20):
            reply = await session.act(view.hand.legal_actions.actions[0],
                                      expected_sequence=None, command_id=cid)
        assert reply.duplicate and reply.version == first.version
        records = await records_through(session, reply.events[-1].sequence)
    finally:
        await session.close()
    sequences = [r.sequence for r in records]
    assert sequences == sorted(set(sequences))
    assert before[-1].sequence in sequences  # the record the action applied on top of
