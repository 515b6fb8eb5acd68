"""``decide(tournament, command, now, seed)``: the events a command leads to, pure.

A command is checked against the folded state; a refused one raises (``FailedPrecondition``,
``AlreadyExists``, ``NotFound``, ``BadRequest``) and changes nothing. The events the command
itself yields are followed by what the tournament then decides on its own (``conduct``: the
start, the clock, seating, balancing, hand for hand, the end), folded in turn until nothing is
left to decide. A report that repeats one already folded (the process manager after a crash)
yields no events, so every report is idempotent.
"""

from __future__ import annotations

import re

from studkit.errors import AlreadyExists, BadRequest, FailedPrecondition, NotFound
from tournament import commands as c
from tournament import events as ev
from tournament.conduct import cancel, conduct
from tournament.state import CANCELLED, REGISTERING, RUNNING, Tournament, apply

_MOVE_ID = re.compile(r"m([0-9]{1,9})")
"""A move's id (``m<n>``, conduct's ``MoveStarted``), in ASCII digits only."""

MAX_FOLLOW_UPS = 10_000
"""A bound on the automatic steps after one command (a loop in ``conduct`` is a bug)."""


class TournamentRefusal(FailedPrecondition):
    """The tournament refuses the command now (``FAILED_PRECONDITION`` with a reason);
    ``retry_after_ms``, when the refusal waits on the process manager, goes to the caller in
    the ErrorInfo metadata."""

    def __init__(self, detail: str, *, reason: str | None = None,
                 retry_after_ms: int = 0) -> None:
        super().__init__(detail, reason=reason)
        self.error_metadata = {"retry_after_ms": str(retry_after_ms)} if retry_after_ms else {}


def refuse(reason: str, detail: str) -> TournamentRefusal:
    return TournamentRefusal(detail, reason=reason)


def decide(t: Tournament, cmd: c.Command, now: float, seed: int = 0) -> list[ev.Event]:
    """Every event ``cmd`` leads to at ``now`` (``seed`` draws the seats if it starts)."""
    events = _command(t, cmd, now)
    t = apply(t, events)
    for _ in range(MAX_FOLLOW_UPS):
        more = conduct(t, now, seed) if t.phase in (REGISTERING, RUNNING) else []
        if not more:
            return events
        events.extend(more)
        t = apply(t, more)
    raise AssertionError("the tournament kept deciding without end")


def _command(t: Tournament, cmd: c.Command, now: float) -> list[ev.Event]:
    if isinstance(cmd, c.Create):
        if t.config is not None:
            raise AlreadyExists(f"tournament {cmd.tournament_id} exists",
                                reason="tournament_exists")
        cmd.config.playable(now)
        return [ev.Created(cmd.tournament_id, cmd.config, now)]
    if t.config is None:
        raise NotFound("no such tournament", reason="no_tournament")
    match cmd:
        case c.Register() | c.ReEnter():
            return _enter(t, cmd, now)
        case c.Unregister():
            return _unregister(t, cmd.player_id)
        case c.WithdrawExcluded():
            return _withdraw_excluded(t, cmd)
        case c.SettleEntry():
            return _settle_entry(t, cmd)
        case c.Cancel():
            if t.phase not in (REGISTERING, RUNNING):
                raise refuse("over", f"the tournament is {t.phase}")
            return cancel(t, cmd.reason, now)
        case c.Tick():
            return []
        case c.ReportHandStarted():
            return _hand_started(t, cmd)
        case c.ReportHandEnded():
            return _hand_ended(t, cmd)
        case c.ConfirmSeat():
            entry = t.entries.get(cmd.entry_id)
            if entry is None or not entry.table_id:
                raise NotFound(f"no seat assigned to {cmd.entry_id}", reason="no_seat")
            return [] if entry.seated else [ev.SeatConfirmed(cmd.entry_id)]
        case c.ConfirmSeatFreed():
            return _seat_freed(t, cmd)
        case c.ConfirmUnseated():
            return _unseated(t, cmd)
        case c.ConfirmReseated():
            if t.move is None or t.move.move_id != cmd.move_id:
                _done_move(t, cmd.move_id)
                return []
            if t.move_stack < 0:
                raise refuse("not_unseated", "the move's player is not unseated yet")
            return [ev.MoveSeated(cmd.move_id)]
        case c.ConfirmPayment():
            if cmd.payment_id not in t.payments:
                raise NotFound(f"no payment {cmd.payment_id}", reason="no_payment")
            return [] if cmd.payment_id in t.paid else [ev.PaymentMade(cmd.payment_id)]
    raise BadRequest("command", f"not a tournament command: {type(cmd).__name__}")


