"""What replaying a PHH hand through our rules reports: the verdict, the first action our
rules refuse, and the result with our stacks and event log."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum, unique

from rules.events import Event

END_OF_ACTIONS = "(end of actions)"
"""The :attr:`Rejection.action` of a file that ends while our hand is not over."""


@unique
class Verdict(StrEnum):
    """How a replayed hand compares with the file."""

    OK = "ok"
    """Every action is legal for us and the finishing stacks (if the file has them) agree."""
    REJECTED = "rejected"
    """Our rules refuse an action of the file (see :class:`Rejection`)."""
    STACKS_DIFFER = "stacks_differ"
    """Every action is legal but our finishing stacks are not the file's."""
    UNCHECKED = "unchecked"
    """The hand cannot be judged: not stud hi/lo, a malformed file, cards not recorded."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejection:
    """The first action our rules refuse. ``number`` counts actions from 1; one past the
    last action (with ``action`` :data:`END_OF_ACTIONS`) means the file ends while our hand
    is not over."""

    number: int
    action: str
    reason: str
    """A :class:`Reason` value, or ``hand_over``, ``betting_not_over``, ``showdown_pending``,
    ``hand_not_over`` for a file that deals or acts out of our order."""
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    """What replaying one PHH hand through our rules gave."""

    name: str
    verdict: Verdict
    rejection: Rejection | None = None
    our_stacks: tuple[int, ...] | None = None
    file_stacks: tuple[int, ...] | None = None
    problem: str = ""
    """Why the hand is :attr:`Verdict.UNCHECKED`."""
    notes: tuple[str, ...] = ()
    events: tuple[Event, ...] = ()
    """Our event log of the hand (table events included), as far as it got."""
    seats: tuple[int, ...] = ()
    """Our seat of each PHH player, in player order."""

    @property
    def agrees(self) -> bool:
        """Whether the file and our rules agree on this hand."""
        return self.verdict == Verdict.OK
