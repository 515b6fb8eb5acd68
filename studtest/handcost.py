"""What a hand costs the room, counted from outside the services (issue 35): taps between the
services and what they talk to, and watchers that count what they are sent.

- :class:`RedisTap`: a TCP proxy in front of a real ``redis-server`` for one service (its ACL
  user's URL rewritten to the tap's port). It reads the requests off the wire: each command by
  name, each round trip (a request written while the connection had no reply pending: a
  pipeline or a ``MULTI`` block is one), the bytes written, and of each call of the event
  store's append script (``studkit/append.lua``, by its SHA-1) the envelopes it carries: the
  appends, the events and the bytes appended.
- :class:`GrpcTap`: a ``grpc.aio`` proxy in front of a real dealer or wallet, forwarding every
  call as bytes (metadata, deadline and refusals passed through) and counting the calls by
  method: the table's calls to that service, counted where they arrive.
- :class:`Watchers`: ``WatchTable`` streams, as each seat's player and as a player on the rail,
  counting the records each is sent; or, for the seats, ``Play`` streams (issue 35), which
  also carry the driver's actions for that seat and their replies (counted as the stream's
  messages, the replies' records as its records).

Nothing here imports or patches the services' own code: the counts hold whatever their inside
looks like. ``bench/bench_hand_cost.py`` prints them per hand; ``tests/integration/
test_hand_cost.py`` pins them for one stacked-deck hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import grpc

import rules
from rules import ActionKind, Phase
from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from studkit.auth import Principal, Role, TokenBook
from studkit.mapping.events import event_from_proto

APPEND_SHA: Final = hashlib.sha1(
    resources.files("studkit").joinpath("append.lua").read_bytes()).hexdigest().encode()
"""The event store's append script, as EVALSHA names it."""
APPEND_ARGS_BEFORE_ENVELOPES: Final = 1 + 6 + 7
"""EVALSHA's arguments after the SHA before the first envelope: numkeys, 6 keys, 7 ARGV."""
SCRIPTS: Final = {"studkit": ("append", "trim"),
                  "dealer": ("seeds", "record_deal", "create_hand", "read_table"),
                  "wallet": ("apply",)}
"""The services' Lua scripts, by package (``<name>.lua`` beside its modules)."""


def script_names() -> dict[bytes, str]:
    """The SHA-1 (as EVALSHA names it) of every script of the services, to its name; the
    table's lease and heartbeat scripts are strings of ``studkit.ownership``."""
    from studkit import ownership
    names: dict[bytes, str] = {}
    for package, files in SCRIPTS.items():
        for name in files:
            body = resources.files(package).joinpath(f"{name}.lua").read_bytes()
            names[hashlib.sha1(body).hexdigest().encode()] = name
    for name in ("lease", "heartbeat"):
        sha = getattr(ownership, f"_{name.upper()}_SHA", None)
        if isinstance(sha, str):
            names[sha.encode()] = name
    return names


_SCRIPT_NAMES: Final = script_names()


