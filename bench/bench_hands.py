"""Benchmark of the hand evaluator (rules.hands) against phevaluator, treys and PokerKit on
7-card hands.

Prints evaluations per second and the ratios; asserts nothing about speed. Each library gets
its own card objects, prepared outside the timed loops; phevaluator (the ``bench`` extra, a C
evaluator) is called from Python with integer card ids, ``evaluate_cards(*ids)``. Run:
``.venv/bin/python bench/bench_hands.py [N]`` (default 20000 hands).
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

try:
    from phevaluator import evaluate_cards  # type: ignore[import-untyped]
except ImportError:  # the bench extra is not installed: make bench-rules installs it
    evaluate_cards = None

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

    Keys: ``best_high``, ``best_low``, ``phevaluator`` (when installed), ``treys``,
    ``pokerkit_high``, ``pokerkit_low`` (per second) and ``high_vs_phevaluator``,
    ``high_vs_treys``, ``high_vs_pokerkit``, ``low_vs_pokerkit`` (ours / theirs).
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

    # phevaluator: its own ids (rank * 4 + suit, clubs diamonds hearts spades), which are
    # ours (Card.index); checked on the sample so that both rank the hands alike.
    ids = [tuple(card.index for card in hand) for hand in hands]
    figures: dict[str, float] = {}
    if evaluate_cards is not None:
        evaluate = evaluate_cards
        _check_phevaluator(hands[:2000], ids[:2000])

        def phevaluator_one(item: tuple[int, ...]) -> object:
            return evaluate(*item)

    # ours and phevaluator alternated, best of each, so that a busy moment hurts both alike
    for _ in range(3):
        figures["best_high"] = max(figures.get("best_high", 0.0),
                                   _rate(best_high, hands, repeats=2))
        if evaluate_cards is not None:
            figures["phevaluator"] = max(figures.get("phevaluator", 0.0),
                                         _rate(phevaluator_one, ids, repeats=2))
    figures |= {
        "best_low": _rate(best_low, hands, repeats=5),
        "treys": _rate(treys_one, treys_inputs, repeats=3),
        "pokerkit_high": _rate(StandardHighHand.from_game, pokerkit_hands, repeats=1),
        "pokerkit_low": _rate(EightOrBetterLowHand.from_game_or_none, pokerkit_hands, repeats=1),
    }
    if "phevaluator" in figures:
        figures["high_vs_phevaluator"] = figures["best_high"] / figures["phevaluator"]
    figures["high_vs_treys"] = figures["best_high"] / figures["treys"]
    figures["high_vs_pokerkit"] = figures["best_high"] / figures["pokerkit_high"]
    figures["low_vs_pokerkit"] = figures["best_low"] / figures["pokerkit_low"]
    return figures


def _check_phevaluator(hands: Sequence[tuple[Card, ...]], ids: Sequence[tuple[int, ...]]) -> None:
    """phevaluator ranks the hands as best_high does (its rank: smaller is better)."""
    assert evaluate_cards is not None
    ours = sorted(range(len(hands)), key=lambda i: best_high(hands[i]).key)
    theirs = [-evaluate_cards(*ids[i]) for i in ours]
    assert theirs == sorted(theirs), "phevaluator and best_high order the hands differently"


def report(n: int, figures: dict[str, float]) -> str:
    """The figures as text."""
    lines = [f"hand evaluation: {n} random 7-card hands (seed {SEED})"]
    names = ("best_high", "best_low", "phevaluator", "treys", "pokerkit_high", "pokerkit_low")
    for name in (n for n in names if n in figures):
        rate = figures[name]
        lines.append(f"  {name:<14} {rate:>12,.0f} /s  {1e6 / rate:>8.2f} us each")
    if "high_vs_phevaluator" in figures:
        lines.append(f"  best_high / phevaluator    {figures['high_vs_phevaluator']:7.2f}x  "
                     "(target >= 0.75x)")
    lines.append(f"  best_high / treys          {figures['high_vs_treys']:7.1f}x  (target >= 1.5x)")
    lines.append(
        f"  best_high / pokerkit high  {figures['high_vs_pokerkit']:7.1f}x  (target >= 50x)"
    )
    lines.append(f"  best_low  / pokerkit low   {figures['low_vs_pokerkit']:7.1f}x")
    return "\n".join(lines)


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    print(report(count, run_hands_bench(count)))
