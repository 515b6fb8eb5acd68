"""What one hand costs the room, by kind (issue 35), counted from outside the services and
averaged over random legal hands of 2 to 8 players. Counts, not times: the figures are the
same on a busy machine as on an idle one.

The stack: a real ``redis-server`` (one ACL user per service) and ``python -m dealer``,
``python -m wallet`` and ``python -m table`` as separate processes
(``studtest.processes``), with taps between them (``studtest.handcost``): each service's Redis
connection goes through a counting TCP proxy (commands by name, round trips, the event store's
appends with the envelopes they carry), the table's calls to the dealer and the wallet through
a counting gRPC proxy (calls by method), and each table is watched (``WatchTable``) by each
seated player and by one player on the rail, who count the records they are sent and the
messages that carry them (batched watches, ``WatchTableRequest.batched``, unless
``--unbatched``).

One table per number of players (2 to 8, ``--players``), played one after another by one
driver that folds seat 1's watch with the rules and acts for whoever is to act with a random
legal action (a fold with probability ``--fold``, else any other legal action uniformly;
seeded). A table's count runs from its second hand waiting for its bring-in to the hand
``--hands / tables`` later waiting for its own: whole cycles of a hand (its actions, the
driver's streets, its showdown and settlement, the next hand's start and deal). The
replica's ownership round (heartbeat, lease renewals, lobby lines: a cost of time, not of
hands) is pushed out of the window with ``TABLE_LEASE_MS=60000``.

``--actions play``: each seated player follows the table over a ``TableService.Play`` stream
instead of ``WatchTable`` (issue 35) and the driver sends that seat's actions on it, each one
message answered on the stream; the table then sends a stream's own actions' records in their
replies only. The watchers' counts are then what the streams carry: records (the replies'
included) and messages (the replies included). Either way a line says the messages the
players' clients receive a hand, replies included (unary: the watch messages and a reply an
action; play: the streams' messages), the one figure that compares the two.

Last line: ``hands=... actions=... appends=... appends_beyond_actions=... events=...
bytes_appended=... store_round_trips=... dealer_calls=... wallet_calls=... watch_records=...
watch_messages=...``, each per hand. Run: ``make bench-hand-cost`` or ``.venv/bin/python
bench/bench_hand_cost.py [--hands 203] [--players 2-8] [--fold 0.15] [--seed 35]
[--unbatched] [--actions unary|play]``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import secrets
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import grpc

import rules
from rules import ActionKind
from stud.v1 import dealer_pb2, wallet_pb2
from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from studkit.auth import TokenBook
from studtest.handcost import (
    HandCost,
    Taps,
    Watchers,
    grpc_tap,
    measure_table,
    redis_taps,
    streaming_methods,
)
from studtest.processes import CHANNEL_OPTIONS, RoomProcesses
from studtest.table import TableClient, fast_settings, player
from studtools.devkeys import DevKeys
from studtools.redis_server import RedisServer, server_version

SERVICES = ("table", "dealer", "wallet", "auditor")


def chooser(fold: float):  # type: ignore[no-untyped-def]
    """A fold with probability ``fold`` (when legal), else any other legal action."""
    def choose(actions: Sequence[rules.LegalAction], rng: random.Random) -> rules.LegalAction:
        rest = [a for a in actions if a.kind != ActionKind.FOLD]
        if not rest or (len(rest) < len(actions) and rng.random() < fold):
            return next(a for a in actions if a.kind == ActionKind.FOLD)
        return rng.choice(rest)
    return choose


ROWS: tuple[tuple[str, str], ...] = (
    ("actions", "player actions"),
    ("appends", "appends (the event store's script)"),
    ("appends beyond actions", "  beyond the players' own"),
    ("events", "events appended"),
    ("bytes appended", "bytes appended (envelopes)"),
    ("store round trips", "store round trips, all services"),
    ("table round trips", "  table"),
    ("dealer round trips", "  dealer"),
    ("wallet round trips", "  wallet"),
    ("dealer and wallet calls", "dealer and wallet calls"),
    ("dealer calls", "  dealer"),
    ("dealer StartHand", "    StartHand"),
    ("dealer Deal", "    Deal"),
    ("dealer Reveal", "    Reveal"),
    ("wallet calls", "  wallet"),
    ("wallet SettleHand", "    SettleHand"),
    ("wallet Reconcile", "    Reconcile"),
    ("watch records", "records to watchers (players + rail)"),
    ("watch records per watcher", "  per watcher"),
    ("watch messages", "gRPC messages to watchers"),
    ("watch messages per watcher", "  per watcher"),
)


def totals(cost: HandCost) -> dict[str, float]:
    out: dict[str, float] = dict(cost.totals())
    out["appends beyond actions"] = out["appends"] - out["actions"]
    out["dealer and wallet calls"] = out.get("dealer calls", 0) + out.get("wallet calls", 0)
    out["watch records per watcher"] = out["watch records"] / (cost.players + 1)
    out["watch messages per watcher"] = out["watch messages"] / (cost.players + 1)
    return out


def print_table(costs: list[HandCost]) -> dict[str, float]:
    """The rows per hand, a column per number of players and one for all; the last column's
    figures."""
    columns = [(f"{c.players}p", totals(c), c.hands) for c in costs]
    every: dict[str, float] = {}
    for _name, figures, _hands in columns:
        for key, value in figures.items():
            every[key] = every.get(key, 0) + value
    hands = sum(c.hands for c in costs)
    watchers = sum((c.players + 1) * c.hands for c in costs)
    for kind in ("records", "messages"):  # a per-hand mean over watchers
        every[f"watch {kind} per watcher"] = every[f"watch {kind}"] / watchers * hands
    columns.append(("all", every, hands))
    print(f"  {'per hand':<36}" + "".join(f"{name:>9}" for name, _f, _h in columns))
    for key, label in ROWS:
        print(f"  {label:<36}" + "".join(
            f"{figures.get(key, 0) / max(1, n):>9.1f}" for _name, figures, n in columns))
    print(f"  {'hands':<36}" + "".join(f"{n:>9}" for _name, _f, n in columns))
    return {key: every.get(key, 0) / max(1, hands) for key, _label in ROWS}


ACTIONS = {"unary": "by unary calls (WatchTable watches)",
           "play": "over each player's Play stream (the rail's a WatchTable)"}


def client_messages_line(costs: list[HandCost], actions: str) -> str:
    """The messages the players' clients receive per hand, replies included: the seats'
    watch messages and, with unary actions, a reply an action (a Play stream's replies are
    among its messages already)."""
    hands = max(1, sum(c.hands for c in costs))
    seats = sum(sum(n for w, n in c.counts.messages.items() if w != "rail") for c in costs)
    replies = sum(c.actions for c in costs) if actions == "unary" else 0
    return (f"  messages to the players' clients per hand, replies included ({actions}): "
            f"{(seats + replies) / hands:.1f} ({seats / hands:.1f} on their "
            f"{'watches' if actions == 'unary' else 'Play streams'}"
            + (f" + {replies / hands:.1f} unary replies)" if replies else ")"))


def commands_lines(costs: list[HandCost]) -> list[str]:
    """Each service's Redis commands per hand, over every hand."""
    hands = max(1, sum(c.hands for c in costs))
    out = []
    for service in ("table", "dealer", "wallet"):
        summed: dict[str, int] = {}
        for cost in costs:
            for command, n in cost.counts.redis[service].commands.items():
                summed[command] = summed.get(command, 0) + n
        out.append(f"  {service} Redis commands per hand: " + ", ".join(
            f"{command} {n / hands:.1f}" for command, n in sorted(summed.items(),
                                                                  key=lambda kv: -kv[1])))
    return out


