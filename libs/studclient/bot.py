"""One of the SDK's bots at a table (``stud bots``, the demo, the tournament bots): its play
loop (act at its turn with its strategy, top up when short, come back when sat out, sit out
once the run's hands have started); the tally of what the bots did; a table of a run."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from stud.v1 import table_pb2
from studclient.client import Client
from studclient.errors import (
    FailedPrecondition,
    InsufficientFunds,
    NotYourTurn,
    Stale,
    StudError,
)
from studclient.strategies import Strategy
from studclient.views import hand_over, my_turn


@dataclass
class Tally:
    """What the bots did."""

    actions: int = 0
    refused: int = 0
    """Expected refusals: the table moved on before the action (stale, a time-out)."""
    errors: list[str] = field(default_factory=list)
    """Unexpected errors."""

    def error(self, where: str, exc: BaseException) -> None:
        self.errors.append(f"{where}: {type(exc).__name__}: {exc}")


@dataclass
class Bot:
    """One bot player: its client, seat and strategy."""

    name: str
    client: Client
    table_id: str
    strategy_name: str
    strategy: Strategy
    rng: random.Random
    seat: int = 0
    buy_in: int = 0
    last_seen: str = "no view yet"
    """The last view this bot acted on, in words (printed when a run times out)."""
    fund: Callable[[Bot, int], Awaitable[None]] | None = None
    """Funds this bot's account again (the run's operator deposit) when it busts with its
    account too short to buy in again; None: it stays busted."""

    async def play(self, hands: int, ours: set[str], tally: Tally) -> None:
        """Act at each turn until ``hands`` hands have started, then sit out; return once
        no hand is in progress and every bot of the table sits out."""
        acted_at = -1
        sat_out = False
        sat_in_for = -1
        topped_up_for = (-1, False)
        """The hand a top-up was last asked in, and whether the bot had busted: once more
        after a bust, between hands (a bust ends a heads-up table's hands)."""
        async with self.client.watch(self.table_id) as watch:
            async for view in watch.views():
                self.last_seen = _seen(view)
                mine = [s for s in view.seats if s.player_id in ours]
                if sat_out and hand_over(view) and all(s.sitting_out for s in mine):
                    return
                if view.hands_started >= hands and not sat_out:
                    sat_out = True
                    await self._command(tally, "sit_out", self.client.sit_out(self.table_id))
                    continue
                me = next((s for s in view.seats if s.seat == view.viewer_seat), None)
                big_bet = view.config.big_bet
                busted = me is not None and me.stack == 0 and hand_over(view)
                if (me is not None and not sat_out and me.stack < 5 * big_bet
                        and topped_up_for < (view.hands_started, busted)
                        and me.stack < self.buy_in):
                    # Short: top up (during a hand the table adds it when the hand ends).
                    topped_up_for = (view.hands_started, busted)
                    await self._top_up(tally, self.buy_in - me.stack, busted)
                if (me is not None and not sat_out and me.sitting_out and me.stack > 0
                        and sat_in_for < view.hands_started):
                    # Sat out by the table (time-outs, a bust): come back.
                    sat_in_for = view.hands_started
                    await self._command(tally, "sit_in", self.client.sit_in(self.table_id))
                if view.version > acted_at and my_turn(view):
                    acted_at = view.version
                    action = self.strategy(view, self.rng)
                    if await self._command(tally, "act", self.client.act(
                            self.table_id, action, expected_sequence=view.version)):
                        tally.actions += 1

    async def _top_up(self, tally: Tally, amount: int, busted: bool) -> None:
        """Top up by ``amount``; busted with too little in its account, the bot is funded
        again (:attr:`fund`) and buys in again, so its table keeps dealing."""
        try:
            await self.client.top_up(self.table_id, amount)
        except InsufficientFunds as exc:
            if not busted or self.fund is None:
                self._refused(tally, "top_up", exc)
                return
            await self.fund(self, self.buy_in)
            await self._command(tally, "top_up", self.client.top_up(self.table_id, amount))
        except StudError as exc:
            self._refused(tally, "top_up", exc)

    async def _command(self, tally: Tally, what: str, call: Any) -> bool:
        try:
            await call
            return True
        except StudError as exc:
            self._refused(tally, what, exc)
        return False

    def _refused(self, tally: Tally, what: str, exc: StudError) -> None:
        """Count a refusal the table may give (a lost race, a pending or late top-up, an
        account too short), else record an error of the run."""
        if isinstance(exc, (Stale, NotYourTurn, InsufficientFunds)) or (
                isinstance(exc, FailedPrecondition) and exc.reason in (
                    "topup_pending", "hand_in_progress", "above_buy_in_max")):
            tally.refused += 1
        else:
            tally.error(f"{self.name} {what}", exc)


@dataclass
class TableRun:
    """One table of a bots run: its bots, whether the run opened it, and its hands before."""

    table_id: str
    opened: bool
    hands_before: int
    bots: list[Bot] = field(default_factory=list)


def _seen(view: table_pb2.TableView) -> str:
    me = next((s for s in view.seats if s.seat == view.viewer_seat), None)
    return (f"version {view.version}, hands started {view.hands_started}, "
            f"hand over {hand_over(view)}, my turn {my_turn(view)}, "
            f"stack {me.stack if me else None}, sitting out {me.sitting_out if me else None}")
