"""Tournament money in the pure ledger: an entry's buy-in goes to the tournament's own pool
account and its fee to the house; a refund gives back exactly what the entry paid, once; a
prize never takes more than the pool holds. Property: any sequence of entries, refunds and
prizes, each retried at random, creates and loses no chip, never takes a pool below zero,
applies each key once, and keeps every pool equal to its buy-ins minus refunds minus prizes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studtest.wallet_model import ModelWallet
from wallet.ledger import (
    MAX_PLACE,
    SHARE,
    Guard,
    GuardOp,
    InvalidTransaction,
    LedgerEntry,
    LedgerView,
    PoolAction,
    PoolUnavailable,
    Posting,
    UnknownEntry,
    decide,
)
from wallet.model import (
    HOUSE,
    MAX_AMOUNT,
    AccountId,
    Command,
    EnterTournament,
    PayPrize,
    Pool,
    PoolEntry,
    RefundEntry,
    TxKind,
    player_account,
    pool_account,
)
from wallet.pools import check_pool, evolve_pool, replay_pool

ALICE = player_account("alice")
POOL = pool_account("t1")


def enter(entry: str = "e1", player: str = "alice", buy_in: int = 100, fee: int = 10,
          key: str = "k1", tournament: str = "t1") -> EnterTournament:
    return EnterTournament(player_id=player, tournament_id=tournament, entry_id=entry,
                           buy_in=buy_in, fee=fee, idempotency_key=key)


def refund(entry: str = "e1", player: str = "alice", key: str = "r1") -> RefundEntry:
    return RefundEntry(player_id=player, tournament_id="t1", entry_id=entry,
                       idempotency_key=key)


def prize(amount: int, player: str = "alice", place: int = 1, key: str = "p1") -> PayPrize:
    return PayPrize(player_id=player, tournament_id="t1", amount=amount, place=place,
                    idempotency_key=key)


def entered(*entries: PoolEntry, balance: int = 0) -> Pool:
    return Pool(tournament_id="t1", balance=balance, entries=entries)


E1 = PoolEntry(entry_id="e1", player_id="alice", buy_in=100, fee=10)


class TestDecide:
    def test_an_entry_pays_the_buy_in_to_the_pool_and_the_fee_to_the_house(self) -> None:
        """The player pays buy-in + fee, guarded by their balance; the pool gets the buy-in."""
        tx = decide(enter())
        assert tx.kind is TxKind.TOURNAMENT_ENTRY
        assert tx.postings == (Posting(ALICE, -110), Posting(POOL, 100), Posting(HOUSE, 10))
        assert tx.guards == (Guard(ALICE, GuardOp.AT_LEAST, 110),)
        assert tx.pool is not None and tx.pool.action is PoolAction.ENTER
        assert (tx.pool.ref, tx.pool.buy_in, tx.pool.fee) == ("e1", 100, 10)
        assert tx.scope == "entry:t1:k1" and tx.players == ("alice",)

    def test_a_free_entry_fee_posts_nothing_to_the_house(self) -> None:
        """Fee 0: two postings, none to the house."""
        assert decide(enter(fee=0)).postings == (Posting(ALICE, -100), Posting(POOL, 100))

    def test_a_refund_gives_back_what_the_entry_paid(self) -> None:
        """The amounts come from the pool's record of the entry, not from the caller."""
        tx = decide(refund(), LedgerView(entry=E1))
        assert tx.kind is TxKind.ENTRY_REFUND
        assert tx.postings == (Posting(POOL, -100), Posting(ALICE, 110), Posting(HOUSE, -10))
        assert tx.guards == (Guard(POOL, GuardOp.AT_LEAST, 100),
                             Guard(HOUSE, GuardOp.AT_LEAST, 10))
        assert tx.amount == 110 and tx.scope == "refund:t1:r1"

    def test_a_refund_of_an_entry_never_made_is_unknown(self) -> None:
        """No such entry in the pool (none read, or another entry): ``unknown_entry``."""
        for view in (LedgerView(), LedgerView(entry=E1)):
            with pytest.raises(UnknownEntry) as info:
                decide(refund(entry="e9"), view)
            assert info.value.reason == "unknown_entry"

    def test_a_refund_for_another_player_is_refused(self) -> None:
        """Bob cannot be refunded alice's entry."""
        with pytest.raises(PoolUnavailable) as info:
            decide(refund(player="bob"), LedgerView(entry=E1))
        assert info.value.reason == "entry_of_another_player"

    def test_a_cancels_share_by_chips_is_a_prize_of_place_0(self) -> None:
        """Issue 29, G3: an entry still in when its tournament is cancelled after a bust is
        paid its share of the pool by chips, with no place (0): paid from the pool as a
        prize, recorded with place 0, where it was refused ``place_out_of_range`` and the
        pool stayed full."""
        tx = decide(prize(70, place=SHARE))
        assert tx.kind is TxKind.PRIZE
        assert tx.postings == (Posting(POOL, -70), Posting(ALICE, 70))
        assert tx.guards == (Guard(POOL, GuardOp.AT_LEAST, 70),)
        assert tx.pool is not None and (tx.pool.place, tx.pool.ref) == (0, "p1")
        assert tx.fingerprint != decide(prize(70, place=1)).fingerprint

    def test_a_prize_is_guarded_by_the_pool(self) -> None:
        """From the pool to the player, never more than the pool holds."""
        tx = decide(prize(70, place=2))
        assert tx.postings == (Posting(POOL, -70), Posting(ALICE, 70))
        assert tx.guards == (Guard(POOL, GuardOp.AT_LEAST, 70),)
        assert tx.pool is not None and (tx.pool.place, tx.pool.ref) == (2, "p1")

    @pytest.mark.parametrize(
        ("command", "reason"),
        [
            (enter(buy_in=0), "non_positive_amount"),
            (enter(buy_in=-5), "non_positive_amount"),
            (enter(fee=-1), "negative_amount"),
            (enter(buy_in=MAX_AMOUNT + 1), "amount_too_large"),
            (enter(buy_in=MAX_AMOUNT, fee=1), "amount_too_large"),
            (prize(0), "non_positive_amount"),
            (prize(-3), "non_positive_amount"),
            (prize(MAX_AMOUNT + 1), "amount_too_large"),
            (prize(10, place=MAX_PLACE + 1), "place_out_of_range"),
        ],
    )
    def test_amounts_and_places_out_of_range_are_invalid(self, command: Command,
                                                         reason: str) -> None:
        """Never valid as sent: ``InvalidTransaction`` naming the reason."""
        with pytest.raises(InvalidTransaction) as info:
            decide(command)
        assert info.value.reason == reason


