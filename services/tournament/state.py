"""The tournament as folded from its stream: a frozen :class:`Tournament` and ``apply``.

No I/O and no clock: the fold of the same events is the same state on every replica. The
mappings of a state are never changed in place; ``apply`` builds new ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from tournament import events as ev
from tournament.payouts import Standing, paid_places

REGISTERING = "registering"
RUNNING = "running"
FINISHED = "finished"
CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class Entry:
    entry_id: str
    player_id: str
    number: int
    """1 for a player's first entry, 2 for the first re-entry, ..."""
    paid: bool = False
    gone: bool = False
    """Dropped (charge refused) or withdrawn (unregistered): not part of the field."""
    chips: int = 0
    """The stack at the last report (or the seating): a hand reported started from a view
    of the table taken during it has its antes and bets posted already."""
    settled: int = 0
    """The stack at the last hand's end (or the seating, or a move's unseating): the
    entries' ``settled`` sum to the field's chips at every step."""
    table_id: str = ""
    seat: int = 0
    seated: bool = False
    """The table has confirmed the seat."""
    bust: ev.Busted | None = None
    dropped: str = ""
    """Why the wallet refused the entry's charge ("" unless dropped)."""


@dataclass(frozen=True, slots=True)
class Table:
    table_id: str
    seats: tuple[str | None, ...]
    in_hand: int = 0
    """The hand in progress (0: between hands)."""
    holds: frozenset[str] = frozenset()
    breaking: bool = False
    last_hand: int = 0
    """The last hand reported ended (a report of it or an older one again changes nothing)."""
    start_stacks: ev.Stacks = ()
    """The stacks at the start of the hand in progress (or of the last one)."""
    hand_h4h_round: int = 0
    """The round of hand for hand the hand in progress (or the last one) was dealt in."""


@dataclass(frozen=True, slots=True)
class Tournament:
    tournament_id: str = ""
    config: ev.Config | None = None
    version: int = 0
    phase: str = ""
    entries: Mapping[str, Entry] = field(default_factory=dict)
    order: tuple[str, ...] = ()
    """Entry ids in the order they were requested."""
    tables: Mapping[str, Table] = field(default_factory=dict)
    tables_opened: int = 0
    closed: frozenset[str] = frozenset()
    """Tables closed (broken or at the end): a late report of one changes nothing."""
    started_at: float = 0.0
    seed: int = 0
    level: int = 0
    on_break: bool = False
    registration_open: bool = False
    move: ev.MoveStarted | None = None
    move_stack: int = -1
    """The stack the moving entry was unseated with (-1: not unseated yet)."""
    moves: int = 0
    """Moves done."""
    moves_started: int = 0
    """Moves started (done, in flight or cancelled): the next move's id is ``m<this + 1>``."""
    rounds: int = 0
    """Bust rounds so far."""
    hand_for_hand: bool = False
    h4h_round: int = 0
    h4h_waiting: frozenset[str] = frozenset()
    h4h_busts: Mapping[int, int] = field(default_factory=dict)
    """Round of hand for hand -> the bust round its busts share."""
    payments: Mapping[str, ev.RefundDue | ev.PrizeDue] = field(default_factory=dict)
    paid: frozenset[str] = frozenset()
    winner: str = ""

    @property
    def cfg(self) -> ev.Config:
        assert self.config is not None, "the tournament is not created"
        return self.config

    def field(self) -> list[Entry]:
        """The entries that count: paid (or pending) and not gone, in entry order."""
        return [self.entries[e] for e in self.order if not self.entries[e].gone]

    def alive(self) -> frozenset[str]:
        return frozenset(e.entry_id for e in self.field() if e.paid and e.bust is None)

    def pool(self) -> int:
        return self.cfg.buy_in * sum(1 for e in self.field() if e.paid)

    def layout(self) -> dict[str, tuple[str | None, ...]]:
        """Each table's seats; the seat a move in flight goes to is held for it (marked
        ``>`` and the entry, not a player of the table yet, not an open seat either)."""
        out = {t: tab.seats for t, tab in self.tables.items()}
        m = self.move
        if m is not None and m.to_table in out:
            seats = list(out[m.to_table])
            seats[m.to_seat - 1] = f">{m.entry_id}"
            out[m.to_table] = tuple(seats)
        return out

    def chips_in_play(self) -> int:
        return sum(self.entries[e].chips for e in self.alive())

    def standings(self) -> list[Standing]:
        """Every paid entry's place as it stands: the entries still in share places
        ``1..alive`` until the end; the busted are ranked by bust round (the later the
        better), then by the stack at the start of that hand (the larger the better); equal
        stacks in one round share places."""
        alive = sorted(self.alive(), key=self.order.index)
        out = [Standing(e, 1, len(alive)) for e in alive]
        busts = sorted((e.bust for e in self.field() if e.paid and e.bust is not None),
                       key=lambda b: (-b.round, -b.start_stack))
        place, i = len(alive) + 1, 0
        while i < len(busts):
            key = (busts[i].round, busts[i].start_stack)
            j = i
            while j < len(busts) and (busts[j].round, busts[j].start_stack) == key:
                j += 1
            out.extend(Standing(b.entry_id, place, place + j - i - 1) for b in busts[i:j])
            place, i = place + j - i, j
        return out

    def paid_places(self) -> int:
        return paid_places(max(2, sum(1 for e in self.field() if e.paid)))


