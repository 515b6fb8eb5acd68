"""The process manager's round for one tournament (services/tournament/driver.py ``step``)
over the real model, issue 29 G1's second half: one step the log refuses (here a settlement,
refused for ever as G1's attack made it) never stops the others of the round, above all the
refunds and prizes; and the manager's ids are in a namespace no caller can choose."""

from __future__ import annotations

import pytest

from studkit.auth import Principal, Role
from studkit.errors import AlreadyExists, FailedPrecondition
from tournament import commands as c
from tournament import events as ev
from tournament.app import MANAGER, Outcome, Record, stored_id
from tournament.clients import Unavailable
from tournament.decide import decide
from tournament.driver import step
from tournament.state import CANCELLED, REGISTERING, RUNNING, Tournament, apply
from tournament.structure import TURBO

TID = "T"


class Log:
    """A :class:`tournament.app.Writer` over the pure model that refuses the command ids in
    ``refused`` (``command_id_reused``, as the store did for G1's stolen ids)."""

    def __init__(self, refused: set[str]) -> None:
        self.t = Tournament()
        self.refused = refused
        self.ids: list[str] = []
        self.now = 0.0

    async def load(self, _tid: str) -> Tournament:
        return self.t

    async def execute(self, _tid: str, cmd: c.Command, command_id: str) -> Outcome:
        if command_id in self.refused:
            raise AlreadyExists(f"command id {command_id} was used for another command",
                                reason="command_id_reused")
        self.ids.append(command_id)
        events = decide(self.t, cmd, self.now, 7)
        first = self.t.version
        self.t = apply(self.t, events)
        return Outcome(self.t.version, tuple(Record(first + i, self.now, e)
                                             for i, e in enumerate(events, 1)), False)


class Wallet:
    def __init__(self) -> None:
        self.entered: list[str] = []
        self.refunded: list[str] = []
        self.paid: list[tuple[str, int, int]] = []
        self.excluded: dict[str, str] = {}
        self.asked: list[str] = []
        self.away = False

    async def enter(self, _tid: str, entry_id: str, _player: str, _buy_in: int,
                    _fee: int) -> None:
        self.entered.append(entry_id)

    async def refund(self, _tid: str, entry_id: str, _player: str) -> None:
        self.refunded.append(entry_id)

    async def pay(self, _tid: str, payment_id: str, _player: str, amount: int,
                  place: int) -> None:
        self.paid.append((payment_id, amount, place))

    async def exclusion(self, player: str) -> str:
        self.asked.append(player)
        if self.away:
            raise Unavailable("wallet: UNAVAILABLE")
        return self.excluded.get(player, "")


async def test_a_settlement_refused_for_ever_holds_back_no_refund() -> None:
    log, wallet = Log({"settle.e3"}), Wallet()
    await log.execute(TID, c.Create(TID, ev.Config("mtt", ev.MULTI_TABLE, 1000, 100, TURBO,
                                                   seats=4, start_at=3600.0)), "create")
    for name in ("ann", "bob"):
        await log.execute(TID, c.Register(name), f"r-{name}")
    await step(log, wallet, TID)  # both charged and settled
    assert all(e.paid for e in log.t.field())
    await log.execute(TID, c.Register("mal"), "r-mal")  # e3: its settlement is refused
    await log.execute(TID, c.Cancel("the room closes"), "c-1")
    assert log.t.phase == CANCELLED
    for _ in range(3):
        await step(log, wallet, TID)
    assert sorted(set(wallet.refunded)) == ["e1", "e2"]
    assert {"refund/e1", "refund/e2"} <= log.t.paid
    assert "paid.refund/e1" in log.ids and "settle.e3" not in log.ids


async def test_a_refused_clock_holds_back_no_settlement() -> None:
    """G1b: ``tick.<version>`` taken by a caller froze a sit & go before its start."""
    log, wallet = Log(set()), Wallet()
    await log.execute(TID, c.Create(TID, ev.Config("sng", ev.SIT_AND_GO, 1000, 100, TURBO,
                                                   seats=2)), "create")
    await log.execute(TID, c.Register("ann"), "r-ann")
    await log.execute(TID, c.Register("bob"), "r-bob")
    log.refused = {f"tick.{log.t.version}"}
    await step(log, wallet, TID)
    assert wallet.entered == ["e1", "e2"] and log.t.phase == "running"


