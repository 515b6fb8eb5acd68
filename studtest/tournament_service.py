"""An in-process tournament service for integration tests (real gRPC, real Redis), with a
client that signs each call for a principal, and helpers that wait on its process manager."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

import grpc

from stud.v1 import tournament_pb2 as pb
from stud.v1 import tournament_pb2_grpc as pb_grpc
from studkit.auth import IssuerSource, Principal, Role, TokenBook
from studkit.grpc_server import GrpcServer
from studtools.devkeys import DevKeys
from tournament.bootstrap import TournamentDeps, build_deps
from tournament.config import Settings
from tournament.server import create_server

OPERATOR: Final = Principal(Role.OPERATOR, "ops")
TIMEOUT_S: Final = 10.0


@dataclass
class TournamentClient:
    stub: pb_grpc.TournamentServiceStub
    keys: IssuerSource
    tokens: TokenBook = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = TokenBook(self.keys)

    def md(self, who: Principal) -> tuple[tuple[str, str]]:
        return self.tokens.metadata(who)

    async def create(self, tid: str, config: pb.TournamentConfig, command_id: str = "",
                     who: Principal = OPERATOR) -> pb.TournamentReply:
        reply: pb.TournamentReply = await self.stub.CreateTournament(
            pb.CreateTournamentRequest(tournament_id=tid, config=config,
                                       command_id=command_id or f"create-{tid}"),
            metadata=self.md(who), timeout=TIMEOUT_S)
        return reply

    async def register(self, tid: str, who: Principal, command_id: str) -> pb.TournamentReply:
        reply: pb.TournamentReply = await self.stub.Register(
            pb.RegisterRequest(tournament_id=tid, command_id=command_id),
            metadata=self.md(who), timeout=TIMEOUT_S)
        return reply

    async def unregister(self, tid: str, who: Principal,
                         command_id: str) -> pb.TournamentReply:
        reply: pb.TournamentReply = await self.stub.Unregister(
            pb.UnregisterRequest(tournament_id=tid, command_id=command_id),
            metadata=self.md(who), timeout=TIMEOUT_S)
        return reply

    async def cancel(self, tid: str, reason: str, command_id: str,
                     who: Principal = OPERATOR) -> pb.TournamentReply:
        reply: pb.TournamentReply = await self.stub.CancelTournament(
            pb.CancelTournamentRequest(tournament_id=tid, reason=reason,
                                       command_id=command_id),
            metadata=self.md(who), timeout=TIMEOUT_S)
        return reply

    async def get(self, tid: str, who: Principal = OPERATOR) -> pb.TournamentView:
        view: pb.TournamentView = await self.stub.GetTournament(
            pb.GetTournamentRequest(tournament_id=tid), metadata=self.md(who),
            timeout=TIMEOUT_S)
        return view


@dataclass
class OffsetClock:
    """The wall clock plus an offset the test moves: a tournament service built with it
    (``running_tournament(..., clock=)``) takes its start, its level clock and its
    deadlines by it, so a start comes when the test moves the clock past it, not when a busy
    machine happens to get there (the offset starts at 0: the wall clock)."""

    offset: float = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def jump_to(self, at: float) -> None:
        """From now on the clock reads ``at`` and runs on from there (never back)."""
        self.offset = max(self.offset, at - time.time())


@dataclass
class RunningTournament:
    settings: Settings
    deps: TournamentDeps
    port: int
    client: TournamentClient
    server: GrpcServer


@contextlib.asynccontextmanager
async def running_tournament(settings: Settings, keys: DevKeys, *,
                             prepare: Callable[[TournamentDeps], None] | None = None,
                             clock: Callable[[], float] | None = None
                             ) -> AsyncIterator[RunningTournament]:
    """Start the service for ``settings`` (``addr="127.0.0.1:0"``) with its process manager;
    stop both on exit. ``prepare`` sees the dependencies before anything starts (a test's
    wrapper around the wallet or the store). ``clock``: the time the service decides by
    (:class:`OffsetClock`; None: the wall clock)."""
    deps = build_deps(settings, clock or time.time)
    if prepare is not None:
        prepare(deps)
    server, port = create_server(settings, deps)
    await deps.start()
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.TournamentServiceStub(channel)  # type: ignore[no-untyped-call]
            yield RunningTournament(settings, deps, port, TournamentClient(stub, keys), server)
    finally:
        await server.stop(None)
        await deps.close()


async def freeze(running: RunningTournament) -> None:
    """The replica stops as a ``kill -9`` or a frozen process would: its keeper's heartbeat
    and renewals end and nothing is handed back (its leases run out)."""
    task = running.deps.leases.task
    if task is not None:
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=0.1)
        running.deps.leases.task = None


async def kill(running: RunningTournament) -> None:
    """:func:`freeze`, and its process manager and its server gone too, mid-round."""
    await freeze(running)
    task = running.deps.task
    if task is not None:
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=0.1)
        running.deps.task = None
    running.deps.leases.held.clear()
    await running.server.stop(None)


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float = 10.0) -> None:
    """Wait until ``check()`` holds (the process manager works in rounds)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while not await check():
        if loop.time() > end:
            raise AssertionError("the condition never held")
        await asyncio.sleep(0.05)
