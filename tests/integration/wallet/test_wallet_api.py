"""The wallet's API end to end over real gRPC and Redis: accounts, deposits, buy-ins,
settlements with and without rake, cash-outs, statements, reconciliation, idempotency."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from stud.v1 import wallet_pb2 as pb
from studkit.auth import Principal, Role
from studkit.grpc_server import rpc_error_reason
from studtest.wallet import AUDITOR, OPERATOR, TABLE, RunningWallet, player
from wallet.ledger import replay

pytestmark = pytest.mark.integration

STREET = pb.SettleHandRequest


def settlement(
    hand: str,
    seats: list[tuple[int, str, int, int]],
    *,
    table: str = "t1",
    rake: int = 0,
    bps: int = 0,
    cap: int = 0,
    street: int = STREET.STREET_SEVENTH,
) -> pb.SettleHandRequest:
    return pb.SettleHandRequest(
        table_id=table,
        hand_id=hand,
        seats=[
            pb.SettlementSeat(seat=s, player_id=p, amount_in=i, amount_won=w)
            for s, p, i, w in seats
        ],
        rake=rake,
        rake_policy=pb.RakePolicy(percent_bps=bps, cap=cap),
        ended_on_street=street,
    )


async def seated(wallet: RunningWallet, stacks: dict[str, tuple[int, int]]) -> None:
    """Open, fund and seat each player: name -> (seat, buy-in) at table t1."""
    client = wallet.client
    for name, (seat, amount) in stacks.items():
        await client.create_account(name)
        await client.deposit(name, amount * 2, f"dep-{name}")
        await client.buy_in(name, "t1", seat, amount, f"buy-{name}")


class TestAccounts:
    async def test_player_opens_own_account_and_reads_zero(self, wallet: RunningWallet) -> None:
        """A player may open their own account; its balance starts at zero."""
        client = wallet.client
        await client.create_account("alice", who=player("alice"))
        reply = await client.stub.GetBalance(
            pb.GetBalanceRequest(account=pb.AccountRef(player_id="alice")),
            metadata=client.metadata(player("alice")),
        )
        assert reply.balance == 0 and reply.account.player_id == "alice"

    async def test_opening_twice_is_already_exists(self, wallet: RunningWallet) -> None:
        """A second CreateAccount for the same player is ALREADY_EXISTS."""
        await wallet.client.create_account("bob")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await wallet.client.create_account("bob")
        assert info.value.code() is grpc.StatusCode.ALREADY_EXISTS


class TestDeposits:
    async def test_deposit_is_idempotent(self, wallet: RunningWallet) -> None:
        """A retried deposit returns the original outcome, flagged replayed, and moves nothing."""
        client = wallet.client
        await client.create_account("alice")
        first = await client.deposit("alice", 500, "k1")
        again = await client.deposit("alice", 500, "k1")
        assert (first.balance, first.replayed) == (500, False)
        assert (again.transaction_id, again.balance, again.replayed) == (
            first.transaction_id, 500, True,
        )
        assert await client.player_balance("alice") == 500
        external = pb.AccountRef(system=pb.SYSTEM_ACCOUNT_EXTERNAL)
        assert await client.balance(external, who=AUDITOR) == -500

    async def test_same_key_different_amount_is_refused(self, wallet: RunningWallet) -> None:
        """Reusing an idempotency key for another amount is ALREADY_EXISTS."""
        client = wallet.client
        await client.create_account("alice")
        await client.deposit("alice", 500, "k1")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await client.deposit("alice", 501, "k1")
        assert info.value.code() is grpc.StatusCode.ALREADY_EXISTS
        assert rpc_error_reason(info.value) == "idempotency_key_reused"
        assert await client.player_balance("alice") == 500

    async def test_withdraw_moves_money_out_and_refuses_overdraft(
        self, wallet: RunningWallet
    ) -> None:
        """A withdrawal leaves the balance reduced; one beyond it is FAILED_PRECONDITION."""
        client = wallet.client
        await client.create_account("alice")
        await client.deposit("alice", 500, "k1")
        reply = await client.stub.Withdraw(
            pb.WithdrawRequest(player_id="alice", amount=200, idempotency_key="w1"),
            metadata=client.metadata(OPERATOR),
        )
        assert reply.balance == 300
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await client.stub.Withdraw(
                pb.WithdrawRequest(player_id="alice", amount=301, idempotency_key="w2"),
                metadata=client.metadata(OPERATOR),
            )
        assert info.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert rpc_error_reason(info.value) == "insufficient_funds"


class TestHands:
    async def test_buy_in_settle_cash_out(self, wallet: RunningWallet) -> None:
        """Money moves account -> seat -> (hand) -> seat -> account and always sums to 0."""
        client = wallet.client
        await seated(wallet, {"alice": (1, 1000), "bob": (2, 1000)})
        assert await client.escrows("t1") == {1: 1000, 2: 1000}
        reply = await client.settle(
            settlement("h1", [(1, "alice", 300, 600), (2, "bob", 300, 0)])
        )
        assert {s.seat: s.balance for s in reply.seats} == {1: 1300, 2: 700}
        assert await client.escrows("t1") == {1: 1300, 2: 700}
        out = await client.cash_out("alice", "t1", 1, "leave-1")
        assert (out.amount, out.player_balance) == (1300, 2300)
        assert await client.escrows("t1") == {2: 700}
        balances = await wallet.deps.store.balances()
        assert sum(balances.values()) == 0
        assert replay(await wallet.deps.store.ledger()) == balances

    async def test_rake_goes_to_the_house(self, wallet: RunningWallet) -> None:
        """A 5% rake capped at 30 on a pot of 1000 sends 30 to the house."""
        client = wallet.client
        await seated(wallet, {"alice": (1, 1000), "bob": (2, 1000)})
        await client.settle(
            settlement(
                "h1", [(1, "alice", 500, 970), (2, "bob", 500, 0)], rake=30, bps=500, cap=30
            )
        )
        house = pb.AccountRef(system=pb.SYSTEM_ACCOUNT_HOUSE)
        assert await client.balance(house, who=AUDITOR) == 30
        assert await client.escrows("t1") == {1: 1470, 2: 500}

    async def test_no_rake_when_the_hand_ends_on_third_street(
        self, wallet: RunningWallet
    ) -> None:
        """On 3rd street the rake must be 0; a table sending one is INVALID_ARGUMENT."""
        client = wallet.client
        await seated(wallet, {"alice": (1, 1000), "bob": (2, 1000)})
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await client.settle(
                settlement(
                    "h1", [(1, "alice", 100, 95), (2, "bob", 100, 100)],
                    rake=5, bps=500, cap=30, street=STREET.STREET_THIRD,
                )
            )
        assert rpc_error_reason(info.value) == "rake_mismatch"
        await client.settle(
            settlement(
                "h1", [(1, "alice", 100, 200), (2, "bob", 100, 0)],
                bps=500, cap=30, street=STREET.STREET_THIRD,
            )
        )
        assert await client.escrows("t1") == {1: 1100, 2: 900}

    async def test_settlement_retry_answers_the_original_even_after_cash_out(
        self, wallet: RunningWallet
    ) -> None:
        """A settlement replayed after the seats moved on returns its original outcome."""
        client = wallet.client
        await seated(wallet, {"alice": (1, 1000), "bob": (2, 1000)})
        request = settlement("h1", [(1, "alice", 300, 600), (2, "bob", 300, 0)])
        first = await client.settle(request)
        await client.cash_out("alice", "t1", 1, "leave-1")
        again = await client.settle(request)
        assert again.replayed and again.transaction_id == first.transaction_id
        assert list(again.seats) == list(first.seats)
        assert await client.player_balance("alice") == 2300

    async def test_different_payload_under_a_settled_hand_id_is_refused(
        self, wallet: RunningWallet
    ) -> None:
        """Another result for an already settled hand is ALREADY_EXISTS; nothing moves."""
        client = wallet.client
        await seated(wallet, {"alice": (1, 1000), "bob": (2, 1000)})
        await client.settle(settlement("h1", [(1, "alice", 300, 600), (2, "bob", 300, 0)]))
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await client.settle(settlement("h1", [(1, "alice", 300, 0), (2, "bob", 300, 600)]))
        assert info.value.code() is grpc.StatusCode.ALREADY_EXISTS
        assert await client.escrows("t1") == {1: 1300, 2: 700}

    async def test_reconcile_reports_the_last_settled_hand(self, wallet: RunningWallet) -> None:
        """Reconcile lists occupied seats, their total and the last settled hand id."""
        client = wallet.client
        await seated(wallet, {"alice": (1, 1000), "bob": (3, 500)})
        await client.settle(settlement("h7", [(1, "alice", 100, 0), (3, "bob", 100, 200)]))
        reply = await client.stub.Reconcile(
            pb.ReconcileRequest(table_id="t1"), metadata=client.metadata(OPERATOR)
        )
        assert [(s.seat, s.player_id, s.balance) for s in reply.seats] == [
            (1, "alice", 900), (3, "bob", 600),
        ]
        assert (reply.total, reply.last_hand_id) == (1500, "h7")

    async def test_seat_held_by_another_player_is_refused(self, wallet: RunningWallet) -> None:
        """Buying into a seat held for someone else is FAILED_PRECONDITION seat_taken."""
        client = wallet.client
        await seated(wallet, {"alice": (1, 1000)})
        await client.create_account("bob")
        await client.deposit("bob", 1000, "dep-bob")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await client.buy_in("bob", "t1", 1, 100, "b1")
        assert info.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert rpc_error_reason(info.value) == "seat_taken"

    async def test_a_sit_down_is_never_added_to_an_escrow_there(
            self, wallet: RunningWallet, snapshot: Any) -> None:
        """Review finding F3: a sit-down's buy-in (``sit_down``) on a seat holding the same
        player's escrow (an orphan a table's crash left, its refund to come) is refused
        seat_taken and moves nothing, as on a seat held for another player; a top-up on
        the player's own seat still adds to it."""
        client = wallet.client
        await seated(wallet, {"ann": (4, 10_000), "bob": (2, 500)})
        before = await snapshot()
        for name in ("ann", "cat"):
            if name == "cat":
                await client.create_account("cat")
                await client.deposit("cat", 1_000, "dep-cat")
                before = await snapshot()
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await client.buy_in(name, "t1", 4, 1_000, f"sit-{name}", sit_down=True)
            assert info.value.code() is grpc.StatusCode.FAILED_PRECONDITION
            assert rpc_error_reason(info.value) == "seat_taken"
            assert await snapshot() == before
        top_up = await client.buy_in("ann", "t1", 4, 1_000, "top-ann")
        assert (top_up.player_balance, top_up.seat_balance) == (9_000, 11_000)
        reply = await client.stub.Reconcile(pb.ReconcileRequest(table_id="t1"),
                                            metadata=client.metadata(OPERATOR))
        assert [(s.seat, s.player_id, s.balance) for s in reply.seats] == [
            (2, "bob", 500), (4, "ann", 11_000)]

    async def test_a_sit_down_takes_a_free_seat_and_its_retry_is_a_replay(
            self, wallet: RunningWallet, snapshot: Any) -> None:
        """A sit-down's buy-in takes a free seat (a freed one too); its retry with the same
        key is answered as the replay it is (the replay is checked before the seat, which the
        first call now holds), moving nothing; so is a retry that leaves the flag out."""
        client = wallet.client
        await client.create_account("ann")
        await client.deposit("ann", 5_000, "dep-ann")
        first = await client.buy_in("ann", "t1", 4, 1_000, "sit-1", sit_down=True)
        assert (first.player_balance, first.seat_balance, first.replayed) == (4_000, 1_000,
                                                                             False)
        after = await snapshot()
        for sit_down in (True, False):
            again = await client.buy_in("ann", "t1", 4, 1_000, "sit-1", sit_down=sit_down)
            assert (again.transaction_id, again.seat_balance, again.replayed) == (
                first.transaction_id, 1_000, True)
            assert await snapshot() == after
        await client.cash_out("ann", "t1", 4, "out-1")
        back = await client.buy_in("ann", "t1", 4, 2_000, "sit-2", sit_down=True)
        assert (back.player_balance, back.seat_balance) == (3_000, 2_000)

    async def test_a_player_cannot_squat_a_seat(self, wallet: RunningWallet,
                                                 snapshot: Any) -> None:
        """Seats are the table's business: a player's own BuyIn (which once let one player
        hold a seat against the table) and CashOut are PERMISSION_DENIED and change nothing,
        and the table then buys another player in at that seat."""
        client = wallet.client
        for name in ("alice", "bob"):
            await client.create_account(name)
            await client.deposit(name, 1000, f"d-{name}")
        before = await snapshot()
        for call in (client.buy_in("alice", "t1", 4, 1, "b1", who=player("alice")),
                     client.cash_out("alice", "t1", 4, "c1", who=player("alice"))):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call
            assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert await snapshot() == before
        reply = await client.buy_in("bob", "t1", 4, 400, "b2")
        assert (reply.player_balance, reply.seat_balance) == (600, 400)

    async def test_only_the_table_service_moves_seat_money(self, wallet: RunningWallet,
                                                           snapshot: Any) -> None:
        """A valid service:dealer token may not buy in, settle or cash out (it once settled
        hands): PERMISSION_DENIED, nothing changes."""
        client = wallet.client
        await seated(wallet, {"alice": (1, 1000)})
        dealer = Principal(Role.SERVICE, "dealer")
        before = await snapshot()
        for call in (client.buy_in("alice", "t1", 2, 1, "b9", who=dealer),
                     client.settle(settlement("h1", [(1, "alice", 10, 10)]), who=dealer),
                     client.cash_out("alice", "t1", 1, "c9", who=dealer)):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call
            assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert await snapshot() == before


