"""Refusals of the tournament RPCs: callers who may not (players, the table service, the
dealer, operators), amounts that are never valid, odd ids, entries that were never made or
are another player's, prizes beyond the pool or for a player who never entered, other terms,
undecodable bodies. Each gets its status and reason, is counted, and changes nothing in Redis
(every wallet key compared before and after)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from stud.v1 import wallet_pb2 as pb
from studkit.auth import Principal, Role
from studkit.grpc_server import rpc_error_reason
from studtest.wallet import AUDITOR, OPERATOR, TABLE, TOURNAMENT, RunningWallet, player
from wallet.model import MAX_AMOUNT

pytestmark = pytest.mark.integration

C = grpc.StatusCode
ALICE = player("alice")
DEALER = Principal(Role.SERVICE, "dealer")
UNDECODABLE = b"\xff\xff\xff\xff"  # field 31, wire type 7: no such wire type


def enter(**overrides: Any) -> pb.EnterTournamentRequest:
    return pb.EnterTournamentRequest(**{
        "player_id": "alice", "tournament_id": "t1", "entry_id": "e-new", "buy_in": 100,
        "fee": 10, "idempotency_key": "k-new", **overrides})


def refund(**overrides: Any) -> pb.RefundEntryRequest:
    return pb.RefundEntryRequest(**{
        "player_id": "alice", "tournament_id": "t1", "entry_id": "e-alice",
        "idempotency_key": "r-new", **overrides})


def prize(**overrides: Any) -> pb.PayPrizeRequest:
    return pb.PayPrizeRequest(**{
        "player_id": "alice", "tournament_id": "t1", "amount": 50, "place": 1,
        "idempotency_key": "p-new", **overrides})


@dataclass(frozen=True)
class Case:
    who: Principal
    method: str
    request: Any
    code: grpc.StatusCode
    reason: str


DENIED = (C.PERMISSION_DENIED, "permission_denied")
CASES: dict[str, Case] = {
    # who may do what: the tournament service alone moves tournament money
    **{f"{who.subject}_{method}": Case(who, method, request, *DENIED)
       for who in (ALICE, TABLE, DEALER, OPERATOR, AUDITOR)
       for method, request in (("EnterTournament", enter()), ("RefundEntry", refund()),
                               ("PayPrize", prize()))},
    "player_reads_a_pool": Case(ALICE, "GetPool", pb.GetPoolRequest(tournament_id="t1"),
                                *DENIED),
    "table_reads_a_pool": Case(TABLE, "GetPool", pb.GetPoolRequest(tournament_id="t1"),
                               *DENIED),
    # amounts
    "enter_zero_buy_in": Case(TOURNAMENT, "EnterTournament", enter(buy_in=0),
                              C.INVALID_ARGUMENT, "non_positive_amount"),
    "enter_negative_buy_in": Case(TOURNAMENT, "EnterTournament", enter(buy_in=-100),
                                  C.INVALID_ARGUMENT, "non_positive_amount"),
    "enter_negative_fee": Case(TOURNAMENT, "EnterTournament", enter(fee=-1),
                               C.INVALID_ARGUMENT, "negative_amount"),
    "enter_huge_buy_in": Case(TOURNAMENT, "EnterTournament", enter(buy_in=MAX_AMOUNT + 1),
                              C.INVALID_ARGUMENT, "amount_too_large"),
    "enter_huge_total": Case(TOURNAMENT, "EnterTournament",
                             enter(buy_in=MAX_AMOUNT, fee=MAX_AMOUNT),
                             C.INVALID_ARGUMENT, "amount_too_large"),
    "enter_other_terms": Case(TOURNAMENT, "EnterTournament", enter(buy_in=90),
                              C.FAILED_PRECONDITION, "terms_mismatch"),
    "enter_without_the_funds": Case(TOURNAMENT, "EnterTournament",
                                    enter(player_id="bob", entry_id="e-poor"),
                                    C.FAILED_PRECONDITION, "insufficient_funds"),
    "enter_an_entry_id_taken": Case(TOURNAMENT, "EnterTournament", enter(entry_id="e-alice"),
                                    C.FAILED_PRECONDITION, "entry_exists"),
    "enter_unknown_account": Case(TOURNAMENT, "EnterTournament", enter(player_id="zed"),
                                  C.NOT_FOUND, "unknown_account"),
    "prize_zero": Case(TOURNAMENT, "PayPrize", prize(amount=0), C.INVALID_ARGUMENT,
                       "non_positive_amount"),
    "prize_negative": Case(TOURNAMENT, "PayPrize", prize(amount=-50), C.INVALID_ARGUMENT,
                           "non_positive_amount"),
    "prize_huge": Case(TOURNAMENT, "PayPrize", prize(amount=MAX_AMOUNT + 1),
                       C.INVALID_ARGUMENT, "amount_too_large"),
    "prize_beyond_the_pool": Case(TOURNAMENT, "PayPrize", prize(amount=201),
                                  C.FAILED_PRECONDITION, "insufficient_funds"),
    "prize_from_an_empty_pool": Case(TOURNAMENT, "PayPrize", prize(tournament_id="t2"),
                                     C.FAILED_PRECONDITION, "not_entered"),
    "prize_for_a_player_who_never_entered": Case(TOURNAMENT, "PayPrize",
                                                 prize(player_id="carol"),
                                                 C.FAILED_PRECONDITION, "not_entered"),
    "prize_for_a_refunded_player": Case(TOURNAMENT, "PayPrize", prize(player_id="dave"),
                                        C.FAILED_PRECONDITION, "not_entered"),
    "prize_place_past_the_last": Case(TOURNAMENT, "PayPrize", prize(place=100_001),
                                      C.INVALID_ARGUMENT, "place_out_of_range"),
    # refunds
    "refund_an_entry_never_made": Case(TOURNAMENT, "RefundEntry", refund(entry_id="e-none"),
                                       C.NOT_FOUND, "unknown_entry"),
    "refund_in_a_tournament_never_entered": Case(TOURNAMENT, "RefundEntry",
                                                 refund(tournament_id="t2"),
                                                 C.NOT_FOUND, "unknown_entry"),
    "refund_another_players_entry": Case(TOURNAMENT, "RefundEntry", refund(player_id="bob"),
                                         C.FAILED_PRECONDITION, "entry_of_another_player"),
    "refund_twice": Case(TOURNAMENT, "RefundEntry", refund(player_id="dave",
                                                           entry_id="e-dave"),
                         C.FAILED_PRECONDITION, "entry_refunded"),
    "refund_a_used_key_for_another_entry": Case(TOURNAMENT, "RefundEntry",
                                                refund(idempotency_key="r-dave"),
                                                C.ALREADY_EXISTS, "idempotency_key_reused"),
    # odd ids
    "enter_tournament_id_with_a_space": Case(TOURNAMENT, "EnterTournament",
                                             enter(tournament_id="t 1"),
                                             C.INVALID_ARGUMENT, "malformed_id"),
    "enter_tournament_id_with_a_newline": Case(TOURNAMENT, "EnterTournament",
                                               enter(tournament_id="t1\n"),
                                               C.INVALID_ARGUMENT, "malformed_id"),
    "enter_tournament_id_with_a_colon": Case(TOURNAMENT, "EnterTournament",
                                             enter(tournament_id="t1:entry"),
                                             C.INVALID_ARGUMENT, "malformed_id"),
    "enter_entry_id_too_long": Case(TOURNAMENT, "EnterTournament", enter(entry_id="e" * 65),
                                    C.INVALID_ARGUMENT, "malformed_id"),
    "enter_without_entry_id": Case(TOURNAMENT, "EnterTournament", enter(entry_id=""),
                                   C.INVALID_ARGUMENT, "malformed_id"),
    "enter_without_key": Case(TOURNAMENT, "EnterTournament", enter(idempotency_key=""),
                              C.INVALID_ARGUMENT, "malformed_id"),
    "enter_two_different_keys": Case(TOURNAMENT, "EnterTournament",
                                     enter(command_id="other"),
                                     C.INVALID_ARGUMENT, "conflicting_keys"),
    "refund_odd_entry_id": Case(TOURNAMENT, "RefundEntry", refund(entry_id="e/1"),
                                C.INVALID_ARGUMENT, "malformed_id"),
    "prize_odd_player_id": Case(TOURNAMENT, "PayPrize", prize(player_id="alice*"),
                                C.INVALID_ARGUMENT, "malformed_id"),
    "pool_odd_tournament_id": Case(TOURNAMENT, "GetPool", pb.GetPoolRequest(tournament_id=""),
                                   C.INVALID_ARGUMENT, "malformed_id"),
    "balance_odd_pool_id": Case(OPERATOR, "GetBalance",
                                pb.GetBalanceRequest(account=pb.AccountRef(tournament_pool="")),
                                C.INVALID_ARGUMENT, "malformed_id"),
}


async def arrange(wallet: RunningWallet) -> None:
    """t1 (buy-in 100, fee 10): alice (1000) entered as e-alice, bob (50) can pay no entry,
    carol (1000) never entered, dave entered as e-dave and was refunded (key r-dave); the
    pool holds 200 (alice's and the tournament service's second entry for alice)."""
    client = wallet.client
    for name, funds in (("alice", 1000), ("bob", 50), ("carol", 1000), ("dave", 1000)):
        await client.create_account(name)
        await client.deposit(name, funds, f"d-{name}")
    await client.enter("alice", "t1", "e-alice", 100, 10, "k-alice")
    await client.enter("alice", "t1", "e-alice-2", 100, 10, "k-alice-2")
    await client.enter("dave", "t1", "e-dave", 100, 10, "k-dave")
    await client.refund("dave", "t1", "e-dave", "r-dave")


def refusals(wallet: RunningWallet, method: str, code: grpc.StatusCode) -> float:
    return wallet.deps.metrics.sample("stud_grpc_requests_total",
                                      service="stud.v1.WalletService", method=method,
                                      code=code.name)


@pytest.mark.parametrize("name", list(CASES))
async def test_refusal_has_its_status_and_changes_nothing(
    wallet: RunningWallet, snapshot: Any, name: str
) -> None:
    """Each bad request is refused with its code and reason, counted, and no wallet key
    changes."""
    case = CASES[name]
    await arrange(wallet)
    assert (await wallet.client.pool("t1")).balance == 200
    before = await snapshot()
    counted = refusals(wallet, case.method, case.code)
    rpc = getattr(wallet.client.stub, case.method)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await rpc(case.request, metadata=wallet.client.metadata(case.who), timeout=10)
    assert info.value.code() is case.code, info.value.details()
    assert rpc_error_reason(info.value) == case.reason
    assert refusals(wallet, case.method, case.code) == counted + 1
    assert await snapshot() == before


@pytest.mark.parametrize("method", ["EnterTournament", "RefundEntry", "PayPrize", "GetPool"])
async def test_an_undecodable_body_is_invalid_argument(
    wallet: RunningWallet, snapshot: Any, method: str
) -> None:
    """Raw bytes that are no request message: INVALID_ARGUMENT undecodable_request, nothing
    changed."""
    await arrange(wallet)
    before = await snapshot()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{wallet.port}") as channel:
        call = channel.unary_unary(f"/stud.v1.WalletService/{method}")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call(UNDECODABLE, metadata=wallet.client.metadata(TOURNAMENT), timeout=10)
    assert info.value.code() is C.INVALID_ARGUMENT
    assert rpc_error_reason(info.value) == "undecodable_request"
    assert await snapshot() == before


async def test_refused_tournament_money_is_counted_by_kind(wallet: RunningWallet) -> None:
    """The domain counter names the kind and the outcome, never an id or an amount."""
    await arrange(wallet)
    rpc = wallet.client.stub.PayPrize
    with pytest.raises(grpc.aio.AioRpcError):
        await rpc(prize(amount=10_000), metadata=wallet.client.metadata(TOURNAMENT), timeout=10)
    sample = wallet.deps.metrics.sample
    name = "stud_wallet_tournament_transactions_total"
    assert sample(name, kind="prize", outcome="refused") == 1
    assert sample(name, kind="entry", outcome="applied") == 3
    assert sample(name, kind="refund", outcome="applied") == 1
