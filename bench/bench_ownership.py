"""How long one ownership round takes (issue 17, F2): one replica renewing all its leases with
``Ownership.renew_many`` (one pipeline of batched scripts) on a real local redis-server with
the project's persistence (AOF, ``appendfsync always``), or on a local three-master Redis
Cluster (``--cluster``). Prints figures; asserts nothing.

For each size: the round's wall time (median and worst of ``--rounds`` rounds, one every
``--period`` seconds as the table service's keeper runs them), Redis's CPU per round (the
server's ``used_cpu_sys + used_cpu_user``, summed over the masters) and the share of a
round's period that is, and the longest single script (Redis's ``SLOWLOG`` at 0 µs: how long
other clients' commands may wait behind one batch). Then the same leases renewed the old way
(one script per lease, concurrently) on the service's pool of 100 connections, to show what
it did. Run: ``.venv/bin/python bench/bench_ownership.py`` (about a minute).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

from redis.exceptions import RedisError

from studkit.ownership import BATCH, Ownership, Replica
from studkit.redis_client import Client, connect, connect_sync
from studtest.redis_cluster import LocalRedisCluster
from studtools.redis_server import RedisServer

POOL = 100
"""The table service's Redis pool (redis-py's default ``max_connections``)."""


@contextmanager
def redis(cluster: bool) -> Iterator[list[str]]:
    """Admin URLs: [the client URL, then one per master]."""
    if cluster:
        with LocalRedisCluster(appendonly=True) as local:
            yield [local.url, *(node.url for node in local.nodes)]
    else:
        with RedisServer() as server:
            yield [server.url, server.url]


def redis_cpu_s(urls: list[str]) -> float:
    total = 0.0
    for url in urls:
        client = connect_sync(url)
        info = client.info("cpu")
        total += float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
        client.close()
    return total


def slowlog(urls: list[str], reset: bool) -> float:
    """The longest command (ms) in the masters' slow logs since the last reset."""
    longest = 0.0
    for url in urls:
        client = connect_sync(url)
        if reset:
            client.config_set("slowlog-log-slower-than", 0)
            client.config_set("slowlog-max-len", 10_000)
            client.slowlog_reset()
        else:
            entries = client.slowlog_get(10_000)
            longest = max([longest, *(entry["duration"] / 1000 for entry in entries)])
        client.close()
    return longest


async def round_figures(client: Client, masters: list[str], size: int, rounds: int,
                        period: float, batch: int) -> None:
    me = Ownership(client, Replica(f"r-{size}", "127.0.0.1:1"), lease_ms=int(period * 3000),
                   batch=batch)
    ids = [f"b{size}-{i}" for i in range(size)]
    taken = await me.acquire_many(ids)
    epochs = {t: lease.epoch for t, lease in taken.items()}
    await me.renew_many(epochs)  # warm: script loaded, connections open
    cpu_before = redis_cpu_s(masters)
    slowlog(masters, reset=True)
    times, failed = [], 0
    for _ in range(rounds):
        await asyncio.sleep(period)
        start = time.perf_counter()
        renewed = await me.renew_many(epochs)
        times.append((time.perf_counter() - start) * 1000)
        failed += sum(not lease.ok for lease in renewed.values()) + size - len(renewed)
    cpu_ms = (redis_cpu_s(masters) - cpu_before) * 1000 / rounds
    longest = slowlog(masters, reset=False)
    print(f"  {size:>6,} leases: round {statistics.median(times):7.1f} ms median, "
          f"{max(times):7.1f} ms worst; Redis CPU {cpu_ms:6.1f} ms per round "
          f"({cpu_ms / (period * 10):.1f}% of a core at one round per {period:g} s); "
          f"longest script {longest:.2f} ms; {len(me.batches(ids))} scripts per round; "
          f"leases not renewed: {failed}")


async def old_way(client: Client, size: int) -> None:
    """One script per lease, all at once (TableApp.rebalance before issue 17)."""
    me = Ownership(client, Replica(f"old-{size}", "127.0.0.1:1"), lease_ms=3000)
    ids = [f"o{size}-{i}" for i in range(size)]
    epochs = {t: lease.epoch for t, lease in (await me.acquire_many(ids)).items()}
    start = time.perf_counter()
    outcome = await asyncio.gather(*(me.renew(t, e) for t, e in epochs.items()),
                                   return_exceptions=True)
    ms = (time.perf_counter() - start) * 1000
    errors = [o for o in outcome if isinstance(o, RedisError)]
    kinds = sorted({str(e) for e in errors})
    print(f"  {size:>6,} leases, one script each, concurrently: {ms:7.1f} ms, "
          f"{len(errors):,} failed {kinds if kinds else ''}")


async def main(args: argparse.Namespace) -> None:
    with redis(args.cluster) as urls:
        client = connect(urls[0], max_connections=POOL, socket_timeout=10)
        try:
            where = "a local 3-master Redis Cluster" if args.cluster else \
                "a local redis-server (AOF, appendfsync always)"
            print(f"== renew_many on {where}, batch {args.batch}, pool {POOL}")
            for size in args.sizes:
                await round_figures(client, urls[1:], size, args.rounds, args.period,
                                    args.batch)
            print("== the old round: one renew call per lease, asyncio.gather, pool "
                  f"{POOL}")
            for size in args.old_sizes:
                await old_way(client, size)
        finally:
            await client.aclose()


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 5_000, 20_000])
    parser.add_argument("--old-sizes", type=int, nargs="+", default=[95, 112, 1_000])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--period", type=float, default=1.0,
                        help="seconds between rounds (TABLE_LEASE_MS / 3)")
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--cluster", action="store_true")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))
