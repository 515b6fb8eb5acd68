"""The simulated network between a table process and the dealer and the wallet: a channel
the table's own clients (``table.clients``) build their stubs on, whose calls reach the
dealer's and the wallet's app objects (proto -> command -> app -> proto, as their servicers
translate) after a delay, and fail the way a network does: lost before they arrive, lost
after they were applied, delayed past the caller's deadline (then still applied), delivered
twice, answered twice. A refusal reaches the caller as the status and ``stud-reason`` the
services' error tables give it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import grpc

from dealer import mapping as dmap
from dealer.app import DealerApp
from dealer.errors import DEALER_ERRORS
from sim.loop import pause
from stud.v1 import dealer_pb2 as dpb
from stud.v1 import wallet_pb2 as wpb
from studkit.auth import Principal, Role
from studkit.grpc_errors import REASON_KEY, ErrorTable
from wallet import mapping as wmap
from wallet.app import WalletApp
from wallet.errors import WALLET_ERRORS
from wallet.protection_app import ProtectionApp

TABLE = Principal(Role.SERVICE, "table")
Handler = Callable[[Any], Awaitable[Any]]


@dataclass
class NetFaults:
    """Probabilities per call (documented in docs/reliability.md)."""

    lose_request: float = 0.0
    lose_reply: float = 0.0
    delay: float = 0.0
    duplicate: float = 0.0
    answer_twice: float = 0.0
    latency_s: float = 0.001
    delay_s: float = 4.0


class Counter:
    """Faults injected, by name."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.internal: list[str] = []
        """Calls a service answered INTERNAL (a bug: every refusal has a clear status)."""

    def add(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _error(code: grpc.StatusCode, reason: str, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(),
                                grpc.aio.Metadata((REASON_KEY, reason)), details)


def excluded_seats(command: Any, applied: Any) -> list[int]:
    """The seats a settlement's reply names excluded, as the wallet's server does (issue 34;
    the settlement's script reads it, issue 35): the table stands them up after the hand.
    ``tests/sim/test_exclusion_sim.py`` empties it to see ``sim.checks.exclusions`` fail."""
    return [x.seat for x in command.results if x.player_id in applied.excluded]


def wallet_handlers(app: WalletApp, protection: ProtectionApp | None = None
                    ) -> dict[str, Handler]:
    async def buy_in(r: wpb.BuyInRequest) -> Any:
        command = wmap.buy_in_from_proto(r)
        return wmap.buy_in_to_proto(command, await app.buy_in(TABLE, command))

    async def settle(r: wpb.SettleHandRequest) -> Any:
        command = wmap.settle_hand_from_proto(r)
        applied = await app.settle_hand(TABLE, command)
        reply = wmap.settle_hand_to_proto(command, applied)
        reply.excluded_seats.extend(excluded_seats(command, applied))
        return reply

    async def cash_out(r: wpb.CashOutRequest) -> Any:
        command = wmap.cash_out_from_proto(r)
        return wmap.cash_out_to_proto(command, await app.cash_out(TABLE, command))

    async def reconcile(r: wpb.ReconcileRequest) -> Any:
        table_id = wmap.ident(r.table_id, "table_id")
        return wmap.reconciliation_to_proto(await app.reconcile(TABLE, table_id))

    async def balance(r: wpb.GetBalanceRequest) -> Any:
        account = wmap.account_from_proto(r.account)
        return wpb.GetBalanceResponse(account=wmap.account_to_proto(account),
                                      balance=await app.balance(TABLE, account))

    return {"BuyIn": buy_in, "SettleHand": settle, "CashOut": cash_out,
            "Reconcile": reconcile, "GetBalance": balance}


def dealer_handlers(app: DealerApp) -> dict[str, Handler]:
    async def start(r: dpb.StartHandRequest) -> Any:
        started = await app.start_hand(TABLE, dmap.table_id(r.table_id),
                                       dmap.hand_number(r.hand_number))
        return dpb.StartHandResponse(commitment=started.commitment,
                                     card_commitment=started.card_commitment)

    async def deal(r: dpb.DealRequest) -> Any:
        plan = dmap.plan_from_proto(r)
        got = await app.deal(TABLE, dmap.table_id(r.table_id),
                             dmap.hand_number(r.hand_number), plan)
        return dmap.deal_to_proto(got)

    async def reveal(r: dpb.RevealRequest) -> Any:
        hands = await app.reveal(TABLE, dmap.table_id(r.table_id),
                                 dmap.hand_number(r.hand_number), dmap.seats(r.seats))
        return dmap.reveal_to_proto(hands)

    return {"StartHand": start, "Deal": deal, "Reveal": reveal}


class SimChannel:
    """A ``grpc.aio.Channel`` for the generated stubs: ``unary_unary`` only."""

    def __init__(self, name: str, handlers: dict[str, Handler], errors: ErrorTable,
                 faults: NetFaults, rng: random.Random, counter: Counter,
                 alive: Callable[[], bool]) -> None:
        self.name = name
        self._handlers = handlers
        self._errors = errors
        self.faults = faults
        self._rng = rng
        self._counter = counter
        self._alive = alive
        self.paused = asyncio.Event()
        self.paused.set()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.on_return: Callable[[str], None] | None = None
        """Told of every call answered, before the caller gets the answer (the aimed
        crashes)."""

    def unary_unary(self, path: str, *_args: Any, **_kwargs: Any) -> Callable[..., Any]:
        method = path.rsplit("/", 1)[-1]

        async def call(request: Any, metadata: Any = None, timeout: float | None = None
                       ) -> Any:
            return await self._call(method, request, timeout)
        return call

    def unary_stream(self, path: str, *_args: Any, **_kwargs: Any) -> Callable[..., Any]:
        def refuse(*_a: Any, **_k: Any) -> Any:
            raise NotImplementedError(f"{path}: no stream is simulated")
        return refuse

    async def _serve(self, method: str, request: Any) -> tuple[Any, BaseException | None]:
        try:
            return await self._handlers[method](request), None
        except Exception as exc:  # a refusal, mapped as the service's interceptor maps it
            return None, exc

    def _spawn(self, method: str, request: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(self._serve(method, request))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def _call(self, method: str, request: Any, timeout: float | None) -> Any:
        f, rng, count = self.faults, self._rng, self._counter.add
        if not self.paused.is_set():
            await self.paused.wait()
        if not self._alive():
            raise _error(grpc.StatusCode.UNAVAILABLE, "", "the caller is dead")
        roll = rng.random()
        delay = f.latency_s * (1 + rng.random())
        if roll < f.lose_request:
            count(f"{self.name}_request_lost")
            await asyncio.sleep(timeout or 1.0)
            raise _error(grpc.StatusCode.DEADLINE_EXCEEDED, "", "simulated: request lost")
        roll -= f.lose_request
        if roll < f.delay:
            count(f"{self.name}_delayed")
            delay += f.delay_s * rng.random()
        await pause(delay)
        task = self._spawn(method, request)
        roll -= f.delay
        if roll < f.duplicate:
            count(f"{self.name}_duplicated")
            self._spawn(method, request)
        elif roll - f.duplicate < f.answer_twice:
            count(f"{self.name}_answered_twice")
            await asyncio.shield(task)
            task = self._spawn(method, request)
        if not await _within(task, None if timeout is None else timeout - delay):
            raise _error(grpc.StatusCode.DEADLINE_EXCEEDED, "", "simulated: too late")
        reply, exc = task.result()
        await pause(f.latency_s)
        if rng.random() < f.lose_reply:
            count(f"{self.name}_reply_lost")
            raise _error(grpc.StatusCode.UNAVAILABLE, "", "simulated: reply lost")
        if not self._alive():
            raise _error(grpc.StatusCode.UNAVAILABLE, "", "the caller is dead")
        if self.on_return is not None:  # an aimed crash may kill the caller here
            self.on_return(f"{self.name}.{method}")
            if not self._alive():
                raise _error(grpc.StatusCode.UNAVAILABLE, "", "the caller is dead")
        if exc is not None:
            mapped = self._errors.map(exc)
            if mapped.code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
                self._counter.internal.append(
                    f"{self.name} {method}: {type(exc).__name__}: {exc}")
            raise _error(mapped.code, mapped.reason, mapped.message)
        return reply


async def _within(task: asyncio.Task[Any], seconds: float | None) -> bool:
    """Wait for ``task`` at most ``seconds`` (None: for ever); whether it is done. The task
    runs on when the wait ends or the waiter is cancelled: ``asyncio.shield`` under
    ``asyncio.timeout``, with one future and one timer where those take two futures, a
    timeout's context and its timer (a call waits so once per call)."""
    if task.done():
        return True
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_done: object) -> None:
        if not waiter.done():
            waiter.set_result(None)
    task.add_done_callback(wake)
    timer = None if seconds is None else loop.call_later(seconds, wake, None)
    try:
        await waiter
    finally:
        task.remove_done_callback(wake)
        if timer is not None:
            timer.cancel()
    return task.done()


def as_channel(channel: SimChannel) -> grpc.aio.Channel:
    """The simulated channel where the clients expect a grpc one (the stubs use only
    ``unary_unary`` and ``unary_stream``)."""
    return cast(grpc.aio.Channel, channel)


def channels(wallet: WalletApp, dealer: DealerApp, faults: NetFaults, rng: random.Random,
             counter: Counter, alive: Callable[[], bool],
             protection: ProtectionApp | None = None) -> tuple[SimChannel, SimChannel]:
    """A process's channels to the dealer and the wallet."""
    return (SimChannel("dealer", dealer_handlers(dealer), DEALER_ERRORS, faults, rng, counter,
                       alive),
            SimChannel("wallet", wallet_handlers(wallet, protection), WALLET_ERRORS, faults,
                       rng, counter, alive))
