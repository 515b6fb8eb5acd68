"""The table repository (STYLE §9): the one way to load a table — its latest snapshot, taken
at a hand boundary, plus the events after it — and to save a snapshot.

A snapshot is an optimisation, never the source of truth: it is rebuildable from the stream
(delete it and the next load folds everything), it records the version it was taken at, and a
snapshot claiming more events than the stream holds is ignored. It is JSON of the rules'
frozen state (no pickle: a snapshot read from Redis can never run code), stored under
``stud:table:{id}:snapshot`` beside the stream, in the table's Cluster slot.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final, Union

import structlog

from rules import Card, Event, TableState, evolve, initial_state
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.mapping.room import is_room_event
from studkit.store import EventStore, StoredEvent

log = structlog.get_logger("studkit.repository")

FORMAT: Final = 1
"""Bumped when the rules' state changes shape: an older snapshot is then ignored (rebuilt)."""


# --- a JSON codec for the rules' frozen state ---------------------------------------------

def encode(value: object) -> Any:
    """A JSON-ready form of a rules value (dataclasses, cards, enums, tuples)."""
    if isinstance(value, Card):
        return str(value)
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list | frozenset | set):
        items = sorted(value) if isinstance(value, frozenset | set) else value
        return [encode(item) for item in items]
    return value


def decode(kind: Any, value: Any) -> Any:
    """The rules value of type ``kind`` that :func:`encode` made ``value`` from."""
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        arms = [a for a in typing.get_args(kind) if a is not type(None)]
        if value is None:
            return None
        if len(arms) != 1:
            raise TypeError(f"cannot decode the union {kind}")
        return decode(arms[0], value)
    if origin is tuple:
        args = typing.get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], item) for item in value)
        return tuple(decode(a, item) for a, item in zip(args, value, strict=True))
    if origin is frozenset:
        (arg,) = typing.get_args(kind)
        return frozenset(decode(arg, item) for item in value)
    if kind is Card:
        return Card.parse(value)
    if isinstance(kind, type) and issubclass(kind, Enum):
        return kind(value)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return kind(**{name: decode(hint, value[name])
                       for name, hint in _init_fields(kind) if name in value})
    if kind in (int, str, bool) and not isinstance(value, kind):
        raise TypeError(f"expected {kind.__name__}, got {value!r}")
    return value


@functools.cache
def _init_fields(kind: type) -> tuple[tuple[str, Any], ...]:
    """A dataclass's init fields with their resolved types (resolving them is the slow part
    of a decode; the classes are a fixed few)."""
    hints = typing.get_type_hints(kind)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(kind) if f.init)


def state_to_json(state: TableState) -> str:
    """``state`` as JSON."""
    return json.dumps(encode(state), separators=(",", ":"), sort_keys=True)


def state_from_json(text: str | bytes) -> TableState:
    """The state :func:`state_to_json` wrote."""
    state = decode(TableState, json.loads(text))
    assert isinstance(state, TableState)
    return state


# --- the repository -------------------------------------------------------------------------

@dataclass
class Loaded:
    """A table as loaded: the snapshot's state (or the initial one), the version it is at,
    the room's own data saved with it, and the events after it (not yet folded: the caller
    folds them, so that whatever it keeps beside the state is built the same way)."""

    state: TableState
    version: int
    extra: dict[str, Any] = field(default_factory=dict)
    after: list[StoredEvent] = field(default_factory=list)


def snapshot_key(table_id: str) -> str:
    """Hash beside the table's stream: ``version``, ``format``, ``state``, ``extra``."""
    return keys.table_key(table_id, "snapshot")


class TableRepository:
    """Load a table (snapshot + events after it); save snapshots at hand boundaries."""

    def __init__(self, store: EventStore) -> None:
        self._store = store

    async def load(self, table_id: str) -> Loaded:
        """The latest usable snapshot and the events after it.

        A table whose oldest events were archived (``stud archive`` trims only up to the
        snapshot's version) needs its snapshot: without a usable one the load raises
        :class:`studkit.store.TrimmedRange` rather than fold a stream with its head missing.
        """
        loaded = await self._snapshot(table_id)
        loaded.after = await self._store.read(table_id, from_version=loaded.version,
                                              strict=True)
        return loaded

    async def _snapshot(self, table_id: str) -> Loaded:
        raw = await self._store.client.hgetall(snapshot_key(table_id))
        if not raw:
            return Loaded(initial_state(), 0)
        fields = {(k.decode() if isinstance(k, bytes) else k): v for k, v in raw.items()}
        try:
            if int(fields["format"]) != FORMAT:
                raise ValueError(f"format {int(fields['format'])}")
            version = int(fields["version"])
            if version > await self._store.version(table_id):
                raise ValueError("the snapshot is ahead of the stream")
            state = state_from_json(fields["state"])
            extra = json.loads(fields.get("extra") or b"{}")
        except (KeyError, ValueError, TypeError) as exc:
            log.warning("snapshot_ignored", table_id=table_id, detail=str(exc))
            return Loaded(initial_state(), 0)
        return Loaded(state, version, extra)

    async def save_snapshot(self, table_id: str, version: int, state: TableState,
                            extra: Mapping[str, Any] | None = None) -> None:
        """Save ``state`` as of ``version`` (call at a hand boundary)."""
        await self._store.client.hset(snapshot_key(table_id), mapping={
            "format": FORMAT, "version": version, "state": state_to_json(state),
            "extra": json.dumps(dict(extra or {}), separators=(",", ":"))})

    async def delete_snapshot(self, table_id: str) -> None:
        """Forget the snapshot (the next load folds the whole stream)."""
        await self._store.client.delete(snapshot_key(table_id))


def fold_stored(state: TableState, stored: list[StoredEvent],
                decode_event: Callable[[EventEnvelope], Event]) -> TableState:
    """``state`` with the game's events of ``stored`` folded in (the room's left out)."""
    for item in stored:
        if not is_room_event(item.envelope):
            state = evolve(state, decode_event(item.envelope))
    return state