class TestPoolRecord:
    def test_the_first_entry_fixes_the_terms(self) -> None:
        """A later entry for another buy-in or fee is ``terms_mismatch``; an entry id is
        used once."""
        pool = entered(E1)
        check_pool(pool, decide(enter(entry="e2", player="bob")).pool)  # type: ignore[arg-type]
        for command, reason in ((enter(entry="e2", buy_in=99), "terms_mismatch"),
                                (enter(entry="e2", fee=0), "terms_mismatch"),
                                (enter(), "entry_exists")):
            with pytest.raises(PoolUnavailable) as info:
                check_pool(pool, decide(command).pool)  # type: ignore[arg-type]
            assert info.value.reason == reason

    def test_a_refunded_entry_is_refunded_once(self) -> None:
        """After its refund, the entry no longer stands: a second refund is refused."""
        tx = decide(refund(), LedgerView(entry=E1))
        after = evolve_pool(entered(E1, balance=100), tx)
        assert after.entries[0].refunded and after.balance == 0
        with pytest.raises(PoolUnavailable) as info:
            check_pool(after, tx.pool)  # type: ignore[arg-type]
        assert info.value.reason == "entry_refunded"

    def test_a_prize_needs_a_standing_entry(self) -> None:
        """Only a player with an entry not refunded may be paid."""
        with pytest.raises(PoolUnavailable) as info:
            check_pool(entered(E1), decide(prize(10, player="bob")).pool)  # type: ignore[arg-type]
        assert info.value.reason == "not_entered"

    def test_the_pool_is_rebuilt_from_the_ledger(self) -> None:
        """``replay_pool`` folds the ledger's tournament records back into the pool."""
        model = ModelWallet()
        model.open("alice", 1000)
        model.open("bob", 1000)
        for command in (enter(), enter(entry="e2", player="bob", key="k2"), refund(),
                        prize(60, player="bob", key="p1")):
            assert model.call(command).reason == ""
        ledger = [LedgerEntry(transaction_id=str(i), kind=tx.kind, postings=tx.postings,
                              pool=tx.pool) for i, tx in enumerate(model.applied)]
        assert replay_pool(ledger, "t1") == model.pool("t1")
        assert model.pool("t1").balance == 40 == model.balances[POOL.key]


# --- property -------------------------------------------------------------------------------

PLAYERS = ("p0", "p1", "p2", "p3")
TOURNAMENTS = ("t0", "t1")
TERMS = {"t0": (100, 10), "t1": (250, 0)}


