"""The ``stud`` command line (console script ``stud = studtools.cli:main``).

Commands are argparse subcommands; each module registers its own:

- ``stud replay check FILE.phh...`` (:mod:`studtools.replay_check`)
- ``stud replay list|show|verify|export`` from the live logs (:mod:`studtools.replay_cli`)
- ``stud bots`` (:mod:`studclient.bots`), ``stud play`` (:mod:`studclient.tui`)
- ``stud archive`` (:mod:`studtools.archive`)
- ``stud report`` (:mod:`studtools.report`)
- ``stud trace show|receive`` (:mod:`studtools.traces`)

Every command runs with one environment: the process's over ``make run``'s ``.run/env``
(:func:`studtools.runenv.stud_environment`, loaded here once), so each of them finds the stack
``make run`` started in this directory without ``source .run/env``.

To add one under ``stud replay`` (say ``stud replay table``), write a module with a
``register(replay_commands)`` function that calls ``replay_commands.add_parser(...)`` and sets
``handler=lambda args, out, env: ...`` (returning the exit status; ``env`` is that
environment: read addresses and credentials from it, never from ``os.environ``), and call it
in :func:`build_parser`. A new top-level group goes into ``commands`` the same way.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO, TypeAlias, cast

from studclient import bots, tui
from studtools import archive, replay_check, replay_cli, report, traces
from studtools.runenv import stud_environment

Handler: TypeAlias = Callable[[argparse.Namespace, TextIO, Mapping[str, str]], int]
"""What each subcommand sets as ``handler``: (arguments, output, environment) -> exit status."""


def build_parser() -> argparse.ArgumentParser:
    """The ``stud`` parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="stud", description="Seven Card Stud Hi/Lo tools.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    replay = commands.add_parser("replay", help="replay hand histories through the rules",
                                 description="Replay hand histories through the rules.")
    replay_commands = replay.add_subparsers(dest="replay_command", required=True,
                                            metavar="SUBCOMMAND")
    replay_check.register(replay_commands)
    replay_cli.register(replay_commands)
    bots.register(commands)
    archive.register(commands)
    report.register(commands)
    traces.register(commands)
    tui.register(commands)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         env: Mapping[str, str] | None = None) -> int:
    """Run ``stud``; returns the exit status (argparse exits with 2 on bad usage). ``env``
    (default ``os.environ``) is read over ``make run``'s ``.run/env``."""
    args = build_parser().parse_args(argv)
    handler = cast(Handler, args.handler)
    return handler(args, out if out is not None else sys.stdout,
                   stud_environment(os.environ if env is None else env))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
