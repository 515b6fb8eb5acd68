"""The room's two ceilings, each a ``grpc.aio`` server in its own process on the room's Redis,
measured in the same run as the room (``campaigns.throughput``: ``make bench-room``,
``make load``).

- **bare**: one unary handler doing one Lua append (``studkit.store.EventStore.append``, a
  one-event command) to the caller's own stream, called by as many concurrent callers as asked.
- **fair**: the room's own I/O and nothing else. ``Act`` is one unary call in, one *fenced*
  append (the table's lease taken once, its epoch checked by the append script, as the table
  does) and the event pushed to each of the table's watchers over their server streams
  (``Watch``); callers keep the room's concurrency: one caller per table, each acting again
  as soon as the next seat's watcher has the previous event (as a bot acts when it sees its
  turn), with as many watchers per table as the room has players.
- **fair, stream**: the same when the players act over one bidirectional stream each (the
  room's I/O when its bots use ``TableService.Play``, issue 35). ``Play`` is one stream per
  player of a table: its first message names the table, each later one is an action: one
  message in, the same fenced append, the event pushed to each of the table's other players'
  streams and the reply (the event, as the table's reply carries the action's record) on the
  acting player's own stream. The acting seat goes round the table.

Neither has auth, rules, room state, logging or metrics: what the room spends beyond the fair
ceiling is the table's own work.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import grpc

from stud.v1.envelope_pb2 import EventEnvelope
from studtest.processes import CHANNEL_OPTIONS
from studtools.redis_server import free_port

PAYLOAD: Final = b"p" * 48  # about the size of a typical serialized event
BARE: Final = "/bench.Ceiling/Append"
FAIR_ACT: Final = "/bench.Fair/Act"
FAIR_WATCH: Final = "/bench.Fair/Watch"
FAIR_PLAY: Final = "/bench.Fair/Play"


@dataclass
class Figure:
    label: str
    count: int
    seconds: float
    latencies: list[float]
    calls: int = 0
    """Every call, warm-up included."""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds per process over all the calls."""
    waited: dict[str, float] = field(default_factory=dict)
    """Seconds each process's threads were ready to run but waited for a CPU (the kernel's
    run queue, :func:`run_queue_seconds`), over the same window."""

    @property
    def per_s(self) -> float:
        return self.count / self.seconds

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0

    def line(self) -> str:
        mean = statistics.fmean(self.latencies) * 1000 if self.latencies else 0.0
        return (f"  {self.label:<46} {self.per_s:>8,.0f} /s   p50 {self.pct(0.50):6.2f} ms   "
                f"p99 {self.pct(0.99):6.2f} ms   mean {mean:6.2f} ms   (n={self.count})")

    def cpu_line(self, per: str = "call") -> str:
        calls = max(1, self.calls)
        return f"    CPU per {per}: " + ", ".join(
            f"{name} {used / calls * 1000:.2f} ms" for name, used in self.cpu.items())


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_queue_seconds(pid: int) -> float:
    """How long the threads of a process have been ready to run and waiting for a CPU so far,
    summed (the second field of each thread's ``/proc/<pid>/task/<tid>/schedstat``; 0 where
    the kernel does not keep it). Beside :func:`cpu_seconds`, it says whether a latency is the
    process's or the machine's: a thread that waits longer than it runs is being kept off a
    busy machine's cores."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tasks:
        try:
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):  # a thread gone meanwhile
            continue
    return total / 1e9


# --- the servers ---------------------------------------------------------------------------

def _envelope() -> EventEnvelope:
    return EventEnvelope(event_type="BetMade", schema_version=1, hand_number=1, payload=PAYLOAD)


async def serve(port: int, redis_url: str) -> None:
    """Both ceilings' handlers in one server process (see the module's doc)."""
    from studkit.ownership import Ownership, Replica
    from studkit.redis_client import connect
    from studkit.store import EventStore

    client = connect(redis_url)
    store = EventStore(client)
    ownership = Ownership(client, Replica("fair-ceiling", f"127.0.0.1:{port}"), lease_ms=60_000)
    versions: dict[str, int] = {}
    epochs: dict[str, int] = {}
    watchers: dict[str, list[asyncio.Queue[bytes]]] = {}

    async def append(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        table_id = request.decode()
        result = await store.append(table_id, [_envelope()], versions.get(table_id, 0),
                                    command_id=uuid.uuid4().hex)
        versions[table_id] = result.version
        return b""

    async def fenced_append(table_id: str) -> bytes:
        """One event appended to the table's stream under its lease: the event, serialized."""
        if table_id not in epochs:
            epochs[table_id] = (await ownership.acquire(table_id)).epoch
        envelope = _envelope()
        result = await store.append(table_id, [envelope], versions.get(table_id, 0),
                                    command_id=uuid.uuid4().hex, epoch=epochs[table_id])
        versions[table_id] = result.version
        envelope.sequence = result.version
        data: bytes = envelope.SerializeToString()
        return data

    async def act(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        table_id = request.decode()
        data = await fenced_append(table_id)
        for queue in watchers.get(table_id, ()):
            queue.put_nowait(data)
        return b""

    async def play(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
                   ) -> None:
        # One writer of the stream: the actions' replies and the other players' events go
        # through the same queue, in the order they were made.
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        players: list[asyncio.Queue[bytes]] | None = None

        async def read() -> None:
            nonlocal players
            async for request in requests:
                if players is None:  # the first message: the table
                    players = watchers.setdefault(request.decode(), [])
                    players.append(queue)
                    queue.put_nowait(b"")  # the stream is open
                    continue
                data = await fenced_append(request.decode())
                for other in players:
                    if other is not queue:
                        other.put_nowait(data)
                queue.put_nowait(data)  # the reply

        reader = asyncio.create_task(read())
        try:
            while True:
                await context.write(await queue.get())
        finally:
            reader.cancel()
            if players is not None:
                players.remove(queue)

    async def watch(request: bytes, context: grpc.aio.ServicerContext) -> None:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        mine = watchers.setdefault(request.decode(), [])
        mine.append(queue)
        try:
            await context.write(b"")  # the stream is open
            while True:
                await context.write(await queue.get())
        finally:
            mine.remove(queue)

    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])  # one owner of the port
    server.add_generic_rpc_handlers((
        grpc.method_handlers_generic_handler(
            "bench.Ceiling", {"Append": grpc.unary_unary_rpc_method_handler(append)}),
        grpc.method_handlers_generic_handler(
            "bench.Fair", {"Act": grpc.unary_unary_rpc_method_handler(act),
                           "Watch": grpc.unary_stream_rpc_method_handler(watch),
                           "Play": grpc.stream_stream_rpc_method_handler(play)})))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


