"""The room's figure: actions per second and action latency (p50, p99) with 16 concurrent bots
through the whole stack, beside the bare ceiling measured in the same run. Prints figures;
asserts nothing.

The stack: a real ``redis-server`` (one ACL user per service), and ``python -m dealer``,
``python -m wallet`` and ``python -m table`` as separate processes (``table.processes``).
4 tables x 4 bots (``--tables``, ``--bots``), next-hand delay 0: each bot is a player who
watches the table as its seat (``WatchTable``), folds the events with the rules to know when
it is its turn, and then acts with a random legal action (``expected_sequence`` set), timing
the call. Every action goes through auth, the table's decide/append, and the driver goes on
to the dealer (streets, showdown) and the wallet (settlement, reconciliation) between them.

The ceiling: a ``grpc.aio`` server in its own process whose one unary handler does one Lua
append (``studkit.store.EventStore.append``, a one-event command) to the caller's own stream
on the same Redis, called by as many concurrent callers as there are bots, and again by as
many as there are tables (at most one player per table can be acting at a time).

Run: ``make bench-room`` (or ``.venv/bin/python bench/bench_room.py --seconds 20``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

import rules
from rules import ActionKind, Phase
from stud.v1 import table_pb2 as pb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.auth import DevKeys
from studkit.mapping.events import event_from_proto
from studkit.redis_server import RedisServer, free_port, server_version
from table.processes import CHANNEL_OPTIONS, Clients, room_processes
from table.testing import fast_settings, player

SERVICES = ("table", "dealer", "wallet", "auditor")
PAYLOAD = b"p" * 48  # about the size of a typical serialized event
RPC = {ActionKind.BRING_IN: ("PostBringIn", pb.PostBringInRequest),
       ActionKind.COMPLETE: ("Complete", pb.CompleteRequest),
       ActionKind.BET: ("Bet", pb.BetRequest), ActionKind.RAISE: ("Raise", pb.RaiseRequest),
       ActionKind.CALL: ("Call", pb.CallRequest), ActionKind.CHECK: ("Check", pb.CheckRequest),
       ActionKind.FOLD: ("Fold", pb.FoldRequest)}
CEILING_METHOD = "/bench.Ceiling/Append"


@dataclass
class Window:
    """The measured window and what fell into it."""

    start: float = 0.0
    end: float = float("inf")
    latencies: list[float] = field(default_factory=list)
    refused: int = 0
    hands: int = 0

    def record(self, began: float, ended: float) -> None:
        if self.start <= began and ended <= self.end:
            self.latencies.append(ended - began)


@dataclass(frozen=True)
class Figure:
    label: str
    count: int
    seconds: float
    latencies: list[float]
    calls: int = 0
    """Every call, warm-up included."""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds per process over all the calls."""

    @property
    def per_s(self) -> float:
        return self.count / self.seconds

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    def line(self) -> str:
        mean = statistics.fmean(self.latencies) * 1000
        return (f"  {self.label:<46} {self.per_s:>8,.0f} /s   p50 {self.pct(0.50):6.2f} ms   "
                f"p99 {self.pct(0.99):6.2f} ms   mean {mean:6.2f} ms   (n={self.count})")


# --- the bare ceiling: one Lua append per unary call ---------------------------------------

async def serve_ceiling(port: int, redis_url: str) -> None:
    """The ceiling's server process: ``/bench.Ceiling/Append`` appends one event to the
    stream named in the request (raw bytes) at its next version."""
    from studkit.redis_client import connect
    from studkit.store import EventStore

    client = connect(redis_url)
    store = EventStore(client)
    versions: dict[str, int] = {}

    async def append(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        table_id = request.decode()
        envelope = EventEnvelope(event_type="BetMade", schema_version=1, hand_number=1,
                                 payload=PAYLOAD)
        result = await store.append(table_id, [envelope], versions.get(table_id, 0),
                                    command_id=uuid.uuid4().hex)
        versions[table_id] = result.version
        return b""

    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "bench.Ceiling", {"Append": grpc.unary_unary_rpc_method_handler(append)}),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


async def drive(workers: int, seconds: float, warm_up: float,
                step: Callable[[int], Awaitable[None]], label: str) -> Figure:
    """``workers`` concurrent loops of ``step(worker)``; the calls that begin and end inside
    the window after ``warm_up`` count."""
    window = Window()
    now = time.perf_counter()
    window.start, window.end = now + warm_up, now + warm_up + seconds

    calls = 0

    async def loop(worker: int) -> None:
        nonlocal calls
        while time.perf_counter() < window.end:
            began = time.perf_counter()
            await step(worker)
            calls += 1
            window.record(began, time.perf_counter())

    await asyncio.gather(*(loop(w) for w in range(workers)))
    return Figure(label, len(window.latencies), seconds, window.latencies, calls)


