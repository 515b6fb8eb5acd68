"""How the SDK's bots choose an action (``stud bots --strategy``): any legal action at
random, a calling station, or a tight player that bets its made hands; and the strategy of
each bot of a table in a mixed run."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Final

from stud.v1 import common_pb2, table_pb2
from studclient.views import my_cards

Strategy = Callable[[table_pb2.TableView, random.Random], common_pb2.LegalAction]
A = common_pb2
STRATEGIES: Final = ("random", "tight", "station", "mixed")


def _cards(view: table_pb2.TableView) -> list[common_pb2.Card]:
    """The viewer's own cards (down cards as merged in from the dealer, and up cards)."""
    down, up = my_cards(view)
    return down + up


def _low(rank: int) -> int:
    return 1 if rank == 14 else rank


def strength(cards: Sequence[common_pb2.Card]) -> int:
    """A rough hand score for the tight bot: 2 for a pair or better (trips 3), 1 for a
    low draw (as many distinct cards of eight or lower as half the cards, at least three)
    or three or more of a suit among the first cards, else 0."""
    ranks = [c.rank for c in cards]
    most = max((ranks.count(r) for r in ranks), default=0)
    if most >= 3:
        return 3
    if most == 2:
        return 2
    lows = {_low(r) for r in ranks if _low(r) <= 8}
    suits = [c.suit for c in cards]
    suited = max((suits.count(s) for s in suits), default=0)
    if len(lows) >= max(3, (len(cards) + 1) // 2) or (suited >= 3 and len(cards) <= 4):
        return 1
    return 0


def _pick(actions: Sequence[common_pb2.LegalAction], *kinds: int
          ) -> common_pb2.LegalAction | None:
    for kind in kinds:
        for action in actions:
            if action.kind == kind:
                return action
    return None


def random_strategy(view: table_pb2.TableView, rng: random.Random) -> common_pb2.LegalAction:
    """Any legal action, uniformly."""
    actions: list[common_pb2.LegalAction] = list(view.hand.legal_actions.actions)
    return rng.choice(actions)


def station_strategy(view: table_pb2.TableView, rng: random.Random
                     ) -> common_pb2.LegalAction:
    """A calling station: checks or calls, never raises, never folds."""
    actions = list(view.hand.legal_actions.actions)
    choice = _pick(actions, A.ACTION_KIND_CHECK, A.ACTION_KIND_CALL, A.ACTION_KIND_BRING_IN,
                   A.ACTION_KIND_COMPLETE, A.ACTION_KIND_BET, A.ACTION_KIND_RAISE)
    return choice or actions[0]


def tight_strategy(view: table_pb2.TableView, rng: random.Random) -> common_pb2.LegalAction:
    """Plays pairs and low or suited starts, bets its made hands, folds the rest to a bet."""
    actions = list(view.hand.legal_actions.actions)
    score = strength(_cards(view))
    if score >= 2 or (score == 1 and rng.random() < 0.3):
        aggressive = _pick(actions, A.ACTION_KIND_COMPLETE, A.ACTION_KIND_BET,
                           A.ACTION_KIND_RAISE)
        if aggressive is not None and (score >= 2 or rng.random() < 0.5):
            return aggressive
    if score >= 1:
        choice = _pick(actions, A.ACTION_KIND_CHECK, A.ACTION_KIND_CALL,
                       A.ACTION_KIND_BRING_IN)
    else:
        choice = _pick(actions, A.ACTION_KIND_CHECK, A.ACTION_KIND_BRING_IN, A.ACTION_KIND_FOLD,
                       A.ACTION_KIND_CALL)
    return choice or actions[0]


STRATEGY: Final[dict[str, Strategy]] = {
    "random": random_strategy,
    "tight": tight_strategy,
    "station": station_strategy,
}


def strategy_for(name: str, index: int) -> tuple[str, Strategy]:
    """The strategy of the ``index``-th bot of a table (``mixed``: random, tight, station in
    turn)."""
    if name == "mixed":
        name = ("random", "tight", "station")[index % 3]
    return name, STRATEGY[name]
