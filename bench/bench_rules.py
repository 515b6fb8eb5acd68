"""Benchmark of the rules engine: folding whole recorded hands and deciding commands.

Records N random hands (seeded; 2-8 players at random seats, mostly deep stacks with some
short ones, random legal play through :class:`rules.testing.TableDriver`), then measures
``rules.fold`` over each hand's events starting from the table state before the hand, and
``rules.decide`` over every command of the recording. Prints the figures (target: a whole
hand folded in under 0.2 ms) and then the hand-evaluator benchmark of ``bench_hands.py``;
the last line is ``best_high_s=... phevaluator_s=... ratio=...`` (issue 18: best_high against
phevaluator's C evaluator called from Python with integer ids, target ratio >= 0.75).
Asserts nothing about speed. Run: ``.venv/bin/python bench/bench_rules.py [N]`` (default
2000 hands).
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rules import DECK, TableConfig, decide, fold
from rules.betting import WAGERS, ActionKind, LegalActions
from rules.commands import (
    Command,
    Fold,
    TimeOut,
)
from rules.events import Event
from rules.state import TableState
from rules.testing import StackedDeck, TableDriver, action_command

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_hands beside this file
from bench_hands import report as hands_report
from bench_hands import run_hands_bench

SEED = 20240612
TARGET_MS = 0.2


@dataclass(frozen=True, slots=True)
class RecordedHand:
    """One hand: the table before and after it, its events, and each command with the state
    it met."""

    before: TableState
    after: TableState
    events: tuple[Event, ...]
    decisions: tuple[tuple[TableState, Command], ...]


def _action(rng: random.Random, legal: LegalActions) -> Command:
    """A random legal action: mostly check or call, sometimes a wager, a fold or a time-out."""
    seat = legal.seat
    roll = rng.random()
    wager = next((a for a in legal.actions if a.kind in WAGERS), None)
    if roll < 0.02:
        return TimeOut(seat=seat)
    if roll < 0.25 and wager is not None:
        return action_command(seat, wager.kind)
    if roll < 0.35 and legal.get(ActionKind.FOLD) is not None:
        return Fold(seat=seat)
    passive = next(a for a in legal.actions
                   if a.kind in (ActionKind.CHECK, ActionKind.CALL, ActionKind.BRING_IN))
    return action_command(seat, passive.kind)


def record_hand(rng: random.Random) -> RecordedHand:
    """Play one random hand at a fresh table (a fifth of the tables burn cards)."""
    config = TableConfig.for_stakes(rng.choice((2, 10, 100, 200, 1000)),
                                    burn_cards=rng.random() < 0.2)
    big = config.big_bet
    stacks = {seat: (rng.randint(1, config.ante + config.small_bet) if rng.random() < 0.1
                     else rng.randint(10 * big, 60 * big))
              for seat in rng.sample(range(1, 9), rng.randint(2, 8))}
    table = TableDriver(config, stacks=stacks)
    before, start = table.state, len(table.events)
    decisions: list[tuple[TableState, Command]] = []
    deck = list(DECK)
    rng.shuffle(deck)
    table.play_hand(
        StackedDeck(deck), act=lambda legal: _action(rng, legal),
        mucks=lambda hands: [h.seat for h in hands if rng.random() < 0.5],
        observe=lambda state, command, events: decisions.append((state, command)))
    return RecordedHand(before=before, after=table.state, events=tuple(table.events[start:]),
                        decisions=tuple(decisions))


def _best_of(repeats: int, run: Callable[[], object]) -> float:
    """The fastest of ``repeats`` timed runs, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def run_rules_bench(n: int, repeats: int = 5) -> dict[str, float]:
    """Figures for ``n`` recorded hands: ``hands_per_s``, ``ms_per_hand`` and
    ``events_per_hand`` for folding whole hands; ``decide_us`` per decide call (with
    ``decides_per_hand``); ``record_s``, the time taken to play and record them."""
    rng = random.Random(SEED)
    started = time.perf_counter()
    hands = [record_hand(rng) for _ in range(n)]
    recorded = time.perf_counter() - started
    for hand in hands:  # what is timed folds back to the state the table ended in
        assert fold(hand.events, hand.before) == hand.after

    def fold_all() -> None:
        for hand in hands:
            fold(hand.events, hand.before)

    decisions = [d for hand in hands for d in hand.decisions]

    def decide_all() -> None:
        for state, command in decisions:
            decide(state, command)

    fold_s = _best_of(repeats, fold_all)
    decide_s = _best_of(repeats, decide_all)
    events = sum(len(hand.events) for hand in hands)
    return {
        "hands_per_s": n / fold_s,
        "ms_per_hand": 1e3 * fold_s / n,
        "us_per_event": 1e6 * fold_s / events,
        "events_per_hand": events / n,
        "decide_us": 1e6 * decide_s / len(decisions),
        "decides_per_hand": len(decisions) / n,
        "record_s": recorded,
    }


def core_build() -> str:
    """Which build of the rules this process runs: compiled (mypyc) or pure."""
    import rules.hands

    return "compiled (mypyc)" if not str(rules.hands.__file__).endswith(".py") else "pure"


def report(n: int, figures: dict[str, float]) -> str:
    """The figures as text."""
    verdict = "ok" if figures["ms_per_hand"] < TARGET_MS else "SLOWER than target"
    return "\n".join([
        f"rules engine: {n} random hands, 2-8 players (seed {SEED}), "
        f"recorded in {figures['record_s']:.2f} s",
        f"  fold whole hand  {figures['hands_per_s']:>10,.0f} hands/s  "
        f"{figures['ms_per_hand']:.3f} ms/hand  (target < {TARGET_MS} ms: {verdict})",
        f"  events per hand  {figures['events_per_hand']:>10.1f}          "
        f"{figures['us_per_event']:.2f} us/event",
        f"  decide           {figures['decide_us']:>10.1f} us/call  "
        f"({figures['decides_per_hand']:.1f} commands per hand)",
    ])


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    print(report(count, run_rules_bench(count)))
    print()
    hands_count = 20_000
    hand_figures = run_hands_bench(hands_count)
    print(hands_report(hands_count, hand_figures))
    print(f"core: {core_build()}")
    if "phevaluator" not in hand_figures:
        sys.exit("phevaluator is not installed: run `make bench-rules` (the bench extra)")
    print(f"best_high_s={hand_figures['best_high']:.0f} "
          f"phevaluator_s={hand_figures['phevaluator']:.0f} "
          f"ratio={hand_figures['high_vs_phevaluator']:.2f}")
