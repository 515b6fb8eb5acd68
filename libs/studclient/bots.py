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
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from stud.v1 import common_pb2, table_pb2, wallet_pb2
from studclient.client import Client, TokenProvider, token_subject
from studclient.errors import (
    AlreadyExists,
    FailedPrecondition,
    InsufficientFunds,
    NotYourTurn,
    Stale,
    StudError,
)
from studclient.views import hand_over as hand_over  # re-exported (older imports)
from studclient.views import my_cards, my_turn

TABLE_TARGET_ENV: Final = "STUD_TABLE_TARGET"
DEALER_TARGET_ENV: Final = "STUD_DEALER_TARGET"
WALLET_TARGET_ENV: Final = "STUD_WALLET_TARGET"
OPERATOR_TOKEN_ENV: Final = "STUD_OPERATOR_TOKEN"
PLAYER_TOKENS_ENV: Final = "STUD_PLAYER_TOKENS"
ISSUER_KEY_ENV: Final = "STUD_ISSUER_KEY"
DEFAULT_TARGETS: Final = {TABLE_TARGET_ENV: "127.0.0.1:50051",
                          DEALER_TARGET_ENV: "127.0.0.1:50052",
                          WALLET_TARGET_ENV: "127.0.0.1:50053"}
DEFAULT_ISSUER_KEY_FILE: Final = Path(".run/keys/issuer.pem")
STRATEGIES: Final = ("random", "tight", "station", "mixed")
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
SETTLE_WAIT_S: Final = 20.0

Strategy = Callable[[table_pb2.TableView, random.Random], common_pb2.LegalAction]
A = common_pb2


# --- strategies ------------------------------------------------------------------------------

def _cards(view: table_pb2.TableView) -> list[common_pb2.Card]:
    """The viewer's own cards (down cards as merged in from the dealer, and up cards)."""
    down, up = my_cards(view)
    return down + up


def _low(rank: int) -> int:
    return 1 if rank == 14 else rank


