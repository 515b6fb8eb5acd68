"""The table and its events as one viewer may see them, on the wire. Secrecy comes from the
rules' views (``rules.views``): a player sees their own cards of a hand they were dealt
into, everyone else the public view; the table never holds a down card before showdown
anyway."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, replace

from rules import Event, Phase, TableState, legal_actions, pots
from rules.views import event_for, table_for
from stud.v1 import table_pb2 as pb
from stud.v1.envelope_pb2 import EventEnvelope
from stud.v1.events_pb2 import TableEvent
from studkit.mapping import (
    card_to_proto,
    config_to_proto,
    event_from_envelope,
    event_to_proto,
    legal_actions_to_proto,
    payload_of,
    street_to_proto,
)
from table.clock import deadline
from table.model import settings_to_proto
from table.room import Room
from table.room_state import SeatResult

_PHASES = {
    Phase.DEALING: pb.HAND_PHASE_DEALING,
    Phase.BETTING: pb.HAND_PHASE_BETTING,
    Phase.REVEAL: pb.HAND_PHASE_REVEAL,
    Phase.SHOWDOWN: pb.HAND_PHASE_SHOWDOWN,
    Phase.SETTLING: pb.HAND_PHASE_SETTLING,
    Phase.COMPLETE: pb.HAND_PHASE_COMPLETE,
}
STATUSES = {
    "open": pb.TABLE_STATUS_OPEN,
    "waiting": pb.TABLE_STATUS_WAITING,
    "stopped": pb.TABLE_STATUS_STOPPED,
    "closed": pb.TABLE_STATUS_CLOSED,
}


# No process-wide cache of records (issue 30): one was kept here, keyed by everything a record
# is made of, and `make bench-room` did not show it paying. One run each on 2026-12-05, the
# same tree with and without it, on the 2-core machine loaded by other work (so a few percent
# either way is noise): table CPU per action 2.31 ms with the cache, 2.33 ms without; the
# room 247 and 302 actions/s (p99 49.8 and 19.7 ms), the load's noise, not the cache's.
def record_for(envelope: EventEnvelope, viewer: int | None, dealt_in: bool
               ) -> pb.TableEventRecord:
    """One stored event as ``viewer`` may see it (only a mucked hand differs between
    viewers, RULES 11.7)."""
    return _record(envelope, event_for(event_from_envelope(envelope), viewer, dealt_in))


def _record(envelope: EventEnvelope, shown: Event) -> pb.TableEventRecord:
    record = pb.TableEventRecord(event_id=f"0-{envelope.sequence}",
                                 sequence=envelope.sequence,
                                 hand_number=envelope.hand_number,
                                 event=event_to_proto(shown))
    record.occurred_at.CopyFrom(envelope.occurred_at)
    return record


RECORDS_KEPT = 1024
"""Envelopes whose records :class:`Records` keeps, for the whole process: the watchers of
a table ask for an append's envelopes within a few loop turns of each other."""
_MORE_TAG = bytes([pb.TableEventRecord.DESCRIPTOR.fields_by_name["more"].number << 3 | 2])
"""The key of ``TableEventRecord.more`` (a length-delimited field) on the wire."""


def varint(value: int) -> bytes:
    """``value`` (>= 0) as a protobuf varint: a length or a field's key on the wire."""
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def batch_bytes(records: Sequence[bytes]) -> bytes:
    """One message of a batched watch from records' bytes: the first record's fields, then
    the others in its ``more`` (the highest field: what serializing such a message gives)."""
    first, *rest = records
    if not rest:
        return first
    return first + b"".join(_MORE_TAG + varint(len(r)) + r for r in rest)


_EVENT_TAG = bytes([pb.TableEventRecord.DESCRIPTOR.fields_by_name["event"].number << 3 | 2])
"""The key of ``TableEventRecord.event`` (the record's last field but ``more``)."""
_CASE_TAGS = {
    field.message_type.name: varint(field.number << 3 | 2)
    for field in TableEvent.DESCRIPTOR.oneofs_by_name["event"].fields
}
"""An event type -> the key of its case of ``TableEvent``'s oneof."""


