"""The SDK's tournament client (libs/studclient/tournament.py): the seat tracker folded over
whole runs of the real tournament model (moves, busts, re-entries), following that resumes
from the last sequence after a disconnect without missing or repeating an event, and
commands retried on UNAVAILABLE with the same command id."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from stud.v1 import tournament_pb2 as pb
from studclient.client import Client, RetryPolicy
from studclient.errors import FailedPrecondition, NotFound, Unavailable
from studclient.tournament import Seat, SeatTracker, TournamentUpdate
from studtest.tournament import Run, play
from tournament import commands as c
from tournament import events as ev
from tournament.codec import event_to_proto
from tournament.structure import TURBO


def records(seed: int, field: int, seats: int) -> tuple[Run, list[pb.TournamentEventRecord]]:
    """A whole MTT of the model, as the Watch stream would show it."""
    run = Run(random.Random(seed))
    run.do(c.Create("T", ev.Config("mtt", ev.MULTI_TABLE, 1000, 100, TURBO, seats=seats,
                                   start_at=60.0, late_through_level=2, re_entries=1)))
    for i in range(field):
        run.do(c.Register(f"p{i}"))
    play(run, tick=60.0)
    out = [pb.TournamentEventRecord(sequence=i + 1, occurred_at=Timestamp(seconds=i),
                                    event=event_to_proto(e)) for i, e in enumerate(run.log)]
    return run, out


def follow(player: str, recs: list[pb.TournamentEventRecord]) -> list[TournamentUpdate]:
    tracker = SeatTracker(player)
    return [u for r in recs if (u := tracker.feed(r)) is not None]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_tracker_follows_every_player_through_moves_to_their_bust(seed: int) -> None:
    run, recs = records(seed, field=14, seats=4)
    moved_players = 0
    for player in sorted({e.player_id for e in run.t.field()}):
        tracker = SeatTracker(player)
        tables: list[str] = []
        for record in recs:
            event = record.event
            kind = event.WhichOneof("kind")
            seat = tracker.seat
            if kind == "busted" and event.busted.entry_id in tracker.entries:
                # Where the tracker had the player is where the model busted them.
                assert seat == Seat(event.busted.table_id, event.busted.seat)
            if kind == "hand_started" and seat is not None and tracker.at_table \
                    and event.hand_started.table_id == seat.table_id:
                assert seat.seat in {s.seat for s in event.hand_started.stacks}
            update = tracker.feed(record)
            assert update is not None
            if update.moved is not None:
                tables.append(update.moved.table_id)
        mine = {e.entry_id for e in run.t.field() if e.player_id == player}
        assert tracker.entries >= mine
        assert tracker.over and tracker.seat is None
        moves = [m for m in run.log if isinstance(m, ev.MoveStarted) and m.entry_id in mine]
        # One switch per seating: the first seat of each entry and each move.
        seated = sum(1 for m in run.log if isinstance(m, ev.SeatAssigned) and m.entry_id in mine)
        assert len(tables) == seated + len(moves)
        targets = iter(tables)
        assert all(m.to_table in targets for m in moves), "a move the tracker missed"
        moved_players += bool(moves)
    assert moved_players > 0, "no run moved anyone: the test would prove nothing"


def test_the_tracker_says_busted_once_per_bust_and_skips_repeats() -> None:
    run, recs = records(5, field=10, seats=5)
    winner = run.t.entries[run.t.winner].player_id if run.t.winner in run.t.entries else ""
    for player in {e.player_id for e in run.t.field()}:
        updates = follow(player, recs + recs[:5])  # a resume's overlap is skipped
        assert len(updates) == len(recs)
        busts = [u for u in updates if u.busted]
        # Once per bust of an entry (a re-entry busts again), never for the winner's.
        out = [e for e in run.t.field() if e.player_id == player and e.bust is not None]
        assert len(busts) == len(out) and (player != winner or not busts)
    tracker = SeatTracker("p1")
    for r in recs:
        tracker.feed(r)
    assert tracker.level >= 1 and tracker.last_sequence == len(recs)


# --- over a stub of the generated service stub (the channel itself is never used) ---------

def rpc_error(code: grpc.StatusCode, details: str = "") -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


class Stream:
    """One WatchTournament call: records after ``after``, then an ending."""

    def __init__(self, recs: list[pb.TournamentEventRecord], ending: grpc.aio.AioRpcError
                 ) -> None:
        self.recs, self.ending, self.cancelled = recs, ending, False

    def cancel(self) -> None:
        self.cancelled = True

    def __aiter__(self) -> AsyncIterator[pb.TournamentEventRecord]:
        return self._gen()

    async def _gen(self) -> AsyncIterator[pb.TournamentEventRecord]:
        for r in self.recs:
            yield r
        raise self.ending


class Service:
    def __init__(self, recs: list[pb.TournamentEventRecord], cut_every: int,
                 failures: int = 0, overlap: int = 0) -> None:
        self.recs, self.cut_every, self.overlap = recs, cut_every, overlap
        self.afters: list[int] = []
        self.commands: list[Any] = []
        self.failures = failures

    def WatchTournament(self, request: pb.WatchTournamentRequest, metadata: Any) -> Stream:
        self.afters.append(request.after_sequence)
        if request.tournament_id != "T":
            return Stream([], rpc_error(grpc.StatusCode.NOT_FOUND, "no_tournament"))
        start = max(0, request.after_sequence - self.overlap)
        return Stream(self.recs[start:start + self.cut_every],
                      rpc_error(grpc.StatusCode.UNAVAILABLE, "server went away"))

    async def Register(self, request: pb.RegisterRequest, metadata: Any, timeout: float
                       ) -> pb.TournamentReply:
        self.commands.append((request.tournament_id, request.command_id))
        if len(self.commands) <= self.failures:
            raise rpc_error(grpc.StatusCode.UNAVAILABLE, "restarting")
        return pb.TournamentReply(version=7, duplicate=len(self.commands) > 1)


TOKEN = "x." + "eyJzdWIiOiJwbGF5ZXI6cDEifQ" + ".y"  # sub: player:p1 (unsigned: client side)


def client_with(service: Service, retry: RetryPolicy | None = None) -> Client:
    channel = grpc.aio.insecure_channel("127.0.0.1:9")
    client = Client(channel, None, None, TOKEN, tournament=channel,
                    retry=retry or RetryPolicy(initial_backoff_s=0.001, max_backoff_s=0.002))
    client.tournaments._stub = service  # type: ignore[assignment]  # not the channel
    return client


@pytest.mark.parametrize(("cut_every", "overlap"), [(7, 0), (3, 2), (2, 1)])
async def test_follow_resumes_from_the_last_sequence_and_ends_when_over(
        cut_every: int, overlap: int) -> None:
    _run, recs = records(3, field=9, seats=4)
    service = Service(recs, cut_every, overlap=overlap)
    client = client_with(service)
    got = [u async for u in client.tournaments.follow("T")]
    await client.close()
    # Every record once, in order, through the one that ends the tournament.
    end = next(r.sequence for r in recs if r.event.WhichOneof("kind") == "finished")
    assert [u.record.sequence for u in got] == list(range(1, end + 1))
    assert [u.seat for u in got] == [u.seat for u in follow("p1", recs[:end])]
    # Each resume asks for what follows the last record received (the server's overlap
    # skipped), so each asks for more than the one before.
    yielded = {0} | {u.record.sequence for u in got}
    assert service.afters[0] == 0 and set(service.afters) <= yielded
    assert service.afters == sorted(set(service.afters))
    assert len(service.afters) == -(-end // (cut_every - overlap)) if overlap == 0 \
        else len(service.afters) > end // cut_every
    assert got[-1].kind in ("finished", "cancelled")


async def test_follow_gives_up_on_a_stream_that_only_repeats_itself() -> None:
    _run, recs = records(3, field=5, seats=3)
    client = client_with(Service(recs, 1, overlap=1))
    with pytest.raises(Unavailable):
        async for _ in client.tournaments.follow("T"):
            pass
    await client.close()


async def test_follow_raises_a_refusal_it_cannot_resume() -> None:
    client = client_with(Service([], 5))
    with pytest.raises(NotFound):
        async for _ in client.tournaments.follow("nope"):
            pass
    await client.close()


async def test_a_command_is_retried_on_unavailable_with_the_same_command_id() -> None:
    service = Service([], 1, failures=2)
    client = client_with(service)
    reply = await client.tournaments.register("T")
    await client.close()
    assert len(service.commands) == 3
    assert len({cid for _t, cid in service.commands}) == 1 and service.commands[0][1]
    assert reply.duplicate and reply.version == 7


async def test_a_command_is_retried_past_its_attempts_for_the_patience() -> None:
    """A server down for longer than the attempts last (a replica being taken over): the
    same command id again every ``max_backoff_s`` until it answers, within the patience;
    with no patience, the attempts alone, then the refusal."""
    def quick(patience_s: float) -> RetryPolicy:
        return RetryPolicy(attempts=3, initial_backoff_s=0.001, max_backoff_s=0.01,
                           patience_s=patience_s)

    service = Service([], 1, failures=12)
    client = client_with(service, quick(30))
    await client.tournaments.register("T")
    await client.close()
    assert len(service.commands) == 13
    assert len({cid for _t, cid in service.commands}) == 1
    service = Service([], 1, failures=12)
    client = client_with(service, quick(0))
    with pytest.raises(Unavailable):
        await client.tournaments.register("T")
    await client.close()
    assert len(service.commands) == 3


def pending(retry_after_ms: int) -> grpc.aio.AioRpcError:
    """The service's ``payment_pending`` refusal, with its retry hint in the ErrorInfo."""
    from google.rpc import error_details_pb2, status_pb2

    from studkit.grpc_errors import DETAILS_KEY
    info = error_details_pb2.ErrorInfo(reason="payment_pending", domain="stud-hilo",
                                       metadata={"retry_after_ms": str(retry_after_ms)})
    status = status_pb2.Status(code=grpc.StatusCode.FAILED_PRECONDITION.value[0])
    status.details.add().Pack(info)
    trailers = grpc.aio.Metadata(("stud-reason", "payment_pending"),
                                 (DETAILS_KEY, status.SerializeToString()))
    return grpc.aio.AioRpcError(grpc.StatusCode.FAILED_PRECONDITION, grpc.aio.Metadata(),
                                trailers, "the buy-in is still being charged")


