"""The figures of docs/scaling.md, measured on the in-process room (dealer, wallet and table
in one process over a real local redis-server, ``studtest.table.running_room``). Prints
figures; asserts nothing. Run: ``.venv/bin/python bench/bench_scaling.py`` (several minutes:
tracemalloc slows phase 2).

1. **Redis per hand**: one table, ``--players`` random-legal bots, ``--hands`` hands; then
   ``XLEN`` and ``MEMORY USAGE`` (exact: ``SAMPLES 0``) of the table's keys (stream, command
   record, snapshot, ...), of the dealer's keys of that table, and the growth of the wallet's
   keys: events and bytes per hand.
2. **Memory per open table** in the table service: ``--open-tables`` tables opened, seated and
   dealt (each waiting for an action), measured with ``tracemalloc``: the allocations still
   alive whose traceback passes through ``services/table`` (the table service's own), and all
   of the process's (the in-process dealer's and wallet's per-table data too), per table.
   While they sit idle, the Redis cost of just holding them: commands/s and Redis CPU per
   table (lease renewals, lobby summaries).
3. **Actions per second**: ``--load-tables`` tables of bots acting as fast as the room lets
   them for ``--seconds``; actions/s, the process's CPU per action (table, dealer, wallet
   and bots on one core: an upper bound for the table's), and Redis's CPU and commands per
   action.
4. **Derived capacity** at 0.1 and 0.5 actions/s per table (how: printed beside each line).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import random
import secrets
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from stud.v1 import table_pb2 as pb
from studkit import keys
from studkit.redis_client import connect
from studkit.repository import snapshot_key
from studtest.redis import RedisSource, TestRedis
from studtest.table import Room, act_once, player, running_room
from studtools.devkeys import DevKeys
from studtools.redis_server import RedisServer

TABLE_SUFFIXES = ("events", "commands", "version", "owner", "snapshot", "summary",
                  "settings", "intents", "settled", "closed", "trimmed")


@contextmanager
def redis_server() -> Iterator[TestRedis]:
    passwords = {name: secrets.token_urlsafe(12) for name in ("table", "dealer", "wallet")}
    server = RedisServer(appendonly=True, appendfsync="everysec", passwords=passwords)
    server.start()
    try:
        yield TestRedis(url=server.url, source=RedisSource.LOCAL, server=server)
    finally:
        server.stop()


async def seat_players(room: Room, table_id: str, players: int) -> None:
    for seat in range(1, players + 1):
        name = f"{table_id}-p{seat}"
        await room.fund(name)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=50_000), player(name))


async def play(room: Room, table_id: str, hands: int, rng: random.Random) -> int:
    """Act until ``hands`` hands have started and the last is complete; actions taken."""
    actions = 0
    async with asyncio.timeout(600):
        while True:
            view = await room.client.view(table_id)
            if view.hands_started > hands:
                return actions
            if await act_once(room.client, table_id, view, rng.choice):
                actions += 1
            else:
                await asyncio.sleep(0.005)


async def memory_usage(admin: Any, key: str) -> int:
    value = await admin.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")
    return int(value or 0)


async def prefix_bytes(admin: Any, pattern: str) -> tuple[int, int]:
    """(keys, bytes) of the keys matching ``pattern`` (admin SCAN: a benchmark only)."""
    count = total = 0
    async for key in admin.scan_iter(match=pattern, count=1000):
        count += 1
        total += await memory_usage(admin, key)
    return count, total


async def redis_counters(admin: Any) -> tuple[float, int]:
    """(Redis CPU seconds so far, commands processed so far)."""
    info = await admin.info()
    return (float(info["used_cpu_user"]) + float(info["used_cpu_sys"]),
            int(info["total_commands_processed"]))


def pretty(n: float) -> str:
    return f"{n:,.0f}" if n >= 100 else f"{n:,.2f}"


async def per_hand(test_redis: TestRedis, dev: DevKeys, args: argparse.Namespace
                   ) -> dict[str, float]:
    admin = connect(test_redis.url)
    await admin.flushall()
    async with running_room(test_redis, test_redis.url, dev,
                            snapshot_every=args.snapshot_every) as room:
        table_id = await room.client.open_table("bytes")
        await seat_players(room, table_id, args.players)
        _, wallet_before = await prefix_bytes(admin, "stud:wallet:*")
        actions = await play(room, table_id, args.hands, random.Random(1))
        await asyncio.sleep(0.5)  # the last hand's settlement and snapshot
        hands = (await room.client.view(table_id)).hands_started
        xlen = await admin.xlen(keys.table_stream(table_id))
        table_bytes = {suffix: await memory_usage(
            admin, f"{keys.TABLE_PREFIX}{{{table_id}}}:{suffix}") for suffix in TABLE_SUFFIXES}
        table_bytes["snapshot"] = await memory_usage(admin, snapshot_key(table_id))
        dealer_keys, dealer_bytes = await prefix_bytes(admin, f"stud:dealer:{{{table_id}}}*")
        _, wallet_after = await prefix_bytes(admin, "stud:wallet:*")
        await room.table_deps.app.stop()
    await admin.aclose()
    growing = table_bytes["events"] + table_bytes["commands"]
    print(f"== 1. Redis per hand: 1 table, {args.players} random-legal bots, {hands} hands, "
          f"{actions} player actions ({actions / hands:.1f} per hand)")
    print(f"  stream: XLEN {xlen} = {xlen / hands:.1f} events per hand; MEMORY USAGE "
          f"{table_bytes['events']:,} B = {table_bytes['events'] / xlen:.0f} B per event, "
          f"{table_bytes['events'] / hands:,.0f} B per hand")
    print(f"  command record (idempotency): {table_bytes['commands']:,} B = "
          f"{table_bytes['commands'] / hands:,.0f} B per hand")
    fixed = {k: v for k, v in table_bytes.items() if k not in ("events", "commands") and v}
    print("  fixed per table: " + ", ".join(f"{k} {v:,} B" for k, v in fixed.items())
          + f" (total {sum(fixed.values()):,} B)")
    print(f"  dealer's keys of the table: {dealer_keys} keys, {dealer_bytes:,} B = "
          f"{dealer_bytes / hands:,.0f} B per hand")
    print(f"  wallet's keys grew by {wallet_after - wallet_before:,} B = "
          f"{(wallet_after - wallet_before) / hands:,.0f} B per hand")
    total = growing + dealer_bytes + (wallet_after - wallet_before)
    print(f"  => growing per hand: {growing / hands:,.0f} B (table) + "
          f"{dealer_bytes / hands:,.0f} B (dealer) + "
          f"{(wallet_after - wallet_before) / hands:,.0f} B (wallet) = {total / hands:,.0f} B")
    return {"events_per_hand": xlen / hands, "bytes_per_hand": total / hands,
            "actions_per_hand": actions / hands, "fixed_bytes": sum(fixed.values())}


async def per_open_table(test_redis: TestRedis, dev: DevKeys, args: argparse.Namespace
                         ) -> dict[str, float]:
    admin = connect(test_redis.url)
    await admin.flushall()
    n = args.open_tables
    async with running_room(test_redis, test_redis.url, dev,
                            snapshot_every=args.snapshot_every) as room:
        # The room's own idle cost with no table, subtracted below (server cron, heartbeats).
        base = await idle_costs(admin, args.idle_seconds)
        warm = await room.client.open_table("warm")  # first-use allocations (caches, imports)
        await seat_players(room, warm, args.players)
        await room.client.wait_for(warm, lambda v: v.hands_started >= 1)
        gc.collect()
        tracemalloc.start(40)
        before = tracemalloc.take_snapshot()
        ids = [await room.client.open_table(f"open-{i}") for i in range(n)]
        for table_id in ids:
            await seat_players(room, table_id, args.players)
        for table_id in ids:
            await room.client.wait_for(table_id, lambda v: v.hands_started >= 1
                                       and v.HasField("hand") and v.hand.to_act > 0)
        await asyncio.sleep(1.0)
        gc.collect()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        ours = tracemalloc.Filter(True, "*services/table/*", all_frames=True)
        diff_all = sum(s.size_diff for s in after.compare_to(before, "filename"))
        diff_table = sum(s.size_diff for s in after.filter_traces([ours]).compare_to(
            before.filter_traces([ours]), "filename"))
        # Idle cost of holding n+1 open tables (leases, summaries), beyond the baseline.
        held = await idle_costs(admin, args.idle_seconds)
        await room.table_deps.app.stop()
    await admin.aclose()
    tables = n + 1
    idle_cmds, idle_cpu, idle_proc = ((h - b) / tables for h, b in zip(held, base, strict=True))
    elapsed = args.idle_seconds
    print(f"== 2. Memory per open table: {n} tables x {args.players} players, each dealt and "
          "waiting for an action (tracemalloc, after gc)")
    print(f"  table service's own allocations: {diff_table / n / 1024:,.1f} KiB per table")
    print(f"  whole process (table + in-process dealer and wallet): "
          f"{diff_all / n / 1024:,.1f} KiB per table")
    print(f"  idle in Redis, {tables} open tables over {elapsed:.1f} s: "
          f"{idle_cmds:.2f} commands/s, {idle_cpu * 1e6:.1f} us Redis CPU and "
          f"{idle_proc * 1e6:.1f} us service CPU per second per table, beyond the room's "
          f"baseline with no table ({base[0]:.1f} commands/s, {base[1] * 1e3:.2f} ms Redis CPU "
          "per second): the ownership round's lease renewal and lobby summary")
    return {"table_bytes": diff_table / n, "process_bytes": diff_all / n,
            "idle_cmds": idle_cmds, "idle_cpu": idle_cpu, "idle_proc": idle_proc}


async def idle_costs(admin: Any, seconds: float) -> tuple[float, float, float]:
    """Over ``seconds`` of nobody acting: Redis commands/s, Redis CPU s/s, process CPU s/s."""
    cpu0, cmd0 = await redis_counters(admin)
    p0, t0 = time.process_time(), time.monotonic()
    await asyncio.sleep(seconds)
    p1, t1 = time.process_time(), time.monotonic()
    cpu1, cmd1 = await redis_counters(admin)
    elapsed = t1 - t0
    # the INFO call itself is one command; negligible
    return (cmd1 - cmd0) / elapsed, (cpu1 - cpu0) / elapsed, (p1 - p0) / elapsed


async def throughput(test_redis: TestRedis, dev: DevKeys, args: argparse.Namespace
                     ) -> dict[str, float]:
    admin = connect(test_redis.url)
    await admin.flushall()
    async with running_room(test_redis, test_redis.url, dev,
                            snapshot_every=args.snapshot_every) as room:
        ids = [await room.client.open_table(f"load-{i}") for i in range(args.load_tables)]
        for table_id in ids:
            await seat_players(room, table_id, args.players)
        counts = dict.fromkeys(ids, 0)
        stop = asyncio.Event()

        async def bot(table_id: str, rng: random.Random) -> None:
            while not stop.is_set():
                view = await room.client.view(table_id)
                if await act_once(room.client, table_id, view, rng.choice):
                    counts[table_id] += 1
                else:
                    await asyncio.sleep(0.002)

        tasks = [asyncio.create_task(bot(t, random.Random(i))) for i, t in enumerate(ids)]
        await asyncio.sleep(2.0)  # warm-up
        start_counts = sum(counts.values())
        cpu0, cmd0 = await redis_counters(admin)
        p0, t0 = time.process_time(), time.monotonic()
        await asyncio.sleep(args.seconds)
        p1, t1 = time.process_time(), time.monotonic()
        cpu1, cmd1 = await redis_counters(admin)
        actions = sum(counts.values()) - start_counts
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await room.table_deps.app.stop()
    await admin.aclose()
    rate = actions / (t1 - t0)
    cpu_per_action = (p1 - p0) / actions
    redis_cpu = (cpu1 - cpu0) / actions
    redis_cmds = (cmd1 - cmd0) / actions
    print(f"== 3. Actions per second: {args.load_tables} tables x {args.players} bots acting "
          f"as fast as the room allows, {args.seconds:.0f} s after 2 s warm-up, one process")
    print(f"  {rate:,.0f} actions/s; process CPU {cpu_per_action * 1000:.2f} ms per action "
          f"(table + dealer + wallet + bots: {1 / cpu_per_action:,.0f} actions per "
          "CPU-second, a lower bound for a table replica's core)")
    print(f"  Redis: {redis_cmds:.1f} commands and {redis_cpu * 1e6:.0f} us CPU per action "
          "(player actions; the dealer's and wallet's calls and ownership rounds included)")
    return {"rate": rate, "cpu_per_action": cpu_per_action, "redis_cpu": redis_cpu,
            "redis_cmds": redis_cmds}


def derive(hand: dict[str, float], mem: dict[str, float], load: dict[str, float],
           args: argparse.Namespace) -> None:
    print("== 4. Capacity at the human pace (derived; each line says how)")
    replica_cores = args.replica_cpu
    replica_memory = args.replica_memory_mib * 2**20
    redis_memory = args.redis_memory_gib * 2**30
    per_table_mem = mem["process_bytes"]
    for pace in (0.1, 0.5):
        cpu_bound = args.utilisation * replica_cores / (load["cpu_per_action"] * pace
                                                        + mem["idle_proc"])
        mem_bound = args.utilisation * replica_memory / per_table_mem
        print(f"  at {pace} actions/s per table:")
        print(f"    per replica ({replica_cores} core, {args.replica_memory_mib} MiB, "
              f"{args.utilisation:.0%} target): CPU {pretty(cpu_bound)} tables "
              f"(= {args.utilisation} x {replica_cores} / ({load['cpu_per_action'] * 1000:.2f}"
              f" ms x {pace} + {mem['idle_proc'] * 1e6:.0f} us idle)), "
              f"memory {pretty(mem_bound)} tables (= {args.utilisation} x "
              f"{args.replica_memory_mib} MiB / {per_table_mem / 1024:.0f} KiB) -> "
              f"{pretty(min(cpu_bound, mem_bound))}")
        redis_per_table = load["redis_cpu"] * pace + mem["idle_cpu"]
        redis_cpu_bound = args.utilisation / redis_per_table
        hands_per_day = pace * 86_400 / hand["actions_per_hand"]
        bytes_kept = hand["bytes_per_hand"] * hands_per_day * args.retention_days \
            + hand["fixed_bytes"]
        redis_mem_bound = args.utilisation * redis_memory / bytes_kept
        print(f"    per Redis master (1 core, {args.redis_memory_gib} GiB, "
              f"{args.utilisation:.0%}): CPU {pretty(redis_cpu_bound)} tables (= "
              f"{args.utilisation} / ({load['redis_cpu'] * 1e6:.0f} us x {pace} + "
              f"{mem['idle_cpu'] * 1e6:.1f} us idle)), memory {pretty(redis_mem_bound)} tables"
              f" (= {args.utilisation} x {args.redis_memory_gib} GiB / ("
              f"{hand['bytes_per_hand']:,.0f} B x {hands_per_day:,.0f} hands/day x "
              f"{args.retention_days} days kept before stud archive)) -> "
              f"{pretty(min(redis_cpu_bound, redis_mem_bound))}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hands", type=int, default=30)
    parser.add_argument("--players", type=int, default=6)
    parser.add_argument("--open-tables", type=int, default=40)
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    parser.add_argument("--load-tables", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--snapshot-every", type=int, default=25)
    parser.add_argument("--replica-cpu", type=float, default=1.0)
    parser.add_argument("--replica-memory-mib", type=int, default=1024)
    parser.add_argument("--redis-memory-gib", type=float, default=8.0)
    parser.add_argument("--retention-days", type=float, default=7.0)
    parser.add_argument("--utilisation", type=float, default=0.5)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    dev = DevKeys.generate()
    with redis_server() as test_redis:
        hand = await per_hand(test_redis, dev, args)
        mem = await per_open_table(test_redis, dev, args)
        load = await throughput(test_redis, dev, args)
    derive(hand, mem, load, args)


if __name__ == "__main__":
    asyncio.run(main())