def _shared_record(envelope: EventEnvelope, event: Event) -> bytes:
    """``_record(envelope, event).SerializeToString()`` for the event as stored, its
    ``event`` field written from the event's payload (:func:`~studkit.mapping.payload_of`,
    kept for the events a table writes most) after the record's other fields, as protobuf
    writes them: by field number, ``event`` last (issue 35: an event message built, wrapped
    and serialized for each record)."""
    head = pb.TableEventRecord(event_id=f"0-{envelope.sequence}", sequence=envelope.sequence,
                               hand_number=envelope.hand_number)
    head.occurred_at.CopyFrom(envelope.occurred_at)
    payload = payload_of(event)
    case = _CASE_TAGS[type(event).__name__] + varint(len(payload)) + payload
    data: bytes = head.SerializeToString()
    return data + _EVENT_TAG + varint(len(case)) + case


class _Kept:
    __slots__ = ("envelope", "event", "own", "shared")

    def __init__(self, envelope: EventEnvelope) -> None:
        self.envelope = envelope
        self.event = event_from_envelope(envelope)
        self.shared: bytes | None = None
        """The record of every viewer who sees the event as stored."""
        self.own: dict[tuple[int | None, bool], bytes] = {}
        """The records of viewers who see less of it (``rules.views.event_for``)."""


class Records:
    """Stored envelopes' records, serialized once for every viewer who may see them alike
    (issue 35): the watchers of a table get the same envelope objects from its fan-out, so
    one decode, one ``event_to_proto`` and one serialization serve all of them, where each
    watcher made its own. What each viewer may see is decided per viewer by
    ``rules.views.event_for``, as :func:`record_for` does: the shared bytes are the event as
    stored, given only to a viewer for whom ``event_for`` leaves it as it is; any other
    viewer gets a record of its own. Kept by the envelope object itself (held while kept, so
    another envelope never takes its place), the last :data:`RECORDS_KEPT` of the process."""

    def __init__(self, kept: int = RECORDS_KEPT) -> None:
        self._kept = kept
        self._entries: dict[int, _Kept] = {}

    def record_bytes(self, envelope: EventEnvelope, viewer: int | None,
                     dealt_in: bool) -> bytes:
        """``record_for(envelope, viewer, dealt_in)`` serialized."""
        entries = self._entries
        entry = entries.get(id(envelope))
        if entry is None or entry.envelope is not envelope:
            entry = entries[id(envelope)] = _Kept(envelope)
            if len(entries) > self._kept:
                del entries[next(iter(entries))]
        shown = event_for(entry.event, viewer, dealt_in)
        if shown is entry.event:
            if entry.shared is None:
                entry.shared = _shared_record(envelope, shown)
            return entry.shared
        key = (viewer, dealt_in)
        data = entry.own.get(key)
        if data is None:
            data = entry.own[key] = _record(envelope, shown).SerializeToString()
        return data


def hand_result_to_proto(hand_number: int, seats: tuple[SeatResult, ...]) -> pb.HandResult:
    """Each seat's stack at a finished hand's start and end."""
    return pb.HandResult(hand_number=hand_number, seats=[
        pb.SeatResult(seat=s.seat, player_id=s.player_id, stack_start=s.stack_start,
                      stack_end=s.stack_end) for s in seats])


