"""What the tournament decides on its own after each command (pure): one step at a time,
``decide`` folding each step before asking for the next.

In order: the start (a sit & go when full; a multi-table at its time, or its cancellation
below the minimum field), seats for new entries, the level clock and the breaks, the close of
registration, the end, then balancing (a table broken, or one player moved) and hand for hand.
Holds: a table deals no new hand while it holds any reason (``break``, ``balance``,
``breaking``, ``hand_for_hand``); the process manager pauses and resumes dealing to match.
"""

from __future__ import annotations

from tournament import events as ev
from tournament import seating
from tournament.payouts import split_by_chips, split_places
from tournament.state import REGISTERING, Tournament
from tournament.structure import clock_at

BREAK, BALANCE, BREAKING, H4H = "break", "balance", "breaking", "hand_for_hand"


def conduct(t: Tournament, now: float, seed: int) -> list[ev.Event]:
    if t.phase == REGISTERING:
        return _start(t, now, seed)
    for step in (_seat_entries, _clock, _close_registration, _finish, _break_holds,
                 _balance, _hand_for_hand):
        out = step(t, now)
        if out:
            return out
    return []


def _pending(t: Tournament) -> bool:
    return any(not e.paid for e in t.field())


def _start(t: Tournament, now: float, seed: int) -> list[ev.Event]:
    cfg = t.cfg
    paid = [e.entry_id for e in t.field() if e.paid]
    if _pending(t):
        return []
    if cfg.format == ev.SIT_AND_GO:
        if len(paid) < cfg.seats:
            return []
    elif now < cfg.start_at:
        return []
    elif len(paid) < cfg.min_entrants:
        return cancel(t, "below_minimum", now)
    n = seating.tables_needed(len(paid), cfg.seats)
    ids = [f"{t.tournament_id}.{i}" for i in range(1, n + 1)]
    out: list[ev.Event] = [ev.Started(now, seed), ev.LevelStarted(1, now)]
    out.extend(ev.TableOpened(i) for i in ids)
    stack = cfg.structure.starting_stack
    out.extend(ev.SeatAssigned(e, tb, s, stack)
               for e, tb, s in seating.first_draw(paid, ids, cfg.seats, seed))
    if cfg.late_through_level == 0:
        out.append(ev.RegistrationClosed(now))
    return out


def _seat_entries(t: Tournament, now: float) -> list[ev.Event]:
    """A late entry takes the last open seat at the shortest table (a new table if none)."""
    for e in t.field():
        if e.paid and e.bust is None and not e.table_id:
            stack = t.cfg.structure.starting_stack
            layout = {k: v for k, v in t.layout().items() if not t.tables[k].breaking}
            where = seating.late_seat(layout, t.alive())
            if where is None:
                table_id = f"{t.tournament_id}.{t.tables_opened + 1}"
                return [ev.TableOpened(table_id), ev.SeatAssigned(e.entry_id, table_id,
                                                                  t.cfg.seats, stack)]
            return [ev.SeatAssigned(e.entry_id, where[0], where[1], stack)]
    return []


def _clock(t: Tournament, now: float) -> list[ev.Event]:
    structure = t.cfg.structure
    clock = clock_at(structure, t.started_at, now)
    if (clock.level, clock.on_break) <= (t.level, t.on_break):
        return []
    if not t.on_break and structure.break_after(t.level):
        return [ev.BreakStarted(t.level, now)]
    out: list[ev.Event] = [ev.LevelStarted(t.level + 1, now)]
    late = t.cfg.late_through_level
    if t.registration_open and t.level + 1 > late:
        out.append(ev.RegistrationClosed(now))
    return out


def _close_registration(t: Tournament, now: float) -> list[ev.Event]:
    """Late registration closes early when fewer than two entries are left in."""
    if t.registration_open and len(t.alive()) < 2 and not _pending(t):
        return [ev.RegistrationClosed(now)]
    return []


def _finish(t: Tournament, now: float) -> list[ev.Event]:
    alive = t.alive()
    if t.registration_open or len(alive) != 1 or t.move is not None or _pending(t):
        return []  # an entry still being charged was taken while open: it plays
    (winner,) = alive
    out: list[ev.Event] = [ev.Finished(winner, now)]
    field = sum(1 for e in t.field() if e.paid)
    won = split_places(t.pool(), field, t.standings(), t.order)
    by_entry = {s.entry: s for s in t.standings()}
    for entry in t.order:
        if won.get(entry, 0) > 0:
            s = by_entry[entry]
            out.append(ev.PrizeDue(f"prize/{entry}", entry, t.entries[entry].player_id,
                                   won[entry], s.place, s.place_to))
    out.extend(ev.TableClosed(k) for k in t.tables)
    return out


