"""Benchmark of the hand evaluator (rules.hands) against treys and PokerKit on 7-card hands.

Prints evaluations per second and the ratios; asserts nothing about speed. Each library gets
its own card objects, prepared outside the timed loops. Run: ``.venv/bin/python
bench/bench_hands.py [N]`` (default 20000 hands).
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from pokerkit import Card as PokerKitCard
from pokerkit import EightOrBetterLowHand, StandardHighHand
from treys import Card as TreysCard  # type: ignore[import-untyped]
from treys import Evaluator

from rules import DECK, Card, best_high, best_low

SEED = 20240611
T = TypeVar("T")


def _rate(evaluate: Callable[[T], object], inputs: Sequence[T], repeats: int) -> float:
    """Evaluations per second, the best of ``repeats`` passes over ``inputs``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for item in inputs:
            evaluate(item)
        best = min(best, time.perf_counter() - start)
    return len(inputs) / best


def run_hands_bench(n: int) -> dict[str, float]:
    """Evaluations per second for ``n`` random 7-card hands, and the ratios between them.

    Keys: ``best_high``, ``best_low``, ``treys``, ``pokerkit_high``, ``pokerkit_low`` (per
    second) and ``high_vs_treys``, ``high_vs_pokerkit``, ``low_vs_pokerkit`` (ours / theirs).
    """
    rng = random.Random(SEED)
    hands: list[tuple[Card, ...]] = [tuple(rng.sample(DECK, 7)) for _ in range(n)]
    texts = ["".join(str(card) for card in hand) for hand in hands]
    # treys: two "hole" cards and a five-card "board", as its evaluate() expects.
    treys_hands = [[TreysCard.new(str(card)) for card in hand] for hand in hands]
    treys_inputs = [(cards[5:], cards[:5]) for cards in treys_hands]
    pokerkit_hands = [tuple(PokerKitCard.parse(text)) for text in texts]

    evaluator = Evaluator()
    treys_evaluate = evaluator.evaluate

    def treys_one(item: tuple[list[int], list[int]]) -> object:
        return treys_evaluate(item[0], item[1])

    figures = {
        "best_high": _rate(best_high, hands, repeats=5),
        "best_low": _rate(best_low, hands, repeats=5),
        "treys": _rate(treys_one, treys_inputs, repeats=3),
        "pokerkit_high": _rate(StandardHighHand.from_game, pokerkit_hands, repeats=1),
        "pokerkit_low": _rate(EightOrBetterLowHand.from_game_or_none, pokerkit_hands, repeats=1),
    }
    figures["high_vs_treys"] = figures["best_high"] / figures["treys"]
    figures["high_vs_pokerkit"] = figures["best_high"] / figures["pokerkit_high"]
    figures["low_vs_pokerkit"] = figures["best_low"] / figures["pokerkit_low"]
    return figures


def report(n: int, figures: dict[str, float]) -> str:
    """The figures as text."""
    lines = [f"hand evaluation: {n} random 7-card hands (seed {SEED})"]
    for name in ("best_high", "best_low", "treys", "pokerkit_high", "pokerkit_low"):
        rate = figures[name]
        lines.append(f"  {name:<14} {rate:>12,.0f} /s  {1e6 / rate:>8.2f} us each")
    lines.append(f"  best_high / treys          {figures['high_vs_treys']:7.1f}x  (target >= 1.5x)")
    lines.append(
        f"  best_high / pokerkit high  {figures['high_vs_pokerkit']:7.1f}x  (target >= 50x)"
    )
    lines.append(f"  best_low  / pokerkit low   {figures['low_vs_pokerkit']:7.1f}x")
    return "\n".join(lines)


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    print(report(count, run_hands_bench(count)))
