"""A Play stream's own Python per action (issue 35), in CPU time: the handler
(:class:`table.play.PlayStreams` through the real :class:`table.server.TableServicer`: its
unary action, its reply, the order of replies and records, the tasks and queues of a stream,
inside the interceptors' wrappers as the server runs it: the token's expiry and two scopes)
without gRPC's C core and without Redis. Prints figures; asserts nothing.

Each of ``--streams`` players holds one stream (``batched``) and takes ``--actions`` checks
in turn, one at a time: the request goes in, the table (a stand-in for ``TableApp``: the
command's one ``Checked`` envelope, fanned out to every stream's watch at once, as the
actor fans out an append before its call returns) applies it, and the caller reads the
stream until the action's reply. Figure: us of process CPU an action (all streams' work:
each action's record goes to every stream; the stand-in's own work included, the same in
every revision).

With ``--base REV`` the same figure is taken from that revision's ``libs`` and ``services``
(``git archive``) in alternating rounds, each in a process of its own, and the medians and
the ratio (this tree over the base) are printed.

Run: ``.venv/bin/python bench/bench_play_stream.py [--base HEAD~1] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
TABLE = "t-bench"


async def run(streams: int, actions: int) -> float:
    """us of CPU an action, ``actions`` actions over ``streams`` streams."""
    import grpc

    from rules.events import Checked
    from stud.v1 import table_pb2 as pb
    from stud.v1.envelope_pb2 import EventEnvelope
    from studkit import grpc_server
    from studkit.auth import Principal, Role
    from studkit.commandwindow import new_id
    from studkit.grpc_handlers import expiring, wrap_handler
    from studkit.limits import StreamLimiter
    from studkit.log import configure_logging
    from studkit.mapping.envelope import envelope_at, timestamp_of
    from table.app import Outcome, command_key
    from table.server import TableServicer

    class Actor:
        version = 100

    actor = Actor()
    watches: list[asyncio.Queue[list[EventEnvelope]]] = []

    class App:
        """What the servicer and the Play handler ask of a TableApp."""

        @staticmethod
        def hand_viewer(principal: Any, actor: Any, hand_number: int
                        ) -> tuple[int | None, bool]:
            return None, False

        def actor_of(self, table_id: str) -> Any:
            return actor

        async def routed(self, table_id: str) -> Any:
            class Driver:
                pass
            driver = Driver()
            driver.actor = actor  # type: ignore[attr-defined]
            return driver

        async def watch_batches(self, principal: Any, table_id: str, after: int
                                ) -> AsyncIterator[list[EventEnvelope]]:
            queue: asyncio.Queue[list[EventEnvelope]] = asyncio.Queue()
            watches.append(queue)
            while True:
                yield await queue.get()

        async def act(self, principal: Any, table_id: str, command_id: str, seat: int,
                      command: Any, fp: Any, expected: Any) -> Outcome:
            actor.version += 1
            envelope = envelope_at(Checked(seat=seat), table_id=TABLE,
                                   hand_number=1,
                                   command_id=command_key(principal, command_id),
                                   occurred_at=timestamp_of(1_700_000_000.25))
            envelope.sequence = actor.version
            for queue in watches:
                queue.put_nowait([envelope])
            return Outcome(actor.version, [envelope], False)

    configure_logging("WARNING", json=True, stream=io.StringIO())
    servicer = TableServicer(App(), StreamLimiter(per_principal=100, per_peer=100))  # type: ignore[arg-type]

    class Context:
        """A call's context: its writes go to ``written`` (a handler writing through
        ``context.write``); a handler that yields is read as grpc.aio reads it."""

        def peer(self) -> str:
            return "ipv4:127.0.0.1:1"

        def invocation_metadata(self) -> Any:
            return ()

        into: asyncio.Queue[bytes]

        async def write(self, message: bytes) -> None:
            if message[:1] != b"\x0a":  # a reply (PlayMessage.reply), not a record
                self.into.put_nowait(message)

    players = [Principal(Role.PLAYER, f"p{i}") for i in range(streams)]
    inboxes: list[asyncio.Queue[Any]] = []
    replies: list[asyncio.Queue[bytes]] = []
    tasks: list[asyncio.Task[None]] = []

    async def requests(inbox: asyncio.Queue[Any]) -> AsyncIterator[pb.PlayRequest]:
        while True:
            item = await inbox.get()
            if item is None:
                return
            yield item

    @contextlib.asynccontextmanager
    async def scope(method: str, context: Any) -> AsyncIterator[None]:
        yield

    # The handler as the server runs it: inside the auth interceptor's expiry and scope and
    # the error mapping's scope (a handler that yields is read through each of them).
    behavior = expiring(servicer.play.serve, time.time, lambda: None)
    handler = grpc.stream_stream_rpc_method_handler(
        behavior, request_deserializer=pb.PlayRequest.FromString)
    for _interceptor in range(2):
        handler = wrap_handler(handler, "/stud.v1.TableService/Play", scope)
    play = handler.stream_stream

    async def serve(inbox: asyncio.Queue[Any], into: asyncio.Queue[bytes]) -> None:
        context = Context()
        context.into = into
        served = play(requests(inbox), context)
        if not inspect.isasyncgen(served):
            await served  # it writes through the context
            return
        async for message in served:  # as grpc.aio writes what a handler yields
            await context.write(cast(bytes, message))

    for player in players:
        inbox: asyncio.Queue[Any] = asyncio.Queue()
        inbox.put_nowait(pb.PlayRequest(watch=pb.WatchTableRequest(
            table_id=TABLE, after_sequence=actor.version, batched=True)))
        inboxes.append(inbox)
        replies.append(asyncio.Queue())
        token = grpc_server._principal.set(player)
        tasks.append(asyncio.create_task(serve(inbox, replies[-1])))
        grpc_server._principal.reset(token)
    await asyncio.sleep(0.01)

    async def one(index: int) -> None:
        inboxes[index].put_nowait(pb.PlayRequest(check=pb.CheckRequest(
            table_id=TABLE, seat=index + 1, command_id=new_id(),
            expected_sequence=actor.version)))
        data = await replies[index].get()
        reply = pb.PlayMessage.FromString(data).reply
        assert not reply.code, reply

    for warm in range(50):
        await one(warm % streams)
    started = time.process_time()
    for at in range(actions):
        await one(at % streams)
    spent = time.process_time() - started
    for inbox in inboxes:
        inbox.put_nowait(None)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return spent / actions * 1e6


def figures(args: argparse.Namespace) -> dict[str, float]:
    times = [asyncio.run(run(args.streams, args.actions)) for _ in range(args.repeat)]
    return {"us_per_action": min(times)}


def measured(path: str | None, args: argparse.Namespace) -> dict[str, float]:
    """One round's figures, in a process of its own (``path``: the base's roots, else this
    tree's)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"PYTHONPATH": path} if path is not None else {})
    command = [sys.executable, __file__, "--json", "--repeat", str(args.repeat),
               "--streams", str(args.streams), "--actions", str(args.actions)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="a revision to compare against, side by side")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--actions", type=int, default=2000)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(figures(args)))
        return
    if args.base is None:
        for name, value in figures(args).items():
            print(f"{name}={value:.1f}")
        return
    from bench_table_path import checkout  # git archive REV into a folder

    with tempfile.TemporaryDirectory() as tmp:
        checkout(args.base, Path(tmp))
        base_path = os.pathsep.join(str(Path(tmp) / p) for p in ("libs", "services"))
        this: list[float] = []
        base: list[float] = []
        for _ in range(args.rounds):
            this.append(measured(None, args)["us_per_action"])
            base.append(measured(base_path, args)["us_per_action"])
        mine, theirs = statistics.median(this), statistics.median(base)
        print(f"us_per_action this={mine:.1f} base({args.base})={theirs:.1f} "
              f"ratio={mine / theirs:.3f} (rounds this={[round(t, 1) for t in this]} "
              f"base={[round(b, 1) for b in base]})")


if __name__ == "__main__":
    main()
