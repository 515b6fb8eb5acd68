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


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
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

    def __init__(self, *, number: int, action: str, reason: str, detail: str) -> None:
        # Written out (init=False): compiled, the dataclass's own runs interpreted, five
        # times the cost (tests/unit/rules/test_value_inits.py: the same signature).
        object.__setattr__(self, "number", number)
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "detail", detail)


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
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

    def __init__(self, *, name: str, verdict: Verdict, rejection: Rejection | None = None,
                 our_stacks: tuple[int, ...] | None = None,
                 file_stacks: tuple[int, ...] | None = None, problem: str = "",
                 notes: tuple[str, ...] = (), events: tuple[Event, ...] = (),
                 seats: tuple[int, ...] = ()) -> None:
        # Written out (init=False): compiled, the dataclass's own runs interpreted, five
        # times the cost (tests/unit/rules/test_value_inits.py: the same signature).
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "verdict", verdict)
        object.__setattr__(self, "rejection", rejection)
        object.__setattr__(self, "our_stacks", our_stacks)
        object.__setattr__(self, "file_stacks", file_stacks)
        object.__setattr__(self, "problem", problem)
        object.__setattr__(self, "notes", notes)
        object.__setattr__(self, "events", events)
        object.__setattr__(self, "seats", seats)

    @property
    def agrees(self) -> bool:
        """Whether the file and our rules agree on this hand."""
        return self.verdict == Verdict.OK
