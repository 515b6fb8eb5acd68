"""Event store throughput on a real local redis-server: appends/s through EventStore (1- and
5-event commands) next to a bare XADD loop and a bare EVALSHA of a trivial script, and events
read/s through ``read()``, for a few persistence settings. Prints figures; asserts nothing.

Each figure is one client issuing one command at a time (latency-bound, like one table's
command loop), the best of three rounds of a fixed wall-clock budget. Run:
``make bench-store`` (or ``.venv/bin/python bench/bench_store.py --budget 3``).

``--cpu`` measures instead the client's CPU time (this process's, ``time.process_time``) per
command, side by side in one run: redis-py's own command path (its pool, connections and
``execute_command``, as ``studkit.redis_client.connect`` built it before issue 35), the client
:func:`connect` builds now, and that client without each of its cuts in turn, with the table's
settings (``socket_timeout=10``, ``health_check_interval=30``). Rounds alternate the clients,
so a shared machine's load falls on all of them alike; the figure is each client's median
over the rounds, and its ratio to redis-py's the median of the rounds' ratios
(``.venv/bin/python bench/bench_store.py --cpu --rounds 7``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.connection import Connection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.redis_client import (
    POOL_SIZE,
    POOL_WAIT_S,
    Client,
    FastPool,
    TimedRedis,
    _FastConnection,
    connect,
    reconnecting,
)
from studkit.store import EventStore
from studkit.telemetry import observe_redis, redis_command
from studtools.redis_server import RedisServer, server_version

PAYLOAD = b"p" * 48  # about the size of a typical serialized event
VARIANTS: dict[str, dict[str, object]] = {
    "aof off": {"appendonly": False},
    "aof everysec": {"appendonly": True, "appendfsync": "everysec"},
    "aof always": {"appendonly": True, "appendfsync": "always"},
}


def envelopes(n: int) -> list[EventEnvelope]:
    return [EventEnvelope(event_type="BetMade", schema_version=1, hand_number=1,
                          payload=PAYLOAD) for _ in range(n)]


async def rate(
    budget: float, step: Callable[[int], Awaitable[int]], rounds: int = 3
) -> tuple[float, int]:
    """Run ``step(i)`` (returning how many units it did) for ``rounds`` rounds sharing
    ``budget`` seconds; return the best round's units per second (the machine is shared and
    noisy; the best round is the least disturbed one) and the total number of steps."""
    best, i = 0.0, 0
    for _ in range(rounds):
        done = 0
        start = time.perf_counter()
        deadline = start + budget / rounds
        while time.perf_counter() < deadline:
            done += await step(i)
            i += 1
        best = max(best, done / (time.perf_counter() - start))
    return best, i


async def bench_variant(url: str, budget: float) -> list[tuple[str, float, str]]:
    client = connect(url)
    store = EventStore(client)
    rows: list[tuple[str, float, str]] = []
    try:
        stream = keys.table_stream("bare")

        async def bare_xadd(i: int) -> int:
            await client.xadd(stream, {"envelope": PAYLOAD})
            return 1

        per_s, _ = await rate(budget, bare_xadd)
        rows.append(("bare XADD", per_s, "entries/s"))

        sha = await client.script_load("return 1")

        async def bare_evalsha(i: int) -> int:
            await client.evalsha(sha, 1, keys.table_version("bare"))
            return 1

        per_s, _ = await rate(budget, bare_evalsha)
        rows.append(("bare EVALSHA (return 1)", per_s, "calls/s"))

        for size, table in ((1, "one"), (5, "five")):
            batch = envelopes(size)
            version = (await store.append(table, batch, 0, command_id="warm-up")).version

            async def append(i: int, batch: list[EventEnvelope] = batch,
                             table: str = table) -> int:
                nonlocal version
                result = await store.append(table, batch, version, command_id=f"c{i}")
                version = result.version
                return 1

            per_s, commands = await rate(budget, append)
            rows.append((f"EventStore.append, {size}-event commands", per_s, "commands/s"))
            rows.append((f"  = events appended ({size} x {commands} commands)",
                         per_s * size, "events/s"))

        total = await store.version("five")

        async def read_all(i: int) -> int:
            return len(await store.read("five"))

        per_s, _ = await rate(budget, read_all)
        rows.append((f"EventStore.read, whole stream of {total}", per_s, "events/s"))
    finally:
        await client.aclose()
    return rows


async def main_async(budget: float, variants: list[str]) -> None:
    for name in variants:
        with RedisServer(**VARIANTS[name]) as server:  # type: ignore[arg-type]
            version = ".".join(map(str, server_version(server.binary)))
            print(f"\n== redis-server {version}, {name} ({budget:.1f} s per figure)")
            for label, per_s, unit in await bench_variant(server.url, budget):
                print(f"  {label:<48} {per_s:>10,.0f} {unit}")


class _StockTimedRedis(TimedRedis):
    """``TimedRedis`` as it was: every command through redis-py's ``execute_command``."""

    async def execute_command(self, *args: EncodableT, **options: Any) -> Any:
        started = time.perf_counter()
        try:
            reply = await Redis.execute_command(self, *args, **options)  # type: ignore[no-untyped-call]
        except BaseException as exc:
            observe_redis(redis_command(args), time.perf_counter() - started, exc)
            raise
        observe_redis(redis_command(args), time.perf_counter() - started)
        return reply