class RespRequests:
    """An incremental reader of the requests a client writes (RESP arrays of bulk strings, as
    redis-py writes them); :meth:`feed` returns each whole command read, as its arguments."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[list[bytes]]:
        self._buffer += data
        commands: list[list[bytes]] = []
        buf = self._buffer
        pos = 0
        while True:
            parsed = self._one(buf, pos)
            if parsed is None:
                break
            command, pos = parsed
            commands.append(command)
        del buf[:pos]
        return commands

    @staticmethod
    def _one(buf: bytearray, pos: int) -> tuple[list[bytes], int] | None:
        end = buf.find(b"\r\n", pos)
        if end < 0:
            return None
        if buf[pos:pos + 1] != b"*":  # an inline command (redis-py never writes one)
            return [bytes(buf[pos:end]).split()[0] if buf[pos:end].strip() else b""], end + 2
        count = int(buf[pos + 1:end])
        pos = end + 2
        args: list[bytes] = []
        for _ in range(count):
            end = buf.find(b"\r\n", pos)
            if end < 0:
                return None
            size = int(buf[pos + 1:end])
            start = end + 2
            if len(buf) < start + size + 2:
                return None
            args.append(bytes(buf[start:start + size]))
            pos = start + size + 2
        return args, pos


@dataclass
class RedisCounts:
    """What one service asked of Redis."""

    round_trips: int = 0
    commands: Counter[str] = field(default_factory=Counter)
    bytes_written: int = 0
    appends: int = 0
    """Calls of the event store's append script."""
    events: int = 0
    """Envelopes those calls carried."""
    bytes_appended: int = 0
    """The envelopes' bytes."""
    connections: int = 0

    def copy(self) -> RedisCounts:
        return RedisCounts(self.round_trips, Counter(self.commands), self.bytes_written,
                           self.appends, self.events, self.bytes_appended, self.connections)

    def __sub__(self, other: RedisCounts) -> RedisCounts:
        commands = Counter(self.commands)
        commands.subtract(other.commands)
        return RedisCounts(self.round_trips - other.round_trips, +commands,
                           self.bytes_written - other.bytes_written,
                           self.appends - other.appends, self.events - other.events,
                           self.bytes_appended - other.bytes_appended,
                           self.connections - other.connections)

    def count(self, command: list[bytes]) -> None:
        name = command[0].upper().decode(errors="replace") if command else ""
        if name == "EVALSHA" and len(command) > 1 and command[1].lower() == APPEND_SHA:
            name = "EVALSHA append"
            envelopes = command[2 + APPEND_ARGS_BEFORE_ENVELOPES:]
            self.appends += 1
            self.events += len(envelopes)
            self.bytes_appended += sum(map(len, envelopes))
        elif name in ("EVALSHA", "EVALSHA_RO") and len(command) > 1:
            name = f"{name} {_SCRIPT_NAMES.get(command[1].lower(), 'other')}"
        elif name == "EVAL" and len(command) > 1:
            script = _SCRIPT_NAMES.get(hashlib.sha1(command[1]).hexdigest().encode(), "other")
            name = f"EVAL {script}"
            if script == "append":
                envelopes = command[2 + APPEND_ARGS_BEFORE_ENVELOPES:]
                self.appends += 1
                self.events += len(envelopes)
                self.bytes_appended += sum(map(len, envelopes))
        self.commands[name] += 1


class RedisTap:
    """A counting TCP proxy in front of Redis for one service (see the module docstring)."""

    def __init__(self, upstream_url: str) -> None:
        self.upstream_url = upstream_url
        parts = urlsplit(upstream_url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 6379
        self.counts = RedisCounts()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        """The upstream URL with the tap's port: what the service is given."""
        parts = urlsplit(self.upstream_url)
        netloc = parts.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2
                                         else host))

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.counts.connections += 1
        up_reader, up_writer = await asyncio.open_connection(self._host, self._port)
        pending = [False]  # a request written, its reply not yet come back
        requests = RespRequests()

        async def client_to_server() -> None:
            while data := await reader.read(65536):
                if not pending[0]:
                    self.counts.round_trips += 1
                    pending[0] = True
                self.counts.bytes_written += len(data)
                for command in requests.feed(data):
                    self.counts.count(command)
                up_writer.write(data)
                await up_writer.drain()

        async def server_to_client() -> None:
            while data := await up_reader.read(65536):
                pending[0] = False
                writer.write(data)
                await writer.drain()

        tasks = [asyncio.create_task(client_to_server()), asyncio.create_task(server_to_client())]
        self._tasks.update(tasks)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
                self._tasks.discard(task)
            for w in (writer, up_writer):
                with contextlib.suppress(Exception):
                    w.close()


_DROPPED_METADATA: Final = ("user-agent", "grpc-", ":")


