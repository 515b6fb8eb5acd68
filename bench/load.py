"""``make load``: the room under load, through the whole stack (Redis, the dealer, the wallet
and the table as separate processes), with figures; asserts nothing.

1. **Throughput**: bots over several tables acting as fast as the table lets them
   (``bench_room``): actions per second, p50/p99 action latency, hands per minute, CPU per
   process per action; in the same run the bare ceiling (a ``grpc.aio`` unary handler doing
   one Lua append, same concurrency) and the ratio.
2. **Human pace**: tables of three bots that think 2.5-3.5 s before each action, as people
   do; the number of tables doubles until the action latency's p99 passes 100 ms (or the
   bound ``--max-tables`` is reached); the table process's memory per open table is measured
   on the way.

Last line: ``ratio=… p99_ms=… tables_at_human_pace=…`` (ratio and p99 of the throughput run;
the most tables one table replica carried at human pace with p99 <= 100 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import sys
import tempfile
import time
import uuid
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_room

import rules
from rules import ActionKind, Phase
from stud.v1 import table_pb2 as pb
from studkit.auth import DevKeys
from studkit.mapping.events import event_from_proto
from studkit.redis_server import RedisServer
from table.processes import Clients, room_processes
from table.testing import fast_settings, player

P99_LIMIT_MS = 100.0


def rss_kib(pid: int) -> int:
    """Resident memory of a process (Linux ``/proc``; 0 elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


async def human_table(clients: Clients, table_id: str, latencies: list[float],
                      stop: asyncio.Event, rng: random.Random) -> None:
    """Watch ``table_id`` and act for whoever is to act after 2.5-3.5 s of thought."""
    state = rules.initial_state()
    acted_at = -1
    # Fold the table's history, acting only on what is current (a re-opened watch replays).
    view = await clients.table.view(table_id)
    current = view.version
    watch = clients.table.stub.WatchTable(
        pb.WatchTableRequest(table_id=table_id),
        metadata=clients.table.md(player(f"watcher-{table_id}")))
    try:
        async for record in watch:
            state = rules.evolve(state, event_from_proto(record.event))
            hand = state.hand
            if stop.is_set():
                return
            if hand is None or hand.phase != Phase.BETTING or not hand.to_act \
                    or acted_at == record.sequence or record.sequence < current:
                continue
            legal = rules.legal_actions(state)
            if legal is None or not legal.actions:
                continue
            acted_at = record.sequence
            seat = hand.to_act
            holder = state.seat(seat)
            await asyncio.sleep(rng.uniform(2.5, 3.5))
            actions = [a for a in legal.actions if a.kind != ActionKind.FOLD] or list(
                legal.actions)
            action = rng.choice(actions)
            method, request_type = bench_room.RPC[action.kind]
            request = request_type(table_id=table_id, seat=seat, command_id=uuid.uuid4().hex,
                                   expected_sequence=record.sequence)
            if action.kind in (ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE):
                request.to = action.to
            began = time.perf_counter()
            try:
                await getattr(clients.table.stub, method)(
                    request, metadata=clients.table.md(player(holder.player_id if holder
                                                              else "")), timeout=10)
            except grpc.aio.AioRpcError:
                continue  # stale: another event came first
            latencies.append(time.perf_counter() - began)
    finally:
        watch.cancel()


async def human_pace(url_for: object, log_dir: Path, start: int, most: int, seconds: float,
                     log_level: str) -> tuple[int, list[tuple[int, float, int, float]]]:
    """Double the tables at human pace until p99 > 100 ms; (tables carried, rows of
    (tables, p99 ms, actions, KiB per table))."""
    keys = DevKeys.generate()
    rows: list[tuple[int, float, int, float]] = []
    carried = 0
    # One client connection carries every table's watch here, where real players each have
    # their own: the per-connection watch limit is lifted for the run.
    async with room_processes(url_for, keys, log_dir,  # type: ignore[arg-type]
                              extra_env={"LOG_LEVEL": log_level,
                                         "TABLE_WATCHES_PER_CONNECTION": "100000"}) as room, \
            room.clients() as clients:
        assert room.table.proc is not None
        base_rss = rss_kib(room.table.proc.pid)
        stop = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        opened = 0
        tables = start
        while tables <= most:
            for t in range(opened, tables):
                table_id = await clients.table.open_table(
                    f"human-{t}", settings=fast_settings(action_time_s=30,
                                                         next_hand_delay_ms=1000))
                for seat in (1, 2, 3):
                    name = f"h{t}-{seat}"
                    await clients.wallet.create_account(name)
                    await clients.wallet.deposit(name, 100_000_000, f"dep-{name}")
                    await clients.table.call("SitDown", pb.SitDownRequest(
                        table_id=table_id, seat=seat, buy_in=1_000_000), player(name))
            opened = tables
            latencies: list[float] = []
            # A fresh watcher per table, each writing into this level's list.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            tasks = [asyncio.create_task(human_table(clients, f"human-{t}", latencies, stop,
                                                     random.Random(t))) for t in range(tables)]
            await asyncio.sleep(4.0)  # warm-up: hands under way at every table
            latencies.clear()
            await asyncio.sleep(seconds)
            ordered = sorted(latencies)
            p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000 \
                if ordered else float("inf")
            per_table = (rss_kib(room.table.proc.pid) - base_rss) / tables
            rows.append((tables, p99, len(ordered), per_table))
            print(f"  human pace: {tables:>4} tables  {len(ordered):>5} actions  "
                  f"p99 {p99:7.2f} ms  table RSS {per_table:6.1f} KiB per open table",
                  flush=True)
            if p99 > P99_LIMIT_MS or len(ordered) < tables:
                break  # too slow, or the tables are not all playing (a harness limit)
            carried = tables
            tables *= 2
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return carried, rows