TABLE_OPTIONS: dict[str, Any] = {"socket_timeout": 10, "health_check_interval": 30}
"""The table service's client options (services/table/bootstrap.py)."""


def cpu_client(url: str, cuts: frozenset[str]) -> Client:
    """A plain client with the given cuts of issue 35 (``pool``: :class:`FastPool`; ``send``:
    the connection that writes without a task; ``lean``: ``TimedRedis``'s own command path),
    redis-py's own parts otherwise; the options :func:`connect` gives."""
    if cuts == {"pool", "send", "lean"}:
        return connect(url, **TABLE_OPTIONS)
    options: dict[str, Any] = {
        **TABLE_OPTIONS, "retry": reconnecting(), "max_connections": POOL_SIZE,
        "retry_on_error": [RedisConnectionError, RedisTimeoutError]}
    pool_class = FastPool if "pool" in cuts else BlockingConnectionPool
    pool = pool_class.from_url(url, timeout=POOL_WAIT_S, **options)
    pool.connection_class = _FastConnection if "send" in cuts else Connection
    client_class = TimedRedis if "lean" in cuts else _StockTimedRedis
    return client_class.from_pool(pool)


CPU_CLIENTS: dict[str, frozenset[str]] = {
    "redis-py (before)": frozenset(),
    "all but pool": frozenset({"send", "lean"}),
    "all but send": frozenset({"pool", "lean"}),
    "all but lean": frozenset({"pool", "send"}),
    "connect() (after)": frozenset({"pool", "send", "lean"}),
}
"""The clients compared: before, after, and after without each cut in turn (what a cut
saves is the gap between "all but" it and "after", measured where the others are in)."""


async def cpu_bench(rounds: int, n: int) -> None:
    """Client CPU per command of each :data:`CPU_CLIENTS` (see the module's doc)."""
    with RedisServer(appendonly=False) as server:
        version = ".".join(map(str, server_version(server.binary)))
        clients = {name: cpu_client(server.url, cuts) for name, cuts in CPU_CLIENTS.items()}
        stores = {name: EventStore(client) for name, client in clients.items()}
        sha = await clients["redis-py (before)"].script_load("return 1")
        tables = {name: f"cpu{i}" for i, name in enumerate(clients)}
        versions = {name: 0 for name in clients}
        steps = {name: 0 for name in clients}
        batch = envelopes(1)

        async def get(name: str) -> None:
            await clients[name].get(keys.table_version(tables[name]))

        async def evalsha(name: str) -> None:
            await clients[name].evalsha(sha, 1, keys.table_version(tables[name]))

        async def append(name: str) -> None:
            steps[name] += 1
            result = await stores[name].append(tables[name], batch, versions[name],
                                               command_id=f"c{steps[name]}")
            versions[name] = result.version

        async def tail(name: str) -> None:
            await stores[name].tail(tables[name], versions[name])

        commands: dict[str, Callable[[str], Awaitable[None]]] = {
            "GET": get, "EVALSHA (return 1)": evalsha, "EventStore.append (1 event)": append,
            "EventStore.tail (MULTI of 3)": tail}
        for name in clients:  # connections opened, the script loaded
            for command in commands.values():
                await command(name)
        cpu: dict[tuple[str, str], list[float]] = {}
        for _ in range(rounds):
            for label, command in commands.items():
                for name in clients:
                    started = time.process_time()
                    for _ in range(n):
                        await command(name)
                    cpu.setdefault((label, name), []).append(
                        (time.process_time() - started) / n * 1e6)
        for client in clients.values():
            await client.aclose()
    load = os.getloadavg()
    print(f"== client CPU per command, redis-server {version} (aof off), {rounds} rounds of "
          f"{n} commands per client, alternated; load average {load[0]:.2f}")
    for label in commands:
        print(f"  {label}")
        before = cpu[(label, "redis-py (before)")]
        for name in clients:
            mine = cpu[(label, name)]
            ratio = statistics.median(m / b for m, b in zip(mine, before, strict=True))
            print(f"    {name:<20} {statistics.median(mine):7.1f} us "
                  f"(min {min(mine):6.1f})  x{ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=1.5, help="seconds per figure")
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS),
                        help="persistence setting(s) to run (default: all)")
    parser.add_argument("--cpu", action="store_true",
                        help="client CPU per command, redis-py's path and studkit's side by side")
    parser.add_argument("--rounds", type=int, default=7, help="--cpu: alternated rounds")
    parser.add_argument("--commands", type=int, default=2000,
                        help="--cpu: commands per client per round")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.cpu:
        asyncio.run(cpu_bench(args.rounds, args.commands))
    else:
        asyncio.run(main_async(args.budget, args.variant or list(VARIANTS)))
    print(f"\n(total {time.perf_counter() - started:.1f} s; one client, one command at a time)")


if __name__ == "__main__":
    main()