@pytest.mark.parametrize("role", list(Role))
def test_no_callers_id_is_one_of_the_managers(role: Role) -> None:
    assert role.value != MANAGER
    for chosen in ("settle.e2", "tick.5", "paid.refund", "x"):
        mine = stored_id(Principal(role, "mal"), chosen)
        assert mine != stored_id(None, chosen) and not mine.startswith(f"{MANAGER}:")
    # two callers' equal ids are two ids
    assert stored_id(Principal(role, "ann"), "r-1") != stored_id(Principal(role, "bob"), "r-1")


async def test_an_excluded_entrant_is_withdrawn_and_refunded_once_before_the_start() -> None:
    """Issue 34: asked only when the start is near (a multi-table's start time), the paid
    entries only; the excluded one withdrawn and refunded once under the manager's id, the
    others started; after the start an entry is never withdrawn."""
    log, wallet = Log(set()), Wallet()
    await log.execute(TID, c.Create(TID, ev.Config("mtt", ev.MULTI_TABLE, 1000, 100, TURBO,
                                                   seats=4, start_at=3600.0)), "create")
    for name in ("ann", "bob", "cy"):
        await log.execute(TID, c.Register(name), f"r-{name}")
    wallet.excluded["bob"] = "self_excluded"
    await step(log, wallet, TID, now=0.0)  # charged and settled; the start is far
    assert wallet.asked == [] and all(e.paid for e in log.t.field())
    log.now = 3600.0
    await step(log, wallet, TID, now=3600.0)
    assert wallet.asked == ["ann", "bob", "cy"]
    assert "pm:exclude.e2" in [stored_id(None, i) for i in log.ids]
    assert log.t.phase == RUNNING
    assert sorted(e.player_id for e in log.t.field()) == ["ann", "cy"]
    assert wallet.refunded == ["e2"] and "refund/e2" in log.t.paid
    await step(log, wallet, TID, now=3601.0)
    assert wallet.asked == ["ann", "bob", "cy"] and wallet.refunded == ["e2"]
    with pytest.raises(FailedPrecondition) as started:
        decide(log.t, c.WithdrawExcluded("e1", "self_excluded"), 3602.0)
    assert started.value.reason == "started"


def test_a_withdrawal_waits_for_the_charge_and_repeats_as_nothing() -> None:
    t = apply(Tournament(), [ev.Created(TID, ev.Config("mtt", ev.MULTI_TABLE, 1000, 100,
                                                       TURBO, seats=4, start_at=3600.0), 0.0),
                             ev.EntryRequested("e1", "ann", 0.0)])
    assert t.phase == REGISTERING
    with pytest.raises(FailedPrecondition) as pending:
        decide(t, c.WithdrawExcluded("e1", "operator_excluded"), 1.0)
    assert pending.value.reason == "payment_pending"
    t = apply(t, [ev.EntryPaid("e1")])
    events = decide(t, c.WithdrawExcluded("e1", "operator_excluded"), 1.0)
    assert events == [ev.EntryWithdrawn("e1", "operator_excluded"),
                      ev.RefundDue("refund/e1", "e1", "ann", 1000, 100)]
    assert decide(apply(t, events), c.WithdrawExcluded("e1", "operator_excluded"), 2.0) == []


async def test_a_held_back_start_asks_once_per_version_and_an_outage_once_a_round() -> None:
    """A multi-table past its start time held back by a charge refused for ever: the wallet
    is asked about the paid entrants once for that version of the log, not every round; a
    wallet that does not answer is asked once a round (not once per entry), and nobody is
    withdrawn on its silence."""
    log, wallet = Log({"settle.e3"}), Wallet()
    await log.execute(TID, c.Create(TID, ev.Config("mtt", ev.MULTI_TABLE, 1000, 100, TURBO,
                                                   seats=4, start_at=3600.0)), "create")
    for name in ("ann", "bob", "cy"):
        await log.execute(TID, c.Register(name), f"r-{name}")
    log.now = 3600.0
    checked: dict[str, int] = {}
    for _ in range(3):
        await step(log, wallet, TID, now=3600.0, checked=checked)
    assert log.t.phase == REGISTERING  # e3's settlement never lands
    assert wallet.asked == ["ann", "bob"]
    wallet.away, wallet.asked, checked = True, [], {}
    wallet.excluded["ann"] = "self_excluded"
    for _ in range(2):
        await step(log, wallet, TID, now=3600.0, checked=checked)
    assert wallet.asked == ["ann", "ann"] and checked == {}
    assert sorted(e.player_id for e in log.t.field()) == ["ann", "bob", "cy"]
