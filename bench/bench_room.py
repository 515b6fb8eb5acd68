"""The room's figure: actions per second and action latency (p50, p99) with 16 concurrent bots
through the whole stack, beside the bare and the fair ceilings measured in the same run.
Prints figures; asserts nothing.

The stack: a real ``redis-server`` (one ACL user per service), and ``python -m dealer``,
``python -m wallet`` and ``python -m table`` as separate processes (``studtest.processes``).
4 tables x 4 bots (``--tables``, ``--bots``), next-hand delay 0, the bots in processes of their
own (``campaigns.loadbots``; their CPU is reported apart): each bot is a player who
follows the table as its seat, folds the events with the rules to know when it is its turn,
and then acts with a random legal action (``expected_sequence`` set), timing the action from
its sending to its reply. Every action goes through auth, the table's decide/append, and the
driver goes on to the dealer (streets, showdown) and the wallet (settlement, reconciliation)
between them.

``--actions`` says how the bots talk to the table: ``play`` (the default), one
``TableService.Play`` stream a bot carrying the table's records, its actions and their
replies; ``unary``, ``WatchTable`` and a unary call per action (as browsers play). Several,
comma-separated (``--actions play,unary``), run the room once per mode in the same run, each on
a Redis of its own, printed one after the other; the first is the one beside the ceilings.

The ceilings (``campaigns/ceilings.py``): the bare one, a ``grpc.aio`` unary handler doing one Lua
append, called by as many concurrent callers as there are bots, and again by as many as there
are tables (at most one player per table can be acting at a time); the fair one, the
room's own I/O at the room's concurrency: one unary call in, one fenced append, the event
pushed to each of the table's watchers (one per bot) over their server streams; and the fair
one over streams, the room's I/O when the bots use Play: one message in on the acting player's
open bidirectional stream, the same fenced append, the event pushed to the table's other
players' streams and the reply on the actor's own.

``--traced`` turns tracing on in every service (issue 33): ``OTEL_EXPORTER_OTLP_ENDPOINT``
points at an OTLP receiver this process runs (:mod:`studtools.traces`, spans kept in memory
and counted); the CPU per action beside a run without it is tracing's cost
(docs/operations.md "Traces").

The run itself is ``campaigns.throughput`` (``make load`` runs it too; ``bench/`` builds on
``campaigns/``, never the other way). Run: ``make bench-room`` (or
``.venv/bin/python bench/bench_room.py --seconds 20``; traced: ``make bench-room
BENCH_ROOM_ARGS=--traced``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from campaigns.throughput import SERVICES, parse_actions, room_run
from studtools.redis_server import RedisServer, server_version
from studtools.traces import Receiver, receiving

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_fairness beside this file
from bench_fairness import fairness_lines


@contextlib.asynccontextmanager
async def tracing(on: bool) -> AsyncIterator[Receiver | None]:
    """With ``on``, an OTLP receiver here and every service (a child: it inherits the
    environment) exporting to it; yields the receiver (None when off)."""
    if not on:
        os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        yield None
        return
    async with receiving() as (receiver, port):
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
        os.environ.setdefault("OTEL_TRACES_SAMPLER", "always_on")
        try:
            yield receiver
        finally:
            os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)


async def main_async(args: argparse.Namespace) -> None:
    passwords = {name: secrets.token_urlsafe(16) for name in SERVICES}
    receiver: Receiver | None
    async with tracing(args.traced) as receiver:
        await run_room(args, passwords, receiver)


async def run_room(args: argparse.Namespace, passwords: dict[str, str],
                   receiver: Receiver | None) -> None:
    with RedisServer(passwords=passwords, appendfsync=args.fsync) as redis_server, \
            tempfile.TemporaryDirectory(prefix="bench-room-") as tmp:
        version = ".".join(map(str, server_version(redis_server.binary)))
        print(f"== room: redis-server {version}, AOF appendfsync {args.fsync}, services log at "
              f"{args.log_level}, {args.seconds:.0f} s per figure after {args.warm_up:.0f} s "
              f"warm-up, {os.cpu_count()} CPUs, tracing {'on' if receiver else 'off'}")
        started = time.perf_counter()
        run = await room_run(redis_server, Path(tmp), args.tables, args.bots, args.seconds,
                             args.warm_up, args.log_level, args.actions,
                             lambda: RedisServer(passwords=passwords, appendfsync=args.fsync))
        for line in run.lines(args.seconds):
            print(line)
        print(f"  table CPU per action: {run.table_cpu_ms():.2f} ms (tracing "
              f"{'on' if receiver else 'off'})")
        if receiver is not None:
            print(f"  spans received: {len(receiver.spans)} "
                  f"({len(receiver.spans) / max(1, run.room.count):.1f} per action)")
        for line in fairness_lines():  # what the per-card commitment adds per hand
            print(line)
        print(f"(total {time.perf_counter() - started:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="measured seconds")
    parser.add_argument("--warm-up", type=float, default=3.0, help="seconds before measuring")
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--bots", type=int, default=4, help="bots (players) per table")
    parser.add_argument("--fsync", default="everysec", choices=("always", "everysec", "no"),
                        help="Redis AOF appendfsync")
    parser.add_argument("--log-level", default="INFO", help="the services' LOG_LEVEL")
    parser.add_argument("--traced", action="store_true",
                        help="every service exports its traces to a receiver in this process")
    parser.add_argument("--actions", type=parse_actions, default=["play"],
                        help="how the bots act: play (one Play stream a bot) or unary "
                             "(WatchTable + a unary call an action); several, comma-separated, "
                             "run the room once each (default: play)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
