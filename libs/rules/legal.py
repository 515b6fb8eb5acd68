"""What a player may do (RULES §6-§8), as values: the kinds of action and the legal actions
with their amounts. Kept pure (tools/compile_core.py): the values are built by
:func:`rules._mutable.maker` (no ``__init__``), which a compiled class refuses;
:mod:`rules.betting`, compiled, decides them and re-exports these names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum, unique

from rules._mutable import maker


@unique
class ActionKind(StrEnum):
    """A player action."""

    BRING_IN = "bring_in"
    COMPLETE = "complete"
    BET = "bet"
    RAISE = "raise"
    CALL = "call"
    CHECK = "check"
    FOLD = "fold"


WAGERS = frozenset({ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE})


@dataclass(frozen=True, slots=True, kw_only=True)
class LegalAction:
    """One thing the player to act may do: ``amount`` chips in, reaching ``to`` this street."""

    kind: ActionKind
    amount: int = 0
    to: int = 0
    all_in: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class LegalActions:
    """What the player to act may do now."""

    seat: int
    actions: tuple[LegalAction, ...]

    def get(self, kind: ActionKind) -> LegalAction | None:
        """The action of that kind, if legal."""
        for action in self.actions:
            if action.kind == kind:
                return action
        return None

    @property
    def kinds(self) -> frozenset[ActionKind]:
        """The kinds of the legal actions."""
        return frozenset(a.kind for a in self.actions)


legal_action: Callable[[ActionKind, int, int, bool], LegalAction] = maker(LegalAction)
"""``legal_action(kind, amount, to, all_in)``: ``LegalAction(kind=..., ...)``, built faster."""
legal_actions: Callable[[int, tuple[LegalAction, ...]], LegalActions] = maker(LegalActions)
"""``legal_actions(seat, actions)``: ``LegalActions(seat=..., actions=...)``, built faster."""
