"""``stud bots``: bot players that use only the SDK (:mod:`studclient`), against a running
room.

``stud bots --tables N --hands M [--seed S] [--strategy random|tight|station|mixed]`` opens N
tables (operator; a table whose id exists already is reused), creates and funds one wallet
account per bot (operator deposits, again for a bot that busts with its deposit spent, so a
table keeps dealing), seats ``--players`` bots at each, plays until at least M
hands are complete at every table, sits the bots out, checks that every escrow equals its
stack (the wallet's Reconcile against GetTable), has the bots leave (cashed out), closes the
tables it opened and checks that no chip was created or lost: the bots' balances plus the
house's rake from these tables equal what they started with plus the deposits. The last line
is ``hands=… actions=… errors=… chips_conserved=yes|no``; the exit status is 0 only when no
unexpected error occurred and the chips were conserved.

Addresses: ``STUD_TABLE_TARGET``, ``STUD_DEALER_TARGET``, ``STUD_WALLET_TARGET`` (defaults
``127.0.0.1:50051``, ``:50052``, ``:50053``). Credentials: ``STUD_ISSUER_KEY`` (an Ed25519
private key, PEM inline or a path; default ``.run/keys/issuer.pem`` when that file exists, as
``make run`` writes it) from which operator and player tokens are minted; or
``STUD_OPERATOR_TOKEN`` plus ``STUD_PLAYER_TOKENS`` (comma-separated, one per bot). ``stud``
reads each of them from make run's ``.run/env`` too when it is not set (``studtools.runenv``),
so ``stud bots`` finds the stack ``make run`` started in this directory without ``source``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import sys
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final, TextIO

from stud.v1 import table_pb2
from studclient.bot import Bot, TableRun, Tally
from studclient.bot_money import SETTLE_WAIT_S, Money, escrows_match, gone
from studclient.client import Client, TokenProvider
from studclient.errors import AlreadyExists, StudError
from studclient.room_env import (
    DEALER_TARGET_ENV,
    DEFAULT_ISSUER_KEY_FILE,
    DEFAULT_TARGETS,
    ISSUER_KEY_ENV,
    OPERATOR_TOKEN_ENV,
    PLAYER_TOKENS_ENV,
    TABLE_TARGET_ENV,
    WALLET_TARGET_ENV,
    Credentials,
    bots_credentials,
    connector,
    credentials,
    targets,
)
from studclient.strategies import (
    STRATEGIES,
    STRATEGY,
    Strategy,
    random_strategy,
    station_strategy,
    strategy_for,
    strength,
    tight_strategy,
)
from studclient.views import hand_over

__all__ = [  # the run and the command line; the rest re-exported (the SDK's modules and
    # older imports name them here: studclient.bot, bot_money, room_env, strategies)
    "DEALER_TARGET_ENV", "DEFAULT_ISSUER_KEY_FILE", "DEFAULT_TARGETS", "DESCRIPTION", "EPILOG",
    "ISSUER_KEY_ENV", "OPERATOR_TOKEN_ENV", "PLAYER_TOKENS_ENV", "SETTLE_WAIT_S", "STRATEGIES",
    "STRATEGY", "TABLE_TARGET_ENV", "WALLET_TARGET_ENV", "Bot", "BotsRun", "Credentials",
    "Strategy", "TableRun", "Tally", "credentials", "hand_over", "print_tasks",
    "random_strategy", "register", "run", "station_strategy", "strategy_for", "strength",
    "targets", "tight_strategy",
]

DESCRIPTION: Final = """\
Bot players that use only the client SDK, against a running room. Opens N tables (or reuses
existing ones), creates and funds one account per bot, plays until M hands are complete at
each table, checks that every escrow equals its stack, has the bots leave, closes the tables
and checks the ledger. Last line: hands=... actions=... errors=... chips_conserved=yes|no;
exit status 0 only when errors=0 and chips_conserved=yes. See docs/bots.md."""
EPILOG: Final = """\
environment:
  STUD_TABLE_TARGET, STUD_DEALER_TARGET, STUD_WALLET_TARGET
                   addresses (default 127.0.0.1:50051, :50052, :50053)
  STUD_ISSUER_KEY  issuer private key (PEM or path; default .run/keys/issuer.pem if present)
  STUD_OPERATOR_TOKEN, STUD_PLAYER_TOKENS
                   instead of the key: an operator token and comma-separated player tokens
