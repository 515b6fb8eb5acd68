"""The compiled core (tools/compile_core.py) is the one loaded, and gives what the pure
sources give.

In the compiled build (a C compiler here, STUD_PURE unset) every module the build compiles
must be loaded from ``build/compiled`` and the build must match the sources: a build that
silently fell back to pure Python, or a stale one, fails here. With ``STUD_PURE=1`` every
module must be the source. The pure evaluator, loaded beside the compiled one from its
source, must value every hand hypothesis draws the same; a seeded sample of whole hands played
in a ``STUD_PURE=1`` process must give the same events, states and PHH as here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules import DECK, Card, best_high, best_low, board_value
from tools import compile_core

PURE = os.environ.get("STUD_PURE") == "1"
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")


_WHERE = """
import importlib, json, sys
print(json.dumps({name: importlib.import_module(name).__file__ for name in sys.argv[1:]}))
"""


def _loaded_from(names: list[str]) -> dict[str, Path]:
    """Where a fresh interpreter of this venv (this environment) loads each module from. A
    fresh one: in this process pytest may have imported a module's source for its doctests."""
    done = subprocess.run([sys.executable, "-c", _WHERE, *names], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: Path(path) for name, path in json.loads(done.stdout).items()}


def _dotted(name: str) -> str:
    return name[:-3].replace("/", ".").removesuffix(".__init__")


@pytest.mark.skipif(not PURE, reason="the pure build only (STUD_PURE=1)")
def test_the_pure_build_loads_every_module_from_its_source() -> None:
    names = list(compile_core.sources())
    loaded = _loaded_from([_dotted(name) for name in names])
    for name in names:
        assert loaded[_dotted(name)] == compile_core.SOURCES / name


@pytest.mark.skipif(PURE, reason="the compiled build only")
def test_the_compiled_build_is_loaded_and_matches_the_sources() -> None:
    if shutil.which(os.environ.get("CC", "cc")) is None and not compile_core.OUT.exists():
        pytest.skip("no C compiler: the pure build is the only one")
    assert compile_core.fresh(), "build/compiled is missing or stale: run `make compiled`"
    compiled = compile_core.compiled_modules()
    assert "rules.hands" in compiled and "rules.phh.replay" in compiled
    pure = sorted(compile_core.PURE_ONLY)
    loaded = _loaded_from(compiled + [_dotted(name) for name in pure])
    for name in compiled:
        path = loaded[name]
        assert path.name.endswith(SUFFIX), f"{name} is not compiled: {path}"
        assert path.is_relative_to(compile_core.OUT), path
    for name in pure:
        assert loaded[_dotted(name)] == compile_core.SOURCES / name


def _pure_hands() -> ModuleType:
    """``rules/hands.py`` loaded from its source under another name (its imports are the
    modules of this build)."""
    spec = importlib.util.spec_from_file_location(
        "_pure_rules_hands", compile_core.SOURCES / "rules" / "hands.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while decorating
    spec.loader.exec_module(module)
    return module


PURE_HANDS = _pure_hands()


def test_the_reference_evaluator_is_the_source() -> None:
    assert PURE_HANDS.__file__ is not None and PURE_HANDS.__file__.endswith(".py")
    assert PURE_HANDS.best_high is not best_high


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(DECK), min_size=5, max_size=7, unique=True))
def test_the_evaluators_agree(cards: list[Card]) -> None:
    """Compiled (or pure, in the pure build) and the source give the same values."""
    high, reference = best_high(cards), PURE_HANDS.best_high(cards)
    assert (high.key, high.cards, high.description) == (
        reference.key, reference.cards, reference.description)
    low, reference_low = best_low(cards), PURE_HANDS.best_low(cards)
    if reference_low is None:
        assert low is None
    else:
        assert low is not None
        assert (low.key, low.cards, low.description) == (
            reference_low.key, reference_low.cards, reference_low.description)
    assert board_value(cards[:4]) == PURE_HANDS.board_value(cards[:4])


