"""The pure ledger: every command decides balanced postings with the right guards; invalid
commands are refused; the rake rule; evolve and replay."""

from __future__ import annotations

import dataclasses
import doctest
import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.streets import Street
from wallet import ledger, model
from wallet.ledger import (
    Guard,
    GuardOp,
    InsufficientFunds,
    InvalidTransaction,
    LedgerEntry,
    LedgerView,
    Posting,
    SeatAction,
    SeatRule,
    check_guards,
    compute_rake,
    decide,
    evolve,
    fingerprint,
    replay,
)
from wallet.model import (
    EXTERNAL,
    HOUSE,
    MAX_AMOUNT,
    AccountId,
    BuyIn,
    CashOut,
    Deposit,
    RakePolicy,
    SeatResult,
    SettleHand,
    TxKind,
    Withdraw,
    player_account,
    seat_account,
)

ALICE = player_account("alice")
SEAT1 = seat_account("t1", 1)


def hand(*results: tuple[int, str, int, int], rake: int = 0, bps: int = 0, cap: int = 0,
         street: Street = Street.SEVENTH, hand_id: str = "h1") -> SettleHand:
    return SettleHand(
        table_id="t1",
        hand_id=hand_id,
        results=tuple(SeatResult(seat=s, player_id=p, amount_in=i, amount_won=w)
                      for s, p, i, w in results),
        rake=rake,
        rake_policy=RakePolicy(percent_bps=bps, cap=cap),
        ended_on=street,
    )


