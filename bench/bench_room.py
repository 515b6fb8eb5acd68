"""The room's figure: actions per second and action latency (p50, p99) with 16 concurrent bots
through the whole stack, beside the bare and the fair ceilings measured in the same run.
Prints figures; asserts nothing.

The stack: a real ``redis-server`` (one ACL user per service), and ``python -m dealer``,
``python -m wallet`` and ``python -m table`` as separate processes (``studtest.processes``).
4 tables x 4 bots (``--tables``, ``--bots``), next-hand delay 0, the bots in processes of their
own (``campaigns.loadbots``; their CPU is reported apart): each bot is a player who
watches the table as its seat (``WatchTable``), folds the events with the rules to know when
it is its turn, and then acts with a random legal action (``expected_sequence`` set), timing
the call. Every action goes through auth, the table's decide/append, and the driver goes on
to the dealer (streets, showdown) and the wallet (settlement, reconciliation) between them.

The ceilings (``bench/ceilings.py``): the bare one, a ``grpc.aio`` unary handler doing one Lua
append, called by as many concurrent callers as there are bots, and again by as many as there
are tables (at most one player per table can be acting at a time); and the fair one, the
room's own I/O at the room's concurrency: one unary call in, one fenced append, the event
pushed to each of the table's watchers (one per bot) over their server streams.

Run: ``make bench-room`` (or ``.venv/bin/python bench/bench_room.py --seconds 20``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.ceilings import Figure, bench_ceilings, cpu_seconds
from campaigns.loadbots import BotProcesses, BotsResult, split
from stud.v1 import table_pb2 as pb
from studtest.processes import room_processes
from studtest.table import fast_settings, player
from studtools.devkeys import DevKeys
from studtools.redis_server import RedisServer, server_version

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_fairness beside this file
from bench_fairness import fairness_lines

SERVICES = ("table", "dealer", "wallet", "auditor")
BOT_PROCESSES = 2


async def bench_room(url_for: Callable[[str], str], log_dir: Path, tables: int, bots: int,
                     seconds: float, warm_up: float, log_level: str, redis_pid: int,
                     processes: int = BOT_PROCESSES
                     ) -> tuple[Figure, BotsResult, dict[str, float]]:
    """The room's figure, what the bots measured, and the CPU seconds each process used in
    the window (the bots' own processes apart, as ``bots``)."""
    keys = DevKeys.generate()
    async with room_processes(url_for, keys, log_dir,
                              extra_env={"LOG_LEVEL": log_level}) as room, \
            room.clients() as clients:
        seats = []
        for t in range(1, tables + 1):
            table_id = await clients.table.open_table(
                f"bench-{t}", settings=fast_settings(buy_in_max=100_000_000,
                                                     action_time_s=60))
            for seat in range(1, bots + 1):
                name = f"b{t}{seat}"
                await clients.wallet.create_account(name)
                await clients.wallet.deposit(name, 100_000_000, f"dep-{name}")
                seats.append({"table_id": table_id, "seat": seat, "name": name,
                              "token": clients.table.tokens.token(player(name)),
                              "seed": t * 10 + seat})
        procs = BotProcesses([{"mode": "room", "target": room.table.target, "bots": part,
                               "warm_up": warm_up, "seconds": seconds}
                              for part in split(seats, processes)])
        try:
            await procs.ready()
            await procs.go()
            began = time.perf_counter()
            for bot in seats:
                await clients.table.call("SitDown", pb.SitDownRequest(
                    table_id=bot["table_id"], seat=bot["seat"], buy_in=50_000_000),
                    player(bot["name"]))
            pids = {"table": room.table.proc.pid, "dealer": room.dealer.proc.pid,  # type: ignore[union-attr]
                    "wallet": room.wallet.proc.pid, "redis": redis_pid,  # type: ignore[union-attr]
                    "harness": os.getpid()}
            await asyncio.sleep(max(0.0, began + warm_up - time.perf_counter()))
            cpu = {name: -cpu_seconds(pid) for name, pid in pids.items()}
            await asyncio.sleep(max(0.0, began + warm_up + seconds - time.perf_counter()))
            for name, pid in pids.items():
                cpu[name] += cpu_seconds(pid)
            result = await procs.results()
        finally:
            await procs.kill()
    cpu["bots"] = result.cpu
    if result.errors:
        print(f"  (bot errors: {dict(result.errors)}; first: {result.first_error})")
    label = f"room: {tables} tables x {bots} bots, whole stack"
    return Figure(label, len(result.latencies), seconds, result.latencies), result, cpu


@dataclass
class RoomRun:
    """The room and its ceilings, measured in one run."""

    room: Figure
    bots: BotsResult
    cpu: dict[str, float]
    bare: list[Figure]
    fair: Figure

    @property
    def ratio(self) -> float:
        return self.room.per_s / max(1e-9, self.bare[0].per_s)

    @property
    def fair_ratio(self) -> float:
        return self.room.per_s / max(1e-9, self.fair.per_s)

    def table_cpu_ms(self) -> float:
        return self.cpu["table"] / max(1, self.room.count) * 1000

    def lines(self, seconds: float) -> list[str]:
        room, bots = self.room, self.bots
        in_flight = room.per_s * statistics.fmean(room.latencies) if room.latencies else 0.0
        out = [room.line(),
               f"    {bots.hands} hands ({bots.hands / seconds:.1f}/s), "
               f"{room.count / max(1, bots.hands):.1f} actions per hand, {bots.refused} "
               f"refused as stale, {bots.retries} retried (UNAVAILABLE), {in_flight:.2f} "
               f"actions in flight on average",
               "    CPU per action: " + ", ".join(
                   f"{name} {used / max(1, room.count) * 1000:.2f} ms"
                   for name, used in self.cpu.items())
               + f" (bots: {bots.processes} processes of their own; the window had "
               f"{seconds * (os.cpu_count() or 1):.0f} CPU-seconds, "
               f"{sum(self.cpu.values()):.1f} used)"]
        for ceiling in [*self.bare, self.fair]:
            out += [ceiling.line(), ceiling.cpu_line()]
        out += [f"  ratio room / ceiling ({c.label.split(', ')[-1]}): "
                f"{room.per_s / max(1e-9, c.per_s):.2f}" for c in self.bare]
        out.append(f"  ratio room / fair ceiling: {self.fair_ratio:.2f}")
        return out


async def room_run(redis_server: RedisServer, log_dir: Path, tables: int, bots: int,
                   seconds: float, warm_up: float, log_level: str) -> RoomRun:
    """The room, then the bare ceiling (at the room's bots and at its tables) and the fair one
    (the room's tables, a watcher per bot), on the same Redis."""
    assert redis_server.process is not None
    pid = redis_server.process.pid
    room, result, cpu = await bench_room(redis_server.url_for, log_dir, tables, bots,
                                         seconds, warm_up, log_level, pid)
    bare, fair = await bench_ceilings(redis_server.url_for("table"),
                                      sorted({tables * bots, tables}, reverse=True),
                                      (tables, bots), seconds, warm_up, pid)
    assert fair is not None
    return RoomRun(room, result, cpu, bare, fair)


async def main_async(args: argparse.Namespace) -> None:
    passwords = {name: secrets.token_urlsafe(16) for name in SERVICES}
    with RedisServer(passwords=passwords, appendfsync=args.fsync) as redis_server, \
            tempfile.TemporaryDirectory(prefix="bench-room-") as tmp:
        version = ".".join(map(str, server_version(redis_server.binary)))
        print(f"== room: redis-server {version}, AOF appendfsync {args.fsync}, services log at "
              f"{args.log_level}, {args.seconds:.0f} s per figure after {args.warm_up:.0f} s "
              f"warm-up, {os.cpu_count()} CPUs")
        started = time.perf_counter()
        run = await room_run(redis_server, Path(tmp), args.tables, args.bots, args.seconds,
                             args.warm_up, args.log_level)
        for line in run.lines(args.seconds):
            print(line)
        print(f"  table CPU per action: {run.table_cpu_ms():.2f} ms")
        for line in fairness_lines():  # what the per-card commitment adds per hand
            print(line)
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
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
