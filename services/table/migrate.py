"""Tables written before the room events kept part of their state in keys beside the stream
(``:settings``, ``:intents``, ``:settled``, ``:closed``). When such a table loads, its new
owner records what those keys held as room events (one fenced append, idempotent by its
command id), then deletes them: from then on the stream alone is the table."""

from __future__ import annotations

import structlog

from stud.v1 import table_pb2 as pb
from studkit import keys
from table import room_events as rev
from table.actor import TableActor
from table.clients import key
from table.room import Record
from table.room_events import RoomEvent
from table.room_state import BUY_IN

log = structlog.get_logger("table")

MIGRATION_ID = "s:migrate:side-keys:v1"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _intents(actor: TableActor, raw: dict[bytes, bytes]) -> list[RoomEvent]:
    """Room events for the old ``:intents`` hash (hand-encoded strings), where the room does
    not already hold them."""
    room, table_id = actor.room, actor.table_id
    out: list[RoomEvent] = []
    for k, v in sorted(raw.items()):
        kind, _, seat_text = _text(k).partition(":")
        seat, value = int(seat_text), _text(v)
        holder = room.table.seat(seat) if 1 <= seat <= len(room.table.seats) else None
        if seat in room.sagas:
            continue
        if kind == "leave" and holder is not None:
            out.append(rev.LeaveRequested(seat=seat, player_id=value))
        elif kind == "muck" and holder is not None:
            out.append(rev.MuckPreferenceSet(seat=seat, player_id=holder.player_id, muck=True))
        elif kind == "topup" and holder is not None:
            player, amount, wallet_key = value.split(" ")
            out.append(rev.TopUpQueued(seat=seat, player_id=player, amount=int(amount),
                                       wallet_key=wallet_key))
        elif kind == "sit" and holder is None:
            player, amount, cid, _fp = value.split(" ")
            out.append(rev.BuyInRequested(seat=seat, player_id=player, amount=int(amount),
                                          wallet_key=key(table_id, cid), command_id=cid))
        elif kind == "cashout" and holder is None:
            player, wallet_key = value.split(" ")
            out.append(rev.CashOutRequested(seat=seat, player_id=player,
                                            wallet_key=wallet_key))
    return out


async def migrate_side_keys(actor: TableActor) -> bool:
    """Move an old table's side keys into its stream; False if it has none."""
    client = actor.deps.store.client
    names = {name: keys.legacy_table_key(actor.table_id, name) for name in keys.LEGACY_TABLE_KEYS}
    pipe = client.pipeline(transaction=False)
    pipe.get(names["settings"])
    pipe.hgetall(names["intents"])
    pipe.get(names["settled"])
    pipe.get(names["closed"])
    settings, intents, settled, closed = await pipe.execute()
    if not (settings or intents or settled or closed):
        return False
    room = actor.room
    events: list[RoomEvent] = []
    if settings and room.table.opened:
        from table.model import settings_from_stored
        stored = settings_from_stored(pb.TableSettings.FromString(settings))
        if room.table.config is not None:
            stored = stored.for_config(room.table.config)
        events.append(rev.SettingsSet(settings=stored))
    if settled and int(settled) > room.settled:
        events.append(rev.HandSettled(hand_number=int(settled)))
    if closed and not room.closed:
        events.append(rev.TableClosed(by="migrated"))
    events.extend(_intents(actor, intents or {}))
    if events and room.table.opened:
        await actor.commit(Record(tuple(events)), MIGRATION_ID)
    await client.delete(*names.values())
    log.info("side_keys_migrated", events=len(events),
             buy_ins=sum(1 for s in actor.room.sagas.values() if s.kind == BUY_IN))
    return True