class GrpcTap:
    """A counting ``grpc.aio`` proxy in front of one service (see the module docstring).
    ``streaming``: the methods (full paths) whose replies are streams; every other method is
    forwarded as a unary call."""

    def __init__(self, target: str, streaming: Iterable[str] = ()) -> None:
        self.target = target
        self.calls: Counter[str] = Counter()
        self._streaming = frozenset(streaming)
        self._channel: grpc.aio.Channel | None = None
        self._server: grpc.aio.Server | None = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._channel = grpc.aio.insecure_channel(self.target)
        self._server = grpc.aio.server()
        self._server.add_generic_rpc_handlers((_Forward(self),))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()

    async def close(self) -> None:
        if self._server is not None:
            await self._server.stop(None)
        if self._channel is not None:
            await self._channel.close()

    @staticmethod
    def _metadata(context: grpc.aio.ServicerContext) -> tuple[tuple[str, Any], ...]:
        return tuple((m.key, m.value) for m in context.invocation_metadata() or ()
                     if not m.key.startswith(_DROPPED_METADATA))

    def unary(self, method: str) -> Any:
        async def forward(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            self.calls[method] += 1
            assert self._channel is not None
            call = self._channel.unary_unary(method)
            try:
                reply: bytes = await call(request, metadata=self._metadata(context),
                                          timeout=context.time_remaining())
            except grpc.aio.AioRpcError as exc:
                await context.abort(exc.code(), exc.details() or "",
                                    tuple(exc.trailing_metadata() or ()))
                raise  # abort raises; for the type checker
            return reply
        return grpc.unary_unary_rpc_method_handler(forward)

    def stream(self, method: str) -> Any:
        async def forward(request: bytes, context: grpc.aio.ServicerContext
                          ) -> AsyncIterator[bytes]:
            self.calls[method] += 1
            assert self._channel is not None
            call = self._channel.unary_stream(method)(
                request, metadata=self._metadata(context), timeout=context.time_remaining())
            try:
                async for reply in call:
                    yield reply
            except grpc.aio.AioRpcError as exc:
                await context.abort(exc.code(), exc.details() or "",
                                    tuple(exc.trailing_metadata() or ()))
        return grpc.unary_stream_rpc_method_handler(forward)


class _Forward(grpc.GenericRpcHandler):  # type: ignore[misc]
    def __init__(self, tap: GrpcTap) -> None:
        self._tap = tap

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method = handler_call_details.method
        if method in self._tap._streaming:
            return self._tap.stream(method)
        return self._tap.unary(method)


def streaming_methods(*descriptors: Any) -> set[str]:
    """The full paths of the server-streaming methods of the services in these file
    descriptors (what a :class:`GrpcTap` forwards as streams)."""
    out: set[str] = set()
    for file in descriptors:
        for service in file.services_by_name.values():
            for method in service.methods:
                if method.server_streaming:
                    out.add(f"/{service.full_name}/{method.name}")
    return out


@dataclass
class PlayStream:
    """A seat's ``Play`` stream: the call, and the one action at a time sent on it."""

    call: Any
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    pending: asyncio.Future[pb.PlayReply] | None = None
    held: list[pb.TableEventRecord] = field(default_factory=list)
    """Records that came while an action waited for its reply (queued after its events)."""


class Watchers:
    """``WatchTable`` streams to the table, each as its principal on a connection of its own
    (as each player has), counting the records each is sent and the messages that carried
    them (by name: a seat's player, or ``rail``); ``batched``: the watches ask for several
    records a message (``WatchTableRequest.batched``). A watch opened with ``play`` is a
    ``Play`` stream: :meth:`act` sends an action on it; its replies count as its messages and
    their events as its records (the table sends a stream's own actions' records in their
    replies only)."""

    def __init__(self, target: str, tokens: TokenBook, batched: bool = False) -> None:
        self._target = target
        self._tokens = tokens
        self.batched = batched
        self.sent: Counter[str] = Counter()
        self.messages: Counter[str] = Counter()
        self.last: dict[str, int] = {}
        self.errors: list[str] = []
        self.streams: dict[str, PlayStream] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def act(self, name: str, message: pb.PlayRequest, timeout: float = 10.0
                  ) -> pb.PlayReply:
        """Send an action on ``name``'s Play stream and wait for its reply."""
        async with asyncio.timeout(timeout):
            while name not in self.streams:  # its task has not begun yet
                await asyncio.sleep(0.01)
            stream = self.streams[name]
            await stream.opened.wait()
        assert stream.pending is None, "one action at a time on a stream"
        stream.pending = asyncio.get_running_loop().create_future()
        await stream.call.write(message)
        return await asyncio.wait_for(stream.pending, timeout)

    async def __aenter__(self) -> Watchers:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        """End every watch (what they counted stays)."""
        tasks, self._tasks = self._tasks, []
        self.streams.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    def watch(self, name: str, table_id: str, who: Principal, after: int = 0,
              queue: asyncio.Queue[pb.TableEventRecord] | None = None,
              play: bool = False) -> None:
        """Start watching ``table_id`` as ``who`` (counted as ``name``), after ``after``;
        each record is also put in ``queue`` if one is given (in order: with ``play``, a
        reply's events before the records that came while it was awaited)."""
        metadata = tuple(self._tokens.metadata(who))
        if play:
            self._tasks.append(asyncio.create_task(
                self._play(name, table_id, metadata, after, queue)))
            return

        async def run() -> None:
            async with grpc.aio.insecure_channel(self._target) as channel:
                stub = pb_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
                stream = stub.WatchTable(pb.WatchTableRequest(
                    table_id=table_id, after_sequence=after, batched=self.batched),
                    metadata=metadata)
                try:
                    async for message in stream:
                        self.messages[name] += 1
                        for record in records_of(message):
                            self.sent[name] += 1
                            self.last[name] = record.sequence
                            if queue is not None:
                                queue.put_nowait(record)
                except grpc.aio.AioRpcError as exc:
                    self.errors.append(f"{name} on {table_id}: {exc.code().name} "
                                       f"{exc.details()}")

        self._tasks.append(asyncio.create_task(run()))

    async def _play(self, name: str, table_id: str, metadata: tuple[tuple[str, str], ...],
                    after: int, queue: asyncio.Queue[pb.TableEventRecord] | None) -> None:
        async with grpc.aio.insecure_channel(self._target) as channel:
            stub = pb_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
            call = stub.Play(metadata=metadata)
            stream = self.streams[name] = PlayStream(call)
            try:
                await call.write(pb.PlayRequest(watch=pb.WatchTableRequest(
                    table_id=table_id, after_sequence=after, batched=self.batched)))
                stream.opened.set()
                async for message in call:
                    self.messages[name] += 1
                    if message.HasField("record"):
                        records = records_of(message.record)
                        self.sent[name] += len(records)
                        self.last[name] = records[-1].sequence
                        if queue is None:
                            continue
                        if stream.pending is not None:
                            stream.held.extend(records)
                        else:
                            for record in records:
                                queue.put_nowait(record)
                        continue
                    reply = message.reply
                    events = list(reply.reply.events)
                    self.sent[name] += len(events)
                    if events:
                        self.last[name] = max(self.last.get(name, 0), events[-1].sequence)
                    if queue is not None:
                        for record in [*events, *stream.held]:
                            queue.put_nowait(record)
                        stream.held.clear()
                    pending, stream.pending = stream.pending, None
                    if pending is not None and not pending.done():
                        pending.set_result(reply)
            except grpc.aio.AioRpcError as exc:
                self.errors.append(f"{name} on {table_id}: {exc.code().name} "
                                   f"{exc.details()}")

    @property
    def total(self) -> int:
        return sum(self.sent.values())


def records_of(message: pb.TableEventRecord) -> list[pb.TableEventRecord]:
    """The records one WatchTable message carries: itself, then its ``more`` (a batched
    watch's), in order."""
    if not message.more:
        return [message]
    rest = list(message.more)
    message.ClearField("more")
    return [message, *rest]


@dataclass
class Snapshot:
    """Every counter at one moment."""

    redis: dict[str, RedisCounts]
    grpc: dict[str, Counter[str]]
    watched: Counter[str]
    messages: Counter[str] = field(default_factory=Counter)

    def __sub__(self, other: Snapshot) -> Snapshot:
        grpc_: dict[str, Counter[str]] = {}
        for name, calls in self.grpc.items():
            diff = Counter(calls)
            diff.subtract(other.grpc.get(name, Counter()))
            grpc_[name] = +diff
        watched = Counter(self.watched)
        watched.subtract(other.watched)
        messages = Counter(self.messages)
        messages.subtract(other.messages)
        return Snapshot({n: c - other.redis[n] for n, c in self.redis.items()}, grpc_,
                        +watched, +messages)


@dataclass
class Taps:
    """The taps of one room: a :class:`RedisTap` per service, a :class:`GrpcTap` per called
    service, and the watchers."""

    redis: dict[str, RedisTap]
    grpc: dict[str, GrpcTap]

    def snapshot(self, watchers: Watchers) -> Snapshot:
        return Snapshot({n: t.counts.copy() for n, t in self.redis.items()},
                        {n: Counter(t.calls) for n, t in self.grpc.items()},
                        Counter(watchers.sent), Counter(watchers.messages))

    async def settled(self, watchers: Watchers, quiet_s: float = 0.4,
                      timeout: float = 20.0) -> Snapshot:
        """A snapshot once nothing has moved for ``quiet_s`` (the room at rest)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last = self.snapshot(watchers)
        still_since = loop.time()
        while loop.time() < deadline:
            await asyncio.sleep(0.05)
            now = self.snapshot(watchers)
            if now != last:
                last, still_since = now, loop.time()
            elif loop.time() - still_since >= quiet_s:
                return now
        return last


@contextlib.asynccontextmanager
async def redis_taps(url_for: Mapping[str, str]) -> AsyncIterator[dict[str, RedisTap]]:
    """A started :class:`RedisTap` per service (``url_for``: its upstream URL)."""
    taps = {name: RedisTap(url) for name, url in url_for.items()}
    try:
        for tap in taps.values():
            await tap.start()
        yield taps
    finally:
        for tap in taps.values():
            await tap.close()


@contextlib.asynccontextmanager
async def grpc_tap(target: str, streaming: Iterable[str] = ()) -> AsyncIterator[GrpcTap]:
    """A started :class:`GrpcTap` in front of ``target``."""
    tap = GrpcTap(target, streaming)
    try:
        await tap.start()
        yield tap
    finally:
        await tap.close()


# --- a hand driver over the public API ------------------------------------------------------

Choose = Callable[[Sequence[rules.LegalAction], random.Random], rules.LegalAction]


def passive(actions: Sequence[rules.LegalAction], rng: random.Random) -> rules.LegalAction:
    """The same action every time: check, else call, else the bring-in (a hand to showdown
    with no wager but the bring-in's and the calls')."""
    order = (ActionKind.CHECK, ActionKind.CALL, ActionKind.BRING_IN)
    return min(actions, key=lambda a: order.index(a.kind) if a.kind in order else len(order))


def any_legal(actions: Sequence[rules.LegalAction], rng: random.Random) -> rules.LegalAction:
    """Any legal action, uniformly."""
    return rng.choice(list(actions))


@dataclass
class HandDriver:
    """Plays one table through its public API: folds one seat's watch (``records``: a queue a
    :class:`Watchers` stream fills) with the rules, and acts for whoever is to act with the
    action ``choose`` picks, as that seat's player (``expected_sequence`` set)."""

    stub: Any
    tokens: TokenBook
    table_id: str
    records: asyncio.Queue[pb.TableEventRecord]
    choose: Choose
    rng: random.Random
    state: rules.TableState = field(default_factory=rules.initial_state)
    seen: int = 0
    actions: int = 0
    refused: int = 0
    streams: Watchers | None = None
    """Act over each seat's Play stream (``seat <n>``) instead of a unary call."""

    async def play_until(self, hand_number: int, timeout: float = 120.0) -> None:
        """Act until hand ``hand_number`` (or a later one) waits for its first action (the
        bring-in), and return without taking it."""
        acted_at = -1
        async with asyncio.timeout(timeout):
            while True:
                while not self.records.empty():  # act only at the newest event
                    self._fold(self.records.get_nowait())
                hand = self.state.hand
                if hand is not None and hand.phase == Phase.BETTING and hand.to_act:
                    if hand.hand_number >= hand_number:
                        return
                    if acted_at != self.seen:
                        acted_at = self.seen
                        await self._act()
                        continue
                try:
                    self._fold(await asyncio.wait_for(self.records.get(), 2.0))
                except TimeoutError:
                    acted_at = -1  # nothing came: look again at what we have

    def _fold(self, record: pb.TableEventRecord) -> None:
        self.seen = record.sequence
        self.state = rules.evolve(self.state, event_from_proto(record.event))

    async def _act(self) -> None:
        legal = rules.legal_actions(self.state)
        if legal is None or not legal.actions:
            return
        holder = self.state.seat(legal.seat)
        assert holder is not None
        action = self.choose(legal.actions, self.rng)
        method, request_type = ACTION_RPC[action.kind]
        request = request_type(table_id=self.table_id, seat=legal.seat,
                               command_id=uuid.uuid4().hex, expected_sequence=self.seen)
        if action.kind in (ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE):
            request.to = action.to
        if self.streams is not None:
            reply = await self.streams.act(f"seat {legal.seat}", pb.PlayRequest(
                **{PLAY_FIELD[action.kind]: request}))
            if reply.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]:
                self.refused += 1  # stale: the table moved on first
            elif reply.code:
                raise AssertionError(f"{method} refused: {reply.code} {reply.reason} "
                                     f"{reply.message}")
            else:
                self.actions += 1
            return
        try:
            await getattr(self.stub, method)(
                request, metadata=tuple(self.tokens.metadata(
                    Principal(Role.PLAYER, holder.player_id))), timeout=10)
        except grpc.aio.AioRpcError as exc:
            if exc.code() is not grpc.StatusCode.FAILED_PRECONDITION:
                raise
            self.refused += 1  # stale: the table moved on first
            return
        self.actions += 1


