"""Refusals: each bad request gets the right status code and reason, and changes nothing in
Redis (every wallet key compared before and after)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from stud.v1 import wallet_pb2 as pb
from studkit.auth import Principal, Role, bearer_metadata
from studkit.grpc_server import rpc_error_reason
from studtest.wallet import AUDITOR, OPERATOR, TABLE, RunningWallet, player
from studtools.devkeys import DevKeys
from wallet.model import MAX_AMOUNT

pytestmark = pytest.mark.integration

C = grpc.StatusCode
ALICE, BOB = player("alice"), player("bob")
DEALER = Principal(Role.SERVICE, "dealer")
NOBODY = None
EXPIRED = "expired"


def buy_in(**overrides: Any) -> pb.BuyInRequest:
    fields = {"player_id": "alice", "table_id": "t1", "seat": 1, "amount": 100,
              "idempotency_key": "b-new", **overrides}
    return pb.BuyInRequest(**fields)


def deposit(**overrides: Any) -> pb.DepositRequest:
    return pb.DepositRequest(**{"player_id": "alice", "amount": 100,
                                "idempotency_key": "d-new", **overrides})


def settle(
    seats: list[tuple[int, str, int, int]] | None = None, **overrides: Any
) -> pb.SettleHandRequest:
    seats = [(1, "alice", 100, 200), (2, "bob", 100, 0)] if seats is None else seats
    fields = {
        "table_id": "t1",
        "hand_id": "h-new",
        "seats": [pb.SettlementSeat(seat=s, player_id=p, amount_in=i, amount_won=w)
                  for s, p, i, w in seats],
        "ended_on_street": pb.SettleHandRequest.STREET_SEVENTH,
        **overrides,
    }
    return pb.SettleHandRequest(**fields)


def balance_of(name: str) -> pb.GetBalanceRequest:
    return pb.GetBalanceRequest(account=pb.AccountRef(player_id=name))


@dataclass(frozen=True)
class Case:
    who: Principal | str | None
    method: str
    request: Any
    code: grpc.StatusCode
    reason: str


CASES: dict[str, Case] = {
    # amounts
    "deposit_zero": Case(OPERATOR, "Deposit", deposit(amount=0), C.INVALID_ARGUMENT,
                         "non_positive_amount"),
    "deposit_negative": Case(OPERATOR, "Deposit", deposit(amount=-5), C.INVALID_ARGUMENT,
                             "non_positive_amount"),
    "withdraw_too_large": Case(OPERATOR, "Withdraw",
                               pb.WithdrawRequest(player_id="alice", amount=MAX_AMOUNT + 1,
                                                  idempotency_key="w"),
                               C.INVALID_ARGUMENT, "amount_too_large"),
    "buy_in_zero": Case(TABLE, "BuyIn", buy_in(amount=0), C.INVALID_ARGUMENT,
                        "non_positive_amount"),
    "buy_in_negative": Case(TABLE, "BuyIn", buy_in(amount=-100), C.INVALID_ARGUMENT,
                            "non_positive_amount"),
    "buy_in_short": Case(TABLE, "BuyIn", buy_in(amount=501), C.FAILED_PRECONDITION,
                         "insufficient_funds"),
    "withdraw_short": Case(OPERATOR, "Withdraw",
                           pb.WithdrawRequest(player_id="alice", amount=501,
                                              idempotency_key="w"),
                           C.FAILED_PRECONDITION, "insufficient_funds"),
    # malformed fields
    "buy_in_seat_out_of_range": Case(TABLE, "BuyIn", buy_in(seat=9), C.INVALID_ARGUMENT,
                                     "seat_out_of_range"),
    "buy_in_seat_zero": Case(TABLE, "BuyIn", buy_in(seat=0), C.INVALID_ARGUMENT,
                             "seat_out_of_range"),
    "buy_in_bad_table_id": Case(TABLE, "BuyIn", buy_in(table_id="t 1"), C.INVALID_ARGUMENT,
                                "malformed_id"),
    "buy_in_without_key": Case(TABLE, "BuyIn", buy_in(idempotency_key=""), C.INVALID_ARGUMENT,
                               "malformed_id"),
    "balance_without_account": Case(OPERATOR, "GetBalance", pb.GetBalanceRequest(),
                                    C.INVALID_ARGUMENT, "bad_request"),
    "statement_bad_page_token": Case(
        ALICE, "GetStatement",
        pb.GetStatementRequest(account=pb.AccountRef(player_id="alice"), page_token="zz"),
        C.INVALID_ARGUMENT, "bad_request"),
    # unknown accounts
    "deposit_unknown_account": Case(OPERATOR, "Deposit", deposit(player_id="zed"),
                                    C.NOT_FOUND, "unknown_account"),
    "buy_in_unknown_account": Case(TABLE, "BuyIn", buy_in(player_id="zed"), C.NOT_FOUND,
                                   "unknown_account"),
    "balance_unknown_account": Case(OPERATOR, "GetBalance", balance_of("zed"), C.NOT_FOUND,
                                    "unknown_account"),
    # settlements
    "settle_unbalanced": Case(TABLE, "SettleHand",
                              settle([(1, "alice", 100, 150), (2, "bob", 100, 0)]),
                              C.INVALID_ARGUMENT, "unbalanced"),
    "settle_negative_in": Case(TABLE, "SettleHand",
                               settle([(1, "alice", -100, 0), (2, "bob", 100, 0)]),
                               C.INVALID_ARGUMENT, "negative_amount"),
    "settle_duplicate_seat": Case(TABLE, "SettleHand",
                                  settle([(1, "alice", 100, 200), (1, "alice", 100, 0)]),
                                  C.INVALID_ARGUMENT, "duplicate_seat"),
    "settle_no_seats": Case(TABLE, "SettleHand", settle([]), C.INVALID_ARGUMENT, "no_seats"),
    "settle_no_street": Case(TABLE, "SettleHand",
                             settle(ended_on_street=pb.SettleHandRequest.STREET_UNSPECIFIED),
                             C.INVALID_ARGUMENT, "bad_request"),
    "settle_uncapped_rake": Case(TABLE, "SettleHand",
                                 settle(rake_policy=pb.RakePolicy(percent_bps=500)),
                                 C.INVALID_ARGUMENT, "invalid_rake_policy"),
    "settle_escrow_short": Case(TABLE, "SettleHand",
                                settle([(1, "alice", 600, 1200), (2, "bob", 600, 0)]),
                                C.FAILED_PRECONDITION, "insufficient_funds"),
    "settle_wrong_player": Case(TABLE, "SettleHand",
                                settle([(1, "bob", 100, 200), (2, "alice", 100, 0)]),
                                C.FAILED_PRECONDITION, "seat_not_held"),
    "settle_empty_seat": Case(TABLE, "SettleHand",
                              settle([(1, "alice", 100, 200), (5, "bob", 100, 0)]),
                              C.FAILED_PRECONDITION, "seat_not_held"),
    "settle_known_hand_other_payload": Case(
        TABLE, "SettleHand", settle([(1, "alice", 100, 0), (2, "bob", 100, 200)], hand_id="h0"),
        C.ALREADY_EXISTS, "idempotency_key_reused"),
    "cash_out_wrong_player": Case(TABLE, "CashOut",
                                  pb.CashOutRequest(table_id="t1", seat=1, player_id="bob",
                                                    idempotency_key="c"),
                                  C.FAILED_PRECONDITION, "seat_not_held"),
    # who may do what
    "player_moves_another_players_money": Case(ALICE, "BuyIn", buy_in(player_id="bob"),
                                               C.PERMISSION_DENIED, "permission_denied"),
    "player_buys_in_for_themself": Case(ALICE, "BuyIn", buy_in(player_id="alice"),
                                        C.PERMISSION_DENIED, "permission_denied"),
    "dealer_buys_in": Case(DEALER, "BuyIn", buy_in(), C.PERMISSION_DENIED,
                           "permission_denied"),
    "dealer_settles": Case(DEALER, "SettleHand", settle(), C.PERMISSION_DENIED,
                           "permission_denied"),
    "dealer_cashes_out": Case(DEALER, "CashOut",
                              pb.CashOutRequest(table_id="t1", seat=1, player_id="alice",
                                                idempotency_key="c"),
                              C.PERMISSION_DENIED, "permission_denied"),
    "player_deposits": Case(ALICE, "Deposit", deposit(), C.PERMISSION_DENIED,
                            "permission_denied"),
    "player_withdraws": Case(ALICE, "Withdraw",
                             pb.WithdrawRequest(player_id="alice", amount=1,
                                                idempotency_key="w"),
                             C.PERMISSION_DENIED, "permission_denied"),
    "player_settles": Case(ALICE, "SettleHand", settle(), C.PERMISSION_DENIED,
                           "permission_denied"),
    "player_cashes_out": Case(ALICE, "CashOut",
                              pb.CashOutRequest(table_id="t1", seat=1, player_id="alice",
                                                idempotency_key="c"),
                              C.PERMISSION_DENIED, "permission_denied"),
    "player_reads_another_balance": Case(ALICE, "GetBalance", balance_of("bob"),
                                         C.PERMISSION_DENIED, "permission_denied"),
    "player_opens_another_account": Case(ALICE, "CreateAccount",
                                         pb.CreateAccountRequest(player_id="mallory"),
                                         C.PERMISSION_DENIED, "permission_denied"),
    "player_reconciles": Case(ALICE, "Reconcile", pb.ReconcileRequest(table_id="t1"),
                              C.PERMISSION_DENIED, "permission_denied"),
    "auditor_deposits": Case(AUDITOR, "Deposit", deposit(), C.PERMISSION_DENIED,
                             "permission_denied"),
    "table_deposits": Case(TABLE, "Deposit", deposit(), C.PERMISSION_DENIED,
                           "permission_denied"),
    "no_token": Case(NOBODY, "Deposit", deposit(), C.UNAUTHENTICATED, "missing_token"),
    "expired_token": Case(EXPIRED, "Deposit", deposit(), C.UNAUTHENTICATED, "token_expired"),
}


async def arrange(wallet: RunningWallet) -> None:
    """alice and bob hold 500 each in their accounts and 500 at t1 seats 1 and 2; hand h0
    was settled."""
    client = wallet.client
    for name, seat in (("alice", 1), ("bob", 2)):
        await client.create_account(name)
        await client.deposit(name, 1000, f"d-{name}")
        await client.buy_in(name, "t1", seat, 500, f"b-{name}")
    await client.settle(settle([(1, "alice", 100, 100), (2, "bob", 100, 100)], hand_id="h0"))


def metadata(wallet: RunningWallet, who: Principal | str | None) -> tuple[tuple[str, str], ...]:
    if who is None:
        return ()
    if who == EXPIRED:
        keys = wallet.client.keys
        assert isinstance(keys, DevKeys)
        issuer = keys.issuer(clock=lambda: 1_000_000.0)
        return bearer_metadata(issuer.issue(OPERATOR, ttl_seconds=60))
    assert isinstance(who, Principal)
    return wallet.client.metadata(who)


@pytest.mark.parametrize("name", list(CASES))
async def test_refusal_has_its_status_and_changes_nothing(
    wallet: RunningWallet, snapshot: Any, name: str
) -> None:
    """Each bad request is refused with its code and reason, and no wallet key changes."""
    case = CASES[name]
    await arrange(wallet)
    before = await snapshot()
    rpc = getattr(wallet.client.stub, case.method)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await rpc(case.request, metadata=metadata(wallet, case.who), timeout=10)
    assert info.value.code() is case.code, info.value.details()
    assert rpc_error_reason(info.value) == case.reason
    assert await snapshot() == before


async def test_balance_beyond_the_exact_range_is_refused(
    wallet: RunningWallet, snapshot: Any
) -> None:
    """A deposit that would take a balance past 2^53 - 1 is FAILED_PRECONDITION, no change."""
    client = wallet.client
    await client.create_account("whale")
    await client.deposit("whale", MAX_AMOUNT, "d1")
    before = await snapshot()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await client.deposit("whale", 1, "d2")
    assert info.value.code() is C.FAILED_PRECONDITION
    assert rpc_error_reason(info.value) == "balance_limit"
    assert await snapshot() == before