class TestDecide:
    def test_deposit_moves_from_external_to_the_player(self) -> None:
        """A deposit debits the external account and credits the player."""
        tx = decide(Deposit(player_id="alice", amount=500, idempotency_key="k"))
        assert tx.kind is TxKind.DEPOSIT
        assert tx.postings == (Posting(EXTERNAL, -500), Posting(ALICE, 500))
        assert tx.players == ("alice",) and tx.guards == ()

    def test_withdraw_is_guarded_by_the_balance(self) -> None:
        """A withdrawal needs the player's balance to cover it."""
        tx = decide(Withdraw(player_id="alice", amount=200, idempotency_key="k"))
        assert tx.postings == (Posting(ALICE, -200), Posting(EXTERNAL, 200))
        assert tx.guards == (Guard(ALICE, GuardOp.AT_LEAST, 200),)

    def test_buy_in_claims_the_seat(self) -> None:
        """A buy-in moves money to the seat's escrow and claims the seat for the player."""
        tx = decide(BuyIn(player_id="alice", table_id="t1", seat=1, amount=300,
                          idempotency_key="k"))
        assert tx.postings == (Posting(ALICE, -300), Posting(SEAT1, 300))
        assert tx.seats == (SeatRule(SeatAction.CLAIM, 1, "alice"),)
        assert tx.guards == (Guard(ALICE, GuardOp.AT_LEAST, 300),)

    def test_a_sit_downs_buy_in_claims_only_a_free_seat(self) -> None:
        """A sit-down's buy-in claims the seat only if nobody holds it (review finding F3:
        never added to an orphan escrow of the same player's); a top-up still claims it as
        before, to add to the player's own escrow."""
        sit = decide(BuyIn(player_id="alice", table_id="t1", seat=4, amount=300,
                           idempotency_key="k", sit_down=True))
        assert sit.seats == (SeatRule(SeatAction.CLAIM_FREE, 4, "alice"),)
        top = decide(BuyIn(player_id="alice", table_id="t1", seat=4, amount=300,
                           idempotency_key="k"))
        assert top.seats == (SeatRule(SeatAction.CLAIM, 4, "alice"),)
        assert sit.postings == top.postings and sit.scope == top.scope

    def test_a_buy_ins_fingerprint_leaves_sit_down_out(self) -> None:
        """The flag is a condition on the seat: a buy-in's fingerprint is the one it had
        before the flag existed (a retry across the upgrade is answered as the replay it
        is, not refused idempotency_key_reused)."""
        old = BuyIn(player_id="alice", table_id="t1", seat=2, amount=400, idempotency_key="k")
        fields = {f: getattr(old, f) for f in
                  ("player_id", "table_id", "seat", "amount", "idempotency_key")}
        text = json.dumps({"type": "BuyIn", **fields}, sort_keys=True, separators=(",", ":"))
        assert fingerprint(old) == hashlib.sha256(text.encode()).hexdigest()
        assert fingerprint(dataclasses.replace(old, sit_down=True)) == fingerprint(old)

    def test_settlement_posts_net_changes_and_rake(self) -> None:
        """Each seat gets won - in, the house the rake; every seat's escrow covers its in."""
        tx = decide(hand((1, "alice", 500, 970), (2, "bob", 500, 0), (3, "carol", 0, 0),
                         rake=30, bps=500, cap=30))
        assert tx.postings == (
            Posting(SEAT1, 470), Posting(seat_account("t1", 2), -500), Posting(HOUSE, 30)
        )
        assert tx.guards == (
            Guard(SEAT1, GuardOp.AT_LEAST, 500),
            Guard(seat_account("t1", 2), GuardOp.AT_LEAST, 500),
        )
        assert {r.action for r in tx.seats} == {SeatAction.CHECK}
        assert (tx.scope, tx.hand_id) == ("settle:t1:h1", "h1")

    def test_cash_out_moves_the_escrow_as_read_and_guards_it(self) -> None:
        """A cash-out moves the whole escrow it saw, guarded to be unchanged, and frees the
        seat."""
        view = LedgerView(balances={SEAT1.key: 1300})
        tx = decide(CashOut(table_id="t1", seat=1, player_id="alice", idempotency_key="k"), view)
        assert tx.postings == (Posting(SEAT1, -1300), Posting(ALICE, 1300))
        assert tx.guards == (Guard(SEAT1, GuardOp.EXACTLY, 1300),)
        assert tx.seats == (SeatRule(SeatAction.RELEASE, 1, "alice"),)
        assert tx.amount == 1300

    def test_cash_out_of_an_empty_seat_moves_nothing(self) -> None:
        """A busted player's cash-out frees the seat without postings."""
        tx = decide(CashOut(table_id="t1", seat=1, player_id="alice", idempotency_key="k"))
        assert tx.postings == () and tx.amount == 0

    @pytest.mark.parametrize(
        ("command", "reason"),
        [
            (Deposit(player_id="a", amount=0, idempotency_key="k"), "non_positive_amount"),
            (Deposit(player_id="a", amount=-1, idempotency_key="k"), "non_positive_amount"),
            (Deposit(player_id="a", amount=MAX_AMOUNT + 1, idempotency_key="k"),
             "amount_too_large"),
            (Withdraw(player_id="a", amount=0, idempotency_key="k"), "non_positive_amount"),
            (BuyIn(player_id="a", table_id="t", seat=9, amount=1, idempotency_key="k"),
             "seat_out_of_range"),
            (BuyIn(player_id="a", table_id="t", seat=1, amount=0, idempotency_key="k"),
             "non_positive_amount"),
            (hand(), "no_seats"),
            (hand((1, "a", 100, 150), (2, "b", 100, 0)), "unbalanced"),
            (hand((1, "a", 100, 200), (1, "a", 100, 0)), "duplicate_seat"),
            (hand((1, "a", -1, 0), (2, "b", 1, 0)), "negative_amount"),
            (hand((1, "a", 100, 200), (2, "b", 100, 0), rake=10), "unbalanced"),
            (hand((1, "a", 100, 190), (2, "b", 100, 0), rake=10), "rake_mismatch"),
            (hand((1, "a", 100, 200), (2, "b", 100, 0), bps=500), "invalid_rake_policy"),
            (hand((1, "a", 100, 200), (2, "b", 100, 0), bps=10_001, cap=5),
             "invalid_rake_policy"),
            (CashOut(table_id="t", seat=0, player_id="a", idempotency_key="k"),
             "seat_out_of_range"),
        ],
    )
    def test_refuses_invalid_commands(self, command: ledger.Command, reason: str) -> None:
        """Malformed amounts, seats, unbalanced or wrongly raked settlements are refused."""
        with pytest.raises(InvalidTransaction) as info:
            decide(command)
        assert info.value.reason == reason

    def test_fingerprint_tells_payloads_apart(self) -> None:
        """Equal commands share a fingerprint; any changed field changes it."""
        a = hand((1, "a", 100, 200), (2, "b", 100, 0))
        b = hand((1, "a", 100, 0), (2, "b", 100, 200))
        assert fingerprint(a) == fingerprint(hand((1, "a", 100, 200), (2, "b", 100, 0)))
        assert fingerprint(a) != fingerprint(b)

    @pytest.mark.parametrize("command", [
        Deposit(player_id="alice", amount=5, idempotency_key="k1"),
        Withdraw(player_id="alice", amount=5, idempotency_key="k2"),
        BuyIn(player_id="alice", table_id="t1", seat=2, amount=400, idempotency_key="k3"),
        SettleHand(table_id="t1", hand_id="h3", rake=5,
                   results=(SeatResult(seat=1, player_id="a", amount_in=100, amount_won=195),
                            SeatResult(seat=2, player_id="b", amount_in=100, amount_won=0)),
                   rake_policy=RakePolicy(percent_bps=500, cap=30), ended_on=Street.FIFTH),
        SettleHand(table_id="t1", hand_id="h4", results=(), ended_on=None),
        CashOut(table_id="t1", seat=2, player_id="alice", idempotency_key="k4"),
        model.EnterTournament(player_id="alice", tournament_id="T", entry_id="e1", buy_in=100,
                              fee=10, idempotency_key="k5"),
        model.RefundEntry(player_id="alice", tournament_id="T", entry_id="e1",
                          idempotency_key="k6"),
        model.PayPrize(player_id="alice", tournament_id="T", amount=300, place=1,
                       idempotency_key="k7"),
    ])
    def test_fingerprint_is_the_digest_of_the_commands_asdict(self, command: model.Command
                                                               ) -> None:
        """The text hashed is the canonical JSON of ``asdict``'s view, as it always was: a
        fingerprint recorded before stays the same."""
        payload = {"type": type(command).__name__, **dataclasses.asdict(command)}
        if isinstance(command, BuyIn):
            del payload["sit_down"]  # (added later: a condition on the seat, not the move)
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
        assert fingerprint(command) == hashlib.sha256(text.encode()).hexdigest()