PLAY_FIELD: Final = {ActionKind.BRING_IN: "post_bring_in", ActionKind.COMPLETE: "complete",
                     ActionKind.BET: "bet", ActionKind.RAISE: "raise", ActionKind.CALL: "call",
                     ActionKind.CHECK: "check", ActionKind.FOLD: "fold"}
"""The ``PlayRequest`` field of each kind of action."""
ACTION_RPC: Final = {ActionKind.BRING_IN: ("PostBringIn", pb.PostBringInRequest),
                     ActionKind.COMPLETE: ("Complete", pb.CompleteRequest),
                     ActionKind.BET: ("Bet", pb.BetRequest),
                     ActionKind.RAISE: ("Raise", pb.RaiseRequest),
                     ActionKind.CALL: ("Call", pb.CallRequest),
                     ActionKind.CHECK: ("Check", pb.CheckRequest),
                     ActionKind.FOLD: ("Fold", pb.FoldRequest)}


@dataclass
class HandCost:
    """What ``hands`` hands of ``players`` players cost, counted from the moment one hand
    waited for its bring-in to the moment the hand ``hands`` later did (whole cycles: a hand's
    actions, its end and settlement, the next hand's start and deal)."""

    players: int
    hands: int
    actions: int
    counts: Snapshot

    def totals(self) -> dict[str, int]:
        """Every count over the ``hands`` hands, by name: ``actions``; ``appends``,
        ``events`` and ``bytes appended`` (the table's append script); ``store round trips``
        and ``<service> round trips``, ``<service> <COMMAND>``; ``dealer calls`` and
        ``wallet calls`` and ``<service> <Method>``; ``watch records`` and ``watch records
        <watcher>``; ``watch messages`` and ``watch messages <watcher>`` (the messages that
        carried them)."""
        c = self.counts
        table = c.redis.get("table", RedisCounts())
        out = {"actions": self.actions, "appends": table.appends, "events": table.events,
               "bytes appended": table.bytes_appended,
               "store round trips": sum(r.round_trips for r in c.redis.values())}
        for service, redis in sorted(c.redis.items()):
            out[f"{service} round trips"] = redis.round_trips
            for command, n in sorted(redis.commands.items()):
                out[f"{service} {command}"] = n
        for service, calls in sorted(c.grpc.items()):
            out[f"{service} calls"] = sum(calls.values())
            for method, n in sorted(calls.items()):
                out[f"{service} {method.rsplit('/', 1)[-1]}"] = n
        out["watch records"] = sum(c.watched.values())
        for watcher, n in sorted(c.watched.items()):
            out[f"watch records {watcher}"] = n
        out["watch messages"] = sum(c.messages.values())
        for watcher, n in sorted(c.messages.items()):
            out[f"watch messages {watcher}"] = n
        return out