async def main_async(args: argparse.Namespace) -> None:
    low, _, high = args.players.partition("-")
    players = list(range(int(low), int(high or low) + 1))
    per_table = math.ceil(args.hands / len(players))
    passwords = {name: secrets.token_urlsafe(16) for name in SERVICES}
    rng = random.Random(args.seed)
    keys = DevKeys.generate()
    started = time.perf_counter()
    with RedisServer(passwords=passwords, appendfsync="everysec") as server, \
            tempfile.TemporaryDirectory(prefix="bench-hand-cost-") as tmp:
        version = ".".join(map(str, server_version(server.binary)))
        print(f"== one hand's cost, counted outside the services: redis-server {version}, "
              f"{per_table} hands at each of {len(players)} tables ({players[0]}-{players[-1]} "
              f"players), random legal actions (fold {args.fold:.0%}), seed {args.seed}, "
              f"{'one record a message' if args.unbatched else 'batched'} watches, the "
              f"players' actions {ACTIONS[args.actions]}")
        async with redis_taps({s: server.url_for(s) for s in ("table", "dealer", "wallet")}
                              ) as rtaps:
            room = RoomProcesses(lambda s: rtaps[s].url if s in rtaps else server.url_for(s),
                                 keys, Path(tmp), extra_env={"LOG_LEVEL": "WARNING"},
                                 table_env={"TABLE_LEASE_MS": "60000"})
            streaming = streaming_methods(dealer_pb2.DESCRIPTOR, wallet_pb2.DESCRIPTOR)
            async with grpc_tap(room.dealer.target, streaming) as dealer_tap, \
                    grpc_tap(room.wallet.target, streaming) as wallet_tap:
                room.table.env["TABLE_DEALER_TARGET"] = dealer_tap.address
                room.table.env["TABLE_WALLET_TARGET"] = wallet_tap.address
                taps = Taps(rtaps, {"dealer": dealer_tap, "wallet": wallet_tap})
                try:
                    await room.start()
                    costs = await play(room, keys, taps, players, per_table, args, rng)
                finally:
                    room.stop()
    print_lines = print_table(costs)
    for line in commands_lines(costs):
        print(line)
    print(client_messages_line(costs, args.actions))
    print(f"(total {time.perf_counter() - started:.1f} s)")
    hands = sum(c.hands for c in costs)
    figures = {k.replace(" ", "_"): v for k, v in print_lines.items()
               if k in ("actions", "appends", "appends beyond actions", "events",
                        "bytes appended", "store round trips", "dealer calls",
                        "wallet calls", "watch records", "watch messages")}
    print(f"hands={hands} " + " ".join(f"{k}={v:.1f}" for k, v in figures.items()))


