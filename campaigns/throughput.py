"""The room's throughput run (the figure of ``make bench-room`` and the first part of
``make load``): bots over several tables acting as fast as the table lets them, through the
whole stack, then the bare and the fair ceilings (``campaigns.ceilings``) on the same Redis.

The stack: a real ``redis-server`` (one ACL user per service), and ``python -m dealer``,
``python -m wallet`` and ``python -m table`` as separate processes (``studtest.processes``),
next-hand delay 0, the bots in processes of their own (``campaigns.loadbots``; their CPU is
reported apart): each bot is a player who watches the table as its seat (``WatchTable``),
folds the events with the rules to know when it is its turn, and then acts with a random
legal action (``expected_sequence`` set), timing the call.

``bench/`` builds on ``campaigns/``, never the other way (``tests/unit/test_layers.py``).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaigns.ceilings import Figure, bench_ceilings, cpu_seconds, run_queue_seconds
from campaigns.loadbots import BotProcesses, BotsResult, split
from stud.v1 import table_pb2 as pb
from studtest.processes import room_processes
from studtest.table import fast_settings, player
from studtools.devkeys import DevKeys
from studtools.redis_server import RedisServer

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
        seats: list[dict[str, Any]] = []
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
            waited = {name: -run_queue_seconds(pid) for name, pid in pids.items()}
            await asyncio.sleep(max(0.0, began + warm_up + seconds - time.perf_counter()))
            for name, pid in pids.items():
                cpu[name] += cpu_seconds(pid)
                waited[name] += run_queue_seconds(pid)
            result = await procs.results()
        finally:
            await procs.kill()
    cpu["bots"] = result.cpu
    if result.errors:
        print(f"  (bot errors: {dict(result.errors)}; first: {result.first_error})")
    label = f"room: {tables} tables x {bots} bots, whole stack"
    return Figure(label, len(result.latencies), seconds, result.latencies,
                  waited=waited), result, cpu


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
        if any(self.room.waited.values()):
            # Ready to run but kept off the cores: the machine's share of the latency.
            out.append("    waiting for a CPU per action: " + ", ".join(
                f"{name} {waited / max(1, room.count) * 1000:.2f} ms"
                for name, waited in self.room.waited.items() if name != "harness")
                + " (threads ready to run, in the kernel's run queue)")
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
