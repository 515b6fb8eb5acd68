"""Test support: an in-process wallet server and a typed client that calls it as anyone.

Used by the wallet's tests and by other services' integration tests that need a real wallet.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Final

import grpc

from stud.v1 import wallet_pb2 as pb
from stud.v1 import wallet_pb2_grpc as pb_grpc
from studkit.auth import IssuerSource, Principal, Role, TokenBook
from studkit.grpc_server import GrpcServer
from studtools.devkeys import DevKeys
from wallet.bootstrap import WalletDeps, build_deps
from wallet.config import Settings
from wallet.server import create_server

OPERATOR: Final = Principal(Role.OPERATOR, "ops")
TABLE: Final = Principal(Role.SERVICE, "table")
TOURNAMENT: Final = Principal(Role.SERVICE, "tournament")
AUDITOR: Final = Principal(Role.AUDITOR, "audit")
TIMEOUT_S: Final = 10.0


def player(name: str) -> Principal:
    """The principal of player ``name``."""
    return Principal(Role.PLAYER, name)


@dataclass
class WalletClient:
    """The wallet stub plus tokens: ``client.as_(principal).Deposit(...)``-style helpers."""

    stub: pb_grpc.WalletServiceStub
    keys: IssuerSource
    """Who signs for whom: :class:`~studkit.auth.DevKeys` signs each principal with the key
    that may (the issuer's, or a service's own); a single ``TokenIssuer`` signs everyone
    (forgery tests)."""
    tokens: TokenBook = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = TokenBook(self.keys)

    def metadata(self, who: Principal) -> tuple[tuple[str, str]]:
        """Call metadata carrying a token for ``who``."""
        return self.tokens.metadata(who)

    async def create_account(self, name: str, who: Principal = OPERATOR) -> None:
        """Open ``name``'s account."""
        await self.stub.CreateAccount(
            pb.CreateAccountRequest(player_id=name), metadata=self.metadata(who), timeout=TIMEOUT_S
        )

    async def deposit(
        self, name: str, amount: int, key: str, who: Principal = OPERATOR
    ) -> pb.DepositResponse:
        """Deposit to ``name``'s account."""
        reply: pb.DepositResponse = await self.stub.Deposit(
            pb.DepositRequest(player_id=name, amount=amount, idempotency_key=key),
            metadata=self.metadata(who),
            timeout=TIMEOUT_S,
        )
        return reply

    async def balance(self, account: pb.AccountRef, who: Principal = OPERATOR) -> int:
        """The balance of any account."""
        reply = await self.stub.GetBalance(
            pb.GetBalanceRequest(account=account), metadata=self.metadata(who), timeout=TIMEOUT_S
        )
        return int(reply.balance)

    async def player_balance(self, name: str) -> int:
        """The balance of ``name``'s account."""
        return await self.balance(pb.AccountRef(player_id=name))

    async def buy_in(
        self, name: str, table: str, seat: int, amount: int, key: str, who: Principal = TABLE,
        *, sit_down: bool = False,
    ) -> pb.BuyInResponse:
        """Buy ``name`` in at ``table``/``seat`` (``sit_down``: a sit-down's buy-in, which
        only a free seat takes)."""
        reply: pb.BuyInResponse = await self.stub.BuyIn(
            pb.BuyInRequest(
                player_id=name, table_id=table, seat=seat, amount=amount, idempotency_key=key,
                sit_down=sit_down,
            ),
            metadata=self.metadata(who),
            timeout=TIMEOUT_S,
        )
        return reply

    async def settle(
        self, request: pb.SettleHandRequest, who: Principal = TABLE
    ) -> pb.SettleHandResponse:
        """Settle a hand."""
        reply: pb.SettleHandResponse = await self.stub.SettleHand(
            request, metadata=self.metadata(who), timeout=TIMEOUT_S
        )
        return reply

    async def cash_out(
        self, name: str, table: str, seat: int, key: str, who: Principal = TABLE
    ) -> pb.CashOutResponse:
        """Cash ``name`` out of ``table``/``seat``."""
        reply: pb.CashOutResponse = await self.stub.CashOut(
            pb.CashOutRequest(table_id=table, seat=seat, player_id=name, idempotency_key=key),
            metadata=self.metadata(who),
            timeout=TIMEOUT_S,
        )
        return reply

    async def escrows(self, table: str, who: Principal = TABLE) -> dict[int, int]:
        """Seat -> escrow balance at ``table`` (Reconcile)."""
        reply = await self.stub.Reconcile(
            pb.ReconcileRequest(table_id=table), metadata=self.metadata(who), timeout=TIMEOUT_S
        )
        return {s.seat: s.balance for s in reply.seats}

    async def enter(self, name: str, tournament: str, entry: str, buy_in: int, fee: int,
                    key: str, who: Principal = TOURNAMENT) -> pb.EnterTournamentResponse:
        """Enter ``name`` into ``tournament`` (EnterTournament)."""
        reply: pb.EnterTournamentResponse = await self.stub.EnterTournament(
            pb.EnterTournamentRequest(player_id=name, tournament_id=tournament, entry_id=entry,
                                      buy_in=buy_in, fee=fee, idempotency_key=key),
            metadata=self.metadata(who), timeout=TIMEOUT_S)
        return reply

    async def refund(self, name: str, tournament: str, entry: str, key: str,
                     who: Principal = TOURNAMENT) -> pb.RefundEntryResponse:
        """Refund one entry (RefundEntry)."""
        reply: pb.RefundEntryResponse = await self.stub.RefundEntry(
            pb.RefundEntryRequest(player_id=name, tournament_id=tournament, entry_id=entry,
                                  idempotency_key=key),
            metadata=self.metadata(who), timeout=TIMEOUT_S)
        return reply

    async def prize(self, name: str, tournament: str, amount: int, place: int, key: str,
                    who: Principal = TOURNAMENT) -> pb.PayPrizeResponse:
        """Pay ``name`` a prize from ``tournament``'s pool (PayPrize)."""
        reply: pb.PayPrizeResponse = await self.stub.PayPrize(
            pb.PayPrizeRequest(player_id=name, tournament_id=tournament, amount=amount,
                               place=place, idempotency_key=key),
            metadata=self.metadata(who), timeout=TIMEOUT_S)
        return reply

    async def pool(self, tournament: str, who: Principal = TOURNAMENT) -> pb.GetPoolResponse:
        """A tournament's pool (GetPool)."""
        reply: pb.GetPoolResponse = await self.stub.GetPool(
            pb.GetPoolRequest(tournament_id=tournament), metadata=self.metadata(who),
            timeout=TIMEOUT_S)
        return reply

    async def paid_out(self, table: str, timeout: float = 30.0) -> dict[int, int]:
        """The escrows at ``table`` once every one is paid out, or what is left after
        ``timeout``: a seat leaves the table's view when its cash-out is requested, and the
        wallet pays it at the saga's next step."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (left := {k: v for k, v in (await self.escrows(table)).items() if v}) \
                and loop.time() < deadline:
            await asyncio.sleep(0.05)
        return left


@dataclass
class RunningWallet:
    """An in-process wallet: its dependencies, port and a client on a channel to it."""

    settings: Settings
    deps: WalletDeps
    port: int
    client: WalletClient
    server: GrpcServer | None = None
    """The server itself, so a test can stop it (an outage) before the block ends."""


@contextlib.asynccontextmanager
async def running_wallet(settings: Settings,
                         keys: DevKeys) -> AsyncIterator[RunningWallet]:
    """Start a wallet for ``settings`` (use ``addr="127.0.0.1:0"``; ``settings.auth_keys``
    should trust ``keys``), stop it on exit; its client signs with ``keys``."""
    deps = build_deps(settings)
    server, port = create_server(settings, deps)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.WalletServiceStub(channel)  # type: ignore[no-untyped-call]
            client = WalletClient(stub, keys)
            yield RunningWallet(settings=settings, deps=deps, port=port, client=client,
                                server=server)
    finally:
        await server.stop(None)
        await deps.close()