async def measure_table(stub: Any, tokens: TokenBook, taps: Taps, watchers: Watchers,
                        table_id: str, seats: Mapping[int, str], hands: int, choose: Choose,
                        rng: random.Random, quiet_s: float = 0.4, first_hand: int = 2,
                        play: bool = False) -> HandCost:
    """Watch ``table_id`` as each seated player (``seats``: seat -> player id) and as a player
    on the rail, play it to hand ``first_hand``'s bring-in (the first hand may have started
    before every player sat down), then ``hands`` more hands, and return what those hands
    cost (the table must be open with ``seats`` seated). ``play``: each seated player's watch
    is a ``Play`` stream and the driver acts for the seat over it (the rail still watches)."""
    queue: asyncio.Queue[pb.TableEventRecord] = asyncio.Queue()
    first = min(seats)
    for seat, name in sorted(seats.items()):
        watchers.watch(f"seat {seat}", table_id, Principal(Role.PLAYER, name),
                       queue=queue if seat == first else None, play=play)
    watchers.watch("rail", table_id, Principal(Role.PLAYER, f"rail-{table_id}"))
    driver = HandDriver(stub, tokens, table_id, queue, choose, rng,
                        streams=watchers if play else None)
    try:
        await driver.play_until(first_hand)
        before = await taps.settled(watchers, quiet_s)
        actions = driver.actions
        await driver.play_until(first_hand + hands)
        after = await taps.settled(watchers, quiet_s)
    except TimeoutError:
        raise AssertionError(f"{table_id} stopped at sequence {driver.seen} (watch errors: "
                             f"{watchers.errors or 'none'})") from None
    finally:
        await watchers.stop()
    return HandCost(len(seats), hands, driver.actions - actions, after - before)


