"""``Client._call``'s ``not_owner`` redirects, with the replicas scripted (each address's
answers in order): the first few are followed at once; past them a redirect to a new owner
is still followed, after the not_owner pause, while the call's patience lasts. A replica
killed and restarted while its tables are taken over names one owner after another, and a
client that stopped following after three went on asking a replica that is not the owner
until its patience ran out (the tournament campaign's bot error of 2026-12-06). The same
client against real replicas: tests/integration/client/test_replicas.py."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from stud.v1 import table_pb2
from studclient import client as client_module
from studclient.client import REDIRECTS_AT_ONCE, Client, RetryPolicy
from studclient.errors import DETAILS_KEY, REASON_KEY, StudError


def not_owner(owner: str) -> grpc.aio.AioRpcError:
    status = status_pb2.Status(code=grpc.StatusCode.FAILED_PRECONDITION.value[0])
    status.details.add().Pack(error_details_pb2.ErrorInfo(
        reason="not_owner", metadata={"owner": owner}))
    trailing = grpc.aio.Metadata((REASON_KEY, "not_owner"),
                                 (DETAILS_KEY, status.SerializeToString()))
    return grpc.aio.AioRpcError(grpc.StatusCode.FAILED_PRECONDITION, grpc.aio.Metadata(),
                                trailing, details="not the owner")


class Replicas:
    """Scripted table replicas: ``answers[address]``, each an error to raise or a reply."""

    def __init__(self, answers: dict[str, list[Any]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def stub(self, client: Client, table_id: str | None = None) -> Any:
        address = client.route(table_id or "") or "first"
        replicas = self

        class Stub:
            async def Check(self, request: Any, metadata: Any, timeout: float) -> Any:
                replicas.asked.append(address)
                answer = replicas.answers[address].pop(0)
                if isinstance(answer, BaseException):
                    raise answer
                return answer

        return Stub()


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    taken: list[float] = []
    real_sleep = asyncio.sleep

    async def pause(seconds: float) -> None:
        taken.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(client_module.asyncio, "sleep", pause)
    return taken


def a_client(replicas: Replicas, monkeypatch: pytest.MonkeyPatch,
             patience_s: float = 8.0) -> Client:
    client = Client(grpc.aio.insecure_channel("127.0.0.1:9"), None, None, "token",
                    retry=RetryPolicy(patience_s=patience_s))
    monkeypatch.setattr(client, "table_stub", lambda table_id=None: replicas.stub(
        client, table_id))
    return client


async def call(client: Client) -> Any:
    request = table_pb2.CheckRequest(table_id="t1", seat=1, command_id="c1")
    return await asyncio.wait_for(client._call("Check", request), 5)


async def test_an_owner_named_after_the_first_redirects_is_still_followed(
        monkeypatch: pytest.MonkeyPatch, pauses: list[float]) -> None:
    """b and c name each other while the table changes hands, then b names d, the owner:
    the fourth redirect is followed after a pause, and d answers."""
    reply = table_pb2.CommandReply(version=7)
    replicas = Replicas({"first": [not_owner("b")], "b": [not_owner("c"), not_owner("d")],
                         "c": [not_owner("b")], "d": [reply]})
    client = a_client(replicas, monkeypatch)
    assert await call(client) == reply
    assert replicas.asked == ["first", "b", "c", "b", "d"]
    assert client.route("t1") == "d"
    assert len(pauses) == 4 - REDIRECTS_AT_ONCE  # the redirects past the first three
    await client.close()


async def test_redirects_that_never_reach_the_owner_end_with_the_patience(
        monkeypatch: pytest.MonkeyPatch, pauses: list[float]) -> None:
    """Two replicas naming each other for ever: followed, after pauses once past the first
    three, until the call's attempts and patience are spent; then ``not_owner``."""
    endless = [not_owner("c") for _ in range(100)]
    replicas = Replicas({"first": [not_owner("b")], "b": endless,
                         "c": [not_owner("b") for _ in range(100)]})
    client = a_client(replicas, monkeypatch, patience_s=0.0)
    with pytest.raises(StudError) as caught:
        await call(client)
    assert caught.value.reason == "not_owner"
    retry = RetryPolicy(patience_s=0.0)
    assert len(pauses) == len(retry.delays())  # the attempts' pauses, no patience left
    assert len(replicas.asked) == REDIRECTS_AT_ONCE + len(retry.delays()) + 1
    await client.close()


def rate_limited() -> grpc.aio.AioRpcError:
    trailing = grpc.aio.Metadata((REASON_KEY, "rate_limited"))
    return grpc.aio.AioRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.aio.Metadata(),
                                trailing, details="more than 100 calls a second")


async def test_a_rate_limited_call_is_sent_again_after_a_pause(
        monkeypatch: pytest.MonkeyPatch, pauses: list[float]) -> None:
    """``rate_limited`` says back off and retry: the same request is sent again after a
    pause (a command keeps its id, so it is done once), where it ended the call."""
    reply = table_pb2.CommandReply(version=3)
    replicas = Replicas({"first": [rate_limited(), rate_limited(), reply]})
    client = a_client(replicas, monkeypatch)
    assert await call(client) == reply
    assert replicas.asked == ["first"] * 3
    assert len(pauses) == 2
    await client.close()


async def test_another_resource_exhausted_is_not_retried(
        monkeypatch: pytest.MonkeyPatch, pauses: list[float]) -> None:
    """RESOURCE_EXHAUSTED for another reason (a stream limit) is not a rate limit: the
    call ends with it at once."""
    other = grpc.aio.AioRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.aio.Metadata(),
                                 grpc.aio.Metadata((REASON_KEY, "too_many_streams")),
                                 details="too many streams")
    replicas = Replicas({"first": [other]})
    client = a_client(replicas, monkeypatch)
    with pytest.raises(StudError) as caught:
        await call(client)
    assert caught.value.reason == "too_many_streams"
    assert pauses == [] and replicas.asked == ["first"]
    await client.close()