def _enter(t: Tournament, cmd: c.Register | c.ReEnter, now: float) -> list[ev.Event]:
    cfg = t.cfg
    mine = [e for e in t.field() if e.player_id == cmd.player_id]
    if not t.registration_open:
        raise refuse("registration_closed", "registration is closed")
    if isinstance(cmd, c.Register):
        if mine:
            raise AlreadyExists(f"{cmd.player_id} is registered", reason="already_registered")
    else:
        if not mine:
            raise refuse("not_registered", "a re-entry follows an entry")
        if any(e.bust is None for e in mine):
            raise refuse("still_in", "a re-entry is for a player whose entries are all out")
        if len(mine) > cfg.re_entries:
            raise refuse("no_re_entry", f"at most {cfg.re_entries} re-entries")
    if cfg.capacity and len(t.field()) >= cfg.capacity:
        raise refuse("full", "the tournament is full")
    return [ev.EntryRequested(f"e{len(t.order) + 1}", cmd.player_id, now)]


def _unregister(t: Tournament, player_id: str) -> list[ev.Event]:
    mine = [e for e in t.field() if e.player_id == player_id]
    if not mine:
        raise NotFound(f"{player_id} is not registered", reason="not_registered")
    if t.phase != REGISTERING:
        raise refuse("started", "unregistering is only before the start")
    entry = mine[-1]
    if not entry.paid:
        raise refuse("payment_pending", "the buy-in is still being charged")
    cfg = t.cfg
    return [ev.EntryWithdrawn(entry.entry_id),
            ev.RefundDue(f"refund/{entry.entry_id}", entry.entry_id, player_id, cfg.buy_in,
                         cfg.fee)]


def _withdraw_excluded(t: Tournament, cmd: c.WithdrawExcluded) -> list[ev.Event]:
    """An excluded player's paid entry, before the start: withdrawn and refunded as if they
    had unregistered. A repeat (already withdrawn) is nothing; after the start the entry
    stays in (docs/player-protection.md: no refund once it has started)."""
    entry = t.entries.get(cmd.entry_id)
    if entry is None:
        raise NotFound(f"no entry {cmd.entry_id}", reason="no_entry")
    if entry.gone:
        return []
    if t.phase != REGISTERING:
        raise refuse("started", "an entry is withdrawn only before the start")
    if not entry.paid:
        raise refuse("payment_pending", "the buy-in is still being charged")
    cfg = t.cfg
    return [ev.EntryWithdrawn(entry.entry_id, cmd.reason),
            ev.RefundDue(f"refund/{entry.entry_id}", entry.entry_id, entry.player_id,
                         cfg.buy_in, cfg.fee)]


def _settle_entry(t: Tournament, cmd: c.SettleEntry) -> list[ev.Event]:
    entry = t.entries.get(cmd.entry_id)
    if entry is None:
        raise NotFound(f"no entry {cmd.entry_id}", reason="no_entry")
    if entry.paid or entry.gone:
        return []
    if not cmd.ok:
        return [ev.EntryDropped(cmd.entry_id, cmd.reason)]
    if t.phase == CANCELLED:  # charged after the cancel: it goes straight back
        cfg = t.cfg
        return [ev.EntryPaid(cmd.entry_id),
                ev.RefundDue(f"refund/{entry.entry_id}", entry.entry_id, entry.player_id,
                             cfg.buy_in, cfg.fee)]
    return [ev.EntryPaid(cmd.entry_id)]