@dataclass
class TappedRoom:
    """An in-process room (real dealer, wallet and table servers) whose Redis and
    service-to-service traffic goes through taps."""

    taps: Taps
    table_target: str
    dealer_port: int
    wallet: Any
    """The wallet's :class:`studtest.wallet.RunningWallet`."""


@contextlib.asynccontextmanager
async def tapped_room(redis_url_for: Callable[[str], str], keys: Any, rig: Any = None,
                      **table_overrides: Any) -> AsyncIterator[TappedRoom]:
    """Dealer (``rig``: the rigged one of :mod:`studtest.rigged_dealer`), wallet and table
    in process, each service's Redis through a :class:`RedisTap` and the table's calls to the
    dealer and the wallet through a :class:`GrpcTap` each."""
    from dealer.config import Settings as DealerSettings
    from stud.v1 import dealer_pb2, wallet_pb2
    from studtest.dealer import running_dealer
    from studtest.table import running_table
    from studtest.wallet import running_wallet
    from table.config import Settings as TableSettings
    from wallet.config import Settings as WalletSettings

    streaming = streaming_methods(dealer_pb2.DESCRIPTOR, wallet_pb2.DESCRIPTOR)
    urls = {name: redis_url_for(name) for name in ("table", "dealer", "wallet")}
    async with redis_taps(urls) as rtaps:
        dealer_settings = DealerSettings(addr="127.0.0.1:0", auth_keys=keys.key_set(),
                                         redis_url=rtaps["dealer"].url)
        wallet_settings = WalletSettings(addr="127.0.0.1:0", auth_keys=keys.key_set(),
                                         redis_url=rtaps["wallet"].url)
        async with running_dealer(dealer_settings, keys, rig) as dealer, \
                running_wallet(wallet_settings, keys) as wallet, \
                grpc_tap(f"127.0.0.1:{dealer.port}", streaming) as dealer_tap, \
                grpc_tap(f"127.0.0.1:{wallet.port}", streaming) as wallet_tap:
            values: dict[str, Any] = dict(
                addr="127.0.0.1:0", redis_url=rtaps["table"].url,
                dealer_target=dealer_tap.address, wallet_target=wallet_tap.address,
                auth_keys=keys.key_set(), service_key=keys.service_key("table"),
                metrics_port=0, call_deadline_s=2.0)
            values.update(table_overrides)
            async with running_table(TableSettings(**values)) as (_deps, port):
                yield TappedRoom(Taps(rtaps, {"dealer": dealer_tap, "wallet": wallet_tap}),
                                 f"127.0.0.1:{port}", dealer.port, wallet)
