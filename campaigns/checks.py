"""The campaigns' invariants as comparisons that can come out false, on plain data (no I/O), so
that each is unit-tested on a bad input (``tests/unit/campaigns``). A run that did nothing
cannot pass: every campaign also requires at least one action and one hand.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CommandCount:
    """Events counted per command id against the recorded outcomes."""

    lost: int = 0
    """Events a recorded outcome or an acknowledged reply names that the stream lacks."""
    duplicate: int = 0
    """Events of a command beyond those its recorded outcome names (a command written
    twice, wherever the copies are), and events of a command with no recorded outcome."""
    problems: tuple[str, ...] = ()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def count_commands(stream: Sequence[tuple[str, str]],
                   recorded: Mapping[bytes | str, bytes | str],
                   acknowledged: Iterable[Sequence[int]] = ()) -> CommandCount:
    """Count each command id's events anywhere in ``stream`` (``(entry id, command id)`` in
    order, e.g. ``("0-7", "c:player:ann:42")``) and compare them with its outcome in the
    table's commands hash (``recorded``: command id -> ``"<version> <entry id> ..."``; the
    ``#fp`` fingerprints are ignored); each acknowledged command (the sequences its reply
    named) must be in the stream.

    >>> count_commands([("0-1", "a"), ("0-2", "a")], {"a": "1 0-1"}).duplicate
    1
    """
    where: dict[str, list[str]] = defaultdict(list)
    for entry_id, command_id in stream:
        where[command_id].append(entry_id)
    present = {entry_id for entry_id, _ in stream}
    lost = duplicate = 0
    problems: list[str] = []
    outcomes = {_text(k): _text(v) for k, v in recorded.items() if not _text(k).endswith("#fp")}
    for command_id, entries in where.items():
        outcome = outcomes.get(command_id)
        if outcome is None:
            duplicate += len(entries)
            problems.append(f"{command_id}: {len(entries)} events, no recorded outcome")
            continue
        named = Counter(outcome.split(" ")[1:])
        found = Counter(entries)
        extra = sum((found - named).values())
        if extra:
            duplicate += extra
            problems.append(f"{command_id}: {len(entries)} events {entries}, recorded "
                            f"{sorted(named)}")
    for command_id, outcome in outcomes.items():
        missing = [e for e in outcome.split(" ")[1:] if e not in present]
        if missing:
            lost += len(missing)
            problems.append(f"{command_id}: recorded {missing} not in the stream")
    for sequences in acknowledged:
        absent = [s for s in sequences if f"0-{s}" not in present]
        if absent or not sequences:
            lost += max(1, len(absent))
            problems.append(f"an acknowledged command's events {list(sequences)} not in the "
                            "stream")
    return CommandCount(lost=lost, duplicate=duplicate, problems=tuple(problems))


def untouched(command_id: str, stream: Sequence[tuple[str, str]],
              recorded: Mapping[bytes | str, bytes | str]) -> str | None:
    """None if the command whose client id is ``command_id`` (a unique id, found inside the
    table's own command ids whatever their prefix) wrote nothing, or exactly what its
    recorded outcome says; else what it changed.

    >>> untouched("x1", [("0-4", "c:player:ann:x1")], {})
    "events ['0-4'] of command x1 without a recorded outcome"
    """
    entries = [e for e, c in stream if command_id in c]
    outcomes = {_text(k): _text(v) for k, v in recorded.items()
                if command_id in _text(k) and not _text(k).endswith("#fp")}
    named = sorted(e for outcome in outcomes.values() for e in outcome.split(" ")[1:])
    if not outcomes:
        return f"events {entries} of command {command_id} without a recorded outcome" \
            if entries else None
    if sorted(entries) != named:
        return f"command {command_id}: events {entries}, recorded {named}"
    return None


def gapless(sequences: Sequence[int], first: int = 1) -> str | None:
    """None if ``sequences`` run ``first, first+1, ...`` with no gap or repeat."""
    want = list(range(first, first + len(sequences)))
    if list(sequences) != want:
        wrong = next(i for i, (a, b) in enumerate(zip(sequences, want, strict=True)) if a != b)
        return f"sequence {sequences[wrong]} where {want[wrong]} was due"
    return None


@dataclass
class ReplayCheck:
    """``stud replay verify --all --json -v`` against the hands played."""

    hands: int = 0
    verified: int = 0
    failed: int = 0
    unchecked: int = 0
    """Hands with a note that something could not be checked, or without a check a
    complete hand must have had."""
    in_full: int = 0
    """Hands verified with every check and no note."""
    unverified: int = 0
    """Hands played that were not verified in full."""
    problems: list[str] = field(default_factory=list)


REQUIRED_CHECKS = ("legal", "chips", "wallet", "cards")
"""What the replay must have checked of every hand (the rules re-decided every command,
chips conserved, the wallet's settlement equals the fold, every card from the committed
deck)."""


def check_replay(report: Mapping[str, Any], hands_played: int) -> ReplayCheck:
    """Judge the verifier's JSON report: every hand played verified, none failed, every
    hand checked in full, and no note saying something was not checked.

    >>> check_replay({"hands": 2, "verified": 2, "failed": 0, "notes": [], "results": [
    ...     {"table": "t", "hand": 1, "checks": list(REQUIRED_CHECKS), "notes": []},
    ...     {"table": "t", "hand": 2, "checks": ["legal"], "notes": []}]}, 2).unverified
    1
    """
    out = ReplayCheck(hands=int(report.get("hands", 0)),
                      verified=int(report.get("verified", 0)),
                      failed=int(report.get("failed", 0)))
    if out.verified != hands_played:
        out.problems.append(f"verified {out.verified} hands of the {hands_played} played")
    if out.hands != hands_played:
        out.problems.append(f"the log has {out.hands} hands, {hands_played} were played")
    if out.failed:
        out.problems.append(f"{out.failed} hands failed verification")
    out.problems.extend(failure_lines(report.get("failures") or []))
    for note in report.get("notes") or []:
        out.problems.append(f"note: {note}")
    results = report.get("results")
    if results is None:
        out.problems.append("no per-hand results (run with -v)")
        results = []
    elif len(results) != out.hands:
        out.problems.append(f"{len(results)} per-hand results for {out.hands} hands")
    for result in results:
        where = f"table {result.get('table')} hand {result.get('hand')}"
        missing = [c for c in REQUIRED_CHECKS if c not in (result.get("checks") or [])]
        notes = list(result.get("notes") or [])
        if missing or notes:
            out.unchecked += 1
            if missing:
                out.problems.append(f"{where}: not checked: {missing}")
            for note in notes:
                out.problems.append(f"{where}: note: {note}")
        elif result.get("ok", True):
            out.in_full += 1
    out.unverified = max(0, hands_played - out.in_full)
    if report.get("notes"):
        out.unverified = hands_played  # a check was not made of any hand
    return out


FAILURE_LINES = 10
"""Failed hands named one by one (the rest counted)."""


def failure_lines(failures: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each failed hand of the verifier's report as one line: its table and hand, where it
    was read from (each store's events, the deck's) and every problem found (its event).

    >>> failure_lines([{"table": "t", "hand": 3, "read_from": ["events #9..#20 from Redis"],
    ...                 "problems": [{"event": 12, "what": "not legal"}]}])
    ['table t hand 3 FAILED (read from events #9..#20 from Redis): event #12: not legal']
    """
    lines = []
    for failure in failures[:FAILURE_LINES]:
        where = ", ".join(failure.get("read_from") or []) or "?"
        problems = "; ".join(
            (f"event #{p.get('event')}: " if p.get("event") is not None else "")
            + str(p.get("what")) for p in failure.get("problems") or []) or "no problem named"
        lines.append(f"table {failure.get('table')} hand {failure.get('hand')} FAILED "
                     f"(read from {where}): {problems}")
    if len(failures) > FAILURE_LINES:
        lines.append(f"... and {len(failures) - FAILURE_LINES} more failed hands")
    return lines


def enough_play(actions: int, hands: int) -> list[str]:
    """A run that did nothing cannot pass.

    >>> enough_play(0, 3)
    ['no action was acknowledged']
    """
    problems = []
    if actions < 1:
        problems.append("no action was acknowledged")
    if hands < 1:
        problems.append("no hand was played")
    return problems
