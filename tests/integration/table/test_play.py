"""``TableService.Play`` over real gRPC against the whole room (issue 35): players play whole
hands each on their own stream; what each stream carries is what WatchTable shows an
observer, their own actions' records in the replies only, never twice."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from studkit.commandwindow import new_id
from studtest.redis import TestRedis
from studtest.table import OPERATOR, Room, player, slow_watch
from studtools.devkeys import DevKeys
from table.play import record_message
from table.views import batch_bytes

from .play_support import PlayStream, play_hands
from .test_showdown_secrecy import cards_in, play_muck_hand, stacked_room, watch_all

pytestmark = pytest.mark.integration


async def observed(room: Room, table_id: str, upto: int) -> list[pb.TableEventRecord]:
    """The operator's WatchTable from the start to the record at ``upto``."""
    out: list[pb.TableEventRecord] = []
    call = room.client.stub.WatchTable(pb.WatchTableRequest(table_id=table_id),
                                       metadata=room.client.md(OPERATOR))
    try:
        async with asyncio.timeout(20):
            async for record in call:
                out.append(record)
                if record.sequence >= upto:
                    break
    finally:
        call.cancel()
    return out


async def at_the_bring_in(room: Room) -> tuple[str, pb.TableView]:
    """A table of ann (seat 1) and bob (seat 2) in its first hand, its bring-in due."""
    table_id = await seated(room, {1: "ann", 2: "bob"})
    view = await room.client.wait_for(table_id, lambda v: v.hand.to_act != 0
                                      and v.hand.phase == pb.HAND_PHASE_BETTING)
    return table_id, view


def reached(stream: PlayStream, version: int) -> bool:
    """Whether ``stream`` has carried the record at ``version`` (as a record or a reply's)."""
    return any(r.sequence >= version for r in stream.records) or any(
        e.sequence >= version for rep in stream.replies for e in rep.reply.events)


async def seated(room: Room, names: dict[int, str]) -> str:
    table_id = await room.client.open_table()
    for seat, name in names.items():
        await room.fund(name)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=10_000), player(name))
    return table_id


async def test_players_play_whole_hands_each_on_their_own_play_stream(room: Room) -> None:
    names = {1: "ann", 3: "bob", 5: "cat"}
    table_id = await seated(room, names)
    # ann batched, the others not; each from the table's start.
    streams = {name: await PlayStream.open(room, player(name), table_id,
                                           batched=name == "ann")
               for name in names.values()}
    try:
        replies = await play_hands(room, table_id, streams, 3, random.Random(35))
        view = await room.client.view(table_id)
        watched = await observed(room, table_id, view.version)
        by_sequence = {r.sequence: r for r in watched}
        assert [r.sequence for r in watched] == sorted(by_sequence)
        applied = [r for r in replies if r.HasField("reply")]
        assert len(applied) >= 3 * 3  # at least a bring-in and two more a hand
        for name, stream in streams.items():
            await stream.wait(lambda s=stream: reached(s, view.version))
            own = [e for rep in stream.replies if rep.HasField("reply")
                   for e in rep.reply.events]
            seen = [r.sequence for r in stream.records]
            # The stream's records are in order, each once; its own actions' records come
            # in its replies only, never again as records.
            assert seen == sorted(set(seen))
            assert not {e.sequence for e in own} & set(seen), name
            # Together they are exactly what the observer saw, record for record (no
            # mucked hand here: every viewer sees the same records).
            mine = {r.sequence: r for r in [*stream.records, *own]
                    if r.sequence <= view.version}  # the next hand goes on meanwhile
            assert sorted(mine) == sorted(by_sequence), name
            for sequence, record in mine.items():
                assert record == by_sequence[sequence], (name, sequence)
            # No down card on a player's stream, their own included (the table never
            # holds one; the owner reads theirs from the dealer).
            for record in [*stream.records, *own]:
                assert not record.event.down_card_dealt.HasField("card"), (name, record)
            # Others' actions arrive as records.
            others = {rep.reply.events[0].sequence for other, s in streams.items()
                      if other != name for rep in s.replies if rep.HasField("reply")}
            assert others <= set(seen)
            # Replies come in order, each naming its action's command id.
            assert all(rep.command_id for rep in stream.replies)
        assert all(r.reply.version > 0 for r in applied)
    finally:
        for stream in streams.values():
            await stream.close()


