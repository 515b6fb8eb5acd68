"""The dealer's CPU per call, by call: ``python -m dealer`` as a process of its own over a real
``redis-server``, driven by :class:`studtest.dealer.TableRole` (the table service's part:
StartHand, a Deal per street, Reveal at the showdown, the public events appended to the
table's stream) for four players who check and call to the showdown, one table at a time.
With ``--seeds`` each player also commits and opens a seed for each hand (CommitSeed,
OpenSeed) and reads their cards after each street and the hand's proof at its end
(GetMyCards, GetHandProof), as the SDK does; with ``--watch`` each keeps ``WatchMyCards`` open
(as the SDK's watch does), whose work the dealer does between the calls, so it is charged to
them: read the CPU per hand then.

The dealer's CPU is read from ``/proc/<pid>/task/*/schedstat`` (nanoseconds, every thread)
before each call; the dealer does nothing between calls, so what it spent from one call's
start to the next's is that call's. ``--base REV`` runs the dealer of another revision
(``git archive`` of its ``services/``, first on the dealer's path) in alternating rounds with
this tree's, and prints each call's ratio (this tree over the base). Prints figures; asserts
nothing.

Run: ``.venv/bin/python bench/bench_dealer.py --hands 150`` (side by side: ``--base HEAD
--rounds 4``).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import secrets
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import grpc

from rules import Phase, TableConfig
from stud.v1 import dealer_pb2 as pb
from stud.v1 import dealer_pb2_grpc as pb_grpc
from stud.v1.common_pb2 import STREET_THIRD
from studkit.cardproof import seed_commitment
from studkit.redis_client import connect
from studkit.store import EventStore
from studtest.dealer import DealerClient, TableRole, player
from studtest.processes import ServiceProcess
from studtools.devkeys import DevKeys
from studtools.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent
PLAYERS = {1: "ann", 3: "bob", 5: "cat", 7: "dan"}
SERVICES = ("table", "dealer")
RATES = {"STUD_RATE_PER_PLAYER": "1000000", "STUD_RATE_PER_CONNECTION": "1000000"}
"""The dealer's call budgets here: far above what the driver can send (studkit.limits)."""


def cpu_ns(pid: int) -> int:
    """The CPU time of every thread of ``pid`` so far (ns)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


class Meter:
    """The dealer's CPU, charged to the call that started last."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.cpu: dict[str, int] = defaultdict(int)
        self.calls: dict[str, int] = defaultdict(int)
        self._last: tuple[str, int] | None = None

    def start(self, kind: str) -> None:
        now = cpu_ns(self.pid)
        if self._last is not None:
            self.cpu[self._last[0]] += now - self._last[1]
        self._last = (kind, now)
        self.calls[kind] += 1

    def stop(self) -> None:
        if self._last is not None:
            self.cpu[self._last[0]] += cpu_ns(self.pid) - self._last[1]
        self._last = None


def metered(client: DealerClient, meter: Meter) -> None:
    """Charge each of ``client``'s calls to its name."""
    for name in ("started", "deal", "reveal", "commit_seed", "open_seed", "my_cards",
                 "hand_proof"):
        call = getattr(client, name)

        def wrap(call=call, name=name):  # type: ignore[no-untyped-def]
            async def inner(*args, **kwargs):  # type: ignore[no-untyped-def]
                # A hand's first street (it freezes the seeds) apart from the others.
                meter.start(name if name != "deal" else
                            "deal 3rd" if args[0].street == STREET_THIRD else "deal 4th-7th")
                return await call(*args, **kwargs)
            return inner

        setattr(client, name, wrap())


