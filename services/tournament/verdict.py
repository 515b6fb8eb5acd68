"""Whether a tournament's history checks out (``VerifyTournament``, for auditors): its folded
log against itself and against the wallet's record of its pool, pure.

What is checked, in every phase (a cancelled tournament's money as much as a finished one's):

- money in the log: the refunds and prizes due never exceed the buy-ins charged, and once it
  is over they are exactly those buy-ins (:func:`unpaid` lists those not paid yet: a
  tournament over is settled only when it lists none);
- chips: the entries' stacks (at their last hand's end) are the starting stacks of the paid
  entries, while it runs and at the end;
- places (finished): the standings tile 1..field, and each prize's place is its entry's;
- the wallet's pool (when it answers): every entry it charged is one the log took (paid, or
  its charge being recorded), every paid entry was charged the buy-in, every refund and prize
  the log says paid was paid, nothing refunded that the log does not owe, and the balance is
  what the record holds (nothing once every payment is made).

The tables' own logs (each move's and bust's stack at the seat) are ``stud replay
tournament``'s: this service does not read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tournament import events as ev
from tournament.state import CANCELLED, FINISHED, RUNNING, Tournament


@dataclass(frozen=True, slots=True)
class PoolEntry:
    player_id: str
    buy_in: int
    refunded: bool


@dataclass(frozen=True, slots=True)
class Pool:
    """The wallet's record of a tournament's pool (``GetPool``)."""

    balance: int
    entries: Mapping[str, PoolEntry]
    prizes_paid: int


def problems(t: Tournament, pool: Pool | None) -> list[str]:
    """Every discrepancy found, each a sentence; [] when the history checks out."""
    out = _money(t) + _chips(t) + _places(t)
    if pool is not None:
        out += _wallet(t, pool)
    return out


def _over(t: Tournament) -> bool:
    return t.phase in (FINISHED, CANCELLED)


def _money(t: Tournament) -> list[str]:
    out: list[str] = []
    charged = t.cfg.buy_in * sum(1 for e in t.entries.values() if e.paid)
    refunds = sum(p.buy_in for p in t.payments.values() if isinstance(p, ev.RefundDue))
    prizes = sum(p.amount for p in t.payments.values() if isinstance(p, ev.PrizeDue))
    if refunds + prizes > charged:
        out.append(f"refunds {refunds:,} and prizes {prizes:,} due exceed the buy-ins "
                   f"charged, {charged:,}")
    elif _over(t) and refunds + prizes != charged:
        out.append(f"the tournament is {t.phase} with buy-ins of {charged:,} charged and "
                   f"{refunds + prizes:,} due back (refunds {refunds:,}, prizes {prizes:,})")
    return out


def unpaid(t: Tournament) -> list[str]:
    """Each refund or prize due and not recorded paid: the process manager's work in flight
    (a round or two), or money stuck if it stays (G2's cancelled tournament whose refunds
    were never paid)."""
    out: list[str] = []
    for k, p in t.payments.items():
        if k not in t.paid:
            amount = p.buy_in if isinstance(p, ev.RefundDue) else p.amount
            out.append(f"payment {k} ({amount:,} to {p.player_id}) is due and not paid")
    return out


def _chips(t: Tournament) -> list[str]:
    if t.phase not in (RUNNING, FINISHED):
        return []
    paid = [e for e in t.field() if e.paid]
    want = t.cfg.structure.starting_stack * len(paid)
    have = sum(e.settled for e in paid if e.bust is None)
    if have != want:
        return [f"the entries hold {have:,} chips, {len(paid)} starting stacks make {want:,}"]
    return []


def _places(t: Tournament) -> list[str]:
    if t.phase != FINISHED:
        return []
    out: list[str] = []
    standings = t.standings()
    groups: dict[tuple[int, int], int] = {}
    for s in standings:
        groups[s.place, s.place_to] = groups.get((s.place, s.place_to), 0) + 1
    covered = sorted(p for (a, b), n in groups.items() if n == b - a + 1 for p in range(a, b + 1))
    if covered != list(range(1, len(standings) + 1)):
        out.append(f"the places {sorted(groups)} do not tile 1..{len(standings)}")
    by_entry = {s.entry: s for s in standings}
    for p in t.payments.values():
        own = by_entry.get(p.entry_id)
        if isinstance(p, ev.PrizeDue) and p.place and (
                own is None or (own.place, own.place_to) != (p.place, p.place_to)):
            out.append(f"{p.payment_id} pays place {p.place}, the entry's standing is "
                       f"{(own.place, own.place_to) if own else 'none'}")
    return out


def _wallet(t: Tournament, pool: Pool) -> list[str]:
    out: list[str] = []
    buy_in = t.cfg.buy_in
    refunds = {p.entry_id: k for k, p in t.payments.items() if isinstance(p, ev.RefundDue)}
    for entry_id, w in pool.entries.items():
        e = t.entries.get(entry_id)
        if e is None or e.player_id != w.player_id or e.dropped:
            out.append(f"the wallet charged entry {entry_id} ({w.player_id}), which the "
                       "log " + ("dropped" if e is not None and e.dropped else "never took"))
        elif w.buy_in != buy_in:
            out.append(f"the wallet charged entry {entry_id} a buy-in of {w.buy_in:,}, "
                       f"the tournament's is {buy_in:,}")
        if w.refunded and entry_id not in refunds:
            out.append(f"the wallet refunded entry {entry_id}, the log owes it no refund")
    for e in t.entries.values():
        if e.paid and e.entry_id not in pool.entries:
            out.append(f"entry {e.entry_id} is paid in the log, the wallet never charged it")
    for entry_id, k in refunds.items():
        charged = pool.entries.get(entry_id)
        if k in t.paid and (charged is None or not charged.refunded):
            out.append(f"{k} is paid in the log, the wallet has not refunded it")
    made = sum(p.amount for k, p in t.payments.items()
               if isinstance(p, ev.PrizeDue) and k in t.paid)
    due = sum(p.amount for p in t.payments.values() if isinstance(p, ev.PrizeDue))
    if not made <= pool.prizes_paid <= due:
        out.append(f"the wallet paid prizes of {pool.prizes_paid:,}, the log made {made:,} "
                   f"of {due:,} due")
    held = sum(w.buy_in for w in pool.entries.values() if not w.refunded) - pool.prizes_paid
    if pool.balance != held:
        out.append(f"the wallet's pool balance is {pool.balance:,}, its entries and prizes "
                   f"leave {held:,}")
    if _over(t) and set(t.payments) <= t.paid and pool.balance != 0:
        out.append(f"every payment is made and the pool still holds {pool.balance:,}")
    return out