@pytest.mark.parametrize("late", [False, True], ids=["watch", "late_watch"])
async def test_replies_come_in_order_and_a_retry_is_a_duplicate(
        room: Room, monkeypatch: pytest.MonkeyPatch, late: bool) -> None:
    """Replies keep the order of their actions, with the watch as it is and with its
    batches late (the bring-in's reply then waits for its records: the retry's and the stale
    fold's refusal wait behind it)."""
    if late:
        slow_watch(monkeypatch)
    table_id, view = await at_the_bring_in(room)
    to_act = view.hand.to_act
    name = next(s.player_id for s in view.seats if s.seat == to_act)
    stream = await PlayStream.open(room, player(name), table_id)
    try:
        cids = [new_id() for _ in range(3)]
        # Three messages at once: the bring-in (applied), the same again (a retry), and a
        # fold that is now stale; each answered in the order sent.
        for cid in (cids[0], cids[0]):
            await stream.send(pb.PlayRequest(post_bring_in=pb.PostBringInRequest(
                table_id=table_id, seat=to_act, command_id=cid,
                expected_sequence=view.version)))
        await stream.send(pb.PlayRequest(fold=pb.FoldRequest(
            table_id=table_id, seat=to_act, command_id=cids[2],
            expected_sequence=view.version)))
        await stream.wait(lambda: len(stream.replies) >= 3)
        first, again, stale = stream.replies[:3]
        assert [r.command_id for r in stream.replies] == [cids[0], cids[0], cids[2]]
        assert first.HasField("reply") and not first.reply.duplicate
        assert again.HasField("reply") and again.reply.duplicate
        assert again.reply.version == first.reply.version
        assert list(again.reply.events) == list(first.reply.events)
        assert not stale.HasField("reply")
        assert stale.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
        assert stale.reason == "stale"
        # The unary call with the same id and request is the same duplicate (one fingerprint
        # for the call and the stream's message).
        unary = await room.client.stub.PostBringIn(pb.PostBringInRequest(
            table_id=table_id, seat=to_act, command_id=cids[0],
            expected_sequence=view.version), metadata=room.client.md(player(name)))
        assert unary.duplicate and unary.version == first.reply.version
    finally:
        await stream.close()


async def act_passively(room: Room, table_id: str, version: int
                        ) -> tuple[str, pb.CommandReply, int]:
    """The next action after the view at ``version`` by a unary call: check, else call,
    else the first legal; who made it, its reply and the view's version it was made at."""
    view = await room.client.wait_for(
        table_id, lambda v: v.version > version and v.hand.phase == pb.HAND_PHASE_BETTING
        and v.hand.to_act != 0 and bool(v.hand.legal_actions.actions))
    actions = {a.kind: a for a in view.hand.legal_actions.actions}
    action = actions.get(6) or actions.get(5) or view.hand.legal_actions.actions[0]
    method, request = {1: ("PostBringIn", pb.PostBringInRequest),
                       2: ("Complete", pb.CompleteRequest), 5: ("Call", pb.CallRequest),
                       6: ("Check", pb.CheckRequest)}[action.kind]
    fields: dict[str, object] = dict(table_id=table_id, seat=view.hand.to_act,
                                     expected_sequence=view.version)
    if action.kind == 2:
        fields["to"] = action.to
    mover = next(s.player_id for s in view.seats if s.seat == view.hand.to_act)
    return (mover, await room.client.call(method, request(**fields), player(mover)),
            view.version)


