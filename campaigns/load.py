"""``make load``: the room under load, through the whole stack (Redis, the dealer, the wallet
and the table as separate processes, the bots in processes of their own), with figures;
asserts nothing.

1. **Throughput**: the room benchmark's bots over several tables acting as fast as the table
   lets them (``campaigns.throughput``, the figure of ``make bench-room``): actions per second,
   p50/p99 action latency, hands per minute, CPU per process per action (the bots' apart); in
   the same run the bare ceiling (a ``grpc.aio`` unary handler doing one Lua append, same
   concurrency) and the fair ceiling (the room's own I/O: one unary call in, one fenced append,
   the event pushed to each of the table's watchers over their server streams, at the room's
   concurrency; ``campaigns/ceilings.py``) and its stream variant (one message in on the acting
   player's open bidirectional stream, as ``TableService.Play``), and the ratios. The bots play
   over one ``Play`` stream each; ``--actions unary`` makes them watch and act by unary calls,
   ``--actions play,unary`` runs the room both ways in the same run (the first one's figures
   in the last line).
2. **Human pace**: tables of three players, each table played by the campaigns' bot
   (:mod:`campaigns.bot`, run in bot processes by :mod:`campaigns.loadbots`), which thinks
   2.5-3.5 s before each action, as people do, and never folds; the number of tables doubles
   (up to ``--max-tables``, 1,000) while the level holds: action p99 at most 50 ms, the table
   process under 90 % of a core and the machine's cores under 90 % busy (``cpu``: whose, the
   run says), at most 64 KiB of the table's RSS per open table (the growth
   per table opened since the previous level, judged from 256 tables: below, the process's
   own warm-up and bounded caches filling make most of it), every table playing and no
   error. A level that fails says
   why: whose limit (the table's, or the harness's own: its bot processes out of CPU) and
   which error.

Every client call is retried on ``UNAVAILABLE`` with the same request (the same command id),
as the SDK does; the run never ends in a traceback.

Last line: ``ratio=… fair_ratio=… table_cpu_ms=… p99_ms=… tables_at_human_pace=… limit=…``
(the throughput run's ratios to the bare and the fair ceiling (the one
``campaigns.throughput.FAIR_CEILING`` names: the one doing the room's I/O, the stream one when
the bots play over ``Play``), the table's CPU per action and
the p99; the most tables one table replica carried at human pace, and what stopped the ladder:
``p99``, ``cpu``, ``rss``, ``errors``, ``idle`` (tables not playing), ``bots`` (the harness's
own limit: the figure is then the harness's, not the room's) or ``none`` at the top).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

import grpc

from campaigns import throughput
from campaigns.bot import OPERATOR
from campaigns.ceilings import cpu_seconds
from campaigns.loadbots import BotProcesses, BotsResult, MintedTokens, split
from rules import TableConfig
from stud.v1 import table_pb2 as pb
from studkit.commandwindow import new_id
from studkit.grpc_errors import rpc_error_reason
from studkit.mapping import config_to_proto
from studtest.processes import Clients, room_processes
from studtest.table import fast_settings, player
from studtools.devkeys import DevKeys
from studtools.redis_server import RedisServer

P99_LIMIT_MS: Final = 50.0
RSS_LIMIT_KIB: Final = 64.0
RSS_JUDGED_FROM: Final = 256
"""Below this many tables the growth per table is mostly the process's bounded caches
filling (the shared event records, gRPC's and Redis's buffers), not the tables."""
CPU_LIMIT: Final = 0.9
"""A process busy this share of the window's wall time is out of CPU (one core)."""
THINK_S: Final = (2.5, 3.5)
SETUP_CONCURRENCY: Final = 16
WARM_UP_S: Final = 4.0
NOISY: Final = ("p99", "cpu")
"""Limits a shared machine's other work can trip: a level failing on one is measured again
once, and fails only if it fails again."""


def rss_kib(pid: int) -> int:
    """Resident memory of a process (Linux ``/proc``; 0 elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far (Linux ``/proc/stat``)."""
    try:
        fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields) - idle) / ticks, sum(fields) / ticks