def cancel(t: Tournament, reason: str, now: float) -> list[ev.Event]:
    """The operator's cancel (or a field below its minimum at the start): before any bust
    every entry's buy-in and fee back; after one, the final paid places already out get
    their prizes and the rest of the pool is split among the entries still in by chips."""
    cfg = t.cfg
    out: list[ev.Event] = [ev.Cancelled(reason, now)]
    paid = [e for e in t.field() if e.paid]
    if t.rounds == 0:
        out.extend(ev.RefundDue(f"refund/{e.entry_id}", e.entry_id, e.player_id, cfg.buy_in,
                                cfg.fee) for e in paid)
    else:
        pool = t.pool()
        won: dict[str, int] = {}
        standings = {s.entry: s for s in t.standings()}
        if not t.registration_open:
            out_now = [s for s in standings.values() if t.entries[s.entry].bust is not None]
            won = split_places(pool, len(paid), out_now, t.order)
        alive = [(e, t.entries[e].chips) for e in t.order if e in t.alive()]
        shares = split_by_chips(pool - sum(won.values()), alive)
        for e in paid:
            s = standings[e.entry_id]
            if won.get(e.entry_id, 0) > 0:
                out.append(ev.PrizeDue(f"prize/{e.entry_id}", e.entry_id, e.player_id,
                                       won[e.entry_id], s.place, s.place_to))
            elif shares.get(e.entry_id, 0) > 0:
                out.append(ev.PrizeDue(f"prize/{e.entry_id}", e.entry_id, e.player_id,
                                       shares[e.entry_id], 0, 0))
    out.extend(ev.TableClosed(k) for k in t.tables)
    return out


def _holds(t: Tournament, reason: str, want: set[str]) -> list[ev.Event]:
    """Hold ``reason`` at exactly the tables in ``want``."""
    out: list[ev.Event] = []
    for k, table in t.tables.items():
        if k in want and reason not in table.holds:
            out.append(ev.TableHeld(k, reason))
        elif k not in want and reason in table.holds:
            out.append(ev.TableReleased(k, reason))
    return out


def _break_holds(t: Tournament, now: float) -> list[ev.Event]:
    return _holds(t, BREAK, set(t.tables) if t.on_break else set())


def _balance(t: Tournament, now: float) -> list[ev.Event]:
    alive = t.alive()
    if t.move is not None:
        return _holds(t, BALANCE, {t.move.from_table} if t.move_stack < 0 else set())
    for k, table in t.tables.items():
        if table.breaking:
            if len(alive) > (len(t.tables) - 1) * t.cfg.seats:  # late entries came in
                return [ev.TableKept(k), ev.TableReleased(k, BREAKING)]
            step = seating.break_move(t.layout(), alive, k)
            if step is None:
                if all(s is None for s in table.seats):
                    return [ev.TableClosed(k)]
                return _holds(t, BALANCE, set())
            return _holds(t, BALANCE, set()) or _start_move(t, step)
    if len(alive) < 2:
        return _holds(t, BALANCE, set())
    plan = seating.plan(t.layout(), alive, t.cfg.seats)
    if isinstance(plan, seating.BreakTable):
        return [ev.TableBreaking(plan.table_id), ev.TableHeld(plan.table_id, BREAKING)]
    if plan is None:
        return _holds(t, BALANCE, set())
    return _holds(t, BALANCE, {plan.from_table}) or _start_move(t, plan)


def _start_move(t: Tournament, step: seating.Move) -> list[ev.Event]:
    """Start a move once its table is held and between hands (never a player in a hand)
    and the table has confirmed the player's seat."""
    if t.tables[step.from_table].in_hand or not t.entries[step.entry].seated:
        return []
    return [ev.MoveStarted(f"m{t.moves_started + 1}", step.entry, step.from_table, step.from_seat,
                           step.to_table, step.to_seat)]


def _hand_for_hand(t: Tournament, now: float) -> list[ev.Event]:
    """From paid places + 1 left in (registration closed, several tables) until the bubble
    bursts, every table plays one hand and waits for all the others before the next."""
    alive = t.alive()
    want = (not t.registration_open and len(t.tables) > 1
            and len(alive) == t.paid_places() + 1)
    if want != t.hand_for_hand:
        return [ev.HandForHand(want), *_holds(t, H4H, set(t.tables) if want else set())]
    if not want:
        return []
    missing = _holds(t, H4H, set(t.tables) - t.h4h_waiting)
    held: list[ev.Event] = [e for e in missing if isinstance(e, ev.TableHeld)]
    if held:
        return held
    ready = (not t.h4h_waiting and t.move is None and not t.on_break
             and all(not tb.in_hand and not tb.breaking for tb in t.tables.values()))
    if not ready:
        return []
    layout = t.layout()
    dealing = tuple(k for k, n in seating.counts(layout, alive).items() if n >= 2)
    if not dealing:
        return []
    return [ev.HandForHandRound(t.h4h_round + 1, dealing),
            *_holds(t, H4H, set(t.tables) - set(dealing))]
