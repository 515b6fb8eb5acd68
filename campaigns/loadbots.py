"""The load's bots in processes of their own (``python -m campaigns.loadbots``), so that what
they cost is measured apart from the services and never slows the table's process.

The parent (:func:`run_bots`) mints every token the bots need, starts the processes with one
JSON spec each on their standard input, and gets one JSON result from each at the end. A
process opens its watches, says ``ready``, waits for ``go``, measures over the window
``[go + warm_up, go + warm_up + seconds]`` and reports: action latencies, refusals that mean
the table moved on, hands started, its own CPU seconds in the window, and every other error
counted by its status code and reason (never a traceback).

Two kinds of bot:

- ``room``: one bot per seat, each on a channel of its own (a player's connection), watching
  the table as its seat and acting at once with a random legal action (the room benchmark).
  The spec's ``actions`` says how: ``play`` (the default) over one ``TableService.Play``
  stream per bot, the table's records and the bot's actions with their replies on it (issue
  35: an action is one message in, not a call of its own); ``unary`` over ``WatchTable`` and
  a unary call per action, as browsers play.
- ``human``: one :class:`campaigns.bot.Bot` per table playing every seat through a
  :class:`campaigns.router.Router` (a router per group of tables), thinking before each action.

Every call is retried on ``UNAVAILABLE`` with the same request (the same command id), as the
SDK does: the table answers a retry of an applied command with its recorded outcome. A Play
stream cut ``UNAVAILABLE`` is opened again from the last sequence seen, and the action whose
reply did not arrive is sent again on it with the same command id; so is a stream whose
reply does not come within :data:`REPLY_TIMEOUT_S` (the unary calls' timeout), counted as an
error (``Play no reply``) where it hung the bot uncounted.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import grpc

import rules
from campaigns.bot import RPC, Tally, never_fold
from campaigns.bot import Bot as HumanBot
from campaigns.router import Router
from rules import ActionKind, Phase
from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from studkit.auth import Principal, Role
from studkit.auth.tokens import Metadata, bearer_metadata
from studkit.grpc_errors import rpc_error_reason
from studkit.mapping.events import event_from_proto
from studtest.processes import CHANNEL_OPTIONS

BOT_CHANNEL_OPTIONS: Final = [*CHANNEL_OPTIONS, ("grpc.use_local_subchannel_pool", 1)]
"""A room bot's channel: a connection of its own, as a player's app has (gRPC shares one
connection among a process's channels to one address by default: the bots of a process then
spent one connection's call budget together, 400 a second, and a room on Play ran past it)."""

RETRY_S: Final = 0.05
"""The pause before a call refused ``UNAVAILABLE`` is sent again."""
RETRY_FOR_S: Final = 30.0
"""How long a call is retried before its refusal counts as an error."""
REPLY_TIMEOUT_S: Final = 10.0
"""How long a Play stream's action waits for its reply (the unary calls' timeout): then it
counts an error (``Play no reply``) and the stream is opened again, the action sent again
with its command id."""
TABLES_PER_ROUTER: Final = 50
"""Human pace: tables sharing one router (one connection)."""
ACTIONS: Final = ("play", "unary")
"""How a room bot sends its actions (the spec's ``actions``; the first is the default)."""
PLAY_FIELD: Final = {ActionKind.BRING_IN: "post_bring_in", ActionKind.COMPLETE: "complete",
                     ActionKind.BET: "bet", ActionKind.RAISE: "raise",
                     ActionKind.CALL: "call", ActionKind.CHECK: "check",
                     ActionKind.FOLD: "fold"}
"""The ``PlayRequest`` field of each kind of action."""
_TO: Final = frozenset({ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE})
_HAND_STARTED: Final = "hand_started"
STATUS: Final = {code.value[0]: code for code in grpc.StatusCode}
"""A status code by its number (a refused action's ``PlayReply.code``)."""


def describe(exc: grpc.aio.AioRpcError) -> str:
    """A refusal as counted: its code and reason."""
    return f"{exc.code().name} {rpc_error_reason(exc) or '-'}"


class MintedTokens:
    """Tokens minted by the parent, by principal (what a :class:`Router` asks of tokens)."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self._tokens = tokens

    @staticmethod
    def key(who: Principal) -> str:
        return f"{who.role.value}:{who.name}"

    def metadata(self, who: Principal) -> Metadata:
        return bearer_metadata(self._tokens[self.key(who)])


@dataclass
class Window:
    """The measured window and what fell into it."""

    start: float = float("inf")
    end: float = float("inf")
    latencies: list[float] = field(default_factory=list)
    refused: int = 0
    retries: int = 0
    hands: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    first_error: str = ""
    cpu: float = 0.0
    """This process's CPU seconds in the window."""

    def inside(self, began: float, ended: float) -> bool:
        return self.start <= began and ended <= self.end

    def error(self, what: str, detail: str) -> None:
        self.errors[what] += 1
        self.first_error = self.first_error or f"{what}: {detail}"


async def call_retrying(method: Any, request: Any, metadata: Metadata, window: Window,
                        stop: asyncio.Event) -> Any:
    """``method(request)``, sent again (the same request) while it is refused
    ``UNAVAILABLE``, for at most :data:`RETRY_FOR_S`."""
    give_up = time.monotonic() + RETRY_FOR_S
    while True:
        try:
            return await method(request, metadata=metadata, timeout=10)
        except grpc.aio.AioRpcError as exc:
            if (exc.code() is not grpc.StatusCode.UNAVAILABLE or stop.is_set()
                    or time.monotonic() > give_up):
                raise
            window.retries += 1
            await asyncio.sleep(RETRY_S)


@dataclass
class RoomBot:
    """One player on a channel of its own: watches the table as its seat, acts at once."""

    target: str
    table_id: str
    seat: int
    metadata: Metadata
    rng: random.Random
    window: Window
    stop: asyncio.Event
    actions: str = ACTIONS[0]
    """``play``: one Play stream; ``unary``: WatchTable and a unary call per action."""
    lost: bool = False
    """A call failed without an answer: the bot's watch carries its own actions again."""
    reply_timeout_s: float = REPLY_TIMEOUT_S
    """How long a Play stream's action waits for its reply."""
    id_prefix: str = field(default_factory=lambda: f"{uuid.uuid4().hex[:16]}-")
    commands: int = 0

    def choose(self, legal: rules.LegalActions) -> rules.LegalAction:
        """Random legal play that rarely folds (long hands, many actions)."""
        actions = [a for a in legal.actions if a.kind != ActionKind.FOLD]
        if not actions or self.rng.random() < 0.08:
            actions = list(legal.actions)
        return self.rng.choice(actions)

    async def act(self, stub: Any, legal: rules.LegalActions, sequence: int
                  ) -> pb.CommandReply | None:
        """Act; the reply (its events are the bot's: its watch leaves them out), None when
        the action was refused or failed (then ``lost`` when it may have been applied)."""
        action = self.choose(legal)
        method, request_type = RPC[action.kind]
        request = request_type(table_id=self.table_id, seat=self.seat,
                               expected_sequence=sequence, command_id=self.command_id())
        if action.kind in (ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE):
            request.to = action.to
        began = time.perf_counter()
        try:
            reply = await call_retrying(getattr(stub, method), request, self.metadata,
                                        self.window, self.stop)
        except grpc.aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.FAILED_PRECONDITION:
                self.window.refused += 1  # stale: the table moved on (e.g. a clock)
            else:
                self.window.error(describe(exc), exc.details() or "")
                self.lost = True
            return None
        ended = time.perf_counter()
        if self.window.inside(began, ended):
            self.window.latencies.append(ended - began)
        return reply  # type: ignore[no-any-return]

    async def run(self, ready: asyncio.Event) -> None:
        if self.actions == "play":
            await self.run_play(ready)
        else:
            await self.run_unary(ready)

    def command_id(self) -> str:
        """A new command id: the bot's random prefix and a count (unique at the table; an
        action with ``expected_sequence`` needs no timed id), where each was a UUID (a
        getrandom call and a formatting: 3-4% of a bot process's samples under py-spy)."""
        self.commands += 1
        return f"{self.id_prefix}{self.commands}"

    def play_request(self, legal: rules.LegalActions, sequence: int
                     ) -> tuple[pb.PlayRequest, str]:
        """A random legal action (:meth:`choose`) as a Play stream's message, and its command
        id (the action built in place, from a dict: no message made and copied)."""
        action = self.choose(legal)
        command_id = self.command_id()
        fields: dict[str, Any] = {"table_id": self.table_id, "seat": self.seat,
                                  "expected_sequence": sequence, "command_id": command_id}
        if action.kind in _TO:
            fields["to"] = action.to
        return pb.PlayRequest(**{PLAY_FIELD[action.kind]: fields}), command_id

    async def run_play(self, ready: asyncio.Event) -> None:
        """The bot over one Play stream: the table's records in, its actions out, each
        answered on the stream. One action at a time: records that come while it waits for
        its reply are folded after the reply's events (they follow them), so the fold is the
        table's order whatever the stream interleaves. A cut stream is opened again from the
        last sequence folded and the unanswered action sent again (the same command id: the
        table answers a retry with the recorded outcome); so is a stream whose reply does not
        come within ``reply_timeout_s`` (counted ``Play no reply``)."""
        async with grpc.aio.insecure_channel(self.target, options=BOT_CHANNEL_OPTIONS) as channel:
            stub = pb_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
            await asyncio.wait_for(channel.channel_ready(), 30)
            await self.play_on(stub, ready)

    async def play_on(self, stub: Any, ready: asyncio.Event) -> None:
        """:meth:`run_play` on ``stub`` (a ``TableServiceStub``)."""
        window, stop, seat = self.window, self.stop, self.seat
        state, seen, acted_at = rules.initial_state(), 0, -1
        pending: pb.PlayRequest | None = None  # the action sent, its reply not come
        pending_id, began, sent_at = "", 0.0, 0.0
        held: list[pb.TableEventRecord] = []  # records come while an action waits
        cut_since: float | None = None  # first cut UNAVAILABLE, nothing received since

        def fold(records: Sequence[pb.TableEventRecord]) -> None:
            nonlocal state, seen
            for record in records:
                if record.sequence <= seen:
                    continue  # had already (a reply's record, a resumed stream's)
                seen = record.sequence
                event = record.event
                state = rules.evolve(state, event_from_proto(event))
                if (seat == 1 and event.WhichOneof("event") == _HAND_STARTED
                        and window.start <= time.perf_counter() <= window.end):
                    window.hands += 1

        while not stop.is_set():
            call = stub.Play(metadata=self.metadata)
            held.clear()
            try:
                await call.write(pb.PlayRequest(watch=pb.WatchTableRequest(
                    table_id=self.table_id, after_sequence=seen, batched=True)))
                if pending is not None:
                    await call.write(pending)  # unanswered: again, the same command id
                    sent_at = time.perf_counter()
                ready.set()
                while True:
                    if pending is None:
                        message = await call.read()
                    else:
                        try:
                            message = await asyncio.wait_for(call.read(), max(
                                0.0, sent_at + self.reply_timeout_s - time.perf_counter()))
                        except TimeoutError:  # lost: again on a new stream, the same id
                            window.error("Play no reply",
                                         f"no reply in {self.reply_timeout_s:g} s")
                            break
                    if stop.is_set():
                        return
                    if message is grpc.aio.EOF:
                        window.error("Play ended", "the table ended the stream with OK")
                        break
                    cut_since = None
                    if message.HasField("record"):
                        record = message.record
                        records = (record, *record.more) if record.more else (record,)
                        if pending is not None:
                            held.extend(records)
                            continue
                        fold(records)
                    else:
                        reply = message.reply
                        if pending is None or reply.command_id != pending_id:
                            window.error("Play reply to no action", reply.command_id)
                            continue
                        if reply.code:
                            code = STATUS[reply.code]
                            if code is grpc.StatusCode.UNAVAILABLE and (
                                    time.perf_counter() - began < RETRY_FOR_S):
                                window.retries += 1
                                await asyncio.sleep(RETRY_S)
                                await call.write(pending)
                                sent_at = time.perf_counter()
                                continue
                            if code is grpc.StatusCode.FAILED_PRECONDITION:
                                window.refused += 1  # stale: the table moved on
                            else:
                                window.error(f"{code.name} {reply.reason or '-'}",
                                             reply.message)
                        else:
                            ended = time.perf_counter()
                            if window.start <= began and ended <= window.end:
                                window.latencies.append(ended - began)
                            fold(reply.reply.events)
                        pending = None
                        if held:
                            fold(held)
                            held.clear()
                    hand = state.hand
                    if (hand is None or hand.phase != Phase.BETTING
                            or hand.to_act != seat or acted_at == seen):
                        continue
                    legal = rules.legal_actions(state)
                    if legal is not None and legal.actions:
                        acted_at = seen
                        pending, pending_id = self.play_request(legal, seen)
                        began = sent_at = time.perf_counter()
                        await call.write(pending)
            except grpc.aio.AioRpcError as exc:  # a cut stream is resumed where it was
                if stop.is_set():
                    return
                now = time.monotonic()
                if exc.code() is grpc.StatusCode.UNAVAILABLE and (
                        now - (cut_since := cut_since or now) < RETRY_FOR_S):
                    window.retries += 1
                else:
                    window.error(f"Play {describe(exc)}", exc.details() or "")
            finally:
                call.cancel()
            await asyncio.sleep(RETRY_S)

    async def run_unary(self, ready: asyncio.Event) -> None:
        async with grpc.aio.insecure_channel(self.target, options=BOT_CHANNEL_OPTIONS) as channel:
            stub = pb_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
            await asyncio.wait_for(channel.channel_ready(), 30)
            state, seen, acted_at = rules.initial_state(), 0, -1
            while not self.stop.is_set():
                # Batched (issue 35): what the table has ready in one message; the bot
                # looks at its turn once the whole message is folded. Its own actions come
                # in their replies only (skip_own), unless one of its calls failed without
                # an answer: then its watch carries them again.
                watch = stub.WatchTable(pb.WatchTableRequest(table_id=self.table_id,
                                                             after_sequence=seen,
                                                             batched=True,
                                                             skip_own=not self.lost),
                                        metadata=self.metadata)
                ready.set()
                try:
                    async for message in watch:
                        if self.stop.is_set():
                            return
                        for record in (message, *message.more):
                            if record.sequence <= seen:
                                continue  # folded from its reply (a table that echoes it)
                            seen = record.sequence
                            state = rules.evolve(state, event_from_proto(record.event))
                            if (record.event.WhichOneof("event") == "hand_started"
                                    and self.seat == 1 and self.window.start
                                    <= time.perf_counter() <= self.window.end):
                                self.window.hands += 1
                        hand = state.hand
                        if (hand is None or hand.phase != Phase.BETTING
                                or hand.to_act != self.seat or acted_at == seen):
                            continue
                        legal = rules.legal_actions(state)
                        if legal is not None and legal.actions:
                            acted_at = seen
                            skipping = not self.lost
                            reply = await self.act(stub, legal, seen)
                            if reply is not None and skipping:
                                for record in reply.events:
                                    if record.sequence > seen:
                                        seen = record.sequence
                                        state = rules.evolve(
                                            state, event_from_proto(record.event))
                            elif self.lost and skipping:
                                break  # watch again from `seen`, its own actions included
                except grpc.aio.AioRpcError as exc:  # a cut stream is resumed where it was
                    if self.stop.is_set():
                        return
                    self.window.error(f"WatchTable {describe(exc)}", exc.details() or "")
                    await asyncio.sleep(RETRY_S)
                finally:
                    watch.cancel()


async def _room(spec: dict[str, Any], window: Window, stop: asyncio.Event) -> None:
    actions = spec.get("actions", ACTIONS[0])
    bots = [RoomBot(spec["target"], b["table_id"], b["seat"], bearer_metadata(b["token"]),
                    random.Random(b["seed"]), window, stop, actions) for b in spec["bots"]]
    readies = [asyncio.Event() for _ in bots]
    tasks = [asyncio.create_task(bot.run(ready)) for bot, ready in zip(bots, readies, strict=True)]
    await asyncio.gather(*(r.wait() for r in readies))
    await _window(spec, window)
    stop.set()
    await _ended(tasks, window)


async def _human(spec: dict[str, Any], window: Window, stop: asyncio.Event) -> None:
    tokens = MintedTokens(spec["tokens"])
    tables: list[str] = spec["tables"]
    routers = [Router([spec["target"]], tokens)  # type: ignore[arg-type]
               for _ in range(0, len(tables), TABLES_PER_ROUTER)]
    tally = Tally()
    think = (float(spec["think"][0]), float(spec["think"][1]))
    tasks = [asyncio.create_task(HumanBot(
        routers[i // TABLES_PER_ROUTER], t, tally, random.Random(spec["seed"] + i),
        never_fold, think, viewer=Principal(Role.PLAYER, spec["viewers"][t])).run(stop))
        for i, t in enumerate(tables)]
    await _window(spec, window, tally)
    stop.set()
    await _ended(tasks, window)
    for router in routers:
        await router.close()


async def _window(spec: dict[str, Any], window: Window, tally: Tally | None = None) -> None:
    """Wait for ``go``, then measure over the window (a tally's latencies cleared at its start
    and taken at its end)."""
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    now = time.perf_counter()
    window.start, window.end = now + spec["warm_up"], now + spec["warm_up"] + spec["seconds"]
    await asyncio.sleep(spec["warm_up"])
    cpu = time.process_time()
    errors_before = 0
    if tally is not None:
        tally.latencies.clear()
        tally.moved_on = 0
        errors_before = len(tally.errors)
    await asyncio.sleep(spec["seconds"])
    window.cpu = time.process_time() - cpu
    if tally is not None:
        window.latencies = list(tally.latencies)
        window.refused = tally.moved_on
        for error in tally.errors[errors_before:]:
            code = " ".join(error.split(": ", 1)[-1].split()[:2])
            window.error(code, error)


async def _ended(tasks: Sequence[asyncio.Task[None]], window: Window) -> None:
    await asyncio.sleep(0.3)
    for task in tasks:
        task.cancel()
    for result in await asyncio.gather(*tasks, return_exceptions=True):
        if isinstance(result, Exception):
            window.error(type(result).__name__, str(result))


# --- the parent's side ----------------------------------------------------------------------

@dataclass
class BotsResult:
    """What every bot process measured in the window, together."""

    latencies: list[float] = field(default_factory=list)
    refused: int = 0
    retries: int = 0
    hands: int = 0
    cpu: float = 0.0
    """CPU seconds of the bot processes in the window."""
    errors: Counter[str] = field(default_factory=Counter)
    first_error: str = ""
    processes: int = 0

    def add(self, part: dict[str, Any]) -> None:
        self.latencies.extend(part["latencies"])
        self.refused += part["refused"]
        self.retries += part["retries"]
        self.hands += part["hands"]
        self.cpu += part["cpu"]
        self.errors.update(part["errors"])
        self.first_error = self.first_error or part["first_error"]
        self.processes += 1


class BotProcesses:
    """Bot processes, each given its spec; ``ready`` once every one has its watches open,
    ``go`` starts every window at once, ``results`` gathers them."""

    def __init__(self, specs: Sequence[dict[str, Any]]) -> None:
        self.specs = specs
        self.procs: list[asyncio.subprocess.Process] = []

    async def ready(self) -> None:
        for spec in self.specs:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "campaigns.loadbots", stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, limit=1 << 26)
            self.procs.append(proc)
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(spec).encode() + b"\n")
            await proc.stdin.drain()
        for proc in self.procs:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 120)
            if line.strip() != b"ready":
                raise RuntimeError(f"a bot process did not start ({line!r})")

    async def go(self) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            await proc.stdin.drain()

    async def results(self) -> BotsResult:
        out = BotsResult()
        for proc in self.procs:
            assert proc.stdout is not None
            out.add(json.loads(await proc.stdout.readline()))
            await proc.wait()
        return out

    async def kill(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


def split(items: Sequence[Any], parts: int) -> list[list[Any]]:
    """``items`` dealt into at most ``parts`` non-empty groups."""
    groups: list[list[Any]] = [list(items[i::parts]) for i in range(max(1, parts))]
    return [g for g in groups if g]


async def child_main() -> None:
    spec = json.loads(sys.stdin.readline())
    window, stop = Window(), asyncio.Event()
    await (_room if spec["mode"] == "room" else _human)(spec, window, stop)
    print(json.dumps({"latencies": window.latencies, "refused": window.refused,
                      "retries": window.retries, "hands": window.hands,
                      "cpu": window.cpu, "errors": dict(window.errors),
                      "first_error": window.first_error}), flush=True)


if __name__ == "__main__":
    asyncio.run(child_main())
