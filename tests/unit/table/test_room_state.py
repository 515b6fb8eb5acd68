"""The room's state (services/table/room_state.py): its fast copy is ``dataclasses.replace``."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from table.room_state import Room, Stakes, Turn, updated


def test_updated_is_replace_for_every_field() -> None:
    """A room updated with any one field, or several, equals ``replace`` with them, and the
    room it came from is left as it was."""
    room = Room(version=7, banks={1: 500}, muck=frozenset({2}), stopped="x", visible=6)
    before = replace(room)
    values: dict[str, object] = {
        "version": 8, "turn": Turn(seat=1, started_at=1.0, action_deadline=2.0, deadline=3.0,
                                   bank_ms=4), "closed": True, "pending_stakes": Stakes(1, 2, 0, 1)}
    for f in fields(Room):
        value = values.get(f.name, getattr(Room(), f.name))
        assert updated(room, {f.name: value}) == replace(room, **{f.name: value})
    assert updated(room, values) == replace(room, **values)  # type: ignore[arg-type]
    assert updated(room, {}) == room
    assert room == before


def test_updated_refuses_a_name_that_is_no_field() -> None:
    """A name that is not a field of the room is an error, as with ``replace``."""
    with pytest.raises(KeyError):
        updated(Room(), {"nope": 1})


def test_a_room_event_is_known_by_its_class_as_isinstance_knows_it() -> None:
    """``is_room`` (by the event's class first: issue 35) says what ``isinstance`` with the
    room events' classes says, for every event of a table's stream, a subclass of either
    kind and anything else."""
    from dataclasses import dataclass
    from typing import get_args

    from rules.events import Event, HandEnded
    from table.room_events import ROOM_EVENT_CLASSES, TableClosed, TurnStarted, is_room

    @dataclass(frozen=True)
    class Closed(TableClosed):
        pass

    @dataclass(frozen=True)
    class Ended(HandEnded):
        pass

    kinds = [*get_args(Event), *ROOM_EVENT_CLASSES, TurnStarted, Closed, Ended]
    for kind in kinds:
        value = object.__new__(kind)
        assert is_room(value) is isinstance(value, ROOM_EVENT_CLASSES), kind
    assert is_room(object()) is False and is_room(Closed(by="ops")) is True
