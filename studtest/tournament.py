"""A pure run of a tournament (test support): the real model (``services/tournament``) driven
as the process manager drives it, against a small model of the tables' contract (seat any
empty seat at any time, unseat only between hands, no hand at a paused table, chips move only
inside a hand). Every choice comes from one seeded ``random.Random``, so a failing run is
reproduced by its seed; ``check`` states the invariants as comparisons that can fail, after
every step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from tournament import commands as c
from tournament import events as ev
from tournament import seating
from tournament.decide import decide
from tournament.payouts import prizes
from tournament.state import FINISHED, RUNNING, Tournament, apply


@dataclass
class World:
    """The tables as the table service would hold them."""

    seats: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict)
    """table -> seat -> (entry, chips)."""
    in_hand: dict[str, int] = field(default_factory=dict)
    """table -> hand in progress (its start stacks are ``starts``)."""
    starts: dict[str, dict[int, int]] = field(default_factory=dict)
    hands: dict[str, int] = field(default_factory=dict)
    paid: dict[str, int] = field(default_factory=dict)
    """player -> chips of the pool paid to them (prizes and refunds of the buy-in)."""


@dataclass
class Run:
    rng: random.Random
    t: Tournament = field(default_factory=Tournament)
    log: list[ev.Event] = field(default_factory=list)
    world: World = field(default_factory=World)
    now: float = 0.0
    hands: int = 0
    moves_unseated_in_hand: int = 0

    def do(self, cmd: c.Command) -> list[ev.Event]:
        events = decide(self.t, cmd, self.now, self.rng.randrange(2**32))
        self.t = apply(self.t, events)
        self.log.extend(events)
        return events

    # --- the process manager's side: one pending intent carried out -----------------------

    def intents(self) -> list[c.Command]:
        """Every step the process manager could take now, as the command it reports."""
        t, w = self.t, self.world
        out: list[c.Command] = []
        out.extend(c.SettleEntry(e.entry_id, True) for e in t.field() if not e.paid)
        for e in t.field():
            moving = t.move is not None and t.move.entry_id == e.entry_id
            if e.table_id and not e.seated and e.bust is None and not moving \
                    and e.table_id in t.tables:
                out.append(c.ConfirmSeat(e.entry_id))
        for k, table in t.tables.items():
            for s, entry in enumerate(table.seats, start=1):
                if entry is not None and t.entries[entry].bust is not None \
                        and not w.in_hand.get(k):
                    out.append(c.ConfirmSeatFreed(k, s))
        m = t.move
        if m is not None:
            if t.move_stack < 0:
                if not w.in_hand.get(m.from_table):
                    out.append(c.ConfirmUnseated(m.move_id, w.seats[m.from_table][m.from_seat][1]))
            else:
                out.append(c.ConfirmReseated(m.move_id))
        out.extend(c.ConfirmPayment(p) for p in t.payments if p not in t.paid)
        return out

    def carry_out(self, cmd: c.Command) -> None:
        """Make the world match what ``cmd`` reports, then report it."""
        t, w = self.t, self.world
        if isinstance(cmd, c.ConfirmSeat):
            e = t.entries[cmd.entry_id]
            table = w.seats.setdefault(e.table_id, {})
            assert e.seat not in table, f"seat {e.table_id}/{e.seat} is taken"
            table[e.seat] = (e.entry_id, e.chips)
        elif isinstance(cmd, c.ConfirmSeatFreed):
            entry, chips = w.seats[cmd.table_id].pop(cmd.seat)
            assert chips == 0, f"{entry} unseated busted with {chips} chips"
        elif isinstance(cmd, c.ConfirmUnseated):
            m = t.move
            assert m is not None and not w.in_hand.get(m.from_table)
            entry, chips = w.seats[m.from_table].pop(m.from_seat)
            assert entry == m.entry_id
        elif isinstance(cmd, c.ConfirmReseated):
            m = t.move
            assert m is not None
            table = w.seats.setdefault(m.to_table, {})
            assert m.to_seat not in table, "the move's seat is taken"
            table[m.to_seat] = (m.entry_id, t.move_stack)
        elif isinstance(cmd, c.ConfirmPayment):
            p = t.payments[cmd.payment_id]
            amount = p.amount if isinstance(p, ev.PrizeDue) else p.buy_in
            w.paid[p.player_id] = w.paid.get(p.player_id, 0) + amount
        self.do(cmd)

    # --- the tables' side ------------------------------------------------------------------

    def table_steps(self) -> list[tuple[str, str]]:
        t, w = self.t, self.world
        out: list[tuple[str, str]] = []
        for k in list(w.seats):
            if k not in t.tables and not w.in_hand.get(k):
                out.append(("close", k))
        for k, table in t.tables.items():
            if w.in_hand.get(k):
                out.append(("end", k))
            elif not table.holds and sum(1 for _, chips in w.seats.get(k, {}).values()
                                         if chips > 0) >= 2:
                out.append(("start", k))
        return out

    def table_step(self, kind: str, k: str) -> None:
        w = self.world
        if kind == "close":
            left = w.seats.pop(k)
            assert t_finished_or_empty(self.t, left), f"table {k} closed with chips {left}"
            return
        if kind == "start":
            w.hands[k] = w.hands.get(k, 0) + 1
            w.in_hand[k] = w.hands[k]
            w.starts[k] = {s: chips for s, (_, chips) in w.seats[k].items() if chips > 0}
            self.hands += 1
            self.do(c.ReportHandStarted(k, w.in_hand[k], tuple(sorted(w.starts[k].items()))))
            return
        hand, start = w.in_hand.pop(k), w.starts[k]
        dealt = list(start)
        winner = self.rng.choice(dealt)
        end = dict(start)
        for s in dealt:
            if s != winner:
                loss = self.rng.choice((0, 0, 0, 0, start[s] // 4, start[s] // 2, start[s]))
                end[s] -= loss
                end[winner] += loss
        for s, chips in end.items():
            w.seats[k][s] = (w.seats[k][s][0], chips)
        self.do(c.ReportHandEnded(k, hand, tuple(sorted(end.items()))))

    def total_chips(self) -> int:
        in_seats = sum(chips for table in self.world.seats.values() for _, chips in table.values())
        moving = self.t.move_stack if self.t.move is not None and self.t.move_stack >= 0 else 0
        mover = self.t.move.entry_id if self.t.move is not None else ""
        unseated = sum(e.chips for e in self.t.field()
                       if e.paid and e.bust is None and e.table_id and not e.seated
                       and e.entry_id != mover)
        return in_seats + moving + unseated


def t_finished_or_empty(t: Tournament, left: dict[int, tuple[str, int]]) -> bool:
    return t.phase != RUNNING or all(chips == 0 for _, chips in left.values())


def check(run: Run) -> None:
    """The invariants after a step: chips conserved, nobody seated twice, tables balanced
    whenever nothing is pending and no table is in a hand."""
    t = run.t
    if t.phase == RUNNING:
        started = sum(1 for e in t.field() if e.paid)
        assert run.total_chips() == started * t.cfg.structure.starting_stack, "chips changed"
        places = [s for table in t.tables.values() for s in table.seats if s is not None]
        assert len(places) == len(set(places)), "an entry holds two seats"
        world = [e for table in run.world.seats.values() for e, _ in table.values()]
        assert len(world) == len(set(world)), "an entry sits at two tables"
        quiet = not run.intents() and not run.world.in_hand
        if quiet and not t.registration_open:
            alive = t.alive()
            assert seating.spread(t.layout(), alive) <= 1, f"unbalanced {t.layout()}"
            assert len(t.tables) == seating.tables_needed(len(alive), t.cfg.seats), \
                "a table should have broken"


def play(run: Run, *, max_steps: int = 200_000, tick: float = 30.0) -> Run:
    """Carry out intents and table steps in an order the seed draws, the clock moving on
    every so often, until the tournament is over."""
    for _ in range(max_steps):
        if run.t.phase not in (RUNNING, "registering") and not run.intents() \
                and not run.world.in_hand and not run.table_steps():
            return run
        options: list[tuple[str, object]] = [("intent", i) for i in run.intents()]
        options += [("table", s) for s in run.table_steps()]
        if not options or run.rng.random() < 0.05:
            run.now += tick
            run.do(c.Tick())
            late_entries(run)
        else:
            kind, what = run.rng.choice(options)
            if kind == "intent":
                assert isinstance(what, c.ConfirmSeat | c.ConfirmSeatFreed | c.ConfirmUnseated
                                  | c.ConfirmReseated | c.ConfirmPayment | c.SettleEntry)
                run.carry_out(what)
                if run.rng.random() < 0.1:  # the process manager again, after a crash
                    assert run.do(what) == [], f"a repeat of {what} changed the tournament"
            else:
                assert isinstance(what, tuple)
                run.table_step(*what)
        check(run)
    raise AssertionError(f"the tournament did not end in {max_steps} steps")


def late_entries(run: Run) -> None:
    """While late registration is open, now and then a newcomer registers or a busted
    player re-enters (when the rules allow it)."""
    t = run.t
    if t.phase != RUNNING or not t.registration_open or run.rng.random() < 0.5:
        return
    out = [e.player_id for e in t.field()
           if all(x.bust is not None for x in t.field() if x.player_id == e.player_id)]
    entries = [x for x in t.field() if out and x.player_id == out[0]]
    if out and len(entries) <= t.cfg.re_entries and run.rng.random() < 0.5:
        run.do(c.ReEnter(out[0]))
    elif not t.cfg.capacity or len(t.field()) < t.cfg.capacity:
        run.do(c.Register(f"late{len(t.order)}"))


def log_check(log: list[ev.Event]) -> None:
    """From the log alone: nobody leaves a table in a hand (no ``MoveStarted`` or
    ``MoveUnseated`` while its table's hand is in progress), and in hand for hand no table
    starts a second hand in one round."""
    in_hand: dict[str, bool] = {}
    h4h, dealt = False, set[str]()
    move: ev.MoveStarted | None = None
    for e in log:
        if isinstance(e, ev.HandStarted):
            in_hand[e.table_id] = True
            if h4h:
                assert e.table_id not in dealt, f"{e.table_id} dealt twice in one round"
                dealt.add(e.table_id)
        elif isinstance(e, ev.HandEnded):
            in_hand[e.table_id] = False
        elif isinstance(e, ev.MoveStarted):
            assert not in_hand.get(e.from_table), f"{e.move_id} started in a hand"
            move = e
        elif isinstance(e, ev.MoveUnseated):
            assert move is not None and not in_hand.get(move.from_table), \
                f"{e.move_id} unseated in a hand"
        elif isinstance(e, ev.HandForHand):
            h4h, dealt = e.on, set()
        elif isinstance(e, ev.HandForHandRound):
            dealt = set()


def final_check(run: Run) -> None:
    """The end: the prizes sum to the pool, the places tile 1..field, better places never
    win less, and the players were paid exactly the prizes."""
    t = run.t
    assert t.phase == FINISHED, t.phase
    assert apply(Tournament(), run.log) == t, "the log does not fold to the state"
    log_check(run.log)
    field_size = sum(1 for e in t.field() if e.paid)
    won = {p.entry_id: p.amount for p in t.payments.values() if isinstance(p, ev.PrizeDue)}
    assert sum(won.values()) == t.pool(), "prizes do not sum to the pool"
    assert sum(run.world.paid.values()) == t.pool()
    groups: dict[tuple[int, int], int] = {}
    for s in t.standings():
        groups[s.place, s.place_to] = groups.get((s.place, s.place_to), 0) + 1
    assert all(k == b - a + 1 for (a, b), k in groups.items()), "a tie's width is wrong"
    slots = sorted(p for a, b in groups for p in range(a, b + 1))
    assert slots == list(range(1, field_size + 1)), "places are not a permutation"
    table = prizes(t.pool(), field_size)
    for s in t.standings():
        k = s.place_to - s.place + 1
        share = sum(table[p - 1] for p in range(s.place, s.place_to + 1) if p <= len(table))
        assert share // k <= won.get(s.entry, 0) <= share // k + 1
