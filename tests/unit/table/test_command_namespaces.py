"""The table's command ids by who sends them (issue 29, G1 asked whether the table has the
tournament's hole): a caller's id is stored under its principal (``c:<role>:<name>:<id>``),
the table's own commands (the driver's deals and timeouts, the money saga's settlements)
under ``s:``, and no caller's id may hold a ':' (``malformed_id``), so neither a player nor
the tournament service can take an id of the table's own, nor one of another caller's (a
player cannot take the tournament's ``UnseatEntrant`` key, derived from its public log)."""

from __future__ import annotations

import pytest

from studkit.auth import Principal, Role
from studkit.errors import BadRequest
from studkit.mapping.common import check_ident
from table.app import command_key

TOURNAMENT = Principal(Role.SERVICE, "tournament")


@pytest.mark.parametrize("chosen", ["s:h1:deal:3", "h1:deal:3", "due:StartHand:4",
                                    "c:service:tournament:tk-1"])
def test_no_caller_may_send_an_id_of_another_namespace(chosen: str) -> None:
    with pytest.raises(BadRequest) as refused:
        check_ident(chosen, "command_id")
    assert refused.value.reason == "malformed_id"


def test_each_caller_has_its_own_ids() -> None:
    key = "tk-" + "0" * 40
    mine = command_key(Principal(Role.PLAYER, "mal"), key)
    assert mine != command_key(TOURNAMENT, key) and not mine.startswith("s:")
    assert command_key(TOURNAMENT, key) == f"c:service:tournament:{key}"