def _closed(t: Tournament, table_id: str) -> bool:
    """Whether a report is of a closed table (a late repeat: nothing to do), else raises
    ``NotFound`` unless the table is open."""
    if table_id in t.closed:
        return True
    if table_id not in t.tables:
        raise NotFound(f"no open table {table_id}", reason="no_table")
    return False


def _hand_started(t: Tournament, cmd: c.ReportHandStarted) -> list[ev.Event]:
    if _closed(t, cmd.table_id):
        return []
    table = t.tables[cmd.table_id]
    if cmd.hand_no <= table.last_hand or cmd.hand_no == table.in_hand:
        return []
    if table.in_hand:
        raise refuse("hand_in_progress", f"hand {table.in_hand} has not ended")
    out: list[ev.Event] = [ev.HandStarted(cmd.table_id, cmd.hand_no, cmd.stacks)]
    if t.hand_for_hand and "hand_for_hand" not in table.holds:
        out.append(ev.TableHeld(cmd.table_id, "hand_for_hand"))  # one hand, then wait
    return out


def _hand_ended(t: Tournament, cmd: c.ReportHandEnded) -> list[ev.Event]:
    if _closed(t, cmd.table_id):
        return []
    table = t.tables[cmd.table_id]
    if cmd.hand_no <= table.last_hand:
        return []
    if cmd.hand_no != table.in_hand:
        raise refuse("hand_not_started", f"hand {cmd.hand_no} was not reported started")
    start = dict(cmd.start or table.start_stacks)
    end = dict(cmd.stacks)
    if sum(start.values()) != sum(end.get(s, 0) for s in start):
        raise refuse("chips_not_conserved",
                     f"hand {cmd.hand_no} at {cmd.table_id} changed the chips of its seats")
    out: list[ev.Event] = [ev.HandEnded(cmd.table_id, cmd.hand_no, cmd.stacks)]
    alive = t.alive()
    busts = [(seat, table.seats[seat - 1]) for seat in sorted(start)
             if end.get(seat, 0) == 0 and start[seat] > 0
             and 1 <= seat <= len(table.seats) and table.seats[seat - 1] in alive]
    if busts:
        # a hand dealt in a round of hand for hand shares its busts' round with the other
        # tables' hands of that round, even one that ends after the bubble burst
        rnd = t.h4h_busts.get(table.hand_h4h_round, 0) or t.rounds + 1
        for seat, entry in busts:
            assert entry is not None
            out.append(ev.Busted(entry, cmd.table_id, seat, cmd.hand_no, start[seat], rnd))
        m = t.move
        if m is not None and t.move_stack < 0 and m.entry_id in {e for _, e in busts}:
            out.append(ev.MoveCancelled(m.move_id, "busted"))
    return out


def _seat_freed(t: Tournament, cmd: c.ConfirmSeatFreed) -> list[ev.Event]:
    if _closed(t, cmd.table_id):
        return []
    seats = t.tables[cmd.table_id].seats
    if not 1 <= cmd.seat <= len(seats):
        raise BadRequest("seat", f"1 to {len(seats)}")
    entry = seats[cmd.seat - 1]
    if entry is None:
        return []
    if t.entries[entry].bust is None:
        raise refuse("not_busted", f"seat {cmd.seat} holds a player still in")
    return [ev.SeatFreed(cmd.table_id, cmd.seat)]


def _done_move(t: Tournament, move_id: str) -> None:
    """A report of a move that is not in flight is a repeat of a finished one (nothing to
    do), or names no move at all."""
    match = _MOVE_ID.fullmatch(move_id)
    if match is None or not 0 < int(match.group(1)) <= t.moves_started:
        raise NotFound(f"no move {move_id}", reason="no_move")


def _unseated(t: Tournament, cmd: c.ConfirmUnseated) -> list[ev.Event]:
    if t.move is None or t.move.move_id != cmd.move_id:
        _done_move(t, cmd.move_id)
        return []
    if t.move_stack >= 0:
        return []
    if t.tables[t.move.from_table].in_hand:
        raise refuse("hand_in_progress", "a player never moves in a hand")
    if cmd.stack <= 0:
        raise refuse("no_chips", "a player who moves has chips")
    return [ev.MoveUnseated(cmd.move_id, cmd.stack)]
