"""The tournament's table client follows ``not_owner`` to the replica that owns the table
(found by ``make tournament``: with several table replicas every call for a table owned
elsewhere was refused and the tournament never went on). Channels here are plain objects
standing in for gRPC's, so that which address each call reached can be seen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from stud.v1 import table_pb2 as tpb
from studkit.grpc_errors import MappedError, trailing_metadata
from tournament.clients import Refused, Unavailable
from tournament.tables import REDIRECTS, TableClient


def refusal(reason: str, code: grpc.StatusCode = grpc.StatusCode.FAILED_PRECONDITION,
            **metadata: str) -> grpc.aio.AioRpcError:
    trailing = trailing_metadata(MappedError(code, reason, reason, metadata))
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailing),
                                details=reason)


class FakeChannel:
    """Answers every unary call by ``answer(address, method)``; records the calls."""

    def __init__(self, address: str, answer: Callable[[str, str], Any],
                 calls: list[tuple[str, str]]) -> None:
        self.address, self.answer, self.calls = address, answer, calls

    def unary_unary(self, method: str, *_args: Any, **_kwargs: Any) -> Any:
        name = method.rsplit("/", 1)[-1]

        async def call(request: Any, **_kw: Any) -> Any:
            self.calls.append((self.address, name))
            return self.answer(self.address, name)
        return call

    def unary_stream(self, method: str, *_args: Any, **_kwargs: Any) -> Any:
        return self.unary_unary(method)

    def stream_stream(self, method: str, *_args: Any, **_kwargs: Any) -> Any:
        return self.unary_unary(method)  # the table stub's Play: never called here

    async def close(self) -> None:
        return None


def client(answer: Callable[[str, str], Any]) -> tuple[TableClient, list[tuple[str, str]]]:
    calls: list[tuple[str, str]] = []
    first = FakeChannel("a", answer, calls)
    made = TableClient(first, lambda: (), 1.0,
                       connect=lambda address: FakeChannel(address, answer, calls))
    return made, calls


async def test_a_call_refused_not_owner_goes_to_the_owner_and_the_next_goes_straight_there(
        ) -> None:
    def answer(address: str, method: str) -> Any:
        if address != "b":
            raise refusal("not_owner", owner="b")
        return tpb.UnseatEntrantReply(stack=1234)

    tables, calls = client(answer)
    assert await tables.unseat("t1", 3, "ann", "k1") == 1234
    assert calls == [("a", "UnseatEntrant"), ("b", "UnseatEntrant")]
    await tables.seat("t1", 4, "bob", 50, "k2")
    assert calls[-1] == ("b", "SeatEntrant")
    await tables.aclose()


async def test_a_redirect_loop_or_an_owner_gone_is_an_outage_and_a_refusal_stays_one() -> None:
    def loop(address: str, method: str) -> Any:
        raise refusal("not_owner", owner="c" if address == "b" else "b")

    tables, calls = client(loop)
    with pytest.raises(Unavailable):
        await tables.seat("t1", 1, "ann", 10, "k")
    assert len(calls) == REDIRECTS + 1

    def nobody(address: str, method: str) -> Any:
        raise refusal("not_owner")

    tables, calls = client(nobody)
    with pytest.raises(Unavailable):
        await tables.seat("t1", 1, "ann", 10, "k")
    assert calls == [("a", "SeatEntrant")]

    def refused(address: str, method: str) -> Any:
        raise refusal("seat_taken")

    tables, calls = client(refused)
    with pytest.raises(Refused) as caught:
        await tables.seat("t1", 1, "ann", 10, "k")
    assert caught.value.reason == "seat_taken"


async def test_an_owner_that_goes_away_is_forgotten() -> None:
    down = {"b": False}

    def answer(address: str, method: str) -> Any:
        if address == "b" and down["b"]:
            raise refusal("unavailable", grpc.StatusCode.UNAVAILABLE)
        if address != "b":
            raise refusal("not_owner", owner="b")
        return tpb.UnseatEntrantReply(stack=7)

    tables, calls = client(answer)
    assert await tables.unseat("t1", 1, "ann", "k") == 7
    down["b"] = True
    with pytest.raises(Unavailable):
        await tables.unseat("t1", 1, "ann", "k")
    down["b"] = False
    calls.clear()
    assert await tables.unseat("t1", 1, "ann", "k") == 7
    assert calls[0][0] == "a"  # asked anew from the first address