_SAMPLE = """
import hashlib, json, random, sys
from rules import DECK, TableConfig, decide, fold
from rules.betting import WAGERS, ActionKind
from rules.commands import Fold, TimeOut
from rules.events import HandStarted
from rules.phh import export_phh, parse_phh, replay_phh
from rules.testing import StackedDeck, TableDriver, action_command

def act(legal):
    roll = rng.random()
    wager = next((a for a in legal.actions if a.kind in WAGERS), None)
    if roll < 0.03:
        return TimeOut(seat=legal.seat)
    if roll < 0.3 and wager is not None:
        return action_command(legal.seat, wager.kind)
    if roll < 0.4 and legal.get(ActionKind.FOLD) is not None:
        return Fold(seat=legal.seat)
    passive = next(a for a in legal.actions
                   if a.kind in (ActionKind.CHECK, ActionKind.CALL, ActionKind.BRING_IN))
    return action_command(legal.seat, passive.kind)

rng = random.Random(int(sys.argv[1]))
events_digest, phh_digest, hands = hashlib.sha256(), hashlib.sha256(), 0
for _ in range(int(sys.argv[2])):
    seats = rng.sample(range(1, 9), rng.randint(2, 7))
    config = TableConfig.for_stakes(rng.choice((2, 10, 100)), burn_cards=rng.random() < 0.3)
    table = TableDriver(config, stacks={s: rng.randint(1, 60 * config.big_bet) for s in seats})
    for _ in range(5):
        if sum(1 for s in seats if table.state.stack(s) > 0) < 2:
            break
        before, start = table.state, len(table.events)
        deck = list(DECK)
        rng.shuffle(deck)
        table.play_hand(StackedDeck(deck), act=act,
                        mucks=lambda shown: [h.seat for h in shown if rng.random() < 0.5])
        events = tuple(table.events[start:])
        after = fold(events, before)
        assert after == table.state
        events_digest.update(repr(events).encode())
        events_digest.update(repr(after).encode())
        hand_seats = next(e.seats for e in events if isinstance(e, HandStarted))
        text = export_phh(events, config,
                          starting_stacks={s: before.stack(s) for s in hand_seats})
        phh_digest.update(text.encode())
        phh_digest.update(repr(replay_phh(parse_phh(text))).encode())
        hands += 1
print(json.dumps({"hands": hands, "events": events_digest.hexdigest(),
                  "phh": phh_digest.hexdigest()}))
"""