async def bench_ceiling(redis_url: str, concurrencies: list[int], seconds: float,
                        warm_up: float, redis_pid: int) -> list[Figure]:
    port = free_port()
    env = {**os.environ, "REDIS_URL": redis_url}
    proc = subprocess.Popen([sys.executable, __file__, "--serve-ceiling", str(port)], env=env)
    figures = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}",
                                             options=CHANNEL_OPTIONS) as channel:
            await asyncio.wait_for(channel.channel_ready(), 30)
            call = channel.unary_unary(CEILING_METHOD)
            for run, workers in enumerate(concurrencies):
                async def step(worker: int, run: int = run) -> None:
                    await call(f"ceiling-{run}-{worker}".encode(), timeout=10)

                pids = {"server": proc.pid, "redis": redis_pid, "callers": os.getpid()}
                before = {name: cpu_seconds(pid) for name, pid in pids.items()}
                figure = await drive(workers, seconds, warm_up, step,
                                     f"ceiling: unary + 1 Lua append, {workers} callers")
                figure.cpu.update({name: cpu_seconds(pid) - before[name]
                                   for name, pid in pids.items()})
                figures.append(figure)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return figures


# --- the room: 16 bots through the whole stack ---------------------------------------------

@dataclass
class Bot:
    """One player: watches the table as its seat, acts when the rules say it is its turn."""

    clients: Clients
    table_id: str
    seat: int
    name: str
    rng: random.Random
    window: Window
    stop: asyncio.Event

    def choose(self, legal: rules.LegalActions) -> rules.LegalAction:
        """Random legal play that rarely folds (long hands, many actions)."""
        actions = [a for a in legal.actions if a.kind != ActionKind.FOLD]
        if not actions or self.rng.random() < 0.08:
            actions = list(legal.actions)
        return self.rng.choice(actions)

    async def act(self, legal: rules.LegalActions, sequence: int) -> None:
        action = self.choose(legal)
        method, request_type = RPC[action.kind]
        request = request_type(table_id=self.table_id, seat=self.seat,
                               expected_sequence=sequence, command_id=uuid.uuid4().hex)
        if action.kind in (ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE):
            request.to = action.to
        began = time.perf_counter()
        try:
            await getattr(self.clients.table.stub, method)(
                request, metadata=self.clients.table.md(player(self.name)), timeout=10)
        except grpc.aio.AioRpcError as exc:
            if exc.code() is not grpc.StatusCode.FAILED_PRECONDITION:
                raise
            self.window.refused += 1  # stale: the table moved on (e.g. a clock)
            return
        self.window.record(began, time.perf_counter())

    async def run(self) -> None:
        state = rules.initial_state()
        acted_at = -1
        watch = self.clients.table.stub.WatchTable(
            pb.WatchTableRequest(table_id=self.table_id, after_sequence=0),
            metadata=self.clients.table.md(player(self.name)))
        try:
            async for record in watch:
                state = rules.evolve(state, event_from_proto(record.event))
                if record.event.WhichOneof("event") == "hand_started" and self.seat == 1:
                    now = time.perf_counter()
                    if self.window.start <= now <= self.window.end:
                        self.window.hands += 1
                if self.stop.is_set():
                    return
                hand = state.hand
                if (hand is None or hand.phase != Phase.BETTING or hand.to_act != self.seat
                        or acted_at == record.sequence):
                    continue
                legal = rules.legal_actions(state)
                if legal is not None and legal.actions:
                    acted_at = record.sequence
                    await self.act(legal, record.sequence)
        finally:
            watch.cancel()


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bench_room(url_for: Callable[[str], str], log_dir: Path, tables: int, bots: int,
                     seconds: float, warm_up: float, log_level: str, redis_pid: int
                     ) -> tuple[Figure, Window, dict[str, float]]:
    """The room's figure, the window, and the CPU seconds each process used in it."""
    keys = DevKeys.generate()
    async with room_processes(url_for, keys, log_dir,
                              extra_env={"LOG_LEVEL": log_level}) as room, \
            room.clients() as clients:
        window = Window()
        stop = asyncio.Event()
        players: list[Bot] = []
        for t in range(1, tables + 1):
            table_id = await clients.table.open_table(
                f"bench-{t}", settings=fast_settings(buy_in_max=100_000_000,
                                                     action_time_s=60))
            for seat in range(1, bots + 1):
                name = f"b{t}{seat}"
                await clients.wallet.create_account(name)
                await clients.wallet.deposit(name, 100_000_000, f"dep-{name}")
                players.append(Bot(clients, table_id, seat, name, random.Random(t * 10 + seat),
                                   window, stop))
        tasks = [asyncio.create_task(bot.run()) for bot in players]
        await asyncio.sleep(0.5)  # every watch open before the first hand starts
        now = time.perf_counter()
        window.start, window.end = now + warm_up, now + warm_up + seconds
        for bot in players:
            await clients.table.call("SitDown", pb.SitDownRequest(
                table_id=bot.table_id, seat=bot.seat, buy_in=50_000_000), player(bot.name))
        pids = {"table": room.table.proc.pid, "dealer": room.dealer.proc.pid,  # type: ignore[union-attr]
                "wallet": room.wallet.proc.pid, "redis": redis_pid,  # type: ignore[union-attr]
                "bots": os.getpid()}
        await asyncio.sleep(max(0.0, window.start - time.perf_counter()))
        cpu = {name: -cpu_seconds(pid) for name, pid in pids.items()}
        await asyncio.sleep(max(0.0, window.end - time.perf_counter()))
        for name, pid in pids.items():
            cpu[name] += cpu_seconds(pid)
        stop.set()
        await asyncio.sleep(0.5)
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        failed = [r for r in results if isinstance(r, Exception)
                  and not isinstance(r, asyncio.CancelledError)]
        if failed:
            print(f"  ({len(failed)} bots failed: {failed[0]!r})")
    label = f"room: {tables} tables x {bots} bots, whole stack"
    return Figure(label, len(window.latencies), seconds, window.latencies), window, cpu


