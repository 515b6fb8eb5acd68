"""One asyncio lock per key, kept only while a call holds or waits for it: :class:`KeyedLocks`.

The dealer serialises each table's refreshes with it; a key nobody is using costs nothing,
so callers naming made-up tables leave no lock behind."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field


@dataclass(eq=False, slots=True)
class _Entry:
    """A key's lock and how many calls hold or wait for it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class KeyedLocks:
    """``async with locks.hold(key):`` one holder per key at a time; ``len(locks)`` counts the
    keys with a holder or a waiter (0 when no call is in flight)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0 and self._entries.get(key) is entry:
                del self._entries[key]
