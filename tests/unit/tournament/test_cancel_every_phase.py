"""A cancel at every phase of a tournament paid all the way to an empty pool (issue 29, G3),
pure: the real model played as the process manager plays it (``studtest.tournament``), then
cancelled, and every payment the cancel makes due decided by the wallet's own ledger
(``wallet.ledger.decide``, the rules ``PayPrize`` and ``RefundEntry`` apply) from a pool that
holds exactly the buy-ins charged.

G3: after the first bust, a cancel pays the entries still in their share of the pool by chips
as ``PrizeDue(place=0)``; the wallet refused any place outside 1..MAX_PLACE, so the process
manager retried for ever and the pool stayed full. The two sides now agree: place 0 is a
cancel's share by chips (wallet.proto, ``PayPrizeRequest.place``)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import pytest

from studtest.tournament import Run, check
from tournament import commands as c
from tournament import events as ev
from tournament.state import CANCELLED, REGISTERING, RUNNING
from tournament.structure import TURBO
from tournament.verdict import Pool, PoolEntry, problems, unpaid
from wallet.ledger import check_guards, decide, evolve
from wallet.model import EnterTournament, PayPrize, RefundEntry, player_account, pool_account
from wallet.model import PoolEntry as WalletEntry
from wallet.transaction import LedgerView

TID = "T"
ENTRANTS = 14
BUY_IN, FEE = 1000, 100
Phase = Callable[[Run], bool]


def _busts(run: Run) -> bool:
    t = run.t
    return t.rounds >= 1 and len(t.alive()) > t.paid_places() + 1 and len(t.tables) > 1


def _bubble(run: Run) -> bool:
    t = run.t
    return len(t.alive()) == t.paid_places() + 1 and not run.world.in_hand


def _hand_for_hand(run: Run) -> bool:
    return run.t.hand_for_hand and bool(run.world.in_hand)


def _final_table(run: Run) -> bool:
    t = run.t
    return len(t.tables) == 1 and t.rounds >= 1 and len(t.alive()) >= 2 \
        and len(t.alive()) <= t.paid_places()


PHASES: dict[str, Phase] = {
    "registering": lambda run: True,
    "before the first hand": lambda run: run.t.phase == RUNNING,
    "after busts": _busts,
    "on the bubble": _bubble,
    "in hand for hand": _hand_for_hand,
    "at the final table": _final_table,
}


def started(seed: int) -> Run:
    run = Run(random.Random(seed))
    run.do(c.Create(TID, ev.Config("mtt", ev.MULTI_TABLE, BUY_IN, FEE, TURBO, seats=4,
                                   start_at=60.0)))
    for i in range(ENTRANTS):
        run.do(c.Register(f"p{i}"))
    for e in list(run.t.field())[:-2]:  # two entries still being charged
        run.carry_out(c.SettleEntry(e.entry_id, True))
    return run


def advance(run: Run, until: Phase, max_steps: int = 100_000) -> bool:
    """Play on, as ``studtest.tournament.play`` does, until ``until`` holds (True) or the
    tournament is over (False)."""
    for _ in range(max_steps):
        if run.t.phase not in (REGISTERING, RUNNING):
            return False
        if until(run):
            return True
        options: list[tuple[str, object]] = [("intent", i) for i in run.intents()]
        options += [("table", s) for s in run.table_steps()]
        if not options or run.rng.random() < 0.05:
            run.now += 30.0
            run.do(c.Tick())
        else:
            kind, what = run.rng.choice(options)
            if kind == "intent":
                run.carry_out(what)  # type: ignore[arg-type]
            else:
                run.table_step(*what)  # type: ignore[misc]
        check(run)
    raise AssertionError("the phase was never reached")


def cancelled_at(phase: str) -> Run:
    """A run cancelled at ``phase`` (the first seed that reaches it), then every step the
    process manager takes after a cancel: the charges in flight and every payment."""
    for seed in range(200):
        run = started(seed)
        if advance(run, PHASES[phase]):
            break
    else:
        raise AssertionError(f"no seed reached {phase}")
    run.do(c.Cancel("the room closes"))
    assert run.t.phase == CANCELLED
    for _ in range(1000):
        steps = [i for i in run.intents() if isinstance(i, c.SettleEntry | c.ConfirmPayment)]
        if not steps:
            return run
        run.carry_out(steps[0])
    raise AssertionError("the payments never ended")


class Ledger:
    """The wallet's pure ledger over one tournament: balances, and its pool's entries."""

    def __init__(self) -> None:
        self.balances: dict[str, int] = {}
        self.entries: dict[str, WalletEntry] = {}
        self.prizes = 0

    def apply(self, command: EnterTournament | RefundEntry | PayPrize) -> None:
        view = LedgerView(balances=self.balances,
                          entry=self.entries.get(getattr(command, "entry_id", "")))
        transaction = decide(command, view)  # the wallet's refusal raises here
        check_guards(self.balances, transaction)
        self.balances = evolve(self.balances, transaction.postings)
        if isinstance(command, EnterTournament):
            self.entries[command.entry_id] = WalletEntry(
                entry_id=command.entry_id, player_id=command.player_id,
                buy_in=command.buy_in, fee=command.fee)
        elif isinstance(command, RefundEntry):
            self.entries[command.entry_id] = replace(self.entries[command.entry_id],
                                                     refunded=True)
        else:
            self.prizes += command.amount

    def pool(self) -> int:
        return self.balances.get(pool_account(TID).key, 0)


def paid_through_the_wallet(run: Run) -> Ledger:
    """What the wallet does for the run's log: each entry charged, each payment paid."""
    t, ledger = run.t, Ledger()
    ledger.balances = {player_account(e.player_id).key: 10 * (BUY_IN + FEE)
                       for e in t.entries.values()}
    for e in t.entries.values():
        if e.paid:
            ledger.apply(EnterTournament(player_id=e.player_id, tournament_id=TID,
                                         entry_id=e.entry_id, buy_in=BUY_IN, fee=FEE,
                                         idempotency_key=f"enter-{e.entry_id}"))
    for payment_id, p in t.payments.items():
        if isinstance(p, ev.RefundDue):
            ledger.apply(RefundEntry(player_id=p.player_id, tournament_id=TID,
                                     entry_id=p.entry_id, idempotency_key=payment_id))
        else:
            ledger.apply(PayPrize(player_id=p.player_id, tournament_id=TID, amount=p.amount,
                                  place=p.place, idempotency_key=payment_id))
    return ledger


@pytest.mark.parametrize("phase", list(PHASES))
def test_a_cancel_pays_out_to_an_empty_pool(phase: str) -> None:
    run = cancelled_at(phase)
    t = run.t
    assert unpaid(t) == [] and set(t.payments) == t.paid
    assert all(e.paid or e.gone for e in t.field())
    ledger = paid_through_the_wallet(run)
    assert ledger.pool() == 0
    pool = Pool(balance=ledger.pool(), prizes_paid=ledger.prizes,
                entries={k: PoolEntry(e.player_id, e.buy_in, e.refunded)
                         for k, e in ledger.entries.items()})
    assert problems(t, pool) == []
    # every player got back at least nothing lost to the room but fees kept on a share
    shares = [p for p in t.payments.values() if isinstance(p, ev.PrizeDue) and p.place == 0]
    if phase in ("registering", "before the first hand"):
        assert not shares and all(isinstance(p, ev.RefundDue) for p in t.payments.values())
    else:
        assert shares, "the entries still in share the rest of the pool by chips"
        alive = {e.entry_id for e in t.field() if e.paid and e.bust is None}
        assert {p.entry_id for p in shares} <= alive