class Pending(Service):
    """Unregister refused ``payment_pending`` ``refusals`` times, then answered."""

    def __init__(self, refusals: int) -> None:
        super().__init__([], 1)
        self.refusals = refusals

    async def Unregister(self, request: pb.UnregisterRequest, metadata: Any, timeout: float
                         ) -> pb.TournamentReply:
        self.commands.append((request.tournament_id, request.command_id))
        if len(self.commands) <= self.refusals:
            raise pending(5)
        return pb.TournamentReply(version=9, entry_id="e1")


async def test_unregister_waits_out_a_pending_buy_in_by_the_servers_hint() -> None:
    """Issue 29: Unregister right after Register is ``payment_pending``; the service says
    when to retry (``retry_after_ms``), and ``unregister(wait_s=...)`` retries then, with the
    same command id, until it is taken or the wait is spent; without a wait, the refusal."""
    service = Pending(refusals=2)
    client = client_with(service)
    reply = await client.tournaments.unregister("T", wait_s=5.0)
    assert reply.entry_id == "e1" and len(service.commands) == 3
    assert len({cid for _t, cid in service.commands}) == 1
    service = Pending(refusals=1)
    client = client_with(service)
    with pytest.raises(FailedPrecondition) as refused:
        await client.tournaments.unregister("T")
    assert refused.value.reason == "payment_pending"
    assert refused.value.metadata["retry_after_ms"] == "5"
    service = Pending(refusals=1000)
    client = client_with(service)
    with pytest.raises(FailedPrecondition):
        await client.tournaments.unregister("T", wait_s=0.05)
    assert 2 <= len(service.commands) <= 12
    await client.close()