async def test_only_this_streams_own_actions_are_left_out(room: Room) -> None:
    """Two Play streams of one player: the records of an action sent on one come in its
    reply there and as records on the other; the player's unary calls' come whole on both,
    and not at all on a third stream whose watch asked for skip_own."""
    table_id, view = await at_the_bring_in(room)
    to_act = view.hand.to_act
    name = next(s.player_id for s in view.seats if s.seat == to_act)
    one, two = [await PlayStream.open(room, player(name), table_id) for _ in range(2)]
    skipping = PlayStream(room.client.stub.Play(metadata=room.client.md(player(name))))
    await skipping.send(pb.PlayRequest(watch=pb.WatchTableRequest(table_id=table_id,
                                                                  skip_own=True)))
    skipping._reader = asyncio.create_task(skipping._read())
    try:
        await skipping.wait(lambda: any(r.sequence == view.version
                                        for r in skipping.records))
        reply = await one.act("post_bring_in", table_id=table_id, seat=to_act,
                              expected_sequence=view.version)
        assert reply.HasField("reply")
        on_one = {e.sequence for e in reply.reply.events}
        # Unary actions until the player has made one and someone else one after it.
        by_call: set[int] = set()
        version, last = view.version, ""
        for _ in range(12):
            mover, done, version = await act_passively(room, table_id, version)
            if mover == name:
                by_call |= {e.sequence for e in done.events}
            elif by_call:
                last = mover
                break
        assert by_call and last, "the hand ended before the player acted by a call"
        end = max(e.sequence for e in done.events)
        for stream in (one, two, skipping):
            await stream.wait(lambda s=stream: any(r.sequence >= end for r in s.records))
        on = {n: {r.sequence for r in s.records} for n, s in
              (("one", one), ("two", two), ("skipping", skipping))}
        assert not on_one & on["one"] and on_one <= on["two"]
        assert by_call <= on["one"] and by_call <= on["two"]
        assert not (on_one | by_call) & on["skipping"]
    finally:
        for stream in (one, two, skipping):
            await stream.close()


async def test_each_play_stream_carries_what_its_callers_watch_does(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys) -> None:
    """A hand that ends with mucked hands (history_reveals_mucked on): the players dealt in
    get the mucked cards on Play as on WatchTable, a player not dealt in and the operator do
    not; each caller's Play stream is record for record its WatchTable."""
    async with stacked_room(redis_server, redis_url, dev_keys) as room:
        table_id = await play_muck_hand(room, reveals_mucked=True)
        version = (await room.client.view(table_id)).version
        public = set().union(*(cards_in(r) for r in await watch_all(room, table_id,
                                                                     OPERATOR)))
        for who in (player("ann"), player("bob"), player("cat"), player("zed"), OPERATOR):
            stream = await PlayStream.open(room, who, table_id, batched=who.name == "bob")
            try:
                await stream.wait(lambda s=stream: reached(s, version))
                watched = await watch_all(room, table_id, who)
                assert stream.records == watched, who
                seen = set().union(*(cards_in(r) for r in stream.records))
                if who.name in ("zed", "ops"):
                    assert seen == public, who
                else:
                    assert seen > public, who  # the mucked hands of the hand dealt in
            finally:
                await stream.close()


@pytest.mark.parametrize("size", [0, 1, 127, 128, 300, 16_383, 16_384, 70_000])
def test_a_record_message_is_what_serializing_one_gives(size: int) -> None:
    """``record_message`` builds ``PlayMessage{record=R}`` from R's bytes (the key of field
    1, R's length as a varint, R): the very bytes serializing the message gives, for
    lengths of one, two and three varint bytes, batched records included."""
    record = pb.TableEventRecord(event_id="0-7", sequence=7, hand_number=1)
    record.event.hand_ended.hand_number = 1
    if size:
        record.event_id = "0-" + "9" * size
    data = record.SerializeToString()
    assert record_message(data) == pb.PlayMessage(record=record).SerializeToString()
    assert pb.PlayMessage.FromString(record_message(data)).record == record
    more = pb.TableEventRecord(event_id="0-8", sequence=8)
    batch = batch_bytes([data, more.SerializeToString()])
    both = pb.TableEventRecord()
    both.CopyFrom(record)
    both.more.append(more)
    assert record_message(batch) == pb.PlayMessage(record=both).SerializeToString()


