"""Proto <-> domain mapping: round trips, and malformed input refused naming the field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.streets import Street
from stud.v1 import wallet_pb2 as pb
from studkit.errors import BadRequest
from wallet import mapping
from wallet.model import (
    EXTERNAL,
    HOUSE,
    AccountId,
    Applied,
    CashOut,
    RakePolicy,
    SeatResult,
    player_account,
    pool_account,
    seat_account,
)

IDS = st.from_regex(r"[A-Za-z0-9_.-]{1,64}", fullmatch=True)
ACCOUNTS = st.one_of(
    IDS.map(player_account),
    st.builds(seat_account, IDS, st.integers(1, 8)),
    IDS.map(pool_account),
    st.sampled_from([HOUSE, EXTERNAL]),
)


class TestAccounts:
    @given(ACCOUNTS)
    def test_account_round_trips(self, account: AccountId) -> None:
        """Domain -> proto -> domain is the identity for every account kind."""
        assert mapping.account_from_proto(mapping.account_to_proto(account)) == account

    def test_missing_account_names_the_field(self) -> None:
        """An AccountRef with nothing set is a BadRequest on 'account'."""
        with pytest.raises(BadRequest) as info:
            mapping.account_from_proto(pb.AccountRef())
        assert info.value.field == "account"

    def test_unspecified_system_account_is_refused(self) -> None:
        """SYSTEM_ACCOUNT_UNSPECIFIED names no account."""
        with pytest.raises(BadRequest) as info:
            mapping.account_from_proto(pb.AccountRef(system=pb.SYSTEM_ACCOUNT_UNSPECIFIED))
        assert info.value.field == "account.system"


class TestSettlement:
    def test_maps_every_field(self) -> None:
        """A settlement request becomes a SettleHand with seats, rake and street."""
        request = pb.SettleHandRequest(
            table_id="t1", hand_id="h9",
            seats=[pb.SettlementSeat(seat=2, player_id="bob", amount_in=5, amount_won=9)],
            rake=1, rake_policy=pb.RakePolicy(percent_bps=100, cap=3),
            ended_on_street=pb.SettleHandRequest.STREET_SIXTH,
        )
        command = mapping.settle_hand_from_proto(request)
        assert command.results == (SeatResult(seat=2, player_id="bob", amount_in=5,
                                              amount_won=9),)
        assert command.rake_policy == RakePolicy(percent_bps=100, cap=3)
        assert (command.rake, command.ended_on) == (1, Street.SIXTH)

    def test_a_void_needs_no_street(self) -> None:
        """A settlement that moves nothing (a voided hand, RULES 9.8) may leave the street
        unspecified; it maps to no street (and so no rake)."""
        request = pb.SettleHandRequest(
            table_id="t1", hand_id="h9",
            seats=[pb.SettlementSeat(seat=2, player_id="bob", amount_in=5, amount_won=5)],
            rake_policy=pb.RakePolicy(percent_bps=100, cap=3),
        )
        assert mapping.settle_hand_from_proto(request).ended_on is None
        request.seats[0].amount_won = 4
        request.rake = 1
        with pytest.raises(BadRequest) as info:
            mapping.settle_hand_from_proto(request)
        assert info.value.field == "ended_on_street"

    @pytest.mark.parametrize(
        ("request_", "field"),
        [
            (pb.SettleHandRequest(table_id="t1", hand_id="h1"), "ended_on_street"),
            (pb.SettleHandRequest(hand_id="h1",
                                  ended_on_street=pb.SettleHandRequest.STREET_THIRD),
             "table_id"),
            (pb.SettleHandRequest(table_id="t1", hand_id="h/1",
                                  ended_on_street=pb.SettleHandRequest.STREET_THIRD),
             "hand_id"),
            (pb.SettleHandRequest(table_id="t1", hand_id="h1",
                                  seats=[pb.SettlementSeat(seat=1, player_id="")],
                                  ended_on_street=pb.SettleHandRequest.STREET_THIRD),
             "seats[0].player_id"),
        ],
    )
    def test_malformed_fields_are_named(self, request_: pb.SettleHandRequest, field: str) -> None:
        """A missing street, id or player is a BadRequest naming that field."""
        with pytest.raises(BadRequest) as info:
            mapping.settle_hand_from_proto(request_)
        assert info.value.field == field


class TestResponses:
    def test_cash_out_reply_reports_amount_and_balance(self) -> None:
        """The cash-out reply carries the amount moved and the player's balance after."""
        command = CashOut(table_id="t1", seat=1, player_id="alice", idempotency_key="k")
        applied = Applied(transaction_id="1-0", amount=70, replayed=True,
                          balances={"player:alice": 170, "seat:t1:1": 0})
        reply = mapping.cash_out_to_proto(command, applied)
        assert (reply.amount, reply.player_balance, reply.replayed) == (70, 170, True)

    def test_deposit_requires_an_idempotency_key(self) -> None:
        """A deposit without an idempotency key is a BadRequest on that field."""
        with pytest.raises(BadRequest) as info:
            mapping.deposit_from_proto(pb.DepositRequest(player_id="a", amount=1))
        assert info.value.field == "idempotency_key"