each is also read from make run's .run/env ($STUD_RUN_DIR/env) when it is not set
  STUD_VIA_GATEWAY=1
                   the addresses are the gRPC-Web gateway's: follow a table's not_owner
                   through it (process environment only; docs/sdk.md)
  STUD_TLS=1, STUD_TLS_CA=PEM-FILE
                   TLS to the addresses (system roots, or these; process environment only)"""


# --- the run ---------------------------------------------------------------------------------

class BotsRun:
    """One run at tables: each table opened (or reused) and its bots seated, the hands
    played, then the bots cashed out, the tables closed and the money checked."""

    def __init__(self, args: argparse.Namespace, out: TextIO, creds: Credentials,
                 connect: Callable[[str | TokenProvider], Client], seed: int,
                 run_id: str) -> None:
        self.args = args
        self.out = out
        self.creds = creds
        self.connect = connect
        self.seed = seed
        self.run_id = run_id
        self.prefix = args.prefix or f"bots-{run_id}"
        self.tally = Tally()
        self.ops = connect(creds.operator)
        self.money = Money(self.ops, out)
        self.tables: list[TableRun] = []
        self.hands = 0
        self.conserved = True
        self._players = 0
        """Bots seated so far (the index of the next one's given token)."""

    async def seat(self, t: int) -> None:
        """Open (or reuse) the run's ``t``-th table and seat its bots, each with an account
        funded with three buy-ins."""
        args, ops = self.args, self.ops
        table_id = f"{self.prefix}-{t}"
        opened = await _open(ops, table_id, args)
        view = await ops.get_table(table_id)
        if view.status == table_pb2.TABLE_STATUS_CLOSED:
            raise RuntimeError(f"table {table_id} is closed: choose another --prefix")
        table = TableRun(table_id, opened, view.hands_started)
        self.tables.append(table)
        free = [s for s in range(1, view.config.seats + 1)
                if s not in {seat.seat for seat in view.seats}]
        if len(free[:args.players]) < max(2, view.config.min_players):
            raise RuntimeError(f"table {table_id} has {len(free)} free seats: "
                               f"too few to play")
        buy_in = min(view.settings.buy_in_max, max(
            view.settings.buy_in_min, args.buy_in or 50 * view.config.big_bet))
        for i, seat in enumerate(free[:args.players]):
            name, token = self.creds.players(self._players, f"bot-{self.run_id}-{t}-{seat}")
            self._players += 1
            strategy_name, strategy = strategy_for(args.strategy, i)
            bot = Bot(name, self.connect(token), table_id, strategy_name, strategy,
                      random.Random(f"{self.seed}-{t}-{seat}"), seat, buy_in,
                      fund=self.money.fund_again)
            table.bots.append(bot)
            await self.money.open_account(name, 3 * buy_in)
            await bot.client.sit(table_id, seat, buy_in)
        print(f"table {table_id}: {len(table.bots)} bots "
              f"({', '.join(b.strategy_name for b in table.bots)}), "
              f"{'opened' if opened else 'reused'}", file=self.out, flush=True)

    async def play(self) -> None:
        """Every bot plays until its table's hands have started, then sits out."""
        async def play(table: TableRun) -> None:
            ours = {b.name for b in table.bots}
            results = await asyncio.gather(
                *(b.play(table.hands_before + self.args.hands, ours, self.tally)
                  for b in table.bots), return_exceptions=True)
            for bot, result in zip(table.bots, results, strict=True):
                if isinstance(result, BaseException):
                    self.tally.error(f"{bot.name} play", result)

        await asyncio.gather(*(play(t) for t in self.tables))

    async def wind_down(self) -> None:
        """Each table's escrows checked against its stacks, its bots cashed out, the table
        closed if the run opened it and its hands counted; then the ledger checked."""
        ops = self.ops
        self.hands = 0
        for table in self.tables:
            ours = {b.name for b in table.bots}
            if not await escrows_match(ops, table):
                self.conserved = False
                print(f"table {table.table_id}: escrows differ from stacks", file=self.out)
            for bot in table.bots:
                try:
                    await bot.client.leave(table.table_id)
                except StudError as exc:
                    self.tally.error(f"{bot.name} leave", exc)
            if table.opened:
                await ops.close_table(table.table_id)
            view = await gone(ops, table, ours)
            self.hands += view.hands_started - table.hands_before
        ledger_ok = await self.money.conserved(self.tables)
        self.conserved = self.conserved and ledger_ok

    def timed_out(self) -> None:
        """What each bot last saw: where a stuck run stopped."""
        self.tally.errors.append(f"timed out after {self.args.timeout} s")
        for table in self.tables:
            for bot in table.bots:
                print(f"{bot.name} last saw {bot.last_seen}", file=self.out)

    async def close(self) -> None:
        for table in self.tables:
            for bot in table.bots:
                await bot.client.close()
        await self.ops.close()

    def report(self) -> int:
        """The errors, then the last lines; the exit status."""
        tally, out, conserved = self.tally, self.out, self.conserved
        for message in tally.errors:
            print(f"error: {message}", file=out)
        ok = not tally.errors and conserved
        print(f"refused={tally.refused} (stale or timed out: expected) seed={self.seed}",
              file=out)
        print(f"hands={self.hands} actions={tally.actions} errors={len(tally.errors)} "
              f"chips_conserved={'yes' if conserved and not tally.errors else 'no'}",
              file=out, flush=True)
        return 0 if ok else 1


async def _open(ops: Client, table_id: str, args: argparse.Namespace) -> bool:
    from rules import Rake, TableConfig
    config = TableConfig.for_stakes(args.stakes)
    if args.rake_bps:
        from dataclasses import replace
        config = replace(config, rake=Rake(args.rake_bps, config.big_bet))
    settings = table_pb2.TableSettings(next_hand_delay_ms=args.hand_delay_ms,
                                       next_hand_delay_set=True)
    if args.buy_in:  # the table lets the bots bring that little
        settings.buy_in_min = min(args.buy_in, 20 * config.big_bet)
    try:
        await ops.open_table(table_id, config, settings)
        return True
    except AlreadyExists:
        return False


def print_tasks() -> None:
    """Each asyncio task of the process and where it waits, on stderr (a bot run that
    seems stuck says why on SIGUSR1)."""
    for task in asyncio.all_tasks():
        where: list[str] = []
        awaited: Any = task.get_coro()
        while awaited is not None and len(where) < 20:  # down the chain of awaits
            frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "ag_frame", None)
            if frame is not None:
                where.append(f"{frame.f_code.co_qualname}:{frame.f_lineno}")
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "ag_await", None)
        print(f"task {task.get_name()}: {' > '.join(where) or repr(task)}", file=sys.stderr)
    sys.stderr.flush()


