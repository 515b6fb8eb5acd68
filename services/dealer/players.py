"""A player's own cards: the down and up cards of the seat the public stream says they were
dealt into, one hand at a time or as a stream that follows them (``GetMyCards``,
``WatchMyCards``). Never another seat's, never to anyone but that player."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from dealer.deck import seat_draws
from dealer.fair import FairDealer, deal_header, stored_hand
from dealer.fair import bind_hand as _bind
from dealer.store import DealerStore, StoredHand, hand_from_hash, hand_key
from dealer.tables import NotSeated, PublicTables, TableView
from studkit.auth import Forbidden, Principal, Role
from studkit.cardproof import CardOpening, DealHeader
from studkit.errors import NotFound


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnCards:
    """A player's cards in one hand, as the dealer gives them to that player only."""

    table_id: str
    hand_number: int
    seat: int
    down: tuple[int, ...]
    up: tuple[int, ...]
    openings: tuple[CardOpening | None, ...] = field(default=(), repr=False)
    """One per down card, in order (None: the corrupted test dealer's withheld opening);
    empty for a hand without a per-card commitment."""
    header: DealHeader | None = None

    def __repr__(self) -> str:
        return f"OwnCards(table_id={self.table_id!r}, hand_number={self.hand_number})"


class PlayerCards:
    """The players' reads of their own cards."""

    def __init__(self, store: DealerStore, tables: PublicTables, fair: FairDealer) -> None:
        self._store = store
        self._tables = tables
        self._fair = fair

    async def own_cards(self, principal: Principal, table_id: str,
                        hand_number: int = 0) -> OwnCards:
        """The caller's own cards in hand ``hand_number`` (0: the table's latest hand)."""
        if principal.role is not Role.PLAYER:
            raise Forbidden("only a player may read their own cards")
        _bind(table_id, hand_number or None)
        # The hand's record read with the table's stream (issue 35: two round trips): the
        # latest hand's, as the cached view knows it, when asked for the latest.
        wanted = hand_number or self._tables.latest_hand(table_id)
        if wanted is None:
            return await self._own_cards(await self._tables.view(table_id), principal,
                                         hand_number)
        view, raw = await self._tables.view_and_hash(table_id, hand_key(table_id, wanted))
        return await self._own_cards(view, principal, hand_number,
                                     hand_from_hash(table_id, wanted, raw))

    async def _own_cards(self, view: TableView, principal: Principal,
                         hand_number: int, found: StoredHand | None = None) -> OwnCards:
        """``found``: the hand's record if already read (used when it is the hand's)."""
        latest = view.state.hand
        if hand_number == 0:
            if latest is None:
                raise NotFound(f"no hand has started at table {view.table_id}",
                               reason="unknown_hand")
            hand_number = latest.hand_number
        seat = (await self._tables.started_hand(view, hand_number)).seat_of(principal.name)
        if seat is None:
            raise Forbidden(f"you were not dealt into hand {hand_number}",
                            reason="not_dealt_in")
        stored = (found if found is not None and found.deck.hand_number == hand_number
                  else await stored_hand(self._store, view.table_id, hand_number))
        draws = seat_draws(stored.deals, seat)
        if latest is not None and latest.hand_number == hand_number:
            # Only cards the public record shows as dealt: a street the table never
            # recorded is not the player's yet.
            player = latest.player(seat)
            draws = draws[: len(player.down) + len(player.up)]
        downs = tuple(d for d in draws if not d.up)
        return OwnCards(table_id=view.table_id, hand_number=hand_number, seat=seat,
                        down=tuple(d.card for d in downs),
                        up=tuple(d.card for d in draws if d.up),
                        openings=self._fair.openings(stored, downs),
                        header=None if stored.fair is None
                        else deal_header(stored.fair.deck, stored.fair.seeds))

    async def watch_own_cards(self, principal: Principal, table_id: str,
                              changes: AsyncIterator[int | None]) -> AsyncIterator[OwnCards]:
        """The caller's cards of the latest hand they were dealt into, now and again after
        every change of the table's stream that changes them. ``changes`` yields once per
        new public event: its version (the table's view is read again only when the cached
        one is older: one read serves every watcher of the table), or None to read it now. A
        table with no public record is :class:`NotFound` (watching a made-up table would hold
        a stream reader for nothing); a caller with no seat there and no place in the hand
        being played is :class:`NotSeated`, at once and whenever that becomes true later (they
        left), so no stream waits for cards that never come.

        The cards are looked up (the hand's record read, the openings made) only when the
        public record shows the caller's seat a card more, or a new hand (issue 35: at every
        card dealt to anyone before): what :meth:`own_cards` gives depends on nothing else."""
        if principal.role is not Role.PLAYER:
            raise Forbidden("only a player may read their own cards")
        _bind(table_id)
        view = await self._tables.view(table_id)
        if not view.state.opened:
            raise NotFound(f"table {table_id} has no public record", reason="unknown_table")
        if not view.has_cards_for(principal.name):
            raise NotSeated(f"{principal.name} has no seat at table {table_id}: sit down "
                            "first, then watch")
        last: OwnCards | None = None
        shown: tuple[int, int, int] | None = None
        """The hand and the seat's down and up cards the public record showed at the last
        look-up."""
        async for version in changes:
            view = await self._tables.view_since(table_id, version)
            if not view.has_cards_for(principal.name):
                raise NotSeated(f"{principal.name} no longer has a seat at table {table_id}")
            hand = view.state.hand
            seat = None if hand is None else view.seat_of(hand.hand_number, principal.name)
            if hand is None or seat is None:
                continue
            player = hand.player(seat)
            now = (hand.hand_number, len(player.down), len(player.up))
            if now == shown:
                continue  # the same cards as at the last look-up
            cards = await self._own_cards(view, principal, hand.hand_number)
            shown = now
            if last is None or (cards.hand_number, cards.down, cards.up) != (
                    last.hand_number, last.down, last.up):
                last = cards
                yield cards
