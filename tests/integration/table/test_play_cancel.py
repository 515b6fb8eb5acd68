"""An action whose caller goes away, or whose reply is lost, once its append was sent (issue
35's review): the table's state follows what was appended and its driver goes on at once
(never at the turn's clock, 30 s away in these rooms), and a Play stream shows every record
that is not its own applied action's (a refusal's records come as records). Real Redis and
real gRPC; the store's ``append`` is wrapped only to act at one exact moment: after the real
append returned, before the actor has taken its outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
import redis.exceptions

from stud.v1 import table_pb2 as pb
from studkit.commandwindow import new_id
from studkit.store import EventStore
from studtest.table import OPERATOR, Room, player

from .play_support import PlayStream
from .test_play_attacks import _table, holder

pytestmark = pytest.mark.integration

FOLLOWS_S = 10.0
"""How long the table may take to show an append and move on: a third of the turn's clock
(``fast_settings``: 30 s), so a table that waits for its clock fails."""


def after_append(monkeypatch: pytest.MonkeyPatch, store: EventStore, command_id: str,
                 then: Callable[[], Awaitable[None]]) -> list[int]:
    """Run ``then`` right after the real append of the command whose id ends with
    ``command_id`` (its first attempt only) returned; the versions it appended at."""
    real = store.append
    seen: list[int] = []

    async def append(table_id: str, envelopes: Any, expected_version: int, stored_id: str,
                     *args: Any, **kwargs: Any) -> Any:
        result = await real(table_id, envelopes, expected_version, stored_id, *args,
                            **kwargs)
        if stored_id.endswith(command_id) and not seen:
            seen.append(result.version)
            await then()
        return result

    monkeypatch.setattr(store, "append", append)
    return seen


async def stored_version(room: Room, table_id: str) -> int:
    return await room.table_deps.events.version(table_id)


def bring_in(view: pb.TableView, table_id: str, command_id: str) -> pb.PostBringInRequest:
    return pb.PostBringInRequest(table_id=table_id, seat=view.hand.to_act,
                                 command_id=command_id, expected_sequence=view.version)


@pytest.mark.parametrize("over", ["unary", "play"])
async def test_an_action_whose_caller_goes_away_after_its_append_is_the_tables(
        room: Room, monkeypatch: pytest.MonkeyPatch, over: str) -> None:
    table_id, view = await _table(room)
    actor = room.table_deps.app.actor_of(table_id)
    assert actor is not None
    name = holder(view, view.hand.to_act)
    cid = new_id()
    calls: list[Any] = []
    gone = asyncio.Event()

    async def caller_goes_away() -> None:
        calls[0].cancel()
        try:
            await asyncio.sleep(0.5)  # the cancel reaches the server's handler meanwhile
        finally:
            gone.set()

    appended = after_append(monkeypatch, actor.store, cid, caller_goes_away)
    request = bring_in(view, table_id, cid)
    if over == "unary":
        call = room.client.stub.PostBringIn(request, metadata=room.client.md(player(name)))
        calls.append(call)
        with pytest.raises((grpc.aio.AioRpcError, asyncio.CancelledError)):
            await call
    else:
        stream = await PlayStream.open(room, player(name), table_id)
        calls.append(stream.call)
        await stream.send(pb.PlayRequest(post_bring_in=request))
    await asyncio.wait_for(gone.wait(), FOLLOWS_S)
    assert calls[0].cancelled()
    assert appended and appended[0] > view.version  # the append landed
    assert await stored_version(room, table_id) >= appended[0]
    # The table shows it (the actor took the append's outcome) and goes on: the other
    # player acts at once, at the version the table shows.
    shown = await room.client.wait_for(table_id, lambda v: v.version >= appended[0]
                                       and v.hand.to_act != view.hand.to_act,
                                       timeout=FOLLOWS_S)
    assert actor.version == await stored_version(room, table_id)
    other = holder(shown, shown.hand.to_act)
    reply = await room.client.call("Fold", pb.FoldRequest(
        table_id=table_id, seat=shown.hand.to_act, expected_sequence=shown.version),
        player(other))
    assert reply.version > shown.version
    await room.client.wait_for(table_id, lambda v: v.hands_started >= 2, timeout=FOLLOWS_S)
    if over == "play":
        # The stream's action was not cancelled with its stream: it went on to its end and
        # was counted then, as its unary call is.
        async with asyncio.timeout(FOLLOWS_S):
            while room.table_deps.metrics.sample(
                    "stud_grpc_requests_total", service="stud.v1.TableService",
                    method="Play/PostBringIn", code="OK") != 1:
                await asyncio.sleep(0.02)


async def test_a_retry_after_a_lost_reply_wakes_the_table(
        room: Room, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fold that ends the hand is appended, its reply lost (UNAVAILABLE): the actor
    folds what the store holds (at once, or at the retry, the recorded outcome), and the
    driver, woken, settles the hand and deals the next one at once."""
    table_id, view = await _table(room)
    actor = room.table_deps.app.actor_of(table_id)
    assert actor is not None
    await room.client.call("PostBringIn", bring_in(view, table_id, new_id()),
                           player(holder(view, view.hand.to_act)))
    view = await room.client.wait_for(table_id, lambda v: v.hand.to_act not in
                                      (0, view.hand.to_act), timeout=FOLLOWS_S)
    name = holder(view, view.hand.to_act)
    cid = new_id()

    async def reply_lost() -> None:
        raise redis.exceptions.TimeoutError("the append's reply was lost")

    appended = after_append(monkeypatch, actor.store, cid, reply_lost)
    fold = pb.FoldRequest(table_id=table_id, seat=view.hand.to_act, command_id=cid,
                          expected_sequence=view.version)
    with pytest.raises(grpc.aio.AioRpcError) as lost:
        await room.client.call("Fold", fold, player(name))
    assert lost.value.code() == grpc.StatusCode.UNAVAILABLE
    assert appended
    retry = await room.client.call("Fold", fold, player(name))
    assert retry.duplicate and retry.version == appended[0]
    await room.client.wait_for(table_id, lambda v: v.hands_started >= 2, timeout=FOLLOWS_S)
    assert actor.version == await stored_version(room, table_id)