async def main_async(args: argparse.Namespace) -> str:
    passwords = {name: secrets.token_urlsafe(16) for name in bench_room.SERVICES}
    with RedisServer(passwords=passwords) as redis_server, \
            tempfile.TemporaryDirectory(prefix="stud-load-") as tmp:
        assert redis_server.process is not None
        print(f"== load: {os.cpu_count()} CPUs; throughput for {args.seconds:.0f} s, "
              f"{args.tables} tables x {args.bots} bots", flush=True)
        room, window, cpu = await bench_room.bench_room(
            redis_server.url_for, Path(tmp) / "room", args.tables, args.bots, args.seconds,
            3.0, "WARNING", redis_server.process.pid)
        ceilings = await bench_room.bench_ceiling(
            redis_server.url_for("table"), [args.tables * args.bots], args.seconds, 3.0,
            redis_server.process.pid)
        ceiling = ceilings[0]
        print(room.line())
        print(ceiling.line())
        ratio = room.per_s / ceiling.per_s
        print(f"  hands per minute: {window.hands / args.seconds * 60:.0f}; CPU per action: "
              + ", ".join(f"{n} {c / max(1, room.count) * 1000:.2f} ms" for n, c in cpu.items()))
        print(f"  ratio room / ceiling: {ratio:.2f}", flush=True)
    # A fresh Redis for the human-pace run (the ceiling's streams are not tables).
    with RedisServer(passwords=passwords) as redis_server, \
            tempfile.TemporaryDirectory(prefix="stud-load-") as tmp:
        carried, _rows = await human_pace(redis_server.url_for, Path(tmp) / "human",
                                          args.human_start, args.max_tables,
                                          args.human_seconds, "WARNING")
        return (f"ratio={ratio:.2f} p99_ms={room.pct(0.99):.2f} "
                f"tables_at_human_pace={carried}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="make load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--bots", type=int, default=4)
    parser.add_argument("--human-start", type=int, default=16)
    parser.add_argument("--max-tables", type=int, default=1024)
    parser.add_argument("--human-seconds", type=float, default=15.0)
    args = parser.parse_args()
    print(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
