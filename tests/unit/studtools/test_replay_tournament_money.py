"""``stud replay tournament``'s money check compares every money fact whatever the phase
(issue 29, G2: ``check_money`` returned at once for a cancelled tournament without prizes, so
G1's tournament, cancelled with a refund due and never paid, 2,200 left in the pool and an
entry the wallet charged that the log never took, said ``verified=yes``; G3's, cancelled with
6 prizes due and none paid, the same)."""

from __future__ import annotations

import json

from stud.v1 import tournament_pb2 as pb
from studtools.replay_tournament import History, check_money

E = pb.TournamentEvent
BUY_IN, FEE = 1000, 100


def cancelled(paid: list[str], refunds: list[str], made: list[str]) -> History:
    h = History(tournament_id="T", buy_in=BUY_IN, paid=list(paid), cancelled="operator",
                players={e: f"p-{e}" for e in ("e1", "e2", "e3")})
    h.refunds = [E.RefundDue(payment_id=f"refund/{e}", entry_id=e, player_id=f"p-{e}",
                             buy_in=BUY_IN, fee=FEE) for e in refunds]
    h.paid_out = {f"refund/{e}" for e in made}
    return h


def pool(entries: dict[str, bool], balance: int,
         prizes: dict[str, int] | None = None) -> dict[str, str]:
    """The wallet's pool hash as ``read_pool`` returns it: entry -> refunded, the balance."""
    out = {f"entry:{e}": json.dumps({"n": i, "player": f"p-{e}", "buy_in": BUY_IN,
                                     "fee": FEE, "refunded": int(refunded)})
           for i, (e, refunded) in enumerate(entries.items(), 1)}
    for i, (key, amount) in enumerate((prizes or {}).items(), 1):
        out[f"prize:{key}"] = json.dumps({"n": i, "player": "p-e1", "amount": amount,
                                          "place": 0})
    out["balance"] = str(balance)
    return out


def test_g1s_cancelled_tournament_does_not_check_out() -> None:
    """e1 paid and refund due (not paid); e2 charged by the wallet, never recorded."""
    h = cancelled(["e1"], ["e1"], [])
    problems = check_money(h, pool({"e1": False, "e2": False}, 2000))
    assert any("refund/e1" in p and "not paid" in p for p in problems)
    assert any("e2" in p and "charged" in p for p in problems)
    assert any("2,000" in p for p in problems)


def test_a_refund_due_and_not_paid_is_a_problem_without_the_wallet() -> None:
    assert check_money(cancelled(["e1", "e2"], ["e1", "e2"], ["e1"]), None) == [
        "payment refund/e2 (1,000 to p-e2) is due and not paid"]


def test_a_cancelled_tournament_refunded_to_an_empty_pool_checks_out() -> None:
    h = cancelled(["e1", "e2"], ["e1", "e2"], ["e1", "e2"])
    assert check_money(h, pool({"e1": True, "e2": True}, 0)) == []


def test_g3s_shares_due_and_not_paid_do_not_check_out() -> None:
    h = cancelled(["e1", "e2", "e3"], [], [])
    h.prizes = [E.PrizeDue(payment_id=f"prize/{e}", entry_id=e, player_id=f"p-{e}",
                           amount=1000, place=0) for e in ("e1", "e2", "e3")]
    problems = check_money(h, pool({"e1": False, "e2": False, "e3": False}, 3000))
    assert sum("is due and not paid" in p for p in problems) == 3
    assert any("pool still holds 3,000" in p for p in problems)
    h.paid_out = {"prize/e1", "prize/e2", "prize/e3"}
    assert check_money(h, pool({"e1": False, "e2": False, "e3": False}, 0,
                               {"k1": 1000, "k2": 1000, "k3": 1000})) == []


def test_a_pool_that_keeps_what_it_paid_out_is_a_problem() -> None:
    h = cancelled(["e1", "e2"], ["e1", "e2"], ["e1", "e2"])
    problems = check_money(h, pool({"e1": True, "e2": False}, 1000))
    assert any("has not refunded" in p for p in problems)
