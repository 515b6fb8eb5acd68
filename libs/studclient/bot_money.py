"""The money of a ``stud bots`` run: each bot's account opened and funded (again when it busts
with its deposit spent, so its table keeps dealing), and at the end the checks that no chip
was created or lost: every escrow equal to its seat's stack, the bots cashed out, and the
bots' balances, the escrows left and the house's rake from the run's tables equal to the
balances before plus the deposits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Final, TextIO

from stud.v1 import table_pb2, wallet_pb2
from studclient.bot import Bot, TableRun
from studclient.client import Client
from studclient.views import hand_over

SETTLE_WAIT_S: Final = 20.0


class Money:
    """What the bots had before the run, the deposits made since, and the house's postings
    before it."""

    def __init__(self, ops: Client, out: TextIO) -> None:
        self.ops = ops
        self.out = out
        self.balances_before: dict[str, int] = {}
        self.deposits = 0
        self.house_before: set[str] = set()

    async def note_house(self) -> None:
        """The house's postings before the run (its rake is what comes after)."""
        self.house_before = {line.posting_id for line in await _house_lines(self.ops)}

    async def open_account(self, name: str, deposit: int) -> None:
        """A bot's account, its balance before the run noted, and a first deposit."""
        await self.ops.create_account(name)
        self.balances_before[name] = await self.ops.balance(name)
        await self.ops.deposit(name, deposit)
        self.deposits += deposit

    async def fund_again(self, bot: Bot, amount: int) -> None:
        """An operator deposit for a bot that busted with its deposit spent (:attr:`Bot.fund`)."""
        await self.ops.deposit(bot.name, amount)
        self.deposits += amount
        print(f"{bot.name} busted with its deposit spent: funded again with {amount}",
              file=self.out, flush=True)

    async def conserved(self, tables: Sequence[TableRun]) -> bool:
        """The bots' balances, the escrows they left and the house's rake from ``tables``
        equal their balances before plus the deposits (the ``ledger:`` line says both)."""
        ops = self.ops
        rake = sum(line.amount for line in await _house_lines(ops)
                   if line.posting_id not in self.house_before
                   and line.table_id in {t.table_id for t in tables})
        after = {name: await ops.balance(name) for name in self.balances_before}
        escrow_left = 0
        for table in tables:
            ours = {b.name for b in table.bots}
            escrow_left += sum(s.balance for s in (await ops.reconcile(table.table_id)).seats
                               if s.player_id in ours)
        total = sum(after.values()) + escrow_left + rake
        expected = sum(self.balances_before.values()) + self.deposits
        print(f"ledger: balances {sum(after.values())} + escrows {escrow_left} + rake "
              f"{rake} = {total}; before {sum(self.balances_before.values())} + deposits "
              f"{self.deposits} = {expected}", file=self.out)
        return total == expected


async def _house_lines(ops: Client) -> list[wallet_pb2.StatementLine]:
    return await ops.statement(wallet_pb2.AccountRef(system=wallet_pb2.SYSTEM_ACCOUNT_HOUSE))


async def escrows_match(ops: Client, table: TableRun) -> bool:
    """Wait until every escrow of the table equals its seat's stack (settlement is
    asynchronous); False if they still differ after a while."""
    deadline = time.monotonic() + SETTLE_WAIT_S
    while True:
        view = await ops.get_table(table.table_id)
        escrows = {s.seat: s.balance for s in (await ops.reconcile(table.table_id)).seats
                   if s.balance}
        stacks = {s.seat: s.stack for s in view.seats if s.stack}
        if hand_over(view) and escrows == stacks:
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)


async def gone(ops: Client, table: TableRun, ours: set[str]) -> table_pb2.TableView:
    """The table once none of the bots sits there any more (they were cashed out)."""
    deadline = time.monotonic() + SETTLE_WAIT_S
    while True:
        view = await ops.get_table(table.table_id)
        escrows = await ops.reconcile(table.table_id)
        if not any(s.player_id in ours for s in view.seats) and not any(
                s.player_id in ours and s.balance for s in escrows.seats):
            return view
        if time.monotonic() > deadline:
            return view
        await asyncio.sleep(0.1)
