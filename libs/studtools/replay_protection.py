"""``stud replay protection --player P``: every limit and exclusion event of a player, oldest
first, from the wallet's stream of them (``stud:wallet:{wallet}:protection:<player>``, which
the ``auditor`` Redis user reads), each in words (``studclient.protection.event_line``) with
its time; docs/player-protection.md. Read only."""

from __future__ import annotations

import json
from typing import Any, TextIO

from studclient.protection import event_line, when
from studkit import keys


def protection_key(player_id: str) -> str:
    """The wallet's stream of one player's protection events (``wallet.protection_store``)."""
    return keys.wallet_key(f"protection:{player_id}")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def events(client: Any, player_id: str) -> list[dict[str, Any]]:
    """The player's protection events, oldest first: id, type, time (ms), JSON and words."""
    out = []
    for entry_id, fields in await client.xrange(protection_key(player_id)):
        fields = {_text(k): _text(v) for k, v in fields.items()}
        text = fields["event"]
        body = json.loads(text)
        out.append({"id": _text(entry_id), "type": body["type"], "at_ms": body["at_ms"],
                    "event": text, "line": event_line(body["type"], text)})
    return out


async def run(client: Any, player_id: str, out: TextIO, as_json: bool = False) -> int:
    """Print the player's protection events; exit status 0."""
    found = await events(client, player_id)
    if as_json:
        json.dump({"player": player_id, "events": found}, out, indent=1)
        out.write("\n")
        return 0
    for e in found:
        print(f"{when(e['at_ms'])}  {e['line']}", file=out)
    print(f"{len(found)} protection event{'s' if len(found) != 1 else ''} of {player_id}",
          file=out)
    return 0
