"""A long table's history (issue 17, F3): ``GetHandHistory`` latency on a table of about
15,000 events, and what unread ``WatchTable(after_sequence=0)`` streams of that table cost the
table process in memory. The room runs as processes (``studtest.processes``); a bot plays one
table (four players, random legal actions) until its stream holds ``--events`` events, then:

- ``GetHandHistory`` of hands spread over the table (first, middle, last), ``--calls`` calls
  one after another: p50 and p99, and the table process's CPU per call (``/proc``);
- ``--watches`` streams ``WatchTable(after_sequence=0)``, each on a connection of its own,
  each reading its first record and then nothing: the table process's RSS before and after.

Prints figures; asserts nothing. Run: ``.venv/bin/python bench/bench_long_table.py``
(a few minutes: most of it is playing the hands).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import secrets
import tempfile
import time
from pathlib import Path

import grpc

from bench.bench_refusals import OWN_CONNECTION, cpu_s, pct
from campaigns.load import rss_kib
from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from studtest.processes import room_processes
from studtest.table import OPERATOR, act_once, fast_settings, player
from studtools.devkeys import DevKeys
from studtools.redis_server import RedisServer

NAMES = ("ann", "bob", "cat", "dan")


async def play_to(clients: object, table_id: str, events: int) -> pb.TableView:
    """Random legal actions until the table's stream holds ``events`` events."""
    client = clients.table  # type: ignore[attr-defined]
    rng = random.Random(17)
    began, shown = time.monotonic(), 0
    while True:
        view = await client.view(table_id)
        if view.version >= events:
            return view
        if view.version >= shown + 2500:
            shown = view.version
            print(f"   ... {view.version} events, {view.hands_started} hands "
                  f"({time.monotonic() - began:.0f} s)", flush=True)
        if not await act_once(client, table_id, view, rng.choice):
            await asyncio.sleep(0.005)


async def measure(args: argparse.Namespace) -> None:
    keys = DevKeys.generate()
    passwords = {name: secrets.token_urlsafe(16) for name in ("table", "dealer", "wallet")}
    with RedisServer(passwords=passwords) as redis_server, \
            tempfile.TemporaryDirectory(prefix="stud-long-") as tmp:
        env = {"LOG_LEVEL": "WARNING", "TABLE_WATCHES_PER_CONNECTION": "1000",
               "TABLE_WATCHES_PER_PLAYER": "1000"}
        async with room_processes(redis_server.url_for, keys, Path(tmp), extra_env=env
                                  ) as room, room.clients() as clients:
            assert room.table.proc is not None
            pid = room.table.proc.pid
            table_id = await clients.table.open_table("long", settings=fast_settings())
            for seat, name in enumerate(NAMES, start=1):
                await clients.wallet.create_account(name)
                await clients.wallet.deposit(name, 100_000_000, f"dep-{name}")
                await clients.table.call("SitDown", pb.SitDownRequest(
                    table_id=table_id, seat=seat, buy_in=1_000_000), player(name))
            began = time.monotonic()
            view = await play_to(clients, table_id, args.events)
            print(f"== long table: {view.version} events, {view.hands_started} hands, played "
                  f"in {time.monotonic() - began:.0f} s", flush=True)
            last = view.hands_started - 1  # ended: the one in progress may still be going
            hands = [1, last // 2, last]
            latencies: list[float] = []
            cpu0 = cpu_s(pid)
            for i in range(args.calls):
                began = time.perf_counter()
                history = await clients.table.call("GetHandHistory", pb.GetHandHistoryRequest(
                    table_id=table_id, hand_number=hands[i % 3]), OPERATOR)
                latencies.append(time.perf_counter() - began)
                assert history.events
            cpu = (cpu_s(pid) - cpu0) / args.calls
            print(f"  GetHandHistory (hands {hands}): p50 {pct(latencies, 0.5):.2f} ms p99 "
                  f"{pct(latencies, 0.99):.2f} ms over {args.calls} calls; table CPU "
                  f"{cpu * 1000:.2f} ms per call", flush=True)
            await asyncio.sleep(2)
            before = rss_kib(pid)
            channels = [grpc.aio.insecure_channel(room.table.target, options=OWN_CONNECTION)
                        for _ in range(args.watches)]
            calls = []
            for n, channel in enumerate(channels):
                stub = pb_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
                call = stub.WatchTable(pb.WatchTableRequest(table_id=table_id,
                                                            after_sequence=0),
                                       metadata=clients.table.md(player(f"w{n}")))
                await call.read()  # the first record, then nothing more is read
                calls.append(call)
            await asyncio.sleep(5)
            after = rss_kib(pid)
            print(f"  {args.watches} unread WatchTable(after_sequence=0): table RSS "
                  f"{before / 1024:.1f} -> {after / 1024:.1f} MiB "
                  f"({(after - before) / args.watches:.0f} KiB per stream)", flush=True)
            for call in calls:
                call.cancel()
            for channel in channels:
                await channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=15_000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--watches", type=int, default=8)
    asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