async def test_records_of_a_refused_action_come_as_records(
        room: Room, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the stream's action with id X runs, the player's unary call with X but another
    command applies first: the action is refused (command_id_reused), and the unary call's
    records come on the stream as records."""
    table_id, view = await _table(room)
    name = holder(view, view.hand.to_act)
    stream = await PlayStream.open(room, player(name), table_id)
    await stream.wait(lambda: any(r.sequence == view.version for r in stream.records))
    app = room.table_deps.app
    act = app.act
    cid = new_id()
    first: list[int] = []

    async def unary_first(principal: Any, table_id_: str, command_id: str, *args: Any
                          ) -> Any:
        if command_id == cid and not first:
            first.append(0)
            reply = await room.client.call("PostBringIn", bring_in(view, table_id, cid),
                                           player(name))
            first[0] = reply.version
            # its records reach the stream while the stream's action is in flight
            await asyncio.sleep(0.5)
        return await act(principal, table_id_, command_id, *args)

    monkeypatch.setattr(app, "act", unary_first)
    reply = await stream.act("complete", table_id=table_id, seat=view.hand.to_act,
                             command_id=cid, to=view.hand.legal_actions.actions[-1].to
                             or 100, expected_sequence=view.version)
    assert reply.reason == "command_id_reused", reply
    assert first
    await stream.wait(lambda: any(r.sequence >= first[0] for r in stream.records))
    seen = [r.sequence for r in stream.records]
    assert set(range(view.version + 1, first[0] + 1)) <= set(seen)
    assert seen == sorted(set(seen))
    await stream.close()


async def test_records_of_an_unavailable_action_come_as_records(
        room: Room, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream's action is appended but its reply lost (UNAVAILABLE) and the client does
    not retry: its records come as records."""
    table_id, view = await _table(room)
    actor = room.table_deps.app.actor_of(table_id)
    assert actor is not None
    name = holder(view, view.hand.to_act)
    stream = await PlayStream.open(room, player(name), table_id)
    await stream.wait(lambda: any(r.sequence == view.version for r in stream.records))
    cid = new_id()

    async def reply_lost() -> None:
        # Its records reach the stream while it is in flight (the room folds them as a
        # catch-up would), then its reply is lost.
        await actor.catch_up()
        await asyncio.sleep(0.5)
        raise redis.exceptions.TimeoutError("the append's reply was lost")

    appended = after_append(monkeypatch, actor.store, cid, reply_lost)
    reply = await stream.act("post_bring_in", table_id=table_id, seat=view.hand.to_act,
                             command_id=cid, expected_sequence=view.version)
    assert reply.code == grpc.StatusCode.UNAVAILABLE.value[0], reply
    assert appended
    await stream.wait(lambda: any(r.sequence >= appended[0] for r in stream.records))
    seen = [r.sequence for r in stream.records]
    assert set(range(view.version + 1, appended[0] + 1)) <= set(seen)
    assert seen == sorted(set(seen))
    await stream.close()


async def test_an_action_under_way_when_the_watch_ends_is_answered(
        room: Room, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watch ends (the replica lets the table go: ``table_moved``) while the stream's
    action is being appended: the action is answered, then the stream ends."""
    table_id, view = await _table(room)
    actor = room.table_deps.app.actor_of(table_id)
    assert actor is not None
    name = holder(view, view.hand.to_act)
    stream = await PlayStream.open(room, player(name), table_id)
    await stream.wait(lambda: any(r.sequence == view.version for r in stream.records))
    cid = new_id()

    async def watch_ends() -> None:
        actor.close_watchers()
        await asyncio.sleep(0.5)  # the stream's watch sees its end meanwhile

    appended = after_append(monkeypatch, actor.store, cid, watch_ends)
    await stream.send(pb.PlayRequest(post_bring_in=bring_in(view, table_id, cid)))
    ended = await stream.ending()
    assert ended.code() == grpc.StatusCode.UNAVAILABLE, ended
    assert appended
    assert [r.command_id for r in stream.replies] == [cid]
    assert stream.replies[0].reply.version == appended[0]
    assert actor.version >= appended[0]
    assert (await room.client.view(table_id, OPERATOR)).version >= appended[0]
