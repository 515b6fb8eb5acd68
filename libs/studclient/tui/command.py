"""The ``stud play`` command line: options, environment, credentials, then the app."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TextIO

from studclient.bots import (
    DEALER_TARGET_ENV,
    DEFAULT_TARGETS,
    ISSUER_KEY_ENV,
    OPERATOR_TOKEN_ENV,
    TABLE_TARGET_ENV,
    WALLET_TARGET_ENV,
    credentials,
)
from studclient.client import Client, TokenProvider, token_subject

PLAYER_TOKEN_ENV: Final = "STUD_PLAYER_TOKEN"
PLAYER_ENV: Final = "STUD_PLAYER"
ENV_FILE: Final = Path(".run/env")
DEFAULT_PLAYER: Final = "alice"
DEV_FUNDS_BUY_INS: Final = 5
"""With an operator at hand (a dev room), a short wallet is topped up to this many
buy-ins."""


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export`` and shell quoting allowed; ``#`` comments) of an env
    file such as make run's ``.run/env``; {} when it is absent or unreadable.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = Path(d, "env")
    ...     _ = p.write_text("# make run\\nexport A='1 2'\\nB=x\\nnot a line\\n")
    ...     read_env_file(p)
    {'A': '1 2', 'B': 'x'}
    """
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].strip()
        key, sep, value = line.partition("=")
        if not sep or not key.isidentifier():
            continue
        try:
            parts = shlex.split(value)
        except ValueError:
            continue
        out[key] = parts[0] if len(parts) == 1 else " ".join(parts)
    return out


def environment(env: Mapping[str, str], env_file: Path = ENV_FILE) -> dict[str, str]:
    """The process environment over make run's env file."""
    return {**read_env_file(env_file), **{k: v for k, v in env.items() if v}}


class Setup:
    """Addresses and credentials of one ``stud play`` run."""

    def __init__(self, env: Mapping[str, str], player: str | None) -> None:
        self.targets = {k: env.get(k) or v for k, v in DEFAULT_TARGETS.items()}
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
                              token if token is not None else self.token)

    async def fund(self, client: Client, buy_in: int) -> str | None:
        """Dev rooms: open the player's account and, with an operator at hand, deposit
        enough for a few buy-ins when the balance is short of one."""
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
        return f"Dev deposit: {amount:,} to {self.player}'s wallet"


def run(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
    """Run the app; the exit status."""
    try:
        setup = Setup(environment(env), args.player)
    except (RuntimeError, ValueError) as exc:
        print(f"stud play: {exc}", file=sys.stderr)
        return 2
    from studclient.tui.app import PlayApp, PlayOptions
    app = PlayApp(setup.connect, PlayOptions(args.table, args.seat, args.buy_in),
                  fund=setup.fund)
    app.run()
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
    parser.add_argument("--table", default="demo", help="table id (default demo)")
    parser.add_argument("--seat", type=_seat, default=0,
                        help="seat to take (default: the first free one)")
    parser.add_argument("--buy-in", type=_amount, default=0,
                        help="chips to bring (default: the table's minimum)")
    parser.add_argument("--player", default=None,
                        help=f"player name whose token is minted from the dev issuer key "
                             f"(default: the player of ${PLAYER_TOKEN_ENV}, else ${PLAYER_ENV}, "
                             f"else {DEFAULT_PLAYER})")
    parser.set_defaults(handler=lambda args, out: run(args, out, os.environ))
