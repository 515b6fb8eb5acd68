"""The table's own Python per action, part by part (issue 35), in CPU time: what runs between
a request arriving and its records leaving, without gRPC's C core and without Redis.
Prints figures; asserts nothing.

- ``plumbing``: the interceptors (error mapping, auth with the rate limiter, metrics, log
  context) around a unary handler that does nothing, called with a stand-in context: us a
  call.
- ``decide``: :meth:`table.actor.TableActor.decide` (the room's decision, the rules' fold,
  the room's fold, the turn's clock, the envelopes) for each command of a seeded game of
  4 players (the commands a table decides: the players' actions, the dealer's streets with
  the down cards unknown, the showdowns), sealed as an append seals them: us a command.
- ``records``: :class:`table.views.Records` of each game envelope of that game, as 4 seated
  watchers and one on the rail are sent them: us an envelope (for all five).
- ``fold``: :func:`table.actor.evolve` of every envelope of that game (a table's load and
  catch-up): us an envelope.
- ``fanout``: the game's appends (each command's game envelopes) fanned out by the actor
  (:meth:`table.actor.TableActor._fan_out`) to 5 live batched watches
  (:meth:`table.watching.Watching.watch_batches`: the inbox, its wake, the batch), each
  taken by a task as the servicer's loop takes them, the records left out (``records``):
  us an append (for all five).

Each figure is the best of ``--repeat`` timings (``time.process_time``). With ``--base REV``
the same figures are taken from that revision's ``libs`` and ``services`` (``git archive``)
in alternating rounds, and the medians and ratios (this tree over the base) are printed.

Run: ``.venv/bin/python bench/bench_table_path.py [--base HEAD~1] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("plumbing", "decide", "records", "fold", "fanout")


def best(run: Callable[[], object], per: int, repeat: int) -> float:
    """The best of ``repeat`` CPU timings of ``run``, in us per item (``per`` items a run)."""
    times = []
    for _ in range(repeat):
        started = time.process_time()
        run()
        times.append(time.process_time() - started)
    return min(times) / per * 1e6


def plumbing(repeat: int, calls: int = 3000) -> float:
    import grpc

    from stud.v1 import table_pb2 as pb
    from studkit import grpc_server
    from studkit.auth import Principal, Role, TokenBook
    from studkit.limits import CallerKeys, CallRateLimiter, LogSampler
    from studkit.log import configure_logging
    from studkit.metrics import Metrics
    from studtools.devkeys import DevKeys
    from table.errors import TABLE_ERRORS

    configure_logging("WARNING", json=True, stream=io.StringIO())
    keys = DevKeys.generate()
    metadata = tuple(TokenBook(keys).metadata(Principal(Role.PLAYER, "ann")))

    class Context:
        def invocation_metadata(self) -> Any:
            return metadata

        def peer(self) -> str:
            return "ipv4:127.0.0.1:5555"

        def code(self) -> None:
            return None

        def time_remaining(self) -> float:
            return 9.0

    async def behaviour(request: Any, context: Any) -> Any:
        grpc_server.current_principal()
        return pb.CommandReply(version=1)

    class Details:
        method = "/stud.v1.TableService/Call"

    async def main() -> float:
        errors = grpc_server.ErrorMappingInterceptor(
            TABLE_ERRORS, metrics=Metrics(), sampler=LogSampler(grpc_server.log_summary))
        auth = grpc_server.AuthInterceptor(keys.verifier(audience="table"),
                                           rates=CallRateLimiter(1e9, 1e9),
                                           callers=CallerKeys())
        handler = grpc.unary_unary_rpc_method_handler(
            behaviour, request_deserializer=pb.CallRequest.FromString,
            response_serializer=pb.CommandReply.SerializeToString)

        async def inner(_details: Any) -> Any:
            return handler

        async def outer(details: Any) -> Any:
            return await auth.intercept_service(inner, details)

        context, request, details = Context(), pb.CallRequest(table_id="t", seat=1), Details()
        times = []
        for _ in range(repeat):
            started = time.process_time()
            for _ in range(calls):
                wrapped = await errors.intercept_service(outer, details)
                await wrapped.unary_unary(request, context)
            times.append(time.process_time() - started)
        return min(times) / calls * 1e6

    return asyncio.run(main())


def game_commands(seed: int, hands: int) -> list[Any]:
    """The room commands of a seeded game of 4 players, as the table decides them."""
    from rules import DECK, TableConfig
    from rules.commands import DealStreet, SitDown
    from rules.testing import StackedDeck, TableDriver
    from studtest.random_tables import random_action
    from table.model import TableSettings
    from table.room import Open, Play

    rng = random.Random(seed)
    config = TableConfig.for_stakes(10)
    stacks = {1: 400, 3: 400, 5: 400, 7: 400}
    table = TableDriver(config, stacks=stacks, table_id="bench")
    commands: list[Any] = [Open("bench", config, TableSettings(next_hand_delay_ms=0))]
    commands += [Play(SitDown(seat=s, player_id=f"p{s}", stack=stack))
                 for s, stack in stacks.items()]

    def observe(_state: Any, command: Any, _events: Any) -> None:
        if isinstance(command, DealStreet):  # the table never learns a down card
            command = replace(command, cards=tuple(
                c if c.up else replace(c, card=None) for c in command.cards))
        commands.append(Play(command))

    for _ in range(hands):
        if sum(1 for s in stacks if table.state.stack(s) > 0) < 2:
            break
        deck = list(DECK)
        rng.shuffle(deck)
        table.play_hand(StackedDeck(deck), act=lambda legal: random_action(rng, legal),
                        mucks=lambda shown: [h.seat for h in shown if rng.random() < 0.5],
                        observe=observe)
    return commands


def decided(commands: list[Any]) -> tuple[Callable[[], int], list[Any], list[list[Any]]]:
    """A run deciding ``commands`` on a fresh actor (returns how many), the sealed
    envelopes of one run, and those of each command (an append's)."""
    from studkit.commit import seal
    from table.actor import ActorDeps, Asked, TableActor

    clock = [1_800_000_000.0]

    def tick() -> float:
        clock[0] += 0.25
        return clock[0]

    envelopes: list[Any] = []
    appends: list[list[Any]] = []

    def run() -> int:
        actor = TableActor("bench", ActorDeps(store=None, redis=None, clock=tick))  # type: ignore[arg-type]
        envelopes.clear()
        appends.clear()
        for command in commands:
            proposal = actor.decide(Asked(command))
            seal(proposal.envelopes, "bench", "c:bench", actor.version)
            envelopes.extend(proposal.envelopes)
            appends.append(list(proposal.envelopes))
            actor.room = proposal.state
        return len(commands)

    run()
    return run, list(envelopes), list(appends)


def fanout(appends: list[list[Any]], repeat: int, watchers: int = 5) -> float:
    """The appends fanned out to ``watchers`` live batched watches: us an append."""
    from studkit.auth import Principal, Role
    from studkit.mapping import is_room_event
    from table.actor import ActorDeps, TableActor
    from table.watching import Watching

    visible = sum(1 for a in appends for e in a if not is_room_event(e))

    async def once() -> float:
        """One round, on a fresh actor with fresh watches: CPU seconds."""
        actor = TableActor("bench", ActorDeps(store=None, redis=None))  # type: ignore[arg-type]

        async def routed(_table_id: str) -> TableActor:
            return actor

        reading = Watching(None, routed)  # type: ignore[arg-type]
        taken = [0] * watchers

        async def watch(number: int) -> None:
            async for batch in reading.watch_batches(Principal(Role.OPERATOR, "ops"),
                                                     "bench", 0):
                taken[number] += len(batch)

        tasks = [asyncio.create_task(watch(n)) for n in range(watchers)]
        for _ in range(3):
            await asyncio.sleep(0)  # each watch subscribed, waiting
        assert len(actor.watchers) == watchers
        started = time.process_time()
        for append in appends:
            actor._fan_out(append)  # room events are the actor's to drop, as it does
            await asyncio.sleep(0)  # the watches take it, as the loop's next turn does
        while min(taken) < visible:
            await asyncio.sleep(0)
        spent = time.process_time() - started
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return spent

    async def main() -> float:
        return min([await once() for _ in range(repeat)]) / len(appends) * 1e6

    return asyncio.run(main())


def figures(repeat: int, seed: int, hands: int) -> dict[str, float]:
    from studkit.mapping import is_room_event
    from table.actor import evolve
    from table.room import Room
    from table.views import Records

    out = {"plumbing": plumbing(repeat)}
    commands = game_commands(seed, hands)
    run, envelopes, appends = decided(commands)
    out["decide"] = best(run, len(commands), repeat)
    game = [e for e in envelopes if not is_room_event(e)]
    viewers = [(1, True), (3, True), (5, True), (7, True), (None, False)]

    def records() -> None:
        kept = Records()
        for envelope in game:
            for seat, dealt_in in viewers:
                kept.record_bytes(envelope, seat, dealt_in)

    out["records"] = best(records, len(game), repeat)

    def fold() -> None:
        room = Room()
        for envelope in envelopes:
            room = evolve(room, envelope)

    out["fold"] = best(fold, len(envelopes), repeat)
    out["fanout"] = fanout(appends, repeat)
    out["commands"] = len(commands)
    out["envelopes"] = len(envelopes)
    return out


def checkout(revision: str, into: Path) -> None:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)