async def play(table: TableRole, seeds: bool) -> None:
    """One hand to the end, every player checking or calling."""
    number = table.t.state.hands_started + 1
    opened: dict[str, bytes] = {}
    if seeds:
        for name in PLAYERS.values():
            seed = secrets.token_bytes(32)
            opened[name] = seed
            await table.dealer.commit_seed(
                table.table_id, number, seed_commitment(table.table_id, number, name, seed),
                player(name))
    await table.start_hand()
    for name, seed in opened.items():
        await table.dealer.open_seed(table.table_id, number, seed, player(name))
    while not table.t.hand.is_over:
        phase = await table.step()
        if seeds and phase == Phase.DEALING:
            for name in PLAYERS.values():
                await table.dealer.my_cards(table.table_id, player(name), number)
    if seeds:
        await table.dealer.hand_proof(table.table_id, number, player(PLAYERS[1]))


async def watching(stub: pb_grpc.DealerServiceStub, client: DealerClient, table_id: str,
                   name: str, received: list[int]) -> None:
    """A player's WatchMyCards stream, as the SDK keeps one open, read to its end."""
    call = stub.WatchMyCards(pb.WatchMyCardsRequest(table_id=table_id),
                             metadata=client.metadata(player(name)))
    async for _cards in call:
        received[0] += 1


async def round_(python_path: str | None, hands: int, seeds: bool, tables: int,
                 watch: bool = False, label: str = "this"
                 ) -> tuple[dict[str, float], dict[str, int]]:
    """(CPU us per call by kind, calls by kind) of one dealer process. A call the dealer
    refuses, or a watcher's stream that ends in an error, stops the round: which dealer
    (``label``), the status and the dealer's log are printed first."""
    passwords = {name: secrets.token_urlsafe(16) for name in SERVICES}
    keys = DevKeys.generate()
    with RedisServer(passwords=passwords, appendfsync="everysec") as redis_server, \
            tempfile.TemporaryDirectory(prefix="bench-dealer-") as tmp:
        env = {"METRICS_PORT": "0", "LOG_LEVEL": "WARNING", **keys.env("dealer"),
               "REDIS_URL": redis_server.url_for("dealer"), "DEALER_SHUTDOWN_GRACE": "1",
               # The four players share one connection and call as fast as the dealer
               # answers (with --seeds, 8 calls each a hand): past the default budgets
               # (100 a player, 400 a connection a second) CommitSeed was refused
               # RESOURCE_EXHAUSTED. The limiter still runs: its cost is measured.
               **RATES}
        if python_path is not None:
            env["PYTHONPATH"] = python_path
        proc = ServiceProcess("dealer", env, Path(tmp) / "dealer.log")
        proc.start()
        client_redis = connect(redis_server.url_for("table"))
        try:
            await proc.wait_serving()
            assert proc.proc is not None
            meter = Meter(proc.proc.pid)
            if os.environ.get("BENCH_DEALER_PID_FILE"):  # for a profiler to attach to
                Path(os.environ["BENCH_DEALER_PID_FILE"]).write_text(str(proc.proc.pid))
            async with grpc.aio.insecure_channel(proc.target) as channel:
                stub = pb_grpc.DealerServiceStub(channel)  # type: ignore[no-untyped-call]
                client = DealerClient(stub, keys)
                metered(client, meter)
                roles = []
                for i in range(tables):
                    role = TableRole(EventStore(client_redis), client, f"bench-{i}",
                                     TableConfig(), PLAYERS, stack=10_000_000)
                    await role.open()
                    roles.append(role)
                received = [0]
                watchers = [asyncio.create_task(watching(stub, client, role.table_id, name,
                                                         received))
                            for role in roles for name in PLAYERS.values()] if watch else []
                for role in roles:  # warm-up: a hand each, not counted
                    await play(role, seeds)
                await asyncio.sleep(0.5 if watch else 0)
                meter.stop()
                meter.cpu.clear()
                meter.calls.clear()
                assert redis_server.process is not None
                redis_before = cpu_ns(redis_server.process.pid)
                for n in range(hands):
                    await play(roles[n % tables], seeds)
                await asyncio.sleep(0.5 if watch else 0)  # the watchers' last updates
                meter.stop()
                for task in watchers:
                    task.cancel()
                ended = await asyncio.gather(*watchers, return_exceptions=True)
                failed = [e for e in ended if isinstance(e, BaseException)
                          and not isinstance(e, asyncio.CancelledError)]
                if failed:  # a stream that ended in an error stopped counting
                    raise failed[0]
                redis_cpu = cpu_ns(redis_server.process.pid) - redis_before
        except grpc.aio.AioRpcError as exc:
            print(f"  the {label} dealer ({python_path or 'this tree'}) answered "
                  f"{exc.code().name}: {exc.details()}; its log:\n{proc.logs()[-6000:]}",
                  file=sys.stderr, flush=True)
            raise
        finally:
            await client_redis.aclose()
            proc.terminate()
    per = {k: meter.cpu[k] / meter.calls[k] / 1000 for k in meter.calls}
    per["redis per hand"] = redis_cpu / hands / 1000
    if watch:
        per["watch messages per hand"] = received[0] / hands
    return per, dict(meter.calls)


