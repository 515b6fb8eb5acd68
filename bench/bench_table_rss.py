"""What an open table costs the table process in memory (issue 18 part 4), by part: the room
as processes (``studtest.processes``), tables opened with three players seated (hands
starting, nobody acting), then one watch stream per table, the table process's RSS read from
``/proc`` before and after each; beside it, what one bare ``grpc.aio`` server stream costs
(the fair ceiling's ``Watch``, ``campaigns/ceilings.py``). Prints figures; asserts nothing.

Run: ``.venv/bin/python bench/bench_table_rss.py --tables 200``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc

from campaigns.ceilings import FAIR_WATCH
from campaigns.load import open_human_table, rss_kib
from campaigns.throughput import SERVICES
from stud.v1 import table_pb2 as pb
from studtest.processes import CHANNEL_OPTIONS, room_processes
from studtest.table import player
from studtools.devkeys import DevKeys
from studtools.redis_server import RedisServer, free_port

WARM = 50
"""Tables (or streams) opened first, so the figures leave the process's warm-up out."""


async def _drain(call: grpc.aio.UnaryStreamCall) -> None:  # type: ignore[type-arg]
    try:
        async for _record in call:
            pass
    except (grpc.aio.AioRpcError, asyncio.CancelledError):
        pass


async def table_rss(redis_server: RedisServer, tables: int) -> tuple[float, float]:
    """(KiB per seated table, KiB per watch stream) of the table process."""
    with tempfile.TemporaryDirectory(prefix="bench-rss-") as tmp:
        async with room_processes(redis_server.url_for, DevKeys.generate(), Path(tmp),
                                  extra_env={"LOG_LEVEL": "WARNING",
                                             "TABLE_WATCHES_PER_CONNECTION": "100000"}
                                  ) as room, room.clients() as clients:
            assert room.table.proc is not None
            pid = room.table.proc.pid
            gate = asyncio.Semaphore(16)

            async def one(t: int) -> None:
                async with gate:
                    await open_human_table(clients, t)

            await asyncio.gather(*(one(t) for t in range(WARM)))
            await asyncio.sleep(3)
            before = rss_kib(pid)
            await asyncio.gather(*(one(t) for t in range(WARM, WARM + tables)))
            await asyncio.sleep(5)
            seated = rss_kib(pid)
            watches = [clients.table.stub.WatchTable(
                pb.WatchTableRequest(table_id=f"human-{t}", after_sequence=0),
                metadata=clients.table.md(player(f"w{t}"))) for t in range(WARM, WARM + tables)]
            drains = [asyncio.create_task(_drain(w)) for w in watches]
            await asyncio.sleep(5)
            watched = rss_kib(pid)
            for watch in watches:
                watch.cancel()
            await asyncio.gather(*drains)
    return (seated - before) / tables, (watched - seated) / tables


async def bare_stream_rss(redis_server: RedisServer, streams: int) -> float:
    """KiB per open bare ``grpc.aio`` server stream (one message sent on each)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "campaigns.ceilings", str(port)],
                            env={**os.environ, "REDIS_URL": redis_server.url_for("table")})
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}",
                                             options=CHANNEL_OPTIONS) as channel:
            await asyncio.wait_for(channel.channel_ready(), 30)
            watch = channel.unary_stream(FAIR_WATCH)
            warm = [watch(b"warm") for _ in range(WARM)]
            for call in warm:
                await call.read()
            await asyncio.sleep(1)
            before = rss_kib(proc.pid)
            calls = [watch(f"s-{i}".encode()) for i in range(streams)]
            for call in calls:
                await call.read()
            await asyncio.sleep(2)
            after = rss_kib(proc.pid)
            for call in warm + calls:
                call.cancel()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return (after - before) / streams


async def main_async(args: argparse.Namespace) -> None:
    passwords = {name: secrets.token_urlsafe(16) for name in SERVICES}
    with RedisServer(passwords=passwords) as redis_server:
        seated, watched = await table_rss(redis_server, args.tables)
        bare = await bare_stream_rss(redis_server, args.tables)
    print(f"== table RSS, {args.tables} tables after {WARM} (3 players seated, nobody acting)")
    print(f"  a seated table             {seated:6.1f} KiB")
    print(f"  its watch stream           {watched:6.1f} KiB")
    print(f"  a bare grpc.aio stream     {bare:6.1f} KiB (the fair ceiling's Watch)")
    print(f"per_table_kib={seated + watched:.1f} watch_kib={watched:.1f} "
          f"bare_stream_kib={bare:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=200)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