class TestRake:
    @pytest.mark.parametrize(
        ("pot", "bps", "cap", "street", "rake"),
        [
            (1_000, 500, 30, Street.FIFTH, 30),  # capped
            (399, 500, 30, Street.SEVENTH, 19),  # 19.95 rounds down
            (19, 500, 30, Street.FOURTH, 0),  # below one unit
            (1_000, 500, 30, Street.THIRD, 0),  # no rake on 3rd street
            (1_000, 500, 30, None, 0),  # no street: a voided hand
            (1_000, 0, 0, Street.SEVENTH, 0),  # no policy
            (1_000, 10_000, 5_000, Street.SIXTH, 1_000),  # 100%, cap above the pot
        ],
    )
    def test_rake_rule(self, pot: int, bps: int, cap: int, street: Street | None,
                       rake: int) -> None:
        """rake = min(cap, pot * bps // 10000), none when the hand ended on 3rd street."""
        assert compute_rake(pot, RakePolicy(percent_bps=bps, cap=cap), street) == rake

    @given(st.integers(0, 10**12), st.integers(0, 10_000), st.integers(1, 10**9),
           st.sampled_from(list(Street)))
    def test_rake_is_bounded(self, pot: int, bps: int, cap: int, street: Street) -> None:
        """The rake never exceeds the cap or the pot and is never negative."""
        rake = compute_rake(pot, RakePolicy(percent_bps=bps, cap=cap), street)
        assert 0 <= rake <= min(cap, pot)


class TestEvolve:
    def test_guards_refuse_overdrafts(self) -> None:
        """check_guards refuses what the store's script refuses: a short balance."""
        tx = decide(Withdraw(player_id="alice", amount=200, idempotency_key="k"))
        check_guards({ALICE.key: 200}, tx)
        with pytest.raises(InsufficientFunds):
            check_guards({ALICE.key: 199}, tx)

    def test_escrow_must_cover_amount_in_even_if_won_back(self) -> None:
        """A seat that puts in more than its escrow is refused even if it wins it back."""
        tx = decide(hand((1, "a", 600, 1200), (2, "b", 600, 0)))
        with pytest.raises(InsufficientFunds):
            check_guards({SEAT1.key: 500, seat_account("t1", 2).key: 600}, tx)

    @given(st.lists(st.tuples(st.sampled_from(["alice", "bob"]), st.integers(1, 10**6)),
                    max_size=30))
    def test_replay_of_deposits_sums_to_zero(self, deposits: list[tuple[str, int]]) -> None:
        """Folding any deposits gives balances that sum to zero, external holding minus all."""
        entries = [
            LedgerEntry(transaction_id=str(i), kind=TxKind.DEPOSIT,
                        postings=decide(Deposit(player_id=p, amount=a,
                                                idempotency_key=str(i))).postings)
            for i, (p, a) in enumerate(deposits)
        ]
        balances = replay(entries)
        assert sum(balances.values()) == 0
        assert balances.get(EXTERNAL.key, 0) == -sum(a for _, a in deposits)

    def test_evolve_keeps_the_input(self) -> None:
        """evolve returns new balances and leaves its input alone."""
        before = {ALICE.key: 5}
        after = evolve(before, [Posting(ALICE, -5), Posting(EXTERNAL, 5)])
        assert before == {ALICE.key: 5} and after == {ALICE.key: 0, EXTERNAL.key: 5}


class TestAccounts:
    @given(st.one_of(
        st.from_regex(r"[A-Za-z0-9_.-]{1,20}", fullmatch=True).map(player_account),
        st.builds(seat_account, st.from_regex(r"[A-Za-z0-9_.-]{1,20}", fullmatch=True),
                  st.integers(1, 8)),
        st.just(HOUSE), st.just(EXTERNAL),
    ))
    def test_keys_round_trip(self, account: AccountId) -> None:
        """An account's key parses back to the account."""
        assert AccountId.parse(account.key) == account


def test_doctests() -> None:
    """The examples in the ledger and model docstrings hold."""
    for module in (ledger, model):
        failed, _ = doctest.testmod(module)
        assert failed == 0