async def test_a_reply_never_comes_before_a_record_written_before_its_action(
        room: Room, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watch's batches slowed (each 0.2 s late), so that an action's reply is ready
    before the records written before it have left: another player's bring-in by a unary
    call, then this player's call on the Play stream with no expected_sequence, applied on
    top of it. The stream carries the bring-in's records before the reply, never after (a
    client folding by sequence would drop a record that comes after a reply past it)."""
    table_id, view = await at_the_bring_in(room)
    first = view.hand.to_act
    other = next(s for s in view.seats if s.seat != first)
    slow_watch(monkeypatch)
    stream = await PlayStream.open(room, player(other.player_id), table_id)
    try:
        await stream.wait(lambda: reached(stream, view.version))
        mover = next(s.player_id for s in view.seats if s.seat == first)
        brought = await room.client.call("PostBringIn", pb.PostBringInRequest(
            table_id=table_id, seat=first, expected_sequence=view.version,
            command_id=new_id()), player(mover))
        before = {e.sequence for e in brought.events}
        reply = await stream.act("call", table_id=table_id, seat=other.seat)
        assert reply.HasField("reply"), reply
        await stream.wait(lambda: before <= {r.sequence for r in stream.records})
        order = [("reply", max(e.sequence for e in m.reply.reply.events))
                 if m.HasField("reply") else ("record", m.record.sequence)
                 for m in stream.messages]
        at_reply = order.index(("reply", max(e.sequence for e in reply.reply.events)))
        late_records = [s for kind, s in order[at_reply:] if kind == "record" and s in before]
        assert late_records == [], order
    finally:
        await stream.close()


async def test_a_retry_on_a_resumed_stream_comes_after_the_records_before_its_action(
        room: Room, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream resumed from before another player's bring-in sends again a call applied
    meanwhile on top of it (its reply lost with the stream that carried it, as a PlaySession
    sends every waiting action on the next stream): the duplicate's reply comes after the
    catch-up's bring-in records, never before them (the watch slowed: the reply is ready
    first)."""
    table_id, view = await at_the_bring_in(room)
    first = view.hand.to_act
    other = next(s for s in view.seats if s.seat != first)
    mover = next(s.player_id for s in view.seats if s.seat == first)
    brought = await room.client.call("PostBringIn", pb.PostBringInRequest(
        table_id=table_id, seat=first, expected_sequence=view.version,
        command_id=new_id()), player(mover))
    before = {e.sequence for e in brought.events}
    cid = new_id()
    called = await room.client.call("Call", pb.CallRequest(
        table_id=table_id, seat=other.seat, command_id=cid), player(other.player_id))
    slow_watch(monkeypatch)
    stream = await PlayStream.open(room, player(other.player_id), table_id,
                                   after=view.version, batched=True)
    try:
        await stream.send(pb.PlayRequest(call=pb.CallRequest(
            table_id=table_id, seat=other.seat, command_id=cid)))
        await stream.wait(lambda: bool(stream.replies)
                          and before <= {r.sequence for r in stream.records})
        reply = stream.replies[0]
        assert reply.HasField("reply") and reply.reply.duplicate
        assert reply.reply.version == called.version
        order = ["reply" if m.HasField("reply") else
                 [m.record.sequence, *[r.sequence for r in m.record.more]]
                 for m in stream.messages]
        at_reply = order.index("reply")
        shown = {s for run in order[:at_reply] if run != "reply" for s in run}
        assert before <= shown, order
    finally:
        await stream.close()


async def test_a_message_that_ends_the_stream_loses_no_reply_the_watch_is_writing(
        room: Room, monkeypatch: pytest.MonkeyPatch) -> None:
    """An applied action's reply waits for its records (the watch slowed), the watch takes it
    from the order with them and is writing it (each of its writes held 0.5 s) when an empty
    message ends the stream: the reply is written before the stream ends, not lost with the
    watch stopped in the middle of its write."""
    from table.play import PlayStreams

    writing = asyncio.Event()
    armed = False
    original = PlayStreams._write

    async def held(stream: object, context: object, messages: list[bytes]) -> None:
        task = asyncio.current_task()
        if armed and messages and task is not None \
                and task.get_coro().__qualname__ == "PlayStreams._watch":  # type: ignore[union-attr]
            writing.set()
            await asyncio.sleep(0.5)
        await original(stream, context, messages)  # type: ignore[arg-type]

    monkeypatch.setattr(PlayStreams, "_write", staticmethod(held))
    slow_watch(monkeypatch)
    table_id, view = await at_the_bring_in(room)
    to_act = view.hand.to_act
    name = next(s.player_id for s in view.seats if s.seat == to_act)
    stream = await PlayStream.open(room, player(name), table_id)
    try:
        await stream.wait(lambda: reached(stream, view.version))
        armed = True
        cid = new_id()
        await stream.send(pb.PlayRequest(post_bring_in=pb.PostBringInRequest(
            table_id=table_id, seat=to_act, command_id=cid, expected_sequence=view.version)))
        async with asyncio.timeout(20):
            await writing.wait()
        await stream.send(pb.PlayRequest())
        end = await stream.ending()
        assert end.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [r.command_id for r in stream.replies] == [cid], stream.messages
        assert stream.replies[0].HasField("reply")
    finally:
        await stream.close()