def _command(data: st.DataObject, model: ModelWallet) -> Command:
    """A random command, mostly about entries that exist (a refund of a standing entry, a
    prize for an entrant), sometimes hostile (other terms, another player, an unknown
    entry, a prize beyond the pool)."""
    tournament = data.draw(st.sampled_from(TOURNAMENTS))
    pool = model.pool(tournament)
    key = str(data.draw(st.integers(0, 40)))
    kind = data.draw(st.sampled_from(["enter", "enter", "refund", "prize"]))
    if kind == "refund" and pool.entries and data.draw(st.integers(0, 9)):
        entry = data.draw(st.sampled_from(pool.entries))
        return RefundEntry(player_id=entry.player_id, tournament_id=tournament,
                           entry_id=entry.entry_id, idempotency_key=f"r{key}")
    if kind == "prize" and pool.entries and data.draw(st.integers(0, 9)):
        entry = data.draw(st.sampled_from(pool.entries))
        amount = data.draw(st.integers(1, max(1, pool.balance * 3 // 2)))
        return PayPrize(player_id=entry.player_id, tournament_id=tournament, amount=amount,
                        place=data.draw(st.integers(1, 9)), idempotency_key=f"p{key}")
    player = data.draw(st.sampled_from(PLAYERS))
    entry_id = f"e{data.draw(st.integers(0, 12))}"
    if kind == "refund":
        return RefundEntry(player_id=player, tournament_id=tournament, entry_id=entry_id,
                           idempotency_key=f"r{key}")
    if kind == "prize":
        return PayPrize(player_id=player, tournament_id=tournament,
                        amount=data.draw(st.integers(1, 600)), place=1,
                        idempotency_key=f"p{key}")
    buy_in, fee = TERMS[tournament]
    return EnterTournament(player_id=player, tournament_id=tournament, entry_id=entry_id,
                           buy_in=buy_in + data.draw(st.sampled_from([0, 0, 0, 0, 0, 1])),
                           fee=fee, idempotency_key=f"n{key}")


def _total(model: ModelWallet) -> int:
    return sum(model.balances.values())


@settings(max_examples=300, deadline=None)
@given(st.data(), st.integers(200, 1500), st.integers(1, 60))
def test_any_sequence_of_tournament_money_conserves_every_chip(
        data: st.DataObject, funds: int, steps: int) -> None:
    """No chip is created or lost, no pool goes below zero, every pool equals its buy-ins
    minus refunds minus prizes, the house holds the fees of the standing entries, and each
    scope is applied once (a retry answers the recorded outcome and moves nothing)."""
    model = ModelWallet()
    for name in PLAYERS:
        model.open(name, funds)
    deposits = funds * len(PLAYERS)
    sent: list[Command] = []
    for _ in range(steps):
        retry = bool(sent) and data.draw(st.integers(0, 3)) == 0
        command = data.draw(st.sampled_from(sent)) if retry else _command(data, model)
        before = dict(model.balances)
        applied = len(model.applied)
        outcome = model.call(command)
        sent.append(command)
        if outcome.reason or outcome.replayed:
            assert model.balances == before
            assert len(model.applied) == applied
        assert _total(model) == 0
        assert -model.balances.get("external", 0) == deposits
        for key, value in model.balances.items():
            assert key == "external" or value >= 0, key
        for tournament in TOURNAMENTS:
            pool = model.pool(tournament)
            assert pool.balance == model.balances.get(pool_account(tournament).key, 0)
            assert pool.balance == pool.buy_ins - pool.refunded - pool.prizes_paid >= 0
        assert model.balances.get(HOUSE.key, 0) == sum(model.pool(t).fees for t in TOURNAMENTS)
    scopes = [tx.scope for tx in model.applied]
    assert len(scopes) == len(set(scopes))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(PLAYERS), min_size=1, max_size=8), st.data())
def test_refunding_every_entry_gives_everyone_back_what_they_paid(
        entrants: list[str], data: st.DataObject) -> None:
    """Entries then a refund of each (in any order, each retried): every player's balance is
    what it was, the pool and the house are empty."""
    model = ModelWallet()
    for name in PLAYERS:
        model.open(name, 5000)
    start = dict(model.balances)
    entries = [(f"e{i}", name) for i, name in enumerate(entrants)]
    for entry, name in entries:
        assert model.call(enter(entry=entry, player=name, key=f"k{entry}")).reason == ""
    for entry, name in data.draw(st.permutations(entries)):
        command = refund(entry=entry, player=name, key=f"r{entry}")
        first, retry = model.call(command), model.call(command)
        assert first.reason == "" and retry.replayed and retry.balances == first.balances
    assert {k: v for k, v in model.balances.items() if v} == {
        k: v for k, v in start.items() if v}
    assert model.pool("t1").balance == 0 == model.balances.get(HOUSE.key, 0)


def test_account_keys_round_trip() -> None:
    """``pool:<tournament>`` parses back to the pool account."""
    assert AccountId.parse(POOL.key) == POOL and POOL.key == "pool:t1"