async def play(room: RoomProcesses, keys: DevKeys, taps: Taps, players: list[int],
               per_table: int, args: argparse.Namespace, rng: random.Random) -> list[HandCost]:
    costs = []
    async with room.clients() as clients, \
            grpc.aio.insecure_channel(room.table.target, options=CHANNEL_OPTIONS) as channel, \
            Watchers(room.table.target, TokenBook(keys),
                     batched=not args.unbatched) as watchers:
        stub = pb_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
        client = TableClient(stub, TokenBook(keys))
        for n in players:
            table_id = await client.open_table(f"cost-{n}", settings=fast_settings(
                action_time_s=3600, buy_in_max=100_000_000))
            seats = {seat: f"p{n}-{seat}" for seat in range(1, n + 1)}
            for seat, name in seats.items():
                await clients.wallet.create_account(name)
                await clients.wallet.deposit(name, 100_000_000, f"dep-{name}")
                await client.call("SitDown", pb.SitDownRequest(
                    table_id=table_id, seat=seat, buy_in=50_000_000), player(name))
            cost = await measure_table(stub, client.tokens, taps, watchers, table_id, seats,
                                       per_table, chooser(args.fold), rng,
                                       play=args.actions == "play")
            costs.append(cost)
            print(f"  {n} players: {cost.hands} hands, {cost.actions} actions", flush=True)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hands", type=int, default=203, help="hands counted, in all")
    parser.add_argument("--players", default="2-8", help="players at the tables: low-high")
    parser.add_argument("--fold", type=float, default=0.15,
                        help="probability of a fold when one is legal")
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--unbatched", action="store_true",
                        help="watch one record a message (WatchTableRequest.batched unset)")
    parser.add_argument("--actions", choices=tuple(ACTIONS), default="unary",
                        help="how the players act: unary calls beside their watches, or "
                             "over a Play stream each (default: unary)")
    args = parser.parse_args()
    asyncio.run(main_async(args))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