# --- the callers ---------------------------------------------------------------------------

async def drive(workers: int, seconds: float, warm_up: float,
                step: Callable[[int], Awaitable[None]], label: str) -> Figure:
    """``workers`` concurrent loops of ``step(worker)``; the calls that begin and end inside
    the window after ``warm_up`` count."""
    now = time.perf_counter()
    start, end = now + warm_up, now + warm_up + seconds
    latencies: list[float] = []
    calls = 0

    async def loop(worker: int) -> None:
        nonlocal calls
        while time.perf_counter() < end:
            began = time.perf_counter()
            await step(worker)
            calls += 1
            ended = time.perf_counter()
            if start <= began and ended <= end:
                latencies.append(ended - began)

    await asyncio.gather(*(loop(w) for w in range(workers)))
    return Figure(label, len(latencies), seconds, latencies, calls)


async def _measured(pids: dict[str, int], run: Awaitable[Figure]) -> Figure:
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    figure = await run
    figure.cpu.update({name: cpu_seconds(pid) - before[name] for name, pid in pids.items()})
    return figure


async def _fair(channel: grpc.aio.Channel, tables: int, watchers: int, seconds: float,
                warm_up: float, pids: dict[str, int]) -> Figure:
    act = channel.unary_unary(FAIR_ACT)
    open_watch = channel.unary_stream(FAIR_WATCH)
    streams = [[open_watch(f"fair-{t}".encode()) for _ in range(watchers)]
               for t in range(tables)]
    for table in streams:
        for stream in table:
            await stream.read()  # open

    async def step(table: int) -> None:
        await act(f"fair-{table}".encode(), timeout=10)
        # The next action once every watcher of the table has the event.
        await asyncio.gather(*(s.read() for s in streams[table]))

    try:
        return await _measured(pids, drive(
            tables, seconds, warm_up, step,
            f"fair ceiling: unary + fenced append + {watchers} watch streams, {tables} tables"))
    finally:
        for table in streams:
            for stream in table:
                stream.cancel()


async def _fair_stream(channel: grpc.aio.Channel, tables: int, players: int, seconds: float,
                       warm_up: float, pids: dict[str, int]) -> Figure:
    open_play = channel.stream_stream(FAIR_PLAY)
    streams = [[open_play() for _ in range(players)] for _ in range(tables)]
    for t, table in enumerate(streams):
        for stream in table:
            await stream.write(f"fair-stream-{t}".encode())
            await stream.read()  # open
    turns = [0] * tables

    async def step(table: int) -> None:
        players_of = streams[table]
        seat = turns[table]
        turns[table] = (seat + 1) % players
        await players_of[seat].write(f"fair-stream-{table}".encode())
        # The next action once the actor has its reply and every other player the event.
        await asyncio.gather(*(s.read() for s in players_of))

    try:
        return await _measured(pids, drive(
            tables, seconds, warm_up, step,
            f"fair ceiling (stream): 1 message + fenced append, {players} bidi streams, "
            f"{tables} tables"))
    finally:
        for table in streams:
            for stream in table:
                stream.cancel()


async def bench_ceilings(redis_url: str, bare: list[int], fair: tuple[int, int] | None,
                         seconds: float, warm_up: float, redis_pid: int,
                         stream: bool = False
                         ) -> tuple[list[Figure], Figure | None, Figure | None]:
    """The bare ceiling at each concurrency of ``bare``, the fair one at ``fair`` =
    (tables, watchers per table), and with ``stream`` its stream variant (the same tables and
    players) after it."""
    port = free_port()
    env = {**os.environ, "REDIS_URL": redis_url}
    proc = subprocess.Popen([sys.executable, "-m", "campaigns.ceilings", str(port)], env=env)
    pids = {"server": proc.pid, "redis": redis_pid, "callers": os.getpid()}
    figures = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}",
                                             options=CHANNEL_OPTIONS) as channel:
            await asyncio.wait_for(channel.channel_ready(), 30)
            call = channel.unary_unary(BARE)
            for run, workers in enumerate(bare):
                async def step(worker: int, run: int = run) -> None:
                    await call(f"ceiling-{run}-{worker}".encode(), timeout=10)

                figures.append(await _measured(pids, drive(
                    workers, seconds, warm_up, step,
                    f"ceiling: unary + 1 Lua append, {workers} callers")))
            fair_figure = (await _fair(channel, *fair, seconds, warm_up, pids)
                           if fair is not None else None)
            stream_figure = (await _fair_stream(channel, *fair, seconds, warm_up, pids)
                             if fair is not None and stream else None)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return figures, fair_figure, stream_figure


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), os.environ["REDIS_URL"]))
