"""The room's throughput run (the figure of ``make bench-room`` and the first part of
``make load``): bots over several tables acting as fast as the table lets them, through the
whole stack, then the bare and the fair ceilings (``campaigns.ceilings``) on the same Redis.

The stack: a real ``redis-server`` (one ACL user per service), and ``python -m dealer``,
``python -m wallet`` and ``python -m table`` as separate processes (``studtest.processes``),
next-hand delay 0, the bots in processes of their own (``campaigns.loadbots``; their CPU is
reported apart): each bot is a player who follows the table as its seat, folds the events with
the rules to know when it is its turn, and then acts with a random legal action
(``expected_sequence`` set), timing the action from its sending to its reply. ``actions``
says how a bot talks to the table: ``play`` (the default), one ``TableService.Play`` stream a
bot carrying the records, the actions and their replies; ``unary``, ``WatchTable`` and a unary
call per action (as browsers play). Several modes in one run: the room once per mode, each on a
Redis of its own, the first one measured beside the ceilings (its ratios), the others printed
after it (side by side on the same machine in the same minutes).

The ceilings: the bare one, the fair one (a unary call per action) and the fair one over
streams (an action one message on a player's open bidirectional stream, as ``Play``).
``FAIR_CEILING`` names the one ``fair_ratio`` divides by: the one doing the room's I/O.

``bench/`` builds on ``campaigns/``, never the other way (``tests/unit/test_layers.py``).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from campaigns.ceilings import Figure, bench_ceilings, cpu_seconds, run_queue_seconds
from campaigns.loadbots import ACTIONS, BotProcesses, BotsResult, split
from stud.v1 import table_pb2 as pb
from studtest.processes import room_processes
from studtest.table import fast_settings, player
from studtools.devkeys import DevKeys
from studtools.redis_server import RedisServer

SERVICES = ("table", "dealer", "wallet", "auditor")
BOT_PROCESSES = 2
FAIR_CEILING = {"play": "stream", "unary": "unary"}
"""The fair ceiling ``fair_ratio`` (``make load``'s last line) divides by, for the room's mode
of action: the one doing the room's own I/O. Bots on ``Play``: ``stream`` (one message an
action on an open bidirectional stream); bots on unary calls: ``unary`` (one unary call an
action, beside the watches: issue 35's definition, when that was the room's I/O). Both
ratios are printed."""
ACTION_MODES = {"play": "over one Play stream a bot (records, actions and replies)",
                "unary": "over WatchTable and a unary call an action"}
"""What each mode of the bots' actions (``campaigns.loadbots.ACTIONS``) means, as printed."""


def parse_actions(text: str) -> list[str]:
    """``--actions``: one mode, or several separated by commas (each room run in turn)."""
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in ACTIONS]
    if not modes or bad:
        raise ValueError(f"--actions: one or more of {', '.join(ACTIONS)}, comma-separated")
    return modes


async def bench_room(url_for: Callable[[str], str], log_dir: Path, tables: int, bots: int,
                     seconds: float, warm_up: float, log_level: str, redis_pid: int,
                     processes: int = BOT_PROCESSES, actions: str = ACTIONS[0]
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
                               "warm_up": warm_up, "seconds": seconds, "actions": actions}
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
    if actions != ACTIONS[0]:
        label += f", {actions} actions"
    return Figure(label, len(result.latencies), seconds, result.latencies,
                  waited=waited), result, cpu


@dataclass
class RoomFigures:
    """One room run: what the bots measured and each process's CPU in the window."""

    room: Figure
    bots: BotsResult
    cpu: dict[str, float]
    actions: str = ACTIONS[0]

    def table_cpu_ms(self) -> float:
        return self.cpu["table"] / max(1, self.room.count) * 1000

    def room_lines(self, seconds: float) -> list[str]:
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
        out.append(f"    actions {self.actions}: {ACTION_MODES[self.actions]}")
        return out


