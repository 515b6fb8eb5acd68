"""The room's part of a table's snapshot (the repository stores the rules' state; this is
the ``extra`` beside it): a cache of the fold of the stream, never the source of truth. A
snapshot written before the room events existed carries only the clock's bookkeeping; the
rest of such a table's room comes from its old side keys (:mod:`table.migrate`)."""

from __future__ import annotations

from typing import Any, Final

from rules import TableState
from studkit.plain import plain
from table.model import TableSettings
from table.room import Room, Saga, Turn
from table.room_state import SagaKind, SeatResult, Stakes

FORMAT: Final = 2
"""The room format of ``extra`` (absent: a snapshot from before the room events)."""


def _by_seat(raw: dict[str, Any], kind: type) -> dict[int, Any]:
    return {int(k): kind(v) for k, v in raw.items()}


def to_extra(room: Room) -> dict[str, object]:
    """The room's state as JSON-ready data."""
    return {
        "room_format": FORMAT,
        "settings": plain(room.settings),
        "sagas": {s: plain(saga) for s, saga in room.sagas.items()},
        "leaving": dict(room.leaving), "muck": sorted(room.muck), "closed": room.closed,
        "stopped": room.stopped, "settled": room.settled,
        "turn": plain(room.turn) if room.turn is not None else None,
        "banks": dict(room.banks), "timeout_streak": dict(room.timeout_streak),
        "timed_out": sorted(room.timed_out), "sat_out_since": dict(room.sat_out_since),
        "departures": {p: list(v) for p, v in room.departures.items()},
        "seatings": {n: dict(seats) for n, seats in room.seatings.items()},
        "hand_starts": dict(room.hand_starts),
        "hand_started_at": list(room.hand_started_at),
        "last_hand_ended_at": room.last_hand_ended_at, "visible": room.visible,
        "tournament_id": room.tournament_id, "paused": room.paused,
        "pause_reason": room.pause_reason, "one_hand": room.one_hand,
        "pending_stakes": plain(room.pending_stakes) if room.pending_stakes else None,
        "results": {n: [plain(r) for r in seats] for n, seats in room.results.items()},
    }


def from_extra(table: TableState, version: int, extra: dict[str, Any]) -> Room:
    """The room a snapshot holds (``table`` at ``version``, ``extra`` beside it)."""
    modern = extra.get("room_format") == FORMAT
    turn = extra.get("turn") if modern else None
    return Room(
        table=table, version=version,
        settings=TableSettings(**extra["settings"]) if modern else TableSettings(),
        sagas={int(s): Saga(**{**v, "kind": SagaKind(v["kind"])})
               for s, v in extra.get("sagas", {}).items()},
        leaving=_by_seat(extra.get("leaving", {}), str),
        muck=frozenset(int(s) for s in extra.get("muck", ())),
        closed=bool(extra.get("closed", False)), stopped=str(extra.get("stopped", "")),
        settled=int(extra.get("settled", 0)),
        turn=Turn(**turn) if turn else None,
        banks=_by_seat(extra.get("banks", {}), int),
        timeout_streak=_by_seat(extra.get("timeout_streak", {}), int),
        timed_out=frozenset(int(s) for s in extra.get("timed_out", ())),
        sat_out_since=_by_seat(extra.get("sat_out_since", {}), float),
        departures={p: (int(v[0]), float(v[1]))
                    for p, v in extra.get("departures", {}).items()},
        seatings={int(n): {int(s): str(p) for s, p in seats.items()}
                  for n, seats in extra.get("seatings", {}).items()},
        hand_starts=_by_seat(extra.get("hand_starts", {}), int),
        hand_started_at=tuple(float(t) for t in extra.get("hand_started_at", ())),
        last_hand_ended_at=float(extra.get("last_hand_ended_at", 0.0)),
        visible=int(extra.get("visible", version)),
        tournament_id=str(extra.get("tournament_id", "")),
        paused=bool(extra.get("paused", False)),
        pause_reason=str(extra.get("pause_reason", "")),
        one_hand=str(extra.get("one_hand", "")),
        pending_stakes=Stakes(**stakes) if (stakes := extra.get("pending_stakes")) else None,
        results={int(n): tuple(SeatResult(**r) for r in seats)
                 for n, seats in extra.get("results", {}).items()},
    )
