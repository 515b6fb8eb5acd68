"""The simulated players of one table: they call the table's use cases (``TableApp``) as the
server would, with their own command ids and the sequence they saw, and misbehave at the
rates drawn from the seed: late (past the clock), twice (the same command id), out of turn,
with a stale sequence, an id reused for another command; leaves, top-ups and sit-outs at any
phase. Every refusal must be a clear status (the table's error table maps it); one that maps
to INTERNAL is a violation."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import grpc

from rules import ActionKind, Phase, TableConfig, legal_actions
from rules.commands import Bet, Call, Check, Complete, Fold, PostBringIn, Raise
from sim.loop import pause
from sim.world import World
from studkit.auth import Principal, Role
from studkit.store import STORE_UNAVAILABLE_ERRORS
from table.errors import TABLE_ERRORS
from table.model import TableSettings
from wallet.model import Deposit
from wallet.protection import LimitKind, Period, SelfExclude, SetLimit, Window

OPERATOR = Principal(Role.OPERATOR, "sim")
CONFIG = TableConfig(seats=5, small_bet=20, big_bet=40, ante=4, bring_in=5)
SETTINGS = TableSettings(action_time_s=10, time_bank_s=10, next_hand_delay_ms=500,
                         sit_out_limit_s=120, rathole_window_s=60, outage_limit_s=30)
BANKROLL = 100_000
PROTECTED_PER_TABLE = 2

_ACTIONS: dict[ActionKind, Callable[[int, int], Any]] = {
    ActionKind.BRING_IN: lambda s, _to: PostBringIn(seat=s),
    ActionKind.COMPLETE: lambda s, to: Complete(seat=s, to=to),
    ActionKind.BET: lambda s, to: Bet(seat=s, to=to),
    ActionKind.RAISE: lambda s, to: Raise(seat=s, to=to),
    ActionKind.CALL: lambda s, _to: Call(seat=s),
    ActionKind.CHECK: lambda s, _to: Check(seat=s),
    ActionKind.FOLD: lambda s, _to: Fold(seat=s),
}


class Table:
    """One table's players and what they did."""

    def __init__(self, world: World, table_id: str, players: int) -> None:
        self.world = world
        self.table_id = table_id
        self.rng: random.Random = world.rngs.players
        self.players = [f"{table_id}-p{i}" for i in range(players)]
        self.ids = 0
        self.refused = 0
        self.internal: list[str] = []
        self.last: dict[str, tuple[str, Any]] = {}
        self.protected: set[str] = set()
        """Players who set limits or took a break (at most two a table: the others keep the
        table dealing, a break lasts a simulated day)."""

    def cid(self) -> str:
        self.ids += 1
        return f"{self.table_id}:{self.ids}"

    async def open(self) -> None:
        for player in self.players:
            await self.world.wallet.create_account(OPERATOR, player)
            await self.world.wallet.deposit(OPERATOR, Deposit(
                player_id=player, amount=BANKROLL, idempotency_key=f"d-{player}"))
        for _attempt in range(30):  # the operator retries an unavailable store, same id,
            proc = self.world.owner.get(self.table_id)  # on whichever process owns it now
            if proc is not None and not proc.dead:
                try:
                    await proc.app.open_table(OPERATOR, self.table_id, "open", CONFIG,
                                              SETTINGS.for_config(CONFIG), "open")
                    return
                except STORE_UNAVAILABLE_ERRORS:
                    pass
            await asyncio.sleep(1.0)
        raise RuntimeError(f"table {self.table_id} could not be opened")

    def _call(self, player: str, name: str, args: tuple[Any, ...], expected: int | None,
              extra: tuple[Any, ...] = (), cid: str | None = None) -> None:
        proc = self.world.owner.get(self.table_id)
        if proc is None or proc.dead:
            return
        principal = Principal(Role.PLAYER, player)
        cid = cid or self.cid()
        fp = f"{name}:{args!r}"
        self.last[player] = (cid, (name, args, expected, extra))

        async def call() -> None:
            try:
                await getattr(proc.app, name)(principal, self.table_id, cid, *args, fp,
                                              expected, *extra)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                mapped = TABLE_ERRORS.map(exc)
                if mapped.code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
                    self.internal.append(f"{name}{args} -> {type(exc).__name__}: {exc}")
                self.refused += 1
        proc.spawn(call())

    def _protect(self, player: str, buy_in_max: int) -> None:
        """A wager or loss limit (set, lowered or raised: a raise waits 24 simulated hours),
        or one time in six a day's break (issue 34); refusals counted like the table's."""
        rng, proc = self.world.rngs.protection, self.world.owner.get(self.table_id)
        if proc is None or proc.dead:
            return
        principal = Principal(Role.PLAYER, player)
        command: SetLimit | SelfExclude
        if rng.random() < 1 / 6:
            command = SelfExclude(player_id=player, period=Period.DAY)
        else:
            command = SetLimit(player_id=player, kind=rng.choice((LimitKind.WAGER,
                                                                   LimitKind.LOSS)),
                               window=rng.choice(list(Window)),
                               amount=rng.randrange(buy_in_max, 6 * buy_in_max))

        async def call() -> None:
            try:
                if isinstance(command, SelfExclude):
                    await self.world.protection.self_exclude(principal, command)
                else:
                    await self.world.protection.set_limit(principal, command)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if TABLE_ERRORS.map(exc).code in (grpc.StatusCode.INTERNAL,
                                                  grpc.StatusCode.UNKNOWN):
                    self.internal.append(f"{command} -> {type(exc).__name__}: {exc}")
                self.refused += 1
        proc.spawn(call())

    async def run(self, until: Callable[[], bool]) -> None:
        while not until():
            await pause(self.rng.uniform(0.1, 1.5))
            self.tick()

    def tick(self) -> None:
        proc = self.world.owner.get(self.table_id)
        actor = proc.actor(self.table_id) if proc is not None else None
        if actor is None:
            return
        rng, room = self.rng, actor.room
        table = room.table
        seated = {s.player_id: n for n, s in enumerate(table.seats, start=1) if s is not None}
        pending = {s.player_id for s in room.sagas.values()}
        hand = table.hand
        version = room.visible
        rate = self.world.probabilities.protection
        for player in self.players:
            if rate and self.world.rngs.protection.random() < rate and (
                    player in self.protected or len(self.protected) < PROTECTED_PER_TABLE):
                self.protected.add(player)
                self._protect(player, room.settings.buy_in_max)
            seat = seated.get(player)
            roll = rng.random()
            if seat is None:
                if player in pending or roll > 0.1:
                    continue
                free = [n for n in range(1, len(table.seats) + 1)
                        if table.seat(n) is None and n not in room.sagas]
                if free:
                    amount = rng.randrange(room.settings.buy_in_min,
                                           room.settings.buy_in_max + 1)
                    self._call(player, "sit_down", (rng.choice(free), amount), version)
                continue
            if roll < 0.004:
                self._call(player, "leave_seat", (seat,), version)
            elif roll < 0.012:
                self._call(player, "add_chips", (seat, rng.randrange(1, 400)), version)
            elif roll < 0.02:
                self._call(player, "sit_out", (seat,), version, (rng.random() < 0.5,))
            elif roll < 0.025 and player in self.last:  # the same command again
                cid, (name, args, expected, extra) = self.last[player]
                self._call(player, name, args, expected, extra, cid=cid)
            elif roll < 0.03:  # an id reused for another command
                cid = self.last.get(player, ("x", None))[0]
                self._call(player, "act", (seat, Check(seat=seat)), version, cid=cid)
            to_act = hand is not None and hand.phase == Phase.BETTING and hand.to_act == seat
            holder = table.seat(seat)
            if holder is not None and holder.sitting_out:
                if rng.random() < 0.2:
                    self._call(player, "sit_out", (seat,), version, (True,))
                continue
            if not to_act:
                if rng.random() < 0.01:  # out of turn
                    self._call(player, "act", (seat, Fold(seat=seat)), version)
                continue
            if rng.random() < 0.03:  # late: the clock runs out first
                continue
            legal = legal_actions(table)
            if legal is None or legal.seat != seat:
                continue
            weights = [3 if a.kind in (ActionKind.CALL, ActionKind.CHECK) else 1
                       for a in legal.actions]
            action = rng.choices(legal.actions, weights)[0]
            command = _ACTIONS[action.kind](seat, action.to)
            expected = version - rng.randrange(1, 3) if rng.random() < 0.02 else version
            self._call(player, "act", (seat, command), expected)
            if rng.random() < 0.02:  # twice, same id
                self._call(player, "act", (seat, command), expected,
                           cid=self.last[player][0])

