"""The SDK's PlaySession (``TableService.Play``, issue 35) on crafted stream messages: every
record the player may see is handed over once and in sequence order, however the stream
interleaves records and replies; a reply that does not come is sent again after the retry
policy's pause, not at once."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from stud.v1 import table_pb2 as pb
from studclient.client import RetryPolicy
from studclient.errors import DeadlineExceeded
from studclient.play import PlaySession, _Waiting


@dataclass
class FakeClient:
    """What a PlaySession asks of its Client."""

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    versions: dict[str, int] = field(default_factory=dict)

    def saw(self, table_id: str, version: int) -> None:
        self.versions[table_id] = max(version, self.versions.get(table_id, 0))

    async def seat_request(self, method: str, table_id: str, seat: int | None = None,
                           expected: Any = None, command_id: str | None = None,
                           **fields: Any) -> Any:
        return getattr(pb, f"{method}Request")(table_id=table_id, seat=seat or 1,
                                               command_id=command_id or "c", **fields)


@dataclass
class FakeCall:
    """The open stream's writing side: what was written, and when."""

    sent: list[tuple[float, pb.PlayRequest]] = field(default_factory=list)

    async def write(self, message: pb.PlayRequest) -> None:
        self.sent.append((time.monotonic(), message))


def session(after: int = 8, retry: RetryPolicy | None = None) -> PlaySession:
    return PlaySession(FakeClient(retry or RetryPolicy()), "t1",  # type: ignore[arg-type]
                       after_sequence=after)


def wait_for(s: PlaySession, command_id: str) -> _Waiting:
    waiting = _Waiting(pb.PlayRequest(), asyncio.get_running_loop().create_future(), [])
    s._waiting[command_id] = waiting
    return waiting


def record(*sequences: int) -> pb.PlayMessage:
    """A (batched) record message of the stream."""
    first, *more = [pb.TableEventRecord(sequence=n, event_id=f"0-{n}") for n in sequences]
    first.more.extend(more)
    return pb.PlayMessage(record=first)


def reply(command_id: str, *sequences: int, version: int | None = None) -> pb.PlayMessage:
    events = [pb.TableEventRecord(sequence=n, event_id=f"0-{n}") for n in sequences]
    return pb.PlayMessage(reply=pb.PlayReply(command_id=command_id, reply=pb.CommandReply(
        version=version or max(sequences, default=0), events=events)))


def refused(command_id: str) -> pb.PlayMessage:
    return pb.PlayMessage(reply=pb.PlayReply(command_id=command_id, code=9, reason="stale",
                                             message="the table moved on"))


def handed(s: PlaySession) -> list[int]:
    out = []
    while not s._queue.empty():
        out.append(s._queue.get_nowait().sequence)
    return out


async def test_a_record_held_below_the_replys_events_is_handed_over_before_them() -> None:
    # The reviewer's reproduction: another player's record 9, committed before the action,
    # comes while it waits; the action (no expected_sequence) applies on top of it.
    s = session()
    wait_for(s, "c1")
    s._handle(record(9))
    assert handed(s) == []  # held while the action waits
    s._handle(reply("c1", 10, 11, 12))
    assert handed(s) == [9, 10, 11, 12]
    assert s.last_sequence == 12


async def test_held_records_on_both_sides_of_the_replys_events_come_in_order() -> None:
    s = session()
    wait_for(s, "c1")
    s._handle(record(9))
    s._handle(record(13, 14))
    s._handle(reply("c1", 10, 11, 12, version=12))
    assert handed(s) == [9, 10, 11, 12, 13, 14]


async def test_a_reply_while_another_action_waits_keeps_the_order() -> None:
    # Two actions waiting (two seats, say): the first's reply must not be handed over ahead
    # of a record the second's reply may still sit below, nor lose one held below it.
    s = session()
    wait_for(s, "c1")
    wait_for(s, "c2")
    s._handle(record(9))
    s._handle(reply("c1", 10, 11))
    s._handle(record(14))
    out = handed(s)
    s._handle(reply("c2", 12, 13))
    out += handed(s)
    assert out == [9, 10, 11, 12, 13, 14]


async def test_a_refused_action_hands_over_what_was_held() -> None:
    s = session()
    wait_for(s, "c1")
    s._handle(record(9, 10))
    s._handle(refused("c1"))
    assert handed(s) == [9, 10]


async def test_records_already_handed_over_are_dropped_once_merged() -> None:
    # A retried action's reply (duplicate) and a resumed stream's catch-up repeat records.
    s = session()
    s._handle(record(9))
    wait_for(s, "c1")
    s._handle(record(9, 10))
    s._handle(reply("c1", 10, 11))
    assert handed(s) == [9, 10, 11]


async def test_records_with_nothing_waiting_are_handed_over_at_once() -> None:
    s = session()
    s._handle(record(9, 10))
    assert handed(s) == [9, 10]


async def test_an_action_given_up_hands_over_what_was_held() -> None:
    s = session(retry=RetryPolicy(attempts=1, timeout_s=0.05, patience_s=0))
    call = FakeCall()
    s._call, s._task = call, asyncio.create_task(asyncio.sleep(0))
    action = asyncio.create_task(s.check(expected_sequence=None))
    while not s._waiting:
        await asyncio.sleep(0.01)
    s._handle(record(9))
    with pytest.raises(DeadlineExceeded):
        await action
    assert handed(s) == [9]


async def test_a_reply_timeout_waits_the_retry_pause_before_sending_again() -> None:
    # The reply is late, not lost: it comes during the pause, so the action is not sent
    # again (it was at once, before).
    s = session(retry=RetryPolicy(attempts=2, initial_backoff_s=30.0, timeout_s=0.05,
                                  patience_s=0))
    call = FakeCall()
    s._call, s._task = call, asyncio.create_task(asyncio.sleep(0))
    action = asyncio.create_task(s.check(expected_sequence=None))
    while not call.sent:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # past the reply timeout, well inside the 30 s pause
    assert len(call.sent) == 1
    command_id = call.sent[0][1].check.command_id
    s._handle(reply(command_id, 9))
    assert (await action).version == 9
    assert len(call.sent) == 1


async def test_a_lost_reply_is_sent_again_after_the_pause_with_the_same_command_id() -> None:
    s = session(retry=RetryPolicy(attempts=2, initial_backoff_s=0.2, timeout_s=0.05,
                                  patience_s=0))
    call = FakeCall()
    s._call, s._task = call, asyncio.create_task(asyncio.sleep(0))
    action = asyncio.create_task(s.check(expected_sequence=None))
    while len(call.sent) < 2:
        await asyncio.sleep(0.01)
    (first, message), (again, repeated) = call.sent
    assert repeated == message
    assert again - first >= 0.05 + 0.2 - 0.01  # the reply timeout, then the pause
    with pytest.raises(DeadlineExceeded):
        await action