class TestStatements:
    async def test_pages_through_postings_oldest_first(self, wallet: RunningWallet) -> None:
        """Statements page with next_page_token and carry kind, amount and running balance."""
        client = wallet.client
        await client.create_account("alice")
        for i in range(5):
            await client.deposit("alice", 100 + i, f"d{i}")
        await client.buy_in("alice", "t1", 1, 50, "b1")
        lines: list[pb.StatementLine] = []
        token = ""
        pages = 0
        while True:
            reply = await client.stub.GetStatement(
                pb.GetStatementRequest(
                    account=pb.AccountRef(player_id="alice"), page_size=2, page_token=token
                ),
                metadata=client.metadata(player("alice")),
            )
            lines += reply.lines
            pages += 1
            token = reply.next_page_token
            if not token:
                break
        assert pages == 3
        assert [line.amount for line in lines] == [100, 101, 102, 103, 104, -50]
        assert lines[-1].kind == pb.TRANSACTION_KIND_BUY_IN and lines[-1].table_id == "t1"
        assert lines[-1].balance_after == sum(range(100, 105)) - 50

    async def test_seat_statement_is_readable_by_the_table(self, wallet: RunningWallet) -> None:
        """The table reads a seat's statement, including the hand id of settlements."""
        client = wallet.client
        await seated(wallet, {"alice": (1, 1000), "bob": (2, 1000)})
        await client.settle(settlement("h1", [(1, "alice", 300, 600), (2, "bob", 300, 0)]))
        reply = await client.stub.GetStatement(
            pb.GetStatementRequest(
                account=pb.AccountRef(seat=pb.SeatAccount(table_id="t1", seat=1))
            ),
            metadata=client.metadata(TABLE),
        )
        assert [(line.amount, line.hand_id) for line in reply.lines] == [(1000, ""), (300, "h1")]


async def test_one_name_for_the_key_and_the_hand(wallet: RunningWallet) -> None:
    """``command_id`` and ``hand_number`` are the names every API uses; the former
    ``idempotency_key`` and ``hand_id`` are still read; both set and different is refused."""
    from stud.v1 import wallet_pb2 as wpb
    from studkit.grpc_server import rpc_error_reason
    from studtest.wallet import OPERATOR as OPS
    client = wallet.client
    await client.create_account("kim")
    md = client.metadata(OPS)
    first = await client.stub.Deposit(wpb.DepositRequest(player_id="kim", amount=100,
                                                         command_id="dep-1"), metadata=md)
    again = await client.stub.Deposit(wpb.DepositRequest(player_id="kim", amount=100,
                                                         idempotency_key="dep-1"), metadata=md)
    assert again.replayed and again.transaction_id == first.transaction_id
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.stub.Deposit(wpb.DepositRequest(
            player_id="kim", amount=100, command_id="dep-2", idempotency_key="dep-3"),
            metadata=md)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert rpc_error_reason(caught.value) == "conflicting_keys"
    assert await client.player_balance("kim") == 100
