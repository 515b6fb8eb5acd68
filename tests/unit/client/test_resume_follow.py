"""studclient.resume.follow, the loop TableWatch and PlaySession resume through: which
endings open the stream again, after which pause, and when it gives up.

The calls are scripted stand-ins for a gRPC call (an async iterator of messages, then an
ending): this tests the loop's decisions alone. The same loop against a real table service
is in tests/integration/client (test_resilience, test_replicas, test_play_session)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from studclient import resume
from studclient.errors import DETAILS_KEY, REASON_KEY, StudError


def ending(code: grpc.StatusCode, reason: str = "", **metadata: str) -> grpc.aio.AioRpcError:
    """A call's ending with ``reason``, and ``metadata`` in its ErrorInfo (as the services
    send it: a ``google.rpc.Status`` in the trailing metadata)."""
    pairs: list[tuple[str, str | bytes]] = [(REASON_KEY, reason)] if reason else []
    if metadata:
        status = status_pb2.Status(code=code.value[0], message=reason)
        status.details.add().Pack(error_details_pb2.ErrorInfo(reason=reason,
                                                              metadata=metadata))
        pairs.append((DETAILS_KEY, status.SerializeToString()))
    trailing = grpc.aio.Metadata(*pairs)
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, details=reason)


class Call:
    """One opened call: its messages, then its ending (None: it ends without an error)."""

    def __init__(self, messages: list[Any], end: BaseException | None) -> None:
        self.messages, self.end = messages, end
        self.metadata: tuple[tuple[str, str], ...] = ()
        self.finished = False

    def __aiter__(self) -> Any:
        return self._run()

    async def _run(self) -> Any:
        for message in self.messages:
            yield message
        self.finished = True
        if self.end is not None:
            raise self.end


class FakeClient:
    """What follow asks of the Client: a token's metadata, the table's route."""

    def __init__(self, refreshable: bool = False) -> None:
        self.refreshable = refreshable
        self.fresh_tokens = 0
        self.forgotten = 0
        self.routes: dict[str, str] = {}

    async def metadata(self, fresh: bool = False) -> tuple[tuple[str, str], ...]:
        self.fresh_tokens += fresh
        return (("authorization", "Bearer fresh" if fresh else "Bearer old"),)

    def forget_route(self, table_id: str) -> None:
        self.forgotten += 1
        self.routes.pop(table_id, None)

    def follow_redirect(self, table_id: str, error: StudError) -> bool:
        owner = error.metadata.get("owner", "")
        if error.reason != "not_owner" or not owner or self.routes.get(table_id) == owner:
            return False
        self.routes[table_id] = owner
        return True


class Run:
    """follow over scripted calls; the pauses it takes are recorded, not slept."""

    def __init__(self, calls: list[Call], client: FakeClient | None = None,
                 close_after: int | None = None) -> None:
        self.calls, self.client = list(calls), client or FakeClient()
        self.opened: list[Call] = []
        self.handled: list[Any] = []
        self.failed: list[StudError] = []
        self.done: list[Call] = []
        self.pauses: list[float] = []
        self.close_after = close_after

    def closed(self) -> bool:
        return self.close_after is not None and len(self.opened) >= self.close_after \
            and self.opened[-1].finished

    def open_call(self, metadata: tuple[tuple[str, str], ...]) -> Call:
        call = self.calls.pop(0)
        call.metadata = metadata
        self.opened.append(call)
        return call

    async def fail(self, error: StudError) -> None:
        self.failed.append(error)

    async def go(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_sleep = asyncio.sleep

        async def pause(seconds: float) -> None:
            self.pauses.append(seconds)
            await real_sleep(0)

        monkeypatch.setattr(resume.asyncio, "sleep", pause)
        await asyncio.wait_for(resume.follow(
            self.client, "t1", open_call=self.open_call, handle=self.handled.append,
            closed=self.closed, fail=self.fail, done=self.done.append), 5)


async def test_unavailable_resumes_with_a_doubling_pause_then_gives_up(monkeypatch):
    calls = [Call([], ending(grpc.StatusCode.UNAVAILABLE)) for _ in range(resume.MAX_FAILURES + 1)]
    run = Run(calls)
    await run.go(monkeypatch)
    assert len(run.opened) == resume.MAX_FAILURES + 1
    assert [e.code for e in run.failed] == [grpc.StatusCode.UNAVAILABLE]
    assert run.pauses[:7] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0]
    assert set(run.pauses[6:]) == {resume.MAX_BACKOFF_S}
    assert len(run.pauses) == resume.MAX_FAILURES
    assert run.client.forgotten == resume.MAX_FAILURES + 1  # UNAVAILABLE forgets the route
    assert run.done == run.opened  # every call's end is reported once


async def test_a_message_resets_the_pause_and_the_count(monkeypatch):
    unavailable = grpc.StatusCode.UNAVAILABLE
    calls = [Call([], ending(unavailable)), Call([], ending(unavailable)),
             Call(["m1"], ending(unavailable)), Call(["m2"], None)]
    run = Run(calls, close_after=4)
    await run.go(monkeypatch)
    assert run.handled == ["m1", "m2"]
    assert run.pauses == [0.05, 0.1, 0.05]
    assert run.failed == []


async def test_an_ending_not_resumable_fails_at_once(monkeypatch):
    run = Run([Call(["m1"], ending(grpc.StatusCode.PERMISSION_DENIED, "not_seated"))])
    await run.go(monkeypatch)
    assert len(run.opened) == 1 and run.pauses == []
    assert [(e.code, e.reason) for e in run.failed] == [
        (grpc.StatusCode.PERMISSION_DENIED, "not_seated")]


async def test_an_expired_token_reopens_at_once_with_a_fresh_one(monkeypatch):
    run = Run([Call([], ending(grpc.StatusCode.UNAUTHENTICATED, "token_expired")),
               Call(["m"], None)], client=FakeClient(refreshable=True), close_after=2)
    await run.go(monkeypatch)
    assert [c.metadata for c in run.opened] == [
        (("authorization", "Bearer old"),), (("authorization", "Bearer fresh"),)]
    assert run.pauses == [] and run.failed == []


async def test_an_expired_token_without_a_provider_fails(monkeypatch):
    run = Run([Call([], ending(grpc.StatusCode.UNAUTHENTICATED, "token_expired"))])
    await run.go(monkeypatch)
    assert [e.reason for e in run.failed] == ["token_expired"]
    assert len(run.opened) == 1


async def test_not_owner_without_an_owner_resumes_until_the_limit(monkeypatch):
    calls = [Call([], ending(grpc.StatusCode.FAILED_PRECONDITION, "not_owner"))
             for _ in range(resume.MAX_FAILURES + 1)]
    run = Run(calls)
    await run.go(monkeypatch)
    assert len(run.opened) == resume.MAX_FAILURES + 1
    assert [e.reason for e in run.failed] == ["not_owner"]


async def test_a_clean_end_reopens_after_a_pause_until_closed(monkeypatch):
    run = Run([Call(["a"], None), Call(["b"], None)], close_after=2)
    await run.go(monkeypatch)
    assert run.handled == ["a", "b"] and run.pauses == [0.05] and run.failed == []


async def test_closing_during_an_error_returns_without_failing(monkeypatch):
    run = Run([Call([], ending(grpc.StatusCode.PERMISSION_DENIED, "not_seated"))],
              close_after=1)
    run.closed = lambda: len(run.opened) >= 1  # type: ignore[method-assign]
    await run.go(monkeypatch)
    assert run.failed == [] and len(run.opened) == 1


async def test_tokens_found_expired_again_pause_then_give_up(monkeypatch):
    """A provider whose fresh tokens the server still finds expired (its clock ahead, a
    cached token): the first expiry reopens at once, each next one in a row after a pause,
    and following gives up after MAX_FAILURES, never a tight loop."""
    calls = [Call([], ending(grpc.StatusCode.UNAUTHENTICATED, "token_expired"))
             for _ in range(resume.MAX_FAILURES + 1)]
    run = Run(calls, client=FakeClient(refreshable=True))
    await run.go(monkeypatch)
    assert len(run.opened) == resume.MAX_FAILURES + 1
    assert [e.reason for e in run.failed] == ["token_expired"]
    assert run.pauses[:3] == [0.05, 0.1, 0.2]
    assert len(run.pauses) == resume.MAX_FAILURES - 1  # all but the first expiry's
    assert run.client.fresh_tokens == resume.MAX_FAILURES


async def test_an_expiry_after_messages_reopens_at_once_again(monkeypatch):
    expired = ending(grpc.StatusCode.UNAUTHENTICATED, "token_expired")
    run = Run([Call(["a"], expired), Call(["b"], expired), Call(["c"], None)],
              client=FakeClient(refreshable=True), close_after=3)
    await run.go(monkeypatch)
    assert run.handled == ["a", "b", "c"] and run.pauses == [] and run.failed == []


async def test_replicas_naming_each_other_give_up(monkeypatch):
    """Two replicas, each naming the other as the table's owner (a stale route in a
    handover that never ends): each redirect is followed, after a pause, until
    MAX_FAILURES, then following gives up."""
    calls = [Call([], ending(grpc.StatusCode.FAILED_PRECONDITION, "not_owner",
                             owner=f"replica-{i % 2}:50051"))
             for i in range(resume.MAX_FAILURES + 1)]
    run = Run(calls)
    await run.go(monkeypatch)
    assert len(run.opened) == resume.MAX_FAILURES + 1
    assert [e.reason for e in run.failed] == ["not_owner"]
    assert len(run.pauses) == resume.MAX_FAILURES


async def test_a_redirect_then_messages_resets_the_count(monkeypatch):
    not_owner = ending(grpc.StatusCode.FAILED_PRECONDITION, "not_owner", owner="b:1")
    run = Run([Call([], not_owner), Call(["m"], None)], close_after=2)
    await run.go(monkeypatch)
    assert run.handled == ["m"] and run.failed == [] and run.client.routes == {"t1": "b:1"}


async def test_a_quiet_tables_watch_is_never_given_up_for_its_tokens_expiries(monkeypatch):
    """A table that sends nothing: each stream lives its token's lifetime (5 minutes here)
    and ends token_expired with no message. Each call open that long was healthy: the stream
    is opened again at once with a fresh token, however many times (the review's finding
    against counting every expiry)."""
    now = [0.0]

    def clock() -> float:
        now[0] += 150.0  # read twice a call: opened, ended
        return now[0]

    monkeypatch.setattr(resume, "_clock", clock)
    expired = ending(grpc.StatusCode.UNAUTHENTICATED, "token_expired")
    count = 2 * resume.MAX_FAILURES
    run = Run([Call([], expired) for _ in range(count)] + [Call(["m"], None)],
              client=FakeClient(refreshable=True), close_after=count + 1)
    await run.go(monkeypatch)
    assert run.failed == [] and run.handled == ["m"]
    assert run.pauses == [] and run.client.fresh_tokens == count
