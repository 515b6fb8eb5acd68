"""The campaigns' one bot: it plays every seat of one table through the :class:`Router`.

It follows the table's events (``WatchTable``, resumed across cuts and takeovers by the
router) and folds them with the rules, as any client may, so it knows who is to act and what
is legal without asking. When a seat is to act it thinks (``think``, seconds, for a human
pace), picks a legal action (``choose``) and sends it as that seat's player, with a fresh
command id and ``expected_sequence`` set to the last event it saw.

What happened is kept in a :class:`Tally`: each acknowledged command (its command id and the
sequences of the events the reply says it appended), each refusal that only means the table
moved on first (``FAILED_PRECONDITION``, ``ABORTED``: another event came first, or the clock
acted), and every other error, reported as it was (nothing is swallowed: a campaign fails on
any). The SDK's bots (``studclient.bots``) are the product's; this one is the campaigns'.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

import grpc

import rules
from campaigns.router import Router
from rules import ActionKind, Phase
from stud.v1 import table_pb2 as pb
from studkit.auth import Principal, Role
from studkit.grpc_errors import rpc_error_reason
from studkit.mapping.events import event_from_proto

OPERATOR: Final = Principal(Role.OPERATOR, "ops")
RPC: Final = {ActionKind.BRING_IN: ("PostBringIn", pb.PostBringInRequest),
              ActionKind.COMPLETE: ("Complete", pb.CompleteRequest),
              ActionKind.BET: ("Bet", pb.BetRequest),
              ActionKind.RAISE: ("Raise", pb.RaiseRequest),
              ActionKind.CALL: ("Call", pb.CallRequest),
              ActionKind.CHECK: ("Check", pb.CheckRequest),
              ActionKind.FOLD: ("Fold", pb.FoldRequest)}
"""The RPC and request of each kind of action."""
MOVED_ON: Final = frozenset({grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED})
"""Refusals that mean the table moved on before the action arrived (stale, not this seat's
turn any more): the bot looks again. A ``not_owner`` the router could not resolve before its
deadline is an error."""

Choose = Callable[[Sequence[rules.LegalAction], random.Random], rules.LegalAction]


def any_action(actions: Sequence[rules.LegalAction], rng: random.Random) -> rules.LegalAction:
    """Any legal action, uniformly."""
    return rng.choice(list(actions))


def never_fold(actions: Sequence[rules.LegalAction], rng: random.Random) -> rules.LegalAction:
    """Any legal action but a fold (a fold only when nothing else is legal)."""
    keep = [a for a in actions if a.kind != ActionKind.FOLD]
    return rng.choice(keep or list(actions))


@dataclass(frozen=True)
class Acknowledged:
    """A command the table acknowledged: its command id (as the bot sent it) and the
    sequences of the events the reply says it appended."""

    command_id: str
    sequences: tuple[int, ...]


@dataclass
class Tally:
    """What the bots did, across tables."""

    actions: int = 0
    moved_on: int = 0
    """Refusals that only mean the table moved on first."""
    errors: list[str] = field(default_factory=list)
    """Every other failure, as it was."""
    acknowledged: dict[str, list[Acknowledged]] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    """Seconds per acknowledged action (the router's retries included)."""
    undecoded: int = 0
    """Events the bot could not fold (an event the rules do not know)."""

    def error(self, what: str) -> None:
        self.errors.append(what)
        if len(self.errors) <= 10:
            print(f"BOT ERROR {what}", flush=True)


@dataclass
class Bot:
    """Plays every seat of ``table_id`` until ``stop`` (see the module docstring)."""

    router: Router
    table_id: str
    tally: Tally
    rng: random.Random
    choose: Choose = any_action
    think: tuple[float, float] = (0.0, 0.0)
    viewer: Principal = OPERATOR
    idle_s: float = 3.0
    state: rules.TableState = field(default_factory=rules.initial_state)
    seen: int = 0
    """The last sequence folded."""

    async def run(self, stop: asyncio.Event) -> None:
        """Fold the table's events; act whenever a seat is to act at the newest of them."""
        try:
            current = (await self.router.view(self.table_id, self.viewer)).version
        except grpc.aio.AioRpcError as exc:
            self.tally.error(f"{self.table_id} GetTable: {_describe(exc)}")
            return
        acted_at = -1
        watch = self.router.watch(self.table_id, self.viewer, after=self.seen,
                                  idle_s=self.idle_s)
        try:
            async for record in watch:
                if stop.is_set():
                    return
                if record is None:  # nothing for a while: try again at what we have
                    acted_at = -1
                else:
                    self._fold(record)
                    if self.seen < current:
                        continue  # history: the table has moved on from it
                if acted_at != self.seen and await self._act():
                    acted_at = self.seen
        except grpc.aio.AioRpcError as exc:
            self.tally.error(f"{self.table_id} WatchTable: {_describe(exc)}")
        finally:
            await watch.aclose()

    def _fold(self, record: pb.TableEventRecord) -> None:
        self.seen = record.sequence
        try:
            self.state = rules.evolve(self.state, event_from_proto(record.event))
        except Exception:
            self.tally.undecoded += 1

    async def _act(self) -> bool:
        """Act for the seat to act, if any; True if an action was sent."""
        hand = self.state.hand
        if hand is None or hand.phase != Phase.BETTING or not hand.to_act:
            return False
        legal = rules.legal_actions(self.state)
        holder = self.state.seat(hand.to_act)
        if legal is None or not legal.actions or holder is None:
            return False
        sequence = self.seen
        if self.think[1] > 0:
            await asyncio.sleep(self.rng.uniform(*self.think))
        action = self.choose(legal.actions, self.rng)
        method, request_type = RPC[action.kind]
        command_id = uuid.uuid4().hex
        request = request_type(table_id=self.table_id, seat=legal.seat, command_id=command_id,
                               expected_sequence=sequence)
        if action.kind in (ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE):
            request.to = action.to
        began = time.perf_counter()
        try:
            reply = await self.router.call(self.table_id, method, request,
                                           Principal(Role.PLAYER, holder.player_id))
        except grpc.aio.AioRpcError as exc:
            if (exc.code() in MOVED_ON and rpc_error_reason(exc) != "not_owner") \
                    or await self._seat_changed_hands(exc, legal.seat, holder.player_id):
                self.tally.moved_on += 1
            else:
                self.tally.error(f"{self.table_id} {method}: {_describe(exc)}")
            return True
        self.tally.latencies.append(time.perf_counter() - began)
        self.tally.actions += 1
        self.tally.acknowledged.setdefault(self.table_id, []).append(
            Acknowledged(command_id, tuple(e.sequence for e in reply.events)))
        return True


    async def _seat_changed_hands(self, exc: grpc.aio.AioRpcError, seat: int,
                                  player_id: str) -> bool:
        """A ``not_your_seat`` refusal to a bot whose view was behind: the seat's player left
        (a campaign stands players up) before the table heard this action. Right when the
        table's view no longer gives the seat to that player; else the refusal is an error."""
        if rpc_error_reason(exc) != "not_your_seat":
            return False
        view = await self.router.view(self.table_id, OPERATOR)
        return not any(s.seat == seat and s.player_id == player_id for s in view.seats)


def _describe(exc: grpc.aio.AioRpcError) -> str:
    return f"{exc.code().name} {rpc_error_reason(exc) or ''} {exc.details()}".strip()
