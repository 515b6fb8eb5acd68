"""The wallet's gRPC face: a thin servicer (proto -> command -> app -> proto) and
``create_server(settings, deps) -> (server, port)``. Errors are raised, never aborted here:
``errors.WALLET_ERRORS`` maps them in the interceptor."""

from __future__ import annotations

import grpc

from stud.v1 import wallet_pb2 as pb
from stud.v1 import wallet_pb2_grpc as pb_grpc
from studkit.grpc_server import GrpcServer, create_grpc_server, current_principal
from wallet import mapping
from wallet.app import WalletApp
from wallet.bootstrap import WalletDeps
from wallet.config import Settings
from wallet.errors import WALLET_ERRORS
from wallet.metrics import timed_settlement
from wallet.model import AccountKind
from wallet.protection_api import ProtectionMethods, events_to_proto
from wallet.protection_app import ProtectionApp

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["WalletService"].full_name


class WalletServicer(ProtectionMethods, pb_grpc.WalletServiceServicer):
    """One method per RPC, each a translation around one app call (the protection RPCs in
    ``protection_api``)."""

    def __init__(self, app: WalletApp, protection: ProtectionApp) -> None:
        self._app = app
        self._protection = protection

    async def CreateAccount(
        self, request: pb.CreateAccountRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateAccountResponse:
        player_id = mapping.ident(request.player_id, "player_id")
        balance = await self._app.create_account(current_principal(), player_id)
        return pb.CreateAccountResponse(player_id=player_id, balance=balance)

    async def GetBalance(
        self, request: pb.GetBalanceRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetBalanceResponse:
        account = mapping.account_from_proto(request.account)
        balance = await self._app.balance(current_principal(), account)
        return pb.GetBalanceResponse(account=mapping.account_to_proto(account), balance=balance)

    async def GetStatement(
        self, request: pb.GetStatementRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetStatementResponse:
        account = mapping.account_from_proto(request.account)
        page = await self._app.statement(
            current_principal(), account, request.page_size, request.page_token
        )
        reply = mapping.statement_to_proto(page)
        if account.kind is AccountKind.PLAYER and not request.page_token:
            reply.protection.extend(events_to_proto(
                await self._protection.events(current_principal(), account.player_id)))
        return reply

    async def Deposit(
        self, request: pb.DepositRequest, context: grpc.aio.ServicerContext
    ) -> pb.DepositResponse:
        command = mapping.deposit_from_proto(request)
        applied = await self._app.deposit(current_principal(), command)
        return mapping.deposit_to_proto(command, applied)

    async def Withdraw(
        self, request: pb.WithdrawRequest, context: grpc.aio.ServicerContext
    ) -> pb.WithdrawResponse:
        command = mapping.withdraw_from_proto(request)
        applied = await self._app.withdraw(current_principal(), command)
        return mapping.withdraw_to_proto(command, applied)

    async def BuyIn(
        self, request: pb.BuyInRequest, context: grpc.aio.ServicerContext
    ) -> pb.BuyInResponse:
        command = mapping.buy_in_from_proto(request)
        # Issue 34: no buy-in once the player's session has passed its time limit, checked
        # and the session recorded by the buy-in's script (apply.lua), with the money move.
        applied = await self._app.buy_in(current_principal(), command)
        return mapping.buy_in_to_proto(command, applied)

    async def SettleHand(
        self, request: pb.SettleHandRequest, context: grpc.aio.ServicerContext
    ) -> pb.SettleHandResponse:
        command = mapping.settle_hand_from_proto(request)
        with timed_settlement():  # stud_wallet_settlement_seconds
            applied = await self._app.settle_hand(current_principal(), command)
        reply = mapping.settle_hand_to_proto(command, applied)
        # Issue 34: the seats to stand up after the hand, and why: an excluded player's, then
        # one whose session has lasted its limit; read by the settlement's script (issue 35),
        # which records the players' sessions with the money move.
        for stood in (applied.excluded, applied.stood_up.keys() - applied.excluded):
            reply.excluded_seats.extend(r.seat for r in command.results if r.player_id in stood)
        for r in command.results:
            if r.player_id in applied.stood_up:
                reply.excluded_reasons[r.seat] = applied.stood_up[r.player_id]
        return reply

    async def CashOut(
        self, request: pb.CashOutRequest, context: grpc.aio.ServicerContext
    ) -> pb.CashOutResponse:
        command = mapping.cash_out_from_proto(request)
        applied = await self._app.cash_out(current_principal(), command)
        return mapping.cash_out_to_proto(command, applied)

    async def Reconcile(
        self, request: pb.ReconcileRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReconcileResponse:
        table_id = mapping.ident(request.table_id, "table_id")
        reconciliation = await self._app.reconcile(current_principal(), table_id)
        return mapping.reconciliation_to_proto(reconciliation)


    async def EnterTournament(
        self, request: pb.EnterTournamentRequest, context: grpc.aio.ServicerContext
    ) -> pb.EnterTournamentResponse:
        command = mapping.enter_tournament_from_proto(request)
        applied = await self._app.enter_tournament(current_principal(), command)
        return mapping.enter_tournament_to_proto(command, applied)

    async def RefundEntry(
        self, request: pb.RefundEntryRequest, context: grpc.aio.ServicerContext
    ) -> pb.RefundEntryResponse:
        command = mapping.refund_entry_from_proto(request)
        applied = await self._app.refund_entry(current_principal(), command)
        return mapping.refund_entry_to_proto(command, applied)

    async def PayPrize(
        self, request: pb.PayPrizeRequest, context: grpc.aio.ServicerContext
    ) -> pb.PayPrizeResponse:
        command = mapping.pay_prize_from_proto(request)
        applied = await self._app.pay_prize(current_principal(), command)
        return mapping.pay_prize_to_proto(command, applied)

    async def GetPool(
        self, request: pb.GetPoolRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetPoolResponse:
        tournament_id = mapping.ident(request.tournament_id, "tournament_id")
        return mapping.pool_to_proto(await self._app.pool(current_principal(), tournament_id))


def create_server(settings: Settings, deps: WalletDeps) -> tuple[GrpcServer, int]:
    """The wallet server bound to ``settings.addr`` (not started) and its port; calls are
    counted in ``deps.metrics`` (served by ``__main__`` on ``settings.metrics_port``)."""
    server = create_grpc_server(
        settings.addr,
        [(pb_grpc.add_WalletServiceServicer_to_server,
          WalletServicer(deps.app, deps.protection), SERVICE_NAME)],
        verifier=deps.verifier,
        errors=WALLET_ERRORS,
        metrics=deps.metrics,
    )
    return server, server.port