def strength(cards: Sequence[common_pb2.Card]) -> int:
    """A rough hand score for the tight bot: 2 for a pair or better (trips 3), 1 for a
    low draw (as many distinct cards of eight or lower as half the cards, at least three)
    or three or more of a suit among the first cards, else 0."""
    ranks = [c.rank for c in cards]
    most = max((ranks.count(r) for r in ranks), default=0)
    if most >= 3:
        return 3
    if most == 2:
        return 2
    lows = {_low(r) for r in ranks if _low(r) <= 8}
    suits = [c.suit for c in cards]
    suited = max((suits.count(s) for s in suits), default=0)
    if len(lows) >= max(3, (len(cards) + 1) // 2) or (suited >= 3 and len(cards) <= 4):
        return 1
    return 0


def _pick(actions: Sequence[common_pb2.LegalAction], *kinds: int
          ) -> common_pb2.LegalAction | None:
    for kind in kinds:
        for action in actions:
            if action.kind == kind:
                return action
    return None


def random_strategy(view: table_pb2.TableView, rng: random.Random) -> common_pb2.LegalAction:
    """Any legal action, uniformly."""
    actions: list[common_pb2.LegalAction] = list(view.hand.legal_actions.actions)
    return rng.choice(actions)


def station_strategy(view: table_pb2.TableView, rng: random.Random
                     ) -> common_pb2.LegalAction:
    """A calling station: checks or calls, never raises, never folds."""
    actions = list(view.hand.legal_actions.actions)
    choice = _pick(actions, A.ACTION_KIND_CHECK, A.ACTION_KIND_CALL, A.ACTION_KIND_BRING_IN,
                   A.ACTION_KIND_COMPLETE, A.ACTION_KIND_BET, A.ACTION_KIND_RAISE)
    return choice or actions[0]


def tight_strategy(view: table_pb2.TableView, rng: random.Random) -> common_pb2.LegalAction:
    """Plays pairs and low or suited starts, bets its made hands, folds the rest to a bet."""
    actions = list(view.hand.legal_actions.actions)
    score = strength(_cards(view))
    if score >= 2 or (score == 1 and rng.random() < 0.3):
        aggressive = _pick(actions, A.ACTION_KIND_COMPLETE, A.ACTION_KIND_BET,
                           A.ACTION_KIND_RAISE)
        if aggressive is not None and (score >= 2 or rng.random() < 0.5):
            return aggressive
    if score >= 1:
        choice = _pick(actions, A.ACTION_KIND_CHECK, A.ACTION_KIND_CALL,
                       A.ACTION_KIND_BRING_IN)
    else:
        choice = _pick(actions, A.ACTION_KIND_CHECK, A.ACTION_KIND_BRING_IN, A.ACTION_KIND_FOLD,
                       A.ACTION_KIND_CALL)
    return choice or actions[0]


STRATEGY: Final[dict[str, Strategy]] = {
    "random": random_strategy,
    "tight": tight_strategy,
    "station": station_strategy,
}


def strategy_for(name: str, index: int) -> tuple[str, Strategy]:
    """The strategy of the ``index``-th bot of a table (``mixed``: random, tight, station in
    turn)."""
    if name == "mixed":
        name = ("random", "tight", "station")[index % 3]
    return name, STRATEGY[name]


# --- tallies ---------------------------------------------------------------------------------

@dataclass
class Tally:
    """What the bots did."""

    actions: int = 0
    refused: int = 0
    """Expected refusals: the table moved on before the action (stale, a time-out)."""
    errors: list[str] = field(default_factory=list)
    """Unexpected errors."""

    def error(self, where: str, exc: BaseException) -> None:
        self.errors.append(f"{where}: {type(exc).__name__}: {exc}")


@dataclass
class Bot:
    """One bot player: its client, seat and strategy."""

    name: str
    client: Client
    table_id: str
    strategy_name: str
    strategy: Strategy
    rng: random.Random
    seat: int = 0
    buy_in: int = 0
    last_seen: str = "no view yet"
    """The last view this bot acted on, in words (printed when a run times out)."""
    fund: Callable[[Bot, int], Awaitable[None]] | None = None
    """Funds this bot's account again (the run's operator deposit) when it busts with its
    account too short to buy in again; None: it stays busted."""

    async def play(self, hands: int, ours: set[str], tally: Tally) -> None:
        """Act at each turn until ``hands`` hands have started, then sit out; return once
        no hand is in progress and every bot of the table sits out."""
        acted_at = -1
        sat_out = False
        sat_in_for = -1
        topped_up_for = (-1, False)
        """The hand a top-up was last asked in, and whether the bot had busted: once more
        after a bust, between hands (a bust ends a heads-up table's hands)."""
        async with self.client.watch(self.table_id) as watch:
            async for view in watch.views():
                self.last_seen = _seen(view)
                mine = [s for s in view.seats if s.player_id in ours]
                if sat_out and hand_over(view) and all(s.sitting_out for s in mine):
                    return
                if view.hands_started >= hands and not sat_out:
                    sat_out = True
                    await self._command(tally, "sit_out", self.client.sit_out(self.table_id))
                    continue
                me = next((s for s in view.seats if s.seat == view.viewer_seat), None)
                big_bet = view.config.big_bet
                busted = me is not None and me.stack == 0 and hand_over(view)
                if (me is not None and not sat_out and me.stack < 5 * big_bet
                        and topped_up_for < (view.hands_started, busted)
                        and me.stack < self.buy_in):
                    # Short: top up (during a hand the table adds it when the hand ends).
                    topped_up_for = (view.hands_started, busted)
                    await self._top_up(tally, self.buy_in - me.stack, busted)
                if (me is not None and not sat_out and me.sitting_out and me.stack > 0
                        and sat_in_for < view.hands_started):
                    # Sat out by the table (time-outs, a bust): come back.
                    sat_in_for = view.hands_started
                    await self._command(tally, "sit_in", self.client.sit_in(self.table_id))
                if view.version > acted_at and my_turn(view):
                    acted_at = view.version
                    action = self.strategy(view, self.rng)
                    if await self._command(tally, "act", self.client.act(
                            self.table_id, action, expected_sequence=view.version)):
                        tally.actions += 1

    async def _top_up(self, tally: Tally, amount: int, busted: bool) -> None:
        """Top up by ``amount``; busted with too little in its account, the bot is funded
        again (:attr:`fund`) and buys in again, so its table keeps dealing."""
        try:
            await self.client.top_up(self.table_id, amount)
        except InsufficientFunds as exc:
            if not busted or self.fund is None:
                self._refused(tally, "top_up", exc)
                return
            await self.fund(self, self.buy_in)
            await self._command(tally, "top_up", self.client.top_up(self.table_id, amount))
        except StudError as exc:
            self._refused(tally, "top_up", exc)

    async def _command(self, tally: Tally, what: str, call: Any) -> bool:
        try:
            await call
            return True
        except StudError as exc:
            self._refused(tally, what, exc)
        return False

    def _refused(self, tally: Tally, what: str, exc: StudError) -> None:
        """Count a refusal the table may give (a lost race, a pending or late top-up, an
        account too short), else record an error of the run."""
        if isinstance(exc, (Stale, NotYourTurn, InsufficientFunds)) or (
                isinstance(exc, FailedPrecondition) and exc.reason in (
                    "topup_pending", "hand_in_progress", "above_buy_in_max")):
            tally.refused += 1
        else:
            tally.error(f"{self.name} {what}", exc)


def _seen(view: table_pb2.TableView) -> str:
    me = next((s for s in view.seats if s.seat == view.viewer_seat), None)
    return (f"version {view.version}, hands started {view.hands_started}, "
            f"hand over {hand_over(view)}, my turn {my_turn(view)}, "
            f"stack {me.stack if me else None}, sitting out {me.sitting_out if me else None}")


# --- credentials -----------------------------------------------------------------------------

def targets(env: Mapping[str, str]) -> dict[str, str]:
    """The room's addresses by variable name: ``env``'s, else make run's usual ports."""
    return {name: env.get(name) or default for name, default in DEFAULT_TARGETS.items()}


@dataclass
class Credentials:
    """Where the bots' tokens come from."""

    operator: str | TokenProvider
    players: Callable[[int, str], tuple[str, str | TokenProvider]]
    """(index, wanted name) -> (player id, token or provider)."""
    minted: bool


def credentials(env: Mapping[str, str]) -> Credentials:
    """From ``STUD_ISSUER_KEY`` (or make run's key file), else ``STUD_OPERATOR_TOKEN`` and
    ``STUD_PLAYER_TOKENS``; ``RuntimeError`` when neither is there."""
    key = env.get(ISSUER_KEY_ENV, "")
    if not key.strip() and not env.get(OPERATOR_TOKEN_ENV) and DEFAULT_ISSUER_KEY_FILE.exists():
        key = str(DEFAULT_ISSUER_KEY_FILE)
    if key.strip():
        from studkit.auth import Principal, Role, TokenBook, issuer_from_env
        book = TokenBook(issuer_from_env({ISSUER_KEY_ENV: key}))

        def provider(who: Principal) -> TokenProvider:
            return lambda: book.token(who)

        operator = provider(Principal(Role.OPERATOR, "bots"))

        def minted(index: int, name: str) -> tuple[str, str | TokenProvider]:
            return name, provider(Principal(Role.PLAYER, name))

        return Credentials(operator, minted, True)
    operator_token = env.get(OPERATOR_TOKEN_ENV, "")
    tokens = [t.strip() for t in env.get(PLAYER_TOKENS_ENV, "").split(",") if t.strip()]
    if not operator_token:
        raise RuntimeError(f"set {ISSUER_KEY_ENV} (make run writes .run/keys/issuer.pem), or "
                           f"{OPERATOR_TOKEN_ENV} and {PLAYER_TOKENS_ENV}")

    def given(index: int, name: str) -> tuple[str, str | TokenProvider]:
        if index >= len(tokens):
            raise RuntimeError(f"{PLAYER_TOKENS_ENV} holds {len(tokens)} tokens; "
                               f"the bots need more")
        return token_subject(tokens[index])[1], tokens[index]

    return Credentials(operator_token, given, False)


# --- the run ---------------------------------------------------------------------------------

@dataclass
class TableRun:
    """One table of the run."""

    table_id: str
    opened: bool
    hands_before: int
    bots: list[Bot] = field(default_factory=list)


async def _house_lines(ops: Client) -> list[wallet_pb2.StatementLine]:
    return await ops.statement(wallet_pb2.AccountRef(system=wallet_pb2.SYSTEM_ACCOUNT_HOUSE))


async def _escrows_match(ops: Client, table: TableRun) -> bool:
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
    where = targets(env)
    try:
        creds = credentials(env)
    except RuntimeError as exc:
        print(f"stud bots: {exc}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    run_id = uuid.uuid4().hex[:8]
    prefix = args.prefix or f"bots-{run_id}"

    def connect(token: str | TokenProvider) -> Client:
        return Client.connect(where[TABLE_TARGET_ENV], where[DEALER_TARGET_ENV],
                              where[WALLET_TARGET_ENV], token)

    tally = Tally()
    ops = connect(creds.operator)
    tables: list[TableRun] = []
    balances_before: dict[str, int] = {}
    deposits = 0
    conserved = True
    hands = 0

    async def fund_again(bot: Bot, amount: int) -> None:
        nonlocal deposits
        await ops.deposit(bot.name, amount)
        deposits += amount
        print(f"{bot.name} busted with its deposit spent: funded again with {amount}",
              file=out, flush=True)
    try:
        async with asyncio.timeout(args.timeout):
            house_before = {line.posting_id for line in await _house_lines(ops)}
            index = 0
            for t in range(1, args.tables + 1):
                table_id = f"{prefix}-{t}"
                opened = await _open(ops, table_id, args)
                view = await ops.get_table(table_id)
                if view.status == table_pb2.TABLE_STATUS_CLOSED:
                    raise RuntimeError(f"table {table_id} is closed: choose another --prefix")
                table = TableRun(table_id, opened, view.hands_started)
                tables.append(table)
                free = [s for s in range(1, view.config.seats + 1)
                        if s not in {seat.seat for seat in view.seats}]
                if len(free[:args.players]) < max(2, view.config.min_players):
                    raise RuntimeError(f"table {table_id} has {len(free)} free seats: "
                                       f"too few to play")
                buy_in = min(view.settings.buy_in_max, max(
                    view.settings.buy_in_min, args.buy_in or 50 * view.config.big_bet))
                for i, seat in enumerate(free[:args.players]):
                    name, token = creds.players(index, f"bot-{run_id}-{t}-{seat}")
                    index += 1
                    strategy_name, strategy = strategy_for(args.strategy, i)
                    bot = Bot(name, connect(token), table_id, strategy_name, strategy,
                              random.Random(f"{seed}-{t}-{seat}"), seat, buy_in,
                              fund=fund_again)
                    table.bots.append(bot)
                    await ops.create_account(name)
                    balances_before[name] = await ops.balance(name)
                    await ops.deposit(name, 3 * buy_in)
                    deposits += 3 * buy_in
                    await bot.client.sit(table_id, seat, buy_in)
                print(f"table {table_id}: {len(table.bots)} bots "
                      f"({', '.join(b.strategy_name for b in table.bots)}), "
                      f"{'opened' if opened else 'reused'}", file=out, flush=True)

            async def play(table: TableRun) -> None:
                ours = {b.name for b in table.bots}
                results = await asyncio.gather(
                    *(b.play(table.hands_before + args.hands, ours, tally)
                      for b in table.bots), return_exceptions=True)
                for bot, result in zip(table.bots, results, strict=True):
                    if isinstance(result, BaseException):
                        tally.error(f"{bot.name} play", result)

            await asyncio.gather(*(play(t) for t in tables))
            hands = 0
            for table in tables:
                ours = {b.name for b in table.bots}
                if not await _escrows_match(ops, table):
                    conserved = False
                    print(f"table {table.table_id}: escrows differ from stacks", file=out)
                for bot in table.bots:
                    try:
                        await bot.client.leave(table.table_id)
                    except StudError as exc:
                        tally.error(f"{bot.name} leave", exc)
                if table.opened:
                    await ops.close_table(table.table_id)
                view = await _gone(ops, table, ours)
                hands += view.hands_started - table.hands_before
            rake = sum(line.amount for line in await _house_lines(ops)
                       if line.posting_id not in house_before
                       and line.table_id in {t.table_id for t in tables})
            after = {name: await ops.balance(name) for name in balances_before}
            escrow_left = 0
            for table in tables:
                ours = {b.name for b in table.bots}
                escrow_left += sum(s.balance for s in (await ops.reconcile(table.table_id)).seats
                                   if s.player_id in ours)
            total = sum(after.values()) + escrow_left + rake
            expected = sum(balances_before.values()) + deposits
            conserved = conserved and total == expected
            print(f"ledger: balances {sum(after.values())} + escrows {escrow_left} + rake "
                  f"{rake} = {total}; before {sum(balances_before.values())} + deposits "
                  f"{deposits} = {expected}", file=out)
    except TimeoutError:
        tally.errors.append(f"timed out after {args.timeout} s")
        for table in tables:  # what each bot last saw: where a stuck run stopped
            for bot in table.bots:
                print(f"{bot.name} last saw {bot.last_seen}", file=out)
    except (StudError, RuntimeError) as exc:
        tally.error("setup", exc)
    finally:
        for table in tables:
            for bot in table.bots:
                await bot.client.close()
        await ops.close()
    for message in tally.errors:
        print(f"error: {message}", file=out)
    ok = not tally.errors and conserved
    print(f"refused={tally.refused} (stale or timed out: expected) seed={seed}", file=out)
    print(f"hands={hands} actions={tally.actions} errors={len(tally.errors)} "
          f"chips_conserved={'yes' if conserved and not tally.errors else 'no'}",
          file=out, flush=True)
    return 0 if ok else 1


async def _gone(ops: Client, table: TableRun, ours: set[str]) -> table_pb2.TableView:
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
