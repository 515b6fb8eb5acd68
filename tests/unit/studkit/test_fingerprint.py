"""One canonical fingerprint for retries (issue 29, "Two fingerprints for retries"): the table
hashed a request's bytes, the tournament ``repr(cmd)``, so a new field of a tournament command
changed every fingerprint and a deploy refused every retry in flight. Both are now
``studkit.fingerprint``: the table's over the request's bytes, as before (the same digests),
the tournament's over canonical JSON that leaves out the fields at their defaults."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import table.server as table_server
from stud.v1 import table_pb2
from studkit.fingerprint import canonical, fingerprint, of_command
from tournament import commands as c
from tournament import events as ev
from tournament.app import _fingerprint, legacy_fingerprint
from tournament.structure import TURBO


@dataclass(frozen=True, slots=True)
class Pace:
    clock_s: int = 0


@dataclass(frozen=True, slots=True)
class Register:
    """``tournament.commands.Register`` as a later deploy might have it: a new field with a
    default, and a nested one."""

    player_id: str
    note: str = ""
    pace: Pace = field(default_factory=Pace)


def test_a_field_added_with_a_default_keeps_the_fingerprint() -> None:
    assert _fingerprint(c.Register("ann")) == of_command(Register("ann"))
    assert of_command(Register("ann", note="x")) != of_command(Register("ann"))
    assert of_command(Register("ann", pace=Pace(5))) != of_command(Register("ann"))
    assert _fingerprint(c.Register("ann")) != _fingerprint(c.Register("bob"))
    assert _fingerprint(c.Register("ann")) != _fingerprint(c.ReEnter("ann"))


def test_the_tournaments_commands_have_a_canonical_form() -> None:
    config = ev.Config("mtt", ev.MULTI_TABLE, 1000, 100, TURBO, seats=4, start_at=60.0)
    create = c.Create("T", config)
    assert canonical(create) == canonical(c.Create("T", config))
    assert b'"type":"Create"' in canonical(create) and b" " not in canonical(create)
    assert _fingerprint(c.Tick()) == fingerprint("Tick", b'{"type":"Tick"}')
    # the old form, kept only to recognise a retry recorded with it, is another digest
    assert legacy_fingerprint(c.Register("ann")) != _fingerprint(c.Register("ann"))


def test_the_table_fingerprints_requests_as_before_with_the_shared_helper() -> None:
    assert table_server.fingerprint is fingerprint
    request = table_pb2.SitDownRequest(table_id="t1", seat=2, buy_in=500, command_id="c-1")
    # the digest the table's own function gave before it moved (a retry recorded then)
    body = request.SerializeToString(deterministic=True)
    assert fingerprint("SitDown", body) == _table_before("SitDown", body)


def _table_before(*parts: object) -> str:
    """services/table/server.py's ``fingerprint`` as it was, verbatim."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else str(part).encode())
        digest.update(b"\x00")
    return digest.hexdigest()[:32]
