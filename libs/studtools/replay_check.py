"""``stud replay check FILE.phh...``: replay PHH hand histories through our rules.

Each hand of each file (``.phh`` holds one hand, ``.phhs`` several) is replayed with
:func:`rules.history.replay_phh` and gets one line::

    hand-48.phh: OK
    odd.phh: REJECTED at action 14 (p2 cbr 450): wrong_amount: a raise now goes to exactly 600
    cut.phh: REJECTED at the end of the actions: hand_not_over: the file ends but seat 2 ...
    tie.phh: STACKS DIFFER: ours [1041, 959] vs file [1040, 960]
    razz.phh: UNCHECKED: variant 'FR' is not seven card stud hi/lo ('F7S/8')

then a summary line. The exit status is 0 only when every hand agrees (OK), else 1.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from rules.history import render_history
from rules.phh import END_OF_ACTIONS, PhhError, ReplayResult, Verdict, parse_phhs, replay_phh


def _stacks(stacks: Sequence[int] | None) -> str:
    return "[" + ", ".join(str(s) for s in stacks or ()) + "]"


def describe(result: ReplayResult) -> str:
    """The one-line verdict of a replayed hand (without its name)."""
    match result.verdict:
        case Verdict.OK:
            return "OK" if result.file_stacks is not None else "OK (no finishing_stacks)"
        case Verdict.REJECTED:
            r = result.rejection
            assert r is not None
            where = ("the end of the actions" if r.action == END_OF_ACTIONS
                     else f"action {r.number} ({r.action})")
            return f"REJECTED at {where}: {r.reason}: {r.detail}"
        case Verdict.STACKS_DIFFER:
            return (f"STACKS DIFFER: ours {_stacks(result.our_stacks)} "
                    f"vs file {_stacks(result.file_stacks)}")
        case _:
            return f"UNCHECKED: {result.problem}"


def check_path(path: Path) -> Iterator[ReplayResult]:
    """Replay every hand of one file; a file that cannot be read gives one UNCHECKED result."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
        hands = parse_phhs(text, name)
    except (OSError, UnicodeDecodeError, PhhError) as error:
        yield ReplayResult(name=name, verdict=Verdict.UNCHECKED, problem=str(error))
        return
    if not hands:
        yield ReplayResult(name=name, verdict=Verdict.UNCHECKED, problem="no hand in the file")
    for hand in hands:
        yield replay_phh(hand)


def check(paths: Sequence[Path], out: TextIO, verbose: bool = False,
          history: bool = False) -> int:
    """Replay the files, print a line per hand and a summary; 0 when every hand agrees."""
    verdicts: Counter[Verdict] = Counter()
    for path in paths:
        for result in check_path(path):
            verdicts[result.verdict] += 1
            print(f"{result.name}: {describe(result)}", file=out)
            if verbose:
                for note in result.notes:
                    print(f"  note: {note}", file=out)
            if history and result.events:
                for line in render_history(result.events).splitlines():
                    print(f"  | {line}", file=out)
    total = sum(verdicts.values())
    print(f"{total} hand{'s' if total != 1 else ''}: " + ", ".join(
        f"{verdicts[v]} {v.value.replace('_', ' ')}" for v in Verdict), file=out)
    return 0 if total and verdicts[Verdict.OK] == total else 1


def register(replay_commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``check`` under ``stud replay``."""
    parser = replay_commands.add_parser(
        "check", help="replay PHH hand histories through our rules",
        description="Replay each hand of the PHH files (.phh, .phhs) through our rules: a line "
        "per hand (OK, REJECTED at an action, STACKS DIFFER, UNCHECKED); exit status 0 only "
        "when every hand agrees.")
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE",
                        help="PHH files (variant F7S/8)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also print notes (e.g. stand-ins for unrecorded up cards)")
    parser.add_argument("--history", action="store_true",
                        help="also print our hand history of each replay")
    parser.set_defaults(handler=lambda args, out, env: check(args.files, out, args.verbose,
                                                             args.history))
