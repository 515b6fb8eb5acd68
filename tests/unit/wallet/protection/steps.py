"""Shared steps of the protection core's unit tests: decide, evolve, and check that every
event decided survives the codec."""

from __future__ import annotations

from wallet.protection import (
    Protection,
    ProtectionCommand,
    ProtectionEvent,
    decide,
    event_from_json,
    event_to_json,
    evolve,
)

T0 = 1_800_000_000_000
MINUTE = 60_000


def run(state: Protection, command: ProtectionCommand, now: int
        ) -> tuple[Protection, tuple[ProtectionEvent, ...]]:
    """``state`` after ``command`` at ``now``, and the events it decided."""
    events = decide(state, command, now)
    for event in events:
        state = evolve(state, event)
        assert event_from_json(event_to_json(event)) == event
    return state, events