def checkout(revision: str, into: Path) -> None:
    """``revision``'s tree (``git archive``) unpacked into ``into``."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            tar.extractall(into, filter="data")
        else:  # Debian 12's 3.11.2: a tree of our own git archive
            tar.extractall(into)


def _line(label: str, per: dict[str, float], calls: dict[str, int], hands: int) -> str:
    total = sum(per[k] * calls[k] for k in calls) / hands
    kinds = ", ".join(f"{k} {per[k]:.0f}" for k in sorted(calls))
    watched = (f"; {per['watch messages per hand']:.1f} WatchMyCards messages per hand"
               if "watch messages per hand" in per else "")
    return (f"  {label}: dealer {total / 1000:.2f} ms per hand (redis, table's appends "
            f"included: {per['redis per hand'] / 1000:.2f} ms); us per call: {kinds}{watched}")


async def main_async(args: argparse.Namespace) -> None:
    paths: dict[str, str | None] = {"this": None}
    with tempfile.TemporaryDirectory(prefix="bench-dealer-base-") as tmp:
        if args.base:
            checkout(args.base, Path(tmp))
            paths = {"base": str(Path(tmp) / "services"), "this": None}
        print(f"== dealer CPU per call: {args.hands} hands of {len(PLAYERS)} players on "
              f"{args.tables} tables per round, seeds {'on' if args.seeds else 'off'}, "
              f"{args.rounds} round(s); load average {os.getloadavg()[0]:.2f} at "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
        results: dict[str, list[dict[str, float]]] = defaultdict(list)
        calls: dict[str, int] = {}
        for r in range(args.rounds):
            for label, path in (paths.items() if r % 2 == 0 else reversed(paths.items())):
                per, calls = await round_(path, args.hands, args.seeds, args.tables,
                                          args.watch, label)
                results[label].append(per)
                print(_line(f"round {r + 1} {label}", per, calls, args.hands), flush=True)
        medians = {label: {k: statistics.median(p[k] for p in runs) for k in runs[0]}
                   for label, runs in results.items()}
        for label, per in medians.items():
            print(_line(f"median {label}", per, calls, args.hands))
        if args.base:
            ratios = ", ".join(f"{k} {medians['this'][k] / medians['base'][k]:.2f}"
                               for k in (*sorted(calls), "redis per hand"))
            per_hand = {label: sum(per[k] * calls[k] for k in calls)
                        for label, per in medians.items()}
            print(f"  ratio this / base: {ratios}; "
                  f"per hand {per_hand['this'] / per_hand['base']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hands", type=int, default=100)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seeds", action="store_true",
                        help="players commit and open seeds, read their cards and the proof")
    parser.add_argument("--watch", action="store_true",
                        help="every player keeps WatchMyCards open, as the SDK does")
    parser.add_argument("--base", default="", help="a revision to run side by side")
    args = parser.parse_args()
    asyncio.run(main_async(args))
    sys.exit(0)


if __name__ == "__main__":
    main()