async def run(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
    """The whole run; the exit status. ``env``: ``stud``'s environment (the process's over
    make run's ``.run/env``). SIGUSR1 prints what each of its tasks is waiting for."""
    with contextlib.suppress(NotImplementedError, RuntimeError):  # not on every platform
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, print_tasks)
    if args.tournament:
        from studclient import tourney_bots
        return await tourney_bots.run(args, out, env)
    creds = bots_credentials(env)
    if creds is None:
        return 2
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    bots_run = BotsRun(args, out, creds, connector(env), seed, uuid.uuid4().hex[:8])
    try:
        async with asyncio.timeout(args.timeout):
            await bots_run.money.note_house()
            for t in range(1, args.tables + 1):
                await bots_run.seat(t)
            await bots_run.play()
            await bots_run.wind_down()
    except TimeoutError:
        bots_run.timed_out()
    except (StudError, RuntimeError) as exc:
        bots_run.tally.error("setup", exc)
    finally:
        await bots_run.close()
    return bots_run.report()


# --- the command line ------------------------------------------------------------------------

def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def register(commands: Any) -> None:
    """Add ``stud bots`` to the ``stud`` parser's subcommands."""
    parser = commands.add_parser(
        "bots", help="bot players at N tables of a running room (SDK only)",
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=_positive, default=1, help="tables (default 1)")
    parser.add_argument("--hands", type=_positive, default=10,
                        help="hands to complete at each table (default 10)")
    parser.add_argument("--seed", type=int, default=None, help="random seed of the bots")
    parser.add_argument("--strategy", choices=STRATEGIES, default="mixed",
                        help="how the bots play (default mixed: random, tight, station)")
    parser.add_argument("--players", type=int, choices=range(2, 9), default=4,
                        metavar="2..8", help="bots per table (default 4)")
    parser.add_argument("--prefix", default=None,
                        help="table ids are PREFIX-1..N (default bots-<random>); an existing "
                             "table is reused")
    parser.add_argument("--stakes", type=_positive, default=200,
                        help="small bet of the tables opened (default 200: $2/$4)")
    parser.add_argument("--buy-in", type=_positive, default=None,
                        help="chips each bot brings (default 50 big bets, within the "
                             "table's limits); bots under 5 big bets top up")
    parser.add_argument("--rake-bps", type=int, default=0,
                        help="rake of the tables opened, basis points (cap: one big bet)")
    parser.add_argument("--hand-delay-ms", type=int, default=0,
                        help="pause between hands at the tables opened (default 0)")
    parser.add_argument("--tournament", default=None, metavar="ID",
                        help="instead of tables: enter tournament ID (or play the entries "
                             "the --prefix bots hold) and play it out, following moves")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="give up after this many seconds (default 600)")
    parser.set_defaults(handler=lambda args, out, env: asyncio.run(run(args, out, env)))