@dataclass
class RoomRun(RoomFigures):
    """The room and its ceilings, measured in one run (``others``: the room again with the
    bots' other modes of action, after it)."""

    bare: list[Figure] = field(default_factory=list)
    fair: Figure | None = None
    fair_stream: Figure | None = None
    others: list[RoomFigures] = field(default_factory=list)

    @property
    def fair_ceiling(self) -> Figure:
        """The fair ceiling ``fair_ratio`` divides by (:data:`FAIR_CEILING`: the one doing
        the room's own I/O)."""
        chosen = self.fair_stream if FAIR_CEILING[self.actions] == "stream" else self.fair
        assert chosen is not None
        return chosen

    @property
    def ratio(self) -> float:
        return self.room.per_s / max(1e-9, self.bare[0].per_s)

    @property
    def fair_ratio(self) -> float:
        return self.room.per_s / max(1e-9, self.fair_ceiling.per_s)

    def lines(self, seconds: float) -> list[str]:
        room = self.room
        out = self.room_lines(seconds)
        for other in self.others:
            out += other.room_lines(seconds)
            out.append(f"    table CPU per action: {other.table_cpu_ms():.2f} ms")
        fair = [c for c in (self.fair, self.fair_stream) if c is not None]
        for ceiling in [*self.bare, *fair]:
            out += [ceiling.line(), ceiling.cpu_line()]
        out += [f"  ratio room / ceiling ({c.label.split(', ')[-1]}): "
                f"{room.per_s / max(1e-9, c.per_s):.2f}" for c in self.bare]
        if self.fair is not None:
            out.append(f"  ratio room / fair ceiling: "
                       f"{room.per_s / max(1e-9, self.fair.per_s):.2f}")
        if self.fair_stream is not None:
            out.append(f"  ratio room / fair ceiling (stream): "
                       f"{room.per_s / max(1e-9, self.fair_stream.per_s):.2f}")
        for other in self.others:
            out.append(f"  ratio room ({other.actions} actions) / fair ceilings: "
                       + ", ".join(f"{other.room.per_s / max(1e-9, c.per_s):.2f}"
                                   for c in fair)
                       + " (unary, stream)")
        return out


async def room_run(redis_server: RedisServer, log_dir: Path, tables: int, bots: int,
                   seconds: float, warm_up: float, log_level: str,
                   actions: Sequence[str] = ACTIONS[:1],
                   fresh_redis: Callable[[], AbstractContextManager[RedisServer]] | None = None
                   ) -> RoomRun:
    """The room with the bots acting as ``actions[0]`` says, then the bare ceiling (at the
    room's bots and at its tables) and the fair ones (the room's tables, a player per bot),
    on the same Redis; then the room again for each other mode of ``actions``, each on a Redis
    of its own from ``fresh_redis`` (the tables of a stopped room would be taken over)."""
    assert redis_server.process is not None
    pid = redis_server.process.pid
    room, result, cpu = await bench_room(redis_server.url_for, log_dir, tables, bots,
                                         seconds, warm_up, log_level, pid,
                                         actions=actions[0])
    bare, fair, fair_stream = await bench_ceilings(
        redis_server.url_for("table"), sorted({tables * bots, tables}, reverse=True),
        (tables, bots), seconds, warm_up, pid, stream=True)
    assert fair is not None
    others = []
    for n, mode in enumerate(actions[1:], 1):
        assert fresh_redis is not None, "several modes of action need fresh_redis"
        with fresh_redis() as other_redis:
            assert other_redis.process is not None
            figures = await bench_room(other_redis.url_for, log_dir / f"{mode}-{n}", tables,
                                       bots, seconds, warm_up, log_level,
                                       other_redis.process.pid, actions=mode)
        others.append(RoomFigures(*figures, actions=mode))
    return RoomRun(room, result, cpu, actions[0], bare, fair, fair_stream, others)