def _play(pure: bool, seed: int, tables: int) -> str:
    env = {**os.environ, "STUD_PURE": "1" if pure else "0"}
    done = subprocess.run([sys.executable, "-c", _SAMPLE, str(seed), str(tables)], env=env,
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_whole_hands_agree_with_the_pure_build() -> None:
    """A seeded sample of whole hands (random legal play, 2-7 players, burns, short stacks)
    gives the same events, folded states and PHH round trips in both builds."""
    compiled, pure = _play(False, 20261202, 60), _play(True, 20261202, 60)
    figures = json.loads(pure)
    assert figures["hands"] >= 200, figures
    assert json.loads(compiled) == figures


_WRONG_TYPES = """
import json
from rules import TableConfig, decide, sit_refusal
from rules.commands import (AddChips, Bet, Call, ChangeStakes, Complete, DealStreet, Fold,
                            LeaveSeat, PostBringIn, Raise, RevealHands, Showdown, SitDown,
                            SitIn, SitOut, StartHand, TimeOut, VoidHand)
from rules.errors import RuleViolation
from rules.testing import TableDriver

def outcome(call):
    try:
        result = call()
    except RuleViolation as refusal:
        return ["refused", refusal.reason.value, refusal.detail]
    except Exception as error:
        return ["raised", type(error).__name__]
    if isinstance(result, RuleViolation):
        return ["refused", result.reason.value, result.detail]
    return ["accepted", repr(result)]

between = TableDriver(TableConfig(), stacks={1: 1000, 4: 1000})
betting = TableDriver(TableConfig(), stacks={1: 1000, 4: 1000})
betting.start()
betting.deal_from("Ah Kd 7c 7d 2c 9s")
out = {}
for w in ("x", "1", 1.0, 2.5, None, True, False, b"1", [1], -1, 0, 2**70):
    for name, state, command in (
        ("SitDown.seat", between, lambda: SitDown(seat=w, player_id="bob", stack=500)),
        ("SitDown.player_id", between, lambda: SitDown(seat=2, player_id=w, stack=500)),
        ("SitDown.stack", between, lambda: SitDown(seat=2, player_id="bob", stack=w)),
        ("LeaveSeat.seat", between, lambda: LeaveSeat(seat=w)),
        ("SitOut.seat", between, lambda: SitOut(seat=w)),
        ("SitIn.seat", between, lambda: SitIn(seat=w)),
        ("AddChips.seat", between, lambda: AddChips(seat=w, amount=10)),
        ("AddChips.amount", between, lambda: AddChips(seat=1, amount=w)),
        ("StartHand.hand_number", between, lambda: StartHand(hand_number=w)),
        ("ChangeStakes.small_bet", between,
         lambda: ChangeStakes(small_bet=w, big_bet=40, ante=5, bring_in=10)),
        ("ChangeStakes.ante", between,
         lambda: ChangeStakes(small_bet=20, big_bet=40, ante=w, bring_in=10)),
        ("PostBringIn.seat", betting, lambda: PostBringIn(seat=w)),
        ("Complete.seat", betting, lambda: Complete(seat=w)),
        ("Complete.to", betting, lambda: Complete(seat=1, to=w)),
        ("Bet.to", betting, lambda: Bet(seat=1, to=w)),
        ("Raise.to", betting, lambda: Raise(seat=1, to=w)),
        ("Call.seat", betting, lambda: Call(seat=w)),
        ("Fold.seat", betting, lambda: Fold(seat=w)),
        ("TimeOut.seat", betting, lambda: TimeOut(seat=w)),
        ("VoidHand.reason", betting, lambda: VoidHand(reason=w)),
        ("DealStreet.cards", betting, lambda: DealStreet(cards=w)),
        ("RevealHands.hands", betting, lambda: RevealHands(hands=w)),
        ("Showdown.mucks", betting, lambda: Showdown(mucks=w)),
    ):
        out[f"{name}={w!r}"] = outcome(lambda: decide(state.state, command()))
    out[f"sit_refusal.seat={w!r}"] = outcome(lambda: sit_refusal(between.state, w, "bob", 500))
    out[f"sit_refusal.player_id={w!r}"] = outcome(
        lambda: sit_refusal(between.state, 2, w, 500))
    out[f"sit_refusal.stack={w!r}"] = outcome(lambda: sit_refusal(between.state, 2, "bob", w))
print(json.dumps(out))
"""


def _wrong_types(pure: bool) -> dict[str, list[str]]:
    env = {**os.environ, "STUD_PURE": "1" if pure else "0"}
    done = subprocess.run([sys.executable, "-c", _WRONG_TYPES], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, list[str]] = json.loads(done.stdout)
    return result


def test_a_wrongly_typed_command_field_is_the_same_refusal_in_both_builds() -> None:
    """``decide`` and ``sit_refusal`` check a command's fields by hand and refuse a wrong type
    with a reason; compiled, a field read as its declared type would raise TypeError first (or
    take True for seat 1). Every outcome, for every field and wrong value, is the pure
    build's, and the seat, player id, stack, amount and stakes are refused, not raised."""
    compiled, pure = _wrong_types(False), _wrong_types(True)
    assert compiled == pure
    checked = ("SitDown.", "sit_refusal.", "AddChips.", "ChangeStakes.", "LeaveSeat.",
               "SitOut.", "SitIn.")
    not_int = ("'x'", "'1'", "1.0", "2.5", "None", "True", "False", "b'1'", "[1]")
    not_str = ("1.0", "2.5", "None", "True", "False", "b'1'", "[1]", "-1", "0")
    refused = 0
    for case, outcome in pure.items():
        field, value = case.split("=", 1)
        if field.startswith(checked) and value in (
                not_str if field.endswith("player_id") else not_int):
            assert outcome[0] == "refused", (case, outcome)
            refused += 1
    assert refused == 11 * len(not_int) + 2 * len(not_str)
