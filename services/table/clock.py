"""The action clock as data (DESIGN 5a): each turn's deadline is in the log (a
``TurnStarted``, stored as the envelope's ``turn_clock`` on the last event after which a
player is to act: ``table.codec``), so any owner re-arms it.
Pure: the time comes in as ``now``."""

from __future__ import annotations

from collections.abc import Sequence

from rules import Phase
from table.room_state import ACTIONS, Room, Turn


def _micros(t: float) -> int:
    return round(t * 1e6)


def as_logged(t: float) -> float:
    """``t`` as the log keeps it (whole microseconds): every time the room keeps goes
    through this, so the state a command produces live is the state a fold of its
    envelopes produces (``occurred_at``, ``turn_clock``).

    >>> as_logged(1800000000.1234567) == 1800000000.123457
    True
    """
    return round(t * 1e6) / 1e6


def fresh_turn(room: Room, seat: int, now: float) -> Turn:
    """A full turn for ``seat`` from ``now``: the action time, then the seat's bank."""
    bank = room.bank(seat)
    action_deadline = as_logged(now + room.settings.action_time_s)
    return Turn(seat=seat, started_at=as_logged(now), action_deadline=action_deadline,
                deadline=as_logged(action_deadline + bank / 1000), bank_ms=bank)


def next_turn(before: Room, after: Room, events: Sequence[object], now: float) -> Turn | None:
    """The clock to write with ``events`` (taking ``before`` to ``after``): a new turn when
    a player is now to act, the running one when the same turn goes on (a seat sat out
    meanwhile), None when nobody is to act or the events are not the game's."""
    hand = after.table.hand
    if not events or hand is None or hand.phase != Phase.BETTING or not hand.to_act:
        return None
    seat = hand.to_act
    running = before.turn
    if running is not None and running.seat == seat and not any(
            isinstance(e, ACTIONS) and e.seat == seat for e in events):
        return running
    return fresh_turn(after, seat, now)


def deadline(room: Room, now: float) -> tuple[float | None, Turn | None]:
    """When the turn of the seat to act runs out, and the clock to keep when the log has
    none for it (a log older than clocks: a full turn from now)."""
    hand = room.table.hand
    if hand is None or hand.phase != Phase.BETTING or not hand.to_act:
        return None, None
    if room.turn is not None and room.turn.seat == hand.to_act:
        return room.turn.deadline, None
    turn = fresh_turn(room, hand.to_act, now)
    return turn.deadline, turn