def p99_ms(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000 \
        if ordered else float("inf")


async def retrying(call: Callable[[], Awaitable[Any]], limit_s: float = 30.0) -> Any:
    """``call()`` again while it is refused ``UNAVAILABLE`` (the same request each time); an
    ``ALREADY_EXISTS`` after a retry means the first attempt was applied."""
    give_up, tried = time.monotonic() + limit_s, False
    while True:
        try:
            return await call()
        except grpc.aio.AioRpcError as exc:
            if tried and exc.code() is grpc.StatusCode.ALREADY_EXISTS:
                return None
            if exc.code() is not grpc.StatusCode.UNAVAILABLE or time.monotonic() > give_up:
                raise
            tried = True
            await asyncio.sleep(0.05)


async def open_human_table(clients: Clients, t: int) -> str:
    """Table ``human-<t>`` with three players seated (each call retried as a client would,
    with the same command id)."""
    table_id = f"human-{t}"
    opening = pb.OpenTableRequest(
        table_id=table_id, command_id=f"open-{t}", config=config_to_proto(TableConfig()),
        settings=fast_settings(action_time_s=30, next_hand_delay_ms=1000))
    await retrying(lambda: clients.table.call("OpenTable", opening, OPERATOR))
    for seat in (1, 2, 3):
        name = f"h{t}-{seat}"
        sit = pb.SitDownRequest(table_id=table_id, seat=seat, buy_in=1_000_000,
                                command_id=new_id(f"sit-{t}-{seat}"))
        await retrying(partial(clients.wallet.create_account, name))
        await retrying(partial(clients.wallet.deposit, name, 100_000_000, f"dep-{name}"))
        await retrying(partial(clients.table.call, "SitDown", sit, player(name)))
    return table_id


@dataclass
class Level:
    """One level of the human-pace ladder."""

    tables: int
    bots: BotsResult
    seconds: float
    table_cpu: float
    """The table process's CPU seconds in the window."""
    machine: float = 0.0
    """The share of the whole machine's CPU busy in the window (every process, the other
    work on a shared machine included)."""
    rss_per_table: float = 0.0
    """The table's RSS grown per table opened since the previous level (the first level:
    since the start, the process's own warm-up included, so not judged)."""
    first: bool = False

    @property
    def p99(self) -> float:
        return p99_ms(self.bots.latencies)

    def limit(self) -> str | None:
        """What failed at this level (the harness's own limit first), or None."""
        per_process = self.bots.cpu / max(1, self.bots.processes) / self.seconds
        if per_process >= CPU_LIMIT:
            return "bots"
        if self.bots.errors:
            return "errors"
        if len(self.bots.latencies) < self.tables:
            return "idle"
        if self.table_cpu / self.seconds >= CPU_LIMIT or self.machine >= CPU_LIMIT:
            return "cpu"
        if self.p99 > P99_LIMIT_MS:
            return "p99"
        if (self.rss_per_table > RSS_LIMIT_KIB and not self.first
                and self.tables >= RSS_JUDGED_FROM):
            return "rss"
        return None

    def line(self) -> str:
        return (f"  human pace: {self.tables:>4} tables  {len(self.bots.latencies):>5} actions  "
                f"p99 {self.p99:7.2f} ms  table CPU {self.table_cpu / self.seconds:5.1%}  "
                f"machine {self.machine:5.1%}  "
                f"bots CPU {self.bots.cpu / self.seconds:5.1%} ({self.bots.processes} "
                f"processes)  table RSS {self.rss_per_table:6.1f} KiB per open table"
                + (" (with the process's warm-up)" if self.first else " (marginal)"))

    def why(self, limit: str) -> str:
        """Whose limit stopped the ladder, and which error."""
        match limit:
            case "bots":
                return ("the harness's limit: its bot processes were out of CPU (the figure "
                        "is the harness's, not the room's)")
            case "errors":
                return (f"the bots were refused: {dict(self.bots.errors)}; first: "
                        f"{self.bots.first_error}")
            case "idle":
                return "some tables did not play in the window (no action acknowledged)"
            case "cpu" if self.table_cpu / self.seconds >= CPU_LIMIT:
                return "the table's limit: its process used a whole core"
            case "cpu":
                return (f"the machine's limit: its cores were {self.machine:.0%} busy (the "
                        f"table used {self.table_cpu / self.seconds:.0%} of one; the dealer, "
                        "the wallet, Redis, the bots and other work the rest)")
            case "p99":
                return f"the table's limit: p99 {self.p99:.1f} ms > {P99_LIMIT_MS:.0f} ms"
            case _:
                return (f"the table's limit: {self.rss_per_table:.1f} KiB of RSS per open "
                        f"table > {RSS_LIMIT_KIB:.0f}")


async def measure_level(target: str, table_pid: int, tables: list[str],
                        tokens: dict[str, str], seconds: float, processes: int) -> Level:
    """One level: bot processes play ``tables`` at human pace; the window's figures."""
    procs = BotProcesses([
        {"mode": "human", "target": target, "tables": part, "tokens": tokens,
         "viewers": {n: f"watcher-{n}" for n in part}, "think": THINK_S,
         "seed": i * 100_003, "warm_up": WARM_UP_S, "seconds": seconds}
        for i, part in enumerate(split(tables, processes))])
    try:
        await procs.ready()
        await procs.go()
        await asyncio.sleep(WARM_UP_S)
        cpu, (busy, total) = cpu_seconds(table_pid), machine_busy()
        await asyncio.sleep(seconds)
        cpu = cpu_seconds(table_pid) - cpu
        busy_after, total_after = machine_busy()
        result = await procs.results()
    finally:
        await procs.kill()
    machine = (busy_after - busy) / max(1e-9, total_after - total)
    return Level(len(tables), result, seconds, cpu, machine)


async def human_pace(url_for: Callable[[str], str], log_dir: Path, start: int, most: int,
                     seconds: float, log_level: str, processes: int
                     ) -> tuple[int, str, list[Level]]:
    """Double the tables at human pace while a level holds; (tables carried, what stopped
    the ladder, the levels)."""
    keys = DevKeys.generate()
    levels: list[Level] = []
    carried, limit = 0, "none"
    # Each bot process's routers carry many tables' watches on one connection, where real
    # players each have their own: the per-connection watch limit is lifted for the run.
    async with room_processes(url_for, keys, log_dir,
                              extra_env={"LOG_LEVEL": log_level,
                                         "TABLE_WATCHES_PER_CONNECTION": "100000"}) as room, \
            room.clients() as clients:
        assert room.table.proc is not None
        table_pid = room.table.proc.pid
        last_rss = rss_kib(table_pid)
        gate = asyncio.Semaphore(SETUP_CONCURRENCY)
        tokens: dict[str, str] = {}
        opened, tables = 0, start

        async def open_one(t: int) -> None:
            async with gate:
                await open_human_table(clients, t)
            for who in (*(player(f"h{t}-{s}") for s in (1, 2, 3)),
                        player(f"watcher-human-{t}")):
                tokens[MintedTokens.key(who)] = clients.table.tokens.token(who)

        while True:
            try:
                await asyncio.gather(*(open_one(t) for t in range(opened, tables)))
            except grpc.aio.AioRpcError as exc:
                limit = "errors"
                print(f"  human pace: opening {tables} tables was refused: {exc.code().name} "
                      f"{rpc_error_reason(exc) or ''} {exc.details()}")
                break
            opened = tables
            names = [f"human-{t}" for t in range(tables)]
            level = await measure_level(room.table.target, table_pid, names, tokens, seconds,
                                        processes)
            if level.limit() in NOISY:
                print(level.line() + f"  ({level.limit()}: measured again, the machine is "
                      "shared)", flush=True)
                level = await measure_level(room.table.target, table_pid, names, tokens,
                                            seconds, processes)
            rss = rss_kib(table_pid)
            grown = tables - (levels[-1].tables if levels else 0)
            level.rss_per_table = (rss - last_rss) / max(1, grown)
            level.first = not levels
            last_rss = rss
            levels.append(level)
            print(level.line(), flush=True)
            failed = level.limit()
            if failed is not None:
                limit = failed
                print(f"  human pace stopped at {tables} tables: {level.why(failed)}",
                      flush=True)
                break
            carried = tables
            if tables >= most:
                break
            tables = min(most, tables * 2)
    return carried, limit, levels


async def main_async(args: argparse.Namespace) -> str:
    passwords = {name: secrets.token_urlsafe(16) for name in throughput.SERVICES}
    with RedisServer(passwords=passwords) as redis_server, \
            tempfile.TemporaryDirectory(prefix="stud-load-") as tmp:
        print(f"== load: {os.cpu_count()} CPUs; throughput for {args.seconds:.0f} s, "
              f"{args.tables} tables x {args.bots} bots", flush=True)
        run = await throughput.room_run(redis_server, Path(tmp) / "room", args.tables,
                                        args.bots, args.seconds, 3.0, "WARNING", args.actions,
                                        lambda: RedisServer(passwords=passwords))
        for line in run.lines(args.seconds):
            print(line)
        print(f"  hands per minute: {run.bots.hands / args.seconds * 60:.0f}", flush=True)
    # A fresh Redis for the human-pace run (the ceilings' streams are not tables).
    with RedisServer(passwords=passwords) as redis_server, \
            tempfile.TemporaryDirectory(prefix="stud-load-") as tmp:
        carried, limit, _levels = await human_pace(
            redis_server.url_for, Path(tmp) / "human", args.human_start, args.max_tables,
            args.human_seconds, "WARNING", args.bot_processes)
    return (f"ratio={run.ratio:.2f} fair_ratio={run.fair_ratio:.2f} "
            f"table_cpu_ms={run.table_cpu_ms():.2f} p99_ms={run.room.pct(0.99):.2f} "
            f"tables_at_human_pace={carried} limit={limit}")


def parser() -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(prog="make load", description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    out.add_argument("--seconds", type=float, default=15.0)
    out.add_argument("--tables", type=int, default=4)
    out.add_argument("--bots", type=int, default=4)
    out.add_argument("--human-start", type=int, default=16)
    out.add_argument("--max-tables", type=int, default=1000)
    out.add_argument("--human-seconds", type=float, default=15.0)
    out.add_argument("--bot-processes", type=int, default=2)
    out.add_argument("--actions", type=throughput.parse_actions, default=["play"],
                     help="the throughput run's bots: play (one Play stream a bot) or unary "
                          "(WatchTable + a unary call an action); several, comma-separated, "
                          "run the room once each, the first one's figures in the last line")
    return out


def main(argv: list[str] | None = None) -> int:
    print(asyncio.run(main_async(parser().parse_args(argv))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
