"""The ``stud play`` command line: options, environment, credentials, then the app."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TextIO

from studclient.bots import (
    DEALER_TARGET_ENV,
    ISSUER_KEY_ENV,
    OPERATOR_TOKEN_ENV,
    TABLE_TARGET_ENV,
    WALLET_TARGET_ENV,
    credentials,
    targets,
)
from studclient.client import Client, TokenProvider, token_subject
from studclient.errors import FailedPrecondition, StudError
from studclient.sitgo import window_s
from studclient.tournament import TournamentClient
from studclient.tourney_bots import DEFAULT_TOURNAMENT_TARGET, TOURNAMENT_TARGET_ENV

PLAYER_TOKEN_ENV: Final = "STUD_PLAYER_TOKEN"
PLAYER_ENV: Final = "STUD_PLAYER"
DEFAULT_PLAYER: Final = "alice"
DEV_FUNDS_BUY_INS: Final = 5
"""With an operator at hand (a dev room), a short wallet is topped up to this many
buy-ins."""
CHARGE_WAIT_S: Final = 5.0
"""How long ``--register`` waits for the wallet's answer to its entry's charge before it lists
the lobby (which counts paid entries only)."""


class Setup:
    """Addresses and credentials of one ``stud play`` run, from ``stud``'s environment (the
    process's over make run's ``.run/env``: ``studtools.runenv``)."""

    def __init__(self, env: Mapping[str, str], player: str | None) -> None:
        self.targets = targets(env)
        self.tournament = env.get(TOURNAMENT_TARGET_ENV) or DEFAULT_TOURNAMENT_TARGET
        self.sitgo_window_s = window_s(env)
        """make run's demo sit & go's window for people (its bots sit after it)."""
        given = env.get(PLAYER_TOKEN_ENV, "")
        self.operator: str | TokenProvider | None = None
        self.token: str | TokenProvider
        minting = bool(env.get(ISSUER_KEY_ENV) or env.get(OPERATOR_TOKEN_ENV)
                       or Path(".run/keys/issuer.pem").exists())
        creds = credentials(env) if minting else None
        if creds is not None and creds.minted:
            self.operator = creds.operator  # dev rooms: funds a short wallet
        if given and not player:
            self.token = given
            self.player = token_subject(given)[1]
            return
        if creds is None:
            raise RuntimeError(f"set {ISSUER_KEY_ENV} (make run writes .run/keys/issuer.pem) "
                               f"or {PLAYER_TOKEN_ENV}")
        name = player or env.get(PLAYER_ENV) or DEFAULT_PLAYER
        self.player, self.token = creds.players(0, name)

    def connect(self, token: str | TokenProvider | None = None) -> Client:
        """A client of the room (the player's, unless another token is given)."""
        return Client.connect(self.targets[TABLE_TARGET_ENV], self.targets[DEALER_TARGET_ENV],
                              self.targets[WALLET_TARGET_ENV],
                              token if token is not None else self.token,
                              tournament_addr=self.tournament)

    async def fund(self, client: Client, buy_in: int) -> str | None:
        """Dev rooms: open the player's account and, with an operator at hand, deposit
        enough for a few buy-ins when the balance is short of one (with a prompt to set
        limits when the player has none)."""
        await client.create_account(exist_ok=True)
        balance = await client.balance()
        if balance >= buy_in or self.operator is None:
            return None
        amount = DEV_FUNDS_BUY_INS * buy_in - balance
        ops = self.connect(self.operator)
        try:
            await ops.deposit(self.player, amount)
        finally:
            await ops.close()
        note = f"Dev deposit: {amount:,} to {self.player}'s wallet"
        if not (await client.protection()).limits:  # RTS 12: prompted at the first deposit
            note += (". You have set no limits: stud play --set-limit deposit:day:AMOUNT "
                     "(loss and wager too, per day, week or month)")
        return note


async def lobby(setup: Setup, args: argparse.Namespace, out: TextIO) -> int:
    """``--lobby``, ``--register ID``, ``--unregister ID``: one call, its lines; the exit
    status."""
    from studclient.tui.tourney import closed_text, lobby_lines
    client = setup.connect()
    try:
        tournaments = client.tournaments
        if args.register:
            view = await tournaments.get(args.register)
            note = await setup.fund(client, view.config.buy_in + view.config.fee)
            if note:
                print(note, file=out)
            try:
                reply = await tournaments.register(args.register)
            except FailedPrecondition as exc:
                from studclient.protection import refusal_text
                if refusal_text(exc):  # a limit or an exclusion (the wallet's refusal)
                    print(f"stud play: {refusal_text(exc)}", file=sys.stderr)
                    return 1
                if exc.reason not in ("registration_closed", "full"):
                    raise
                print(f"stud play: {exc}", file=sys.stderr)
                print(closed_text(args.register, await tournaments.get(args.register),
                                  await tournaments.lobby(), time.time(),
                                  setup.sitgo_window_s), file=sys.stderr)
                return 1
            print(f"{setup.player} registered for {args.register} (version {reply.version})"
                  f"{await charged(tournaments, args.register, reply.entry_id)}", file=out)
        elif args.unregister:
            reply = await tournaments.unregister(args.unregister)
            print(f"{setup.player} unregistered from {args.unregister} (refunded)", file=out)
        for line in lobby_lines(await tournaments.lobby()):
            print(line, file=out)
        return 0
    except StudError as exc:
        print(f"stud play: {exc}", file=sys.stderr)
        return 1
    finally:
        await client.close()


async def charged(tournaments: TournamentClient, tournament_id: str, entry_id: str,
                  wait_s: float = CHARGE_WAIT_S) -> str:
    """What became of a new entry's charge, for the line after ``registered for``: the
    entry is pending until the wallet answers (``Register``), and the lobby listed after it
    counts paid entries only (issue 29's check: ``registered`` above a lobby of '0
    entries'). Waits up to ``wait_s`` for ``paid`` or a drop."""
    if not entry_id:  # a service that names no entry
        return ""
    loop = asyncio.get_running_loop()
    end = loop.time() + wait_s
    while True:
        view = await tournaments.get(tournament_id)
        for entry in view.dropped_entries:
            if entry.entry_id == entry_id:
                return f": the entry was dropped ({entry.dropped_reason or 'refused'})"
        entry = next((e for e in view.entries if e.entry_id == entry_id), None)
        if entry is not None and entry.paid:
            return ""
        if loop.time() >= end:
            return ("; its buy-in is still being charged: the lobby counts it once it is "
                    "paid")
        await asyncio.sleep(0.1)


async def protect(setup: Setup, args: argparse.Namespace, out: TextIO) -> int:
    """``--limits``, ``--set-limit``, ``--cancel-raise``, ``--self-exclude``,
    ``--reality-check``, ``--session-limit``: one call, then the player's protection as it
    stands; the exit status."""
    from studclient.protection import (
        PERIODS,
        parse_kind_window,
        parse_limit,
        protection_lines,
        refusal_text,
    )
    client = setup.connect()
    try:
        await client.create_account(exist_ok=True)
        if args.set_limit:
            await client.set_limit(*parse_limit(args.set_limit))
        elif args.cancel_raise:
            await client.cancel_limit_increase(*parse_kind_window(args.cancel_raise))
        elif args.reality_check is not None:
            await client.set_reality_check(args.reality_check)
        elif args.session_limit is not None:
            await client.set_session_limit(args.session_limit)
        elif args.self_exclude:
            if args.self_exclude not in PERIODS:
                raise ValueError(f"a period is one of {', '.join(PERIODS)}")
            if not args.yes:
                print(f"stud play: self-exclusion for {args.self_exclude} cannot be undone "
                      "before it ends; add --yes to confirm", file=sys.stderr)
                return 2
            await client.self_exclude(PERIODS[args.self_exclude])
        for line in protection_lines(await client.protection()):
            print(line, file=out)
        return 0
    except ValueError as exc:
        print(f"stud play: {exc}", file=sys.stderr)
        return 2
    except StudError as exc:
        print(f"stud play: {refusal_text(exc) or exc}", file=sys.stderr)
        return 1
    finally:
        await client.close()


def run(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
    """Run the app (or the lobby's one call); the exit status."""
    try:
        setup = Setup(env, args.player)
    except (RuntimeError, ValueError) as exc:
        print(f"stud play: {exc}", file=sys.stderr)
        return 2
    if args.lobby or args.register or args.unregister:
        return asyncio.run(lobby(setup, args, out))
    if (args.limits or args.set_limit or args.cancel_raise or args.self_exclude
            or args.reality_check is not None or args.session_limit is not None):
        return asyncio.run(protect(setup, args, out))
    from studclient.tui.app import PlayApp, PlayOptions
    app: PlayApp
    if args.tournament:
        from studclient.tui.tourney import TournamentPlayApp
        app = TournamentPlayApp(setup.connect, args.tournament, table_id=args.table or "")
    else:
        app = PlayApp(setup.connect, PlayOptions(args.table or "demo", args.seat, args.buy_in),
                      fund=setup.fund)

    async def play() -> None:
        await app.run_async()
        await app.wait_closed()  # the screen is gone: a LeaveSeat sent by q is answered

    asyncio.run(play())
    for line in app.log_lines[-5:]:
        print(line, file=out)
    return 0


def _seat(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 8:
        raise argparse.ArgumentTypeError("a seat is 1..8")
    return value


def _amount(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def register(commands: Any) -> None:
    """Add ``stud play`` to the ``stud`` parser's subcommands."""
    parser = commands.add_parser(
        "play", help="play at a running room in the terminal",
        description="Sit down at a table of a running room and play in the terminal "
                    "(keys: docs/play.md).")
    parser.add_argument("--table", default=None,
                        help="table id (default demo); with --tournament, when you hold no "
                             "entry: the table to rail (default: the chip leader's)")
    parser.add_argument("--seat", type=_seat, default=0,
                        help="seat to take (default: the first free one)")
    parser.add_argument("--buy-in", type=_amount, default=0,
                        help="chips to bring (default: the table's minimum)")
    parser.add_argument("--player", default=None,
                        help=f"player name whose token is minted from the dev issuer key "
                             f"(default: the player of ${PLAYER_TOKEN_ENV}, else ${PLAYER_ENV}, "
                             f"else {DEFAULT_PLAYER})")
    tourney = parser.add_argument_group("tournaments")
    tourney.add_argument("--lobby", action="store_true",
                         help="list the tournaments and exit")
    tourney.add_argument("--register", metavar="ID", default=None,
                         help="register for tournament ID (dev rooms: funded), then list")
    tourney.add_argument("--unregister", metavar="ID", default=None,
                         help="withdraw from tournament ID before its start, then list")
    tourney.add_argument("--tournament", metavar="ID", default=None,
                         help="play your entry in tournament ID: the table follows your "
                              "seat when you are moved; without an entry, rail it (watch a "
                              "table as the public sees it: the chip leader's, --table, or "
                              "n for the next)")
    protection = parser.add_argument_group(
        "player protection", "limits and self-exclusion (docs/player-protection.md): each "
        "prints your limits, what is used and left, and any exclusion, then exits")
    protection.add_argument("--limits", action="store_true", help="show them")
    protection.add_argument("--set-limit", metavar="KIND:WINDOW:AMOUNT", default=None,
                            help="KIND deposit, loss or wager; WINDOW day, week or month "
                                 "(rolling); a first or lower limit applies at once, a "
                                 "higher one (or 0: none) 24 hours later")
    protection.add_argument("--cancel-raise", metavar="KIND:WINDOW", default=None,
                            help="withdraw a raise before it applies")
    protection.add_argument("--self-exclude", metavar="PERIOD", default=None,
                            help="take a break or exclude yourself: day, week, month, "
                                 "six_months or indefinite (needs --yes)")
    protection.add_argument("--yes", action="store_true",
                            help="confirm --self-exclude")
    protection.add_argument("--reality-check", metavar="MINUTES", type=int, default=None,
                            help="a reminder every MINUTES of play with the session's time "
                                 "and net result (0: none)")
    protection.add_argument("--session-limit", metavar="MINUTES", type=int, default=None,
                            help="deal me no new hand once a session has lasted MINUTES "
                                 "(1..1440; 0: none; a longer limit applies 24 hours later)")
    parser.set_defaults(handler=lambda args, out, env: run(args, out, env))
