"""What the per-card commitment (docs/fairness.md) costs per hand, measured on the real code
in process: the dealer's commitment (52 salted leaves, the Merkle root, the header), the deal
order from eight seeds, the openings a hand hands out (every player's down cards and the
header on each of their card updates, and the public proof: from the hand's Merkle tree the
dealer makes once, ``dealer.fair``), and one player's whole check at the hand's end.
``make bench-room`` prints these lines after the room's figures; ``python
bench/bench_fairness.py`` prints them alone. Prints figures; asserts nothing."""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

from dealer.fair import card_opening, deal_header
from studkit.cardcheck import verify_mine
from studkit.cardproof import FairDeck, deal_order

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.fairhands
from tests.fairhands import TABLE, deal_hand, with_card_commitment

PLAYERS = 8
UPDATES_PER_HAND = 5
"""WatchMyCards sends a player's cards once per street dealt to them (3rd to 7th)."""


def _us(work: Callable[[], object], runs: int) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(runs):
            work()
        best = min(best, (time.perf_counter() - started) / runs)
    return best * 1e6


def fairness_lines(runs: int = 200) -> list[str]:
    """The figures, one line each."""
    rng = random.Random(7)
    base = list(range(52))
    rng.shuffle(base)
    salts = tuple(rng.randbytes(32) for _ in range(52))
    seeds = [(f"p{i}", rng.randbytes(32)) for i in range(1, PLAYERS + 1)]
    commitments = [(p, "ab" * 32) for p, _s in seeds]

    def commit() -> str:
        deck = FairDeck(table_id=TABLE, hand_number=1, base=tuple(base), salts=salts,
                        dealer_seed=bytes(32))
        return deck.header(commitments).commitment

    deck = FairDeck(table_id=TABLE, hand_number=1, base=tuple(base), salts=salts,
                    dealer_seed=bytes(32))

    def order() -> object:
        return deal_order(TABLE, 1, bytes(32), seeds)

    def one_update() -> object:  # one MyCards message as the dealer makes it: three
        # openings and the header, from the hand's Merkle tree it made once (dealer.fair)
        return ([card_opening(deck, deck.base[p]) for p in (3, 17, 40)],
                deal_header(deck, tuple(commitments)))

    hand = with_card_commitment(deal_hand(rng, players=PLAYERS, seeded=range(1, 9)))
    proof = hand.proof()

    def check() -> object:
        return verify_mine(table_id=TABLE, player_id="p1", events=hand.events,
                           burn_cards=False, proof=proof, mine=hand.own(1), seed=hand.seed("p1"))

    c, o, u, v = _us(commit, runs), _us(order, runs), _us(one_update, runs), _us(check, runs)
    dealer = c + o + u * PLAYERS * UPDATES_PER_HAND + u  # + the public proof
    return [
        f"== per-card commitment, per hand ({PLAYERS} players): commit {c:.0f} us, "
        f"deal order {o:.0f} us, one card update's openings {u:.0f} us, "
        f"a player's whole check {v:.0f} us",
        f"    dealer CPU added per hand: about {dealer / 1000:.1f} ms "
        f"(commit + order + {PLAYERS * UPDATES_PER_HAND} card updates + the public proof); "
        f"each player's client: {v / 1000:.1f} ms; first card waits for the seeds' round "
        "trip (DEALER_SEED_WAIT_MS bounds it)",
    ]


if __name__ == "__main__":
    print("\n".join(fairness_lines()))
