"""What ``GetTournament`` and ``ListTournaments`` show: a tournament's state as
``stud.v1`` views (nothing in a tournament is secret)."""

from __future__ import annotations

from stud.v1 import tournament_pb2 as pb
from tournament import events as ev
from tournament.codec import config_to_proto, level_to_proto, timestamp
from tournament.payouts import prizes
from tournament.state import CANCELLED, FINISHED, REGISTERING, RUNNING, Tournament
from tournament.structure import period_end

PHASES = {REGISTERING: pb.TOURNAMENT_PHASE_REGISTERING, RUNNING: pb.TOURNAMENT_PHASE_RUNNING,
          FINISHED: pb.TOURNAMENT_PHASE_FINISHED, CANCELLED: pb.TOURNAMENT_PHASE_CANCELLED}
FORMATS = {ev.SIT_AND_GO: pb.TOURNAMENT_FORMAT_SIT_AND_GO,
           ev.MULTI_TABLE: pb.TOURNAMENT_FORMAT_MULTI_TABLE}


def summary(t: Tournament) -> pb.TournamentSummary:
    cfg = t.cfg
    return pb.TournamentSummary(
        tournament_id=t.tournament_id, name=cfg.name, format=FORMATS[cfg.format],
        phase=PHASES[t.phase], buy_in=cfg.buy_in, fee=cfg.fee,
        entries=sum(1 for e in t.field() if e.paid),
        players_left=0 if t.phase == CANCELLED else len(t.alive()),
        start_at=timestamp(cfg.start_at) if cfg.start_at else None,
        registration_open=t.registration_open)


def _in_hand(t: Tournament, table_id: str) -> bool:
    table = t.tables.get(table_id)
    return table is not None and table.in_hand > 0


def view(t: Tournament) -> pb.TournamentView:
    cfg = t.cfg
    field = sum(1 for e in t.field() if e.paid)
    won = {p.entry_id: p.amount for p in t.payments.values() if isinstance(p, ev.PrizeDue)}
    places = {s.entry: s for s in t.standings()} if field else {}
    out = pb.TournamentView(
        tournament_id=t.tournament_id, config=config_to_proto(cfg), phase=PHASES[t.phase],
        version=t.version, registration_open=t.registration_open, prize_pool=t.pool(),
        prizes=list(prizes(t.pool(), field)) if field >= 2 else [],
        hand_for_hand=t.hand_for_hand, winner=t.winner,
        started_at=timestamp(t.started_at) if t.started_at else None)
    if t.started_at:  # one source: the log's period, and when the schedule ends it
        ends_at = period_end(cfg.structure, t.started_at, t.level, t.on_break)
        out.clock.CopyFrom(pb.TournamentClock(
            level=t.level, on_break=t.on_break, ends_at=timestamp(ends_at),
            stakes=level_to_proto(cfg.structure.level(t.level)),
            next=level_to_proto(cfg.structure.level(t.level + 1))))
    move = t.move
    for e in t.field():
        s = places.get(e.entry_id)
        busted = e.bust is not None
        going = move is not None and move.entry_id == e.entry_id
        out.entries.append(pb.TournamentEntryView(
            moving_to_table=move.to_table if going and move else "",
            moving_to_seat=move.to_seat if going and move else 0,
            entry_id=e.entry_id, player_id=e.player_id, number=e.number, paid=e.paid,
            chips=e.settled, table_id=e.table_id, seat=e.seat,
            hand_start_chips=e.chips if e.bust is None and _in_hand(t, e.table_id) else 0,
            place=s.place if s and (busted or t.phase == FINISHED) else 0,
            place_to=s.place_to if s and (busted or t.phase == FINISHED) else 0,
            prize=won.get(e.entry_id, 0)))
    for k in t.order:
        e = t.entries[k]
        if e.dropped:
            out.dropped_entries.append(pb.TournamentEntryView(
                entry_id=e.entry_id, player_id=e.player_id, number=e.number,
                dropped_reason=e.dropped))
    for k, table in t.tables.items():
        out.tables.append(pb.TournamentTableView(
            table_id=k, players=sum(1 for x in table.seats if x in t.alive()),
            holds=sorted(table.holds), hand_number=table.in_hand))
    return out
