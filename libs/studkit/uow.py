"""One unit of work for every writer (STYLE §9): load the aggregate, decide, save at the
version that was loaded, and on a lost race load again and decide again. The table, the
dealer and the wallet each say only what to load, what to decide and how to save; the retry
lives here once.

>>> import asyncio
>>> stored = {"version": 0}
>>> async def load() -> int:
...     return stored["version"]
>>> async def save(version: int, value: str) -> str:
...     if stored["version"] != version:
...         raise LookupError("moved")
...     stored["version"] += 1
...     return value
>>> asyncio.run(unit_of_work(load, lambda v: f"v{v}", save, conflicts=(LookupError,)))
'v0'
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from studkit.errors import Conflict

S = TypeVar("S")
D = TypeVar("D")
R = TypeVar("R")


async def unit_of_work(
    load: Callable[[], Awaitable[S]],
    decide: Callable[[S], D],
    save: Callable[[S, D], Awaitable[R]],
    *,
    conflicts: tuple[type[BaseException], ...],
    attempts: int = 5,
    on_conflict: Callable[[int, BaseException], None] | None = None,
) -> R:
    """``save(state, decide(state))`` for a freshly loaded state, again while ``save`` raises
    one of ``conflicts`` (someone else wrote first), at most ``attempts`` times; then
    :class:`~studkit.errors.Conflict` (``ABORTED``: the caller may retry the request).
    ``decide`` raising (a refusal) ends the unit at once and nothing is saved."""
    for attempt in range(1, attempts + 1):
        state = await load()
        decision = decide(state)
        try:
            return await save(state, decision)
        except conflicts as exc:
            if on_conflict is not None:
                on_conflict(attempt, exc)
    raise Conflict(f"concurrent writers kept winning; gave up after {attempts} attempts")