def table_view(table_id: str, room: Room, status: tuple[str, str], now: float,
               player: str | None, viewer_seat: int | None) -> pb.TableView:
    """The table ``room`` at time ``now``, with its ``status`` (and reason), as ``player``
    (None: an observer) may see it. ``viewer_seat`` is the seat they sit in now; the hand is
    shown to them as to a player dealt in only if they were dealt into it
    (``rules.table_for``), whichever seat they sit in now."""
    state: TableState = table_for(room.table, player)
    status_now, reason = status
    # The version a client sees is its last event's: room events are not sent to watchers
    # (a command acted on it is not stale for a room event after it).
    view = pb.TableView(table_id=table_id, version=room.visible,
                        last_event_id=f"0-{room.visible}" if room.visible else "",
                        viewer_seat=viewer_seat or 0, hands_started=state.hands_started,
                        settings=settings_to_proto(room.settings),
                        status=STATUSES[status_now], status_reason=reason,
                        muck_preference=viewer_seat in room.muck if viewer_seat else False,
                        tournament_id=room.tournament_id, dealing_paused=room.paused,
                        pause_reason=room.pause_reason,
                        hand_in_progress=room.table.hand_in_progress)
    if state.config is not None:
        view.config.CopyFrom(config_to_proto(state.config))
        if room.pending_stakes is not None:
            view.pending_stakes.CopyFrom(config_to_proto(replace(
                state.config, **asdict(room.pending_stakes))))
    if room.results:
        last = max(room.results)
        view.last_hand_result.CopyFrom(hand_result_to_proto(last, room.results[last]))
    for number in range(1, len(state.seats) + 1):
        seat = state.seat(number)
        if seat is None:
            continue
        view.seats.append(pb.SeatView(
            seat=number, player_id=seat.player_id, stack=state.stack(number),
            sitting_out=seat.sitting_out, time_bank_ms=room.bank(number),
            leaving=number in room.leaving))
    hand = state.hand
    if hand is None:
        return view
    hv = view.hand
    hv.hand_number = hand.hand_number
    hv.phase = _PHASES[hand.phase]
    if hand.street is not None:
        hv.street = street_to_proto(hand.street)
    hv.deck_commitment = hand.deck_commitment
    hv.to_act = hand.to_act or 0
    hv.bring_in_seat = hand.bring_in_seat or 0
    if hand.community is not None:
        hv.community_card.CopyFrom(card_to_proto(hand.community))
    for p in hand.players:
        pv = pb.PlayerView(seat=p.seat, stack=p.stack, folded=p.folded, all_in=p.all_in,
                           street_total=p.street_total, hand_total=p.hand_total,
                           exposed=p.exposed, shown=p.shown, mucked=p.mucked)
        for card in p.down:
            down = pv.down.add()
            if card is not None:
                down.card.CopyFrom(card_to_proto(card))
        pv.up.extend(card_to_proto(c) for c in p.up)
        hv.players.append(pv)
    for pot in pots(state):
        hv.pots.append(pb.PotView(amount=pot.amount, eligible=list(pot.eligible)))
    legal = legal_actions(state)
    if legal is not None:
        hv.legal_actions.CopyFrom(legal_actions_to_proto(legal))
    for award in hand.awards:
        hv.awards.append(event_to_proto(award).pot_awarded)
    due, _fresh = deadline(room, now)
    if due is not None:
        hv.turn_deadline.FromMicroseconds(int(due * 1e6))
        hv.time_bank_ms = room.bank(hand.to_act or 0)
    return view


def summary(table_id: str, room: Room, status: tuple[str, str], now: float
            ) -> pb.TableSummary:
    """One line of the lobby: the table ``room`` with its ``status`` at time ``now``."""
    state = room.table
    players = [s.player_id for n in range(1, len(state.seats) + 1)
               if (s := state.seat(n)) is not None]
    cutoff = now - 3600
    out = pb.TableSummary(table_id=table_id, settings=settings_to_proto(room.settings),
                          seats_taken=len(players), players=players,
                          hands_per_hour=sum(1 for t in room.hand_started_at if t >= cutoff),
                          hands_started=state.hands_started,
                          status=STATUSES[status[0]],
                          tournament_id=room.tournament_id, dealing_paused=room.paused,
                          pause_reason=room.pause_reason)
    if state.config is not None:
        out.config.CopyFrom(config_to_proto(state.config))
    return out
