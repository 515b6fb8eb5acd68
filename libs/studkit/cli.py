"""The ``stud`` command line (console script ``stud = studkit.cli:main``).

Commands are argparse subcommands; each module registers its own:

- ``stud replay check FILE.phh...`` (:mod:`studkit.replay_check`)
- ``stud replay list|show|verify|export`` from the live logs (:mod:`studkit.replay_cli`)

To add one under ``stud replay`` (say ``stud replay table``), write a module with a
``register(replay_commands)`` function that calls ``replay_commands.add_parser(...)`` and sets
``handler=lambda args, out: ...`` (returning the exit status), and call it in
:func:`build_parser`. A new top-level group goes into ``commands`` the same way.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TextIO, cast

from studclient import bots, tui
from studkit import archive, replay_check, replay_cli


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
    tui.register(commands)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run ``stud``; returns the exit status (argparse exits with 2 on bad usage)."""
    args = build_parser().parse_args(argv)
    handler = cast(Callable[[argparse.Namespace, TextIO], int], args.handler)
    return handler(args, out if out is not None else sys.stdout)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
