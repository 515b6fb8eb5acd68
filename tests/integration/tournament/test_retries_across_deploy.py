"""A retry across the deploy that changed how commands are recorded (issue 29): a command
recorded by the service before it (under the caller's bare id, with the old ``repr``
fingerprint) is still recognised when the caller retries it over gRPC, answered from the log
with the same entry, nothing written; another command under that id is not answered from it.
Over a real Redis, real wallet and tournament services."""

from __future__ import annotations

import pytest

import tournament.app as tournament_app
from stud.v1 import tournament_pb2 as pb
from studkit.auth import Principal, Role
from studtest.tournament_service import RunningTournament
from studtest.wallet import RunningWallet

pytestmark = pytest.mark.integration

MTT = pb.TournamentConfig(name="mtt", format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, buy_in=100,
                          fee=10, seats=8, min_entrants=2, start_at={"seconds": 4_000_000_000},
                          structure=pb.TournamentStructure(preset="default"))


async def test_a_retry_recorded_in_the_old_form_is_recognised(
        tournament: RunningTournament, wallet: RunningWallet) -> None:
    client = tournament.client
    for name in ("ann", "bob"):
        await wallet.client.create_account(name)
        await wallet.client.deposit(name, 1000, f"d-{name}")
    await client.create("old", MTT)
    with pytest.MonkeyPatch.context() as before:  # the service as it was
        before.setattr(tournament_app, "_fingerprint", tournament_app.legacy_fingerprint)
        before.setattr(tournament_app, "stored_id", lambda _by, command_id: command_id)
        first = await client.register("old", Principal(Role.PLAYER, "ann"), "r-1")
    assert await tournament.deps.app.store.recorded("old", "r-1") is not None
    version = (await client.get("old")).version
    again = await client.register("old", Principal(Role.PLAYER, "ann"), "r-1")
    assert again.entry_id == first.entry_id == "e1"
    assert [r.sequence for r in again.events] == [r.sequence for r in first.events]
    # bob's r-1 is his own: taken, not answered with ann's
    bob = await client.register("old", Principal(Role.PLAYER, "bob"), "r-1")
    assert bob.entry_id == "e2"
    assert (await client.get("old")).version > version
