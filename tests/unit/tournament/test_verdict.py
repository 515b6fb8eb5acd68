"""The auditors' verdict (services/tournament/verdict.py, issue 29: "does this tournament's
history check out?" over gRPC, where ``stud replay tournament`` needs Redis): whole runs of
the real model check out against a wallet that did what the log says; each kind of
discrepancy is found, in every phase (a cancelled tournament's unpaid refund included)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from studtest.tournament import Run, play
from tournament import commands as c
from tournament import events as ev
from tournament.state import Tournament
from tournament.structure import TURBO
from tournament.verdict import Pool, PoolEntry, problems, unpaid


def finished(seed: int = 3) -> Run:
    run = Run(random.Random(seed))
    run.do(c.Create("T", ev.Config("mtt", ev.MULTI_TABLE, 1000, 100, TURBO, seats=4,
                                   start_at=60.0)))
    for i in range(9):
        run.do(c.Register(f"p{i}"))
    play(run, tick=60.0)
    assert run.t.phase == "finished"
    return run


def wallet_of(t: Tournament) -> Pool:
    """The pool a wallet that did exactly what the log records would show."""
    refunds = {p.entry_id for k, p in t.payments.items()
               if isinstance(p, ev.RefundDue) and k in t.paid}
    prizes = sum(p.amount for k, p in t.payments.items()
                 if isinstance(p, ev.PrizeDue) and k in t.paid)
    entries = {e.entry_id: PoolEntry(e.player_id, t.cfg.buy_in, e.entry_id in refunds)
               for e in t.entries.values() if e.paid}
    buy_ins = sum(p.buy_in for p in entries.values())
    refunded = sum(p.buy_in for p in entries.values() if p.refunded)
    return Pool(balance=buy_ins - refunded - prizes, entries=entries, prizes_paid=prizes)


def test_a_whole_tournament_checks_out() -> None:
    t = finished().t
    assert problems(t, wallet_of(t)) == []
    assert problems(t, None) == []  # the log alone


def test_an_unpaid_prize_a_stray_charge_and_a_short_pool_are_found() -> None:
    t = finished().t
    prize = next(k for k, p in t.payments.items() if isinstance(p, ev.PrizeDue))
    owed = replace(t, paid=t.paid - {prize})
    assert problems(owed, wallet_of(owed)) == [] and unpaid(t) == []
    assert [p for p in unpaid(owed) if prize in p and "not paid" in p]
    # the wallet paid it and the log did not record it: the wallet is ahead, not wrong
    assert problems(owed, wallet_of(t)) == []
    pool = wallet_of(t)
    stray = replace(pool, entries={**pool.entries, "e99": PoolEntry("x", 1000, False)},
                    balance=pool.balance + 1000)
    assert any("e99" in p for p in problems(t, stray))
    short = replace(pool, balance=pool.balance - 1)
    assert any("balance" in p for p in problems(t, short))


def test_a_cancelled_tournament_with_a_refund_never_paid_does_not_check_out() -> None:
    """G2's case: a cancelled tournament whose refund stayed due said verified=yes."""
    run = Run(random.Random(1))
    run.do(c.Create("S", ev.Config("sng", ev.SIT_AND_GO, 1000, 100, TURBO, seats=3)))
    (req,) = run.do(c.Register("p1"))
    run.do(c.SettleEntry(req.entry_id, True))
    run.do(c.Cancel("operator"))
    t = run.t
    assert problems(t, wallet_of(t)) == []  # no discrepancy, and not settled:
    assert [p for p in unpaid(t) if "refund/e1" in p and "not paid" in p]
    run.do(c.ConfirmPayment("refund/e1"))
    assert problems(run.t, wallet_of(run.t)) == [] and unpaid(run.t) == []


class Checked(Run):
    """A run whose every command's outcome (what a reader of the stream can see: a
    command's events are appended at once) is checked against a faithful wallet."""

    checked = 0

    def do(self, cmd: c.Command) -> list[ev.Event]:
        out = super().do(cmd)
        if self.t.config is not None:
            assert problems(self.t, wallet_of(self.t)) == [], cmd
            self.checked += 1
        return out


@pytest.mark.parametrize("seed", range(6))
def test_a_tournament_checks_out_after_every_command(seed: int) -> None:
    """Mid-run (hands in progress, entries being charged, payments in flight): nothing the
    process manager is still to do is a discrepancy."""
    run = Checked(random.Random(seed))
    sng = seed % 3 == 0
    run.do(c.Create("T", ev.Config("s", ev.SIT_AND_GO, 1000, 100, TURBO, seats=5) if sng else
                    ev.Config("m", ev.MULTI_TABLE, 1000, 100, TURBO, seats=3 + seed % 4,
                              start_at=60.0, late_through_level=2, re_entries=1)))
    for i in range(5 if sng else 8 + seed):
        run.do(c.Register(f"p{i}"))
    if not sng:
        run.do(c.SettleEntry("e1", True))
        run.do(c.Unregister("p0"))
    play(run, tick=60.0)
    assert run.t.phase == "finished" and unpaid(run.t) == [] and run.checked > 50
