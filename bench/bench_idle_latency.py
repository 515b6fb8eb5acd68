"""How long one tiny gRPC call takes after the caller and the server have been idle (issue 35:
the human-pace ladder of ``make load``).

At human pace a table hears from each player every few seconds, so every call finds the
processes idle. On the development machine an action at a single idle table took 54-90 ms at
the bot, of which 34-45 ms passed before the table's first interceptor ran. This script
isolates that cost from the room: a bare ``grpc.aio`` health check, client and server in one
process, none of the product's code, called back to back and then after each idle gap; and,
as the machine's own floor, a plain asyncio TCP echo after the same gaps; and a Redis read
and a write after 1 s idle (the write waits for the AOF's fsync, as an idle table's commit
does).

Beside the times, the thread context switches one call after idle costs (voluntary, summed
over every thread of the process; the machine's noise moves this count little, where it
moves the times several-fold): each is a thread woken, and on an idle virtual machine a
woken thread may wait for its vCPU.

The process imports ``studkit`` first, so it runs on the transport the services run on
(``studkit.transport.GRPC_EXPERIMENTS``); ``GRPC_EXPERIMENTS= `` (empty) gives grpcio's default.

Prints one line per case and the last line ``grpc_busy_ms=… grpc_idle_1s_ms=…
grpc_idle_3s_ms=… echo_idle_1s_ms=… redis_read_idle_1s_ms=… redis_write_idle_1s_ms=…
switches_per_call=… grpc=<version> experiments=…``
(medians); asserts nothing.
Run: ``.venv/bin/python bench/bench_idle_latency.py [--calls 10]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

import studkit.transport  # noqa: F401  (first: the services' gRPC setting, read at grpc's import)

# isort: split
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from studkit.redis_client import connect
from studtools.redis_server import RedisServer


def switches() -> int:
    """Voluntary context switches of every thread of this process so far."""
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status") as status:
                total += next(int(line.split()[1]) for line in status
                              if line.startswith("voluntary_ctxt_switches"))
        except (OSError, StopIteration):
            pass  # a thread that ended meanwhile
    return total


SWITCHES: list[int] = []
"""Context switches of each health check after an idle gap (appended by grpc_calls)."""


async def grpc_calls(gap_s: float, calls: int) -> list[float]:
    """Milliseconds of each health check, ``gap_s`` idle before each but the first."""
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            await stub.Check(health_pb2.HealthCheckRequest())  # connected and warm
            took = []
            for _ in range(calls):
                await asyncio.sleep(gap_s)
                before = switches()
                began = time.perf_counter()
                await stub.Check(health_pb2.HealthCheckRequest())
                took.append((time.perf_counter() - began) * 1000)
                if gap_s:
                    SWITCHES.append(switches() - before)
            return took
    finally:
        await server.stop(None)


async def echo_calls(gap_s: float, calls: int) -> list[float]:
    """Milliseconds of each one-byte round trip over a plain asyncio TCP connection."""
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(100):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        took = []
        for _ in range(calls):
            await asyncio.sleep(gap_s)
            began = time.perf_counter()
            writer.write(b"x")
            await writer.drain()
            await reader.read(100)
            took.append((time.perf_counter() - began) * 1000)
        return took
    finally:
        writer.close()
        server.close()


async def redis_calls(gap_s: float, calls: int) -> tuple[list[float], list[float]]:
    """Milliseconds of a read (GET) and of a write (SET) after ``gap_s`` idle each, on a
    redis-server of the product's durability (AOF, ``appendfsync always``, as the campaigns
    run it): an idle table's commit is one such write (its append script)."""
    with RedisServer() as server:
        client = connect(server.url)
        try:
            await client.set("idle", "0")
            reads, writes = [], []
            for _ in range(calls):
                await asyncio.sleep(gap_s)
                began = time.perf_counter()
                await client.get("idle")
                reads.append((time.perf_counter() - began) * 1000)
                await asyncio.sleep(gap_s)
                began = time.perf_counter()
                await client.set("idle", "1")
                writes.append((time.perf_counter() - began) * 1000)
            return reads, writes
        finally:
            await client.aclose()


def line(name: str, took: list[float]) -> str:
    return (f"  {name:<34} median {statistics.median(took):6.1f} ms  "
            f"min {min(took):6.1f}  max {max(took):6.1f}  (n={len(took)})")


async def main_async(calls: int) -> str:
    busy = await grpc_calls(0.0, calls * 5)
    print(line("grpc health check, back to back", busy), flush=True)
    idle1 = await grpc_calls(1.0, calls)
    print(line("grpc health check, 1 s idle before", idle1), flush=True)
    idle3 = await grpc_calls(3.0, calls)
    print(line("grpc health check, 3 s idle before", idle3), flush=True)
    echo1 = await echo_calls(1.0, calls)
    print(line("asyncio TCP echo, 1 s idle before", echo1), flush=True)
    reads, writes = await redis_calls(1.0, calls)
    print(line("redis GET, 1 s idle before", reads), flush=True)
    print(line("redis SET (fsync always), 1 s idle", writes), flush=True)
    return (f"grpc_busy_ms={statistics.median(busy):.1f} "
            f"grpc_idle_1s_ms={statistics.median(idle1):.1f} "
            f"grpc_idle_3s_ms={statistics.median(idle3):.1f} "
            f"echo_idle_1s_ms={statistics.median(echo1):.1f} "
            f"redis_read_idle_1s_ms={statistics.median(reads):.1f} "
            f"redis_write_idle_1s_ms={statistics.median(writes):.1f} "
            f"switches_per_call={statistics.median(SWITCHES):.0f} grpc={grpc.__version__} "
            f"experiments={os.environ.get('GRPC_EXPERIMENTS') or 'default'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10, help="calls after each gap")
    args = parser.parse_args()
    print(asyncio.run(main_async(args.calls)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