def measured(path: str | None, args: argparse.Namespace) -> dict[str, float]:
    """The figures of one round, in a process of its own (``path``: the base's roots)."""
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = path
    else:
        env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, __file__, "--json", "--repeat", str(args.repeat),
                          "--seed", str(args.seed), "--hands", str(args.hands)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="a revision to compare against, side by side")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--hands", type=int, default=30)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(figures(args.repeat, args.seed, args.hands)))
        return
    if args.base is None:
        got = measured(None, args)
        print(f"== the table's own path: {got['commands']:.0f} commands, "
              f"{got['envelopes']:.0f} envelopes")
        for part in PARTS:
            print(f"  {part:<9} {got[part]:8.2f} us")
        return
    with tempfile.TemporaryDirectory(prefix="table-path-") as src:
        checkout(args.base, Path(src))
        base = os.pathsep.join(str(Path(src) / p) for p in ("libs", "services"))
        rows: dict[str, list[dict[str, float]]] = {"base": [], "this": []}
        print(f"== the table's own path: base {args.base} against this tree, "
              f"{args.rounds} alternating rounds, best of {args.repeat} each (us)")
        for _ in range(args.rounds):
            for label, path in (("base", base), ("this", None)):
                got = measured(path, args)
                rows[label].append(got)
                print(f"  {label:<5}" + "".join(f" {p} {got[p]:7.2f}" for p in PARTS),
                      flush=True)
    medians = {label: {p: statistics.median(r[p] for r in got) for p in PARTS}
               for label, got in rows.items()}
    for label, got in medians.items():
        print(f"  median {label:<5}" + "".join(f" {p} {got[p]:7.2f}" for p in PARTS))
    print(" ".join(f"{p}_ratio={medians['this'][p] / medians['base'][p]:.3f}"
                   for p in PARTS))


if __name__ == "__main__":
    main()