async def main_async(args: argparse.Namespace) -> None:
    passwords = {name: secrets.token_urlsafe(16) for name in SERVICES}
    with RedisServer(passwords=passwords, appendfsync=args.fsync) as redis_server, \
            tempfile.TemporaryDirectory(prefix="bench-room-") as tmp:
        version = ".".join(map(str, server_version(redis_server.binary)))
        bots = args.tables * args.bots
        print(f"== room: redis-server {version}, AOF appendfsync {args.fsync}, services log at "
              f"{args.log_level}, {args.seconds:.0f} s per figure after {args.warm_up:.0f} s "
              f"warm-up, {os.cpu_count()} CPUs")
        started = time.perf_counter()
        assert redis_server.process is not None
        room, window, cpu = await bench_room(
            redis_server.url_for, Path(tmp), args.tables, args.bots, args.seconds,
            args.warm_up, args.log_level, redis_server.process.pid)
        ceilings = await bench_ceiling(redis_server.url_for("table"),
                                       sorted({bots, args.tables}, reverse=True),
                                       args.seconds, args.warm_up, redis_server.process.pid)
        print(room.line())
        in_flight = room.per_s * statistics.fmean(room.latencies)
        print(f"    {window.hands} hands ({window.hands / args.seconds:.1f}/s), "
              f"{room.count / max(1, window.hands):.1f} actions per hand, {window.refused} "
              f"refused as stale, {in_flight:.2f} actions in flight on average")
        print("    CPU per action: " + ", ".join(
            f"{name} {used / max(1, room.count) * 1000:.2f} ms" for name, used in cpu.items())
            + f" (the window had {args.seconds * (os.cpu_count() or 1):.0f} CPU-seconds, "
            f"{sum(cpu.values()):.1f} used)")
        for ceiling in ceilings:
            print(ceiling.line())
            print("    CPU per call: " + ", ".join(
                f"{name} {used / max(1, ceiling.calls) * 1000:.2f} ms"
                for name, used in ceiling.cpu.items()))
        for ceiling in ceilings:
            print(f"  ratio room / ceiling ({ceiling.label.split(', ')[-1]}): "
                  f"{room.per_s / ceiling.per_s:.2f}")
        print(f"(total {time.perf_counter() - started:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="measured seconds")
    parser.add_argument("--warm-up", type=float, default=3.0, help="seconds before measuring")
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--bots", type=int, default=4, help="bots (players) per table")
    parser.add_argument("--fsync", default="everysec", choices=("always", "everysec", "no"),
                        help="Redis AOF appendfsync")
    parser.add_argument("--log-level", default="INFO", help="the services' LOG_LEVEL")
    parser.add_argument("--serve-ceiling", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_ceiling:
        asyncio.run(serve_ceiling(args.serve_ceiling, os.environ["REDIS_URL"]))
        return
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