def _entry(t: Tournament, entry_id: str, **changes: object) -> Mapping[str, Entry]:
    return {**t.entries, entry_id: replace(t.entries[entry_id], **changes)}  # type: ignore[arg-type]


def _table(t: Tournament, table_id: str, **changes: object) -> Mapping[str, Table]:
    return {**t.tables, table_id: replace(t.tables[table_id], **changes)}  # type: ignore[arg-type]


def _sit(t: Tournament, table_id: str, seat: int, entry: str | None) -> Mapping[str, Table]:
    seats = list(t.tables[table_id].seats)
    seats[seat - 1] = entry
    return _table(t, table_id, seats=tuple(seats))


def _stacks(t: Tournament, table_id: str, stacks: ev.Stacks,
            ended: bool = False) -> Mapping[str, Entry]:
    entries = dict(t.entries)
    seats = t.tables[table_id].seats
    for seat, chips in stacks:
        entry = seats[seat - 1] if 1 <= seat <= len(seats) else None
        if entry is not None:
            e = entries[entry]
            entries[entry] = replace(e, chips=chips, settled=chips if ended else e.settled)
    return entries


def evolve(t: Tournament, e: ev.Event) -> Tournament:
    """The state after one event."""
    t = replace(t, version=t.version + 1)
    match e:
        case ev.Created():
            return replace(t, tournament_id=e.tournament_id, config=e.config,
                           phase=REGISTERING, registration_open=True)
        case ev.EntryRequested():
            number = 1 + sum(1 for x in t.entries.values()
                             if x.player_id == e.player_id and not x.gone)
            entry = Entry(e.entry_id, e.player_id, number)
            return replace(t, entries={**t.entries, e.entry_id: entry},
                           order=(*t.order, e.entry_id))
        case ev.EntryPaid():
            chips = t.cfg.structure.starting_stack
            return replace(t, entries=_entry(t, e.entry_id, paid=True, chips=chips,
                                             settled=chips))
        case ev.EntryDropped():
            return replace(t, entries=_entry(t, e.entry_id, gone=True,
                                             dropped=e.reason or "refused"))
        case ev.EntryWithdrawn():
            return replace(t, entries=_entry(t, e.entry_id, gone=True))
        case ev.Started():
            return replace(t, phase=RUNNING, started_at=e.at, seed=e.seed, level=1)
        case ev.RegistrationClosed():
            return replace(t, registration_open=False)
        case ev.LevelStarted():
            return replace(t, level=e.level, on_break=False)
        case ev.BreakStarted():
            return replace(t, on_break=True)
        case ev.TableOpened():
            table = Table(e.table_id, (None,) * t.cfg.seats)
            return replace(t, tables={**t.tables, e.table_id: table},
                           tables_opened=t.tables_opened + 1)
        case ev.TableClosed():
            return replace(t, tables={k: v for k, v in t.tables.items() if k != e.table_id},
                           h4h_waiting=t.h4h_waiting - {e.table_id},
                           closed=t.closed | {e.table_id})
        case ev.SeatAssigned():
            t = replace(t, tables=_sit(t, e.table_id, e.seat, e.entry_id))
            return replace(t, entries=_entry(t, e.entry_id, table_id=e.table_id, seat=e.seat,
                                             chips=e.stack, settled=e.stack))
        case ev.SeatConfirmed():
            return replace(t, entries=_entry(t, e.entry_id, seated=True))
        case ev.TableHeld():
            holds = t.tables[e.table_id].holds | {e.reason}
            return replace(t, tables=_table(t, e.table_id, holds=holds))
        case ev.TableReleased():
            holds = t.tables[e.table_id].holds - {e.reason}
            return replace(t, tables=_table(t, e.table_id, holds=holds))
        case ev.HandStarted():
            t = replace(t, entries=_stacks(t, e.table_id, e.stacks))
            r = t.h4h_round if t.hand_for_hand else 0
            return replace(t, tables=_table(t, e.table_id, in_hand=e.hand_no,
                                            start_stacks=e.stacks, hand_h4h_round=r),
                           h4h_waiting=t.h4h_waiting - {e.table_id})
        case ev.HandEnded():
            t = replace(t, entries=_stacks(t, e.table_id, e.stacks, ended=True))
            return replace(t, tables=_table(t, e.table_id, in_hand=0, last_hand=e.hand_no))
        case ev.Busted():
            r = t.tables[e.table_id].hand_h4h_round
            busts = {**t.h4h_busts, r: e.round} if r else t.h4h_busts
            return replace(t, entries=_entry(t, e.entry_id, bust=e, chips=0, settled=0),
                           rounds=max(t.rounds, e.round), h4h_busts=busts)
        case ev.SeatFreed():
            return replace(t, tables=_sit(t, e.table_id, e.seat, None))
        case ev.MoveStarted():
            return replace(t, move=e, move_stack=-1, moves_started=t.moves_started + 1)
        case ev.MoveCancelled():
            return replace(t, move=None, move_stack=-1)
        case ev.MoveUnseated():
            assert t.move is not None
            m = t.move
            t = replace(t, tables=_sit(t, m.from_table, m.from_seat, None), move_stack=e.stack)
            return replace(t, entries=_entry(t, m.entry_id, chips=e.stack, settled=e.stack,
                                             seated=False))
        case ev.MoveSeated():
            assert t.move is not None
            m = t.move
            t = replace(t, tables=_sit(t, m.to_table, m.to_seat, m.entry_id))
            t = replace(t, entries=_entry(t, m.entry_id, table_id=m.to_table, seat=m.to_seat,
                                          seated=True))
            return replace(t, move=None, move_stack=-1, moves=t.moves + 1)
        case ev.TableBreaking():
            return replace(t, tables=_table(t, e.table_id, breaking=True))
        case ev.TableKept():
            return replace(t, tables=_table(t, e.table_id, breaking=False))
        case ev.HandForHand():
            return replace(t, hand_for_hand=e.on, h4h_waiting=frozenset())
        case ev.HandForHandRound():
            return replace(t, h4h_round=e.number, h4h_waiting=frozenset(e.tables))
        case ev.Cancelled():
            return replace(t, phase=CANCELLED, registration_open=False)
        case ev.Finished():
            return replace(t, phase=FINISHED, winner=e.winner, registration_open=False)
        case ev.RefundDue() | ev.PrizeDue():
            return replace(t, payments={**t.payments, e.payment_id: e})
        case ev.PaymentMade():
            return replace(t, paid=t.paid | {e.payment_id})
    raise TypeError(f"not a tournament event: {e!r}")


def apply(t: Tournament, events: Iterable[ev.Event]) -> Tournament:
    for e in events:
        t = evolve(t, e)
    return t
