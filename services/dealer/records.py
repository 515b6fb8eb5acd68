"""A hand's record after the hand: its audit (the deck, salt, reshuffle key and the dealer's
log of draws, for auditors and the archiver, which copies it to the archive of record), and
the release of the keys of hands the table's stream no longer holds (docs/history.md).
``DealerApp`` checks who asks; this module only reads and forgets."""

from __future__ import annotations

import structlog

from dealer.fair import stored_hand
from dealer.store import DealerStore
from dealer.tables import PublicTables
from studkit.deckproof import FairAudit, HandAudit
from studkit.errors import FailedPrecondition, NotFound
from studkit.store import EventStore

log = structlog.get_logger("dealer")


class HandNotOver(FailedPrecondition):
    """Raised when an audit is asked for before the hand has ended."""

    default_reason = "hand_not_over"


class HandRecords:
    """Finished hands' records: audited, and forgotten once archived."""

    def __init__(self, store: DealerStore, tables: PublicTables) -> None:
        self._store, self._tables = store, tables

    async def release(self, table_id: str, through_hand: int) -> tuple[int, int]:
        """Forget the keys of the table's hands up to ``through_hand``, whose records the
        archive holds; only hands the table's stream no longer holds (``hand_in_redis``
        otherwise). The hand released through and the keys deleted."""
        kept = await first_hand_kept(self._tables.events, table_id)
        if kept is None or through_hand >= kept:
            raise FailedPrecondition(
                f"hand {through_hand} is still in the table's stream (its first kept hand is "
                f"{kept if kept is not None else 'unknown'})", reason="hand_in_redis")
        released, deleted = await self._store.release(table_id, through_hand)
        log.info("hands_released", released_through=released, deleted=deleted)
        return released, deleted

    async def audit(self, table_id: str, hand_number: int) -> HandAudit:
        """A finished hand's deck, salt, reshuffle key and log of draws (``unknown_hand``
        before it started, ``hand_not_over`` while it is played)."""
        view = await self._tables.view(table_id)
        hand = view.state.hand
        if hand is None or hand_number > hand.hand_number:
            raise NotFound(f"hand {hand_number} has not started", reason="unknown_hand")
        if hand.hand_number == hand_number and not hand.is_over:
            raise HandNotOver(f"hand {hand_number} is still being played")
        stored = await stored_hand(self._store, table_id, hand_number)
        log.info("hand_audited", streets=len(stored.deals))
        fair = None if stored.fair is None else FairAudit(
            deck=stored.fair.deck, seeds=stored.fair.seeds,
            opened=stored.fair.seed_openings(), commitment=stored.fair.commitment)
        return HandAudit(deck=stored.deck, commitment=stored.commitment, deals=stored.deals,
                         fair=fair)


async def first_hand_kept(events: EventStore, table_id: str) -> int | None:
    """The first hand the table's stream still holds events of (None: none is named in the
    events after its trimmed head, e.g. a table with nothing trimmed yet between hands)."""
    trimmed = await events.trimmed(table_id)
    if trimmed == 0:
        return 1
    async for entries in events.pages(table_id, trimmed, page=64):
        for entry in entries:
            if entry.envelope.hand_number:
                return int(entry.envelope.hand_number)
    return None
