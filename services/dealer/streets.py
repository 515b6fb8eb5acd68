"""Dealing one street: the table's request checked against the rules' pending deal of its
public stream and against the hand's record, the cards drawn from the stored deck, and the
street recorded once (a street another call recorded first is read, and decided, again).
A repeated request gets the cards recorded for it."""

from __future__ import annotations

import structlog

from dealer.deck import deal_street
from dealer.fair import FairDealer, stored_hand
from dealer.store import DealerStore, Recorded, StoredHand, hand_from_hash, hand_key
from dealer.tables import PublicTables, TableView
from rules import DealPlan, HandState, Street, pending_deal, streets_dealt
from studkit.commit import Writer, write
from studkit.deckproof import StreetDeal
from studkit.errors import FailedPrecondition, NotFound
from studkit.metrics import ClosedCounter

log = structlog.get_logger("dealer")


class _StreetRecorded(Exception):
    """Another call recorded a street since this one's draw was computed: draw again."""

    def __init__(self, table_id: str, hand_number: int) -> None:
        super().__init__(f"table {table_id} hand {hand_number}: a street was recorded meanwhile")


class WrongDeal(FailedPrecondition):
    """Raised when a deal request is not what the rules say must be dealt now."""

    default_reason = "wrong_deal"


def hand_of(view: TableView, hand_number: int) -> HandState:
    """The table's current hand, refused unless it is ``hand_number``."""
    hand = view.state.hand
    if not view.state.opened:
        raise NotFound(f"table {view.table_id} has no public record", reason="unknown_table")
    if hand is None or hand.hand_number != hand_number:
        current = 0 if hand is None else hand.hand_number
        raise FailedPrecondition(
            f"hand {hand_number} is not the table's current hand ({current})",
            reason="not_current_hand",
        )
    return hand


async def hand_and_view(tables: PublicTables, table_id: str, hand_number: int
                        ) -> tuple[StoredHand | None, TableView]:
    """The dealer's record of the hand (None: no deck made for it) and the table's public
    state, read in one round trip (issue 35: two before)."""
    view, raw = await tables.view_and_hash(table_id, hand_key(table_id, hand_number))
    return hand_from_hash(table_id, hand_number, raw), view


class StreetWriter(Writer[DealPlan, StreetDeal]):
    """One street's deal as it is written (studkit.commit): the hand's record and the
    table's state it is decided on, read again when another call recorded a street first."""

    conflicts = (_StreetRecorded,)

    def __init__(self, streets: StreetDealer, table_id: str, hand_number: int, street: Street,
                 first_index: int | None) -> None:
        self.streets, self.table_id, self.hand_number = streets, table_id, hand_number
        self.street, self.first_index = street, first_index
        self.held: tuple[StoredHand, TableView | None] | None = None

    async def catch_up(self, preloaded: StoredHand | None = None) -> None:
        self.held = await self.streets.loaded(self.table_id, self.hand_number, self.street,
                                              preloaded)

    async def propose(self, plan: DealPlan) -> StreetDeal:
        assert self.held is not None
        deal = self.streets.decide(self.hand_number, plan, self.first_index, *self.held)
        return await self.streets.save(self.table_id, self.hand_number, plan,
                                       self.first_index, self.held[0], deal)


class StreetDealer:
    """The streets of every hand: decided, drawn and recorded (``DealerApp.deal``, once the
    caller is known to be a table service)."""

    def __init__(self, store: DealerStore, tables: PublicTables, fair: FairDealer, *,
                 cards_dealt: ClosedCounter, conflict_retries: int) -> None:
        self._store, self._tables, self._fair = store, tables, fair
        self._cards_dealt = cards_dealt
        self._retries = conflict_retries

    async def deal(self, table_id: str, hand_number: int, plan: DealPlan,
                   first_index: int | None) -> StreetDeal:
        """The cards of one street: exactly the rules' pending deal of the public state, or
        a repeat of an earlier request, which gets the same cards."""
        # The hand's record and the table's state, read together, serve the first attempt;
        # a per-card hand's first deal freezes the hand's seeds with its record (the seeds
        # opened as read, or a conflict: draw again), unless it must wait for seed openings:
        # then it freezes them first and decides on the hand as the freeze answers it (both
        # read again only when the freeze waited); a retry after a lost race reads afresh.
        stored, view = await hand_and_view(self._tables, table_id, hand_number)
        writer = StreetWriter(self, table_id, hand_number, plan.street, first_index)
        if stored is not None and not self._fair.awaits_seeds(stored, view):
            writer.held = (stored, None if stored.deal_for(plan.street) is not None else view)
        else:
            frozen = await self._fair.freeze_seeds(table_id, hand_number, stored, view)
            if stored is not None and frozen is not None:
                writer.held = (frozen,
                               None if frozen.deal_for(plan.street) is not None else view)
            else:
                await writer.catch_up()
        # The one retry every writer shares (studkit.commit): a street recorded by a
        # concurrent call meanwhile loads again and decides again.
        return await write(writer, plan, attempts=self._retries)

    async def loaded(self, table_id: str, hand_number: int, street: Street,
                     stored: StoredHand | None) -> tuple[StoredHand, TableView | None]:
        """The hand's record (``stored`` if already read) and, unless the street was dealt
        before (a repeat), the table's public state."""
        if stored is not None:
            if stored.deal_for(street) is not None:
                return stored, None  # a repeat: the table's state is not needed
            return stored, await self._tables.view(table_id)
        found, view = await hand_and_view(self._tables, table_id, hand_number)
        if found is None:
            found = await stored_hand(self._store, table_id, hand_number)  # NotFound, why
        return found, None if found.deal_for(street) is not None else view

    async def save(self, table_id: str, hand_number: int, plan: DealPlan,
                   first_index: int | None, stored: StoredHand, deal: StreetDeal
                   ) -> StreetDeal:
        """Record a street's deal (``_StreetRecorded`` if another call recorded one first)."""
        if stored.deal_for(plan.street) is not None:
            return deal  # a repeat: recorded before
        fair = stored.fair
        freeze = None if fair is None or fair.frozen else fair.opened.keys()
        outcome, existing = await self._store.record_deal(
            table_id, hand_number, deal, len(stored.deals), freeze)
        if outcome is Recorded.CONFLICT:
            raise _StreetRecorded(table_id, hand_number)
        if outcome is Recorded.MISSING:
            raise NotFound(f"no deck for hand {hand_number}", reason="unknown_hand")
        if outcome is Recorded.EXISTS and existing is not None:
            return _repeat(existing, plan, first_index)
        if freeze is not None:
            assert fair is not None
            log.info("seeds_frozen", committed=len(fair.seeds), opened=len(fair.opened))
        up = sum(1 for card in deal.cards if card.up)
        self._cards_dealt.inc(up, face="up")
        self._cards_dealt.inc(len(deal.cards) - up, face="down")
        log.info("street_dealt", cards=len(deal.cards), burned=deal.burn is not None,
                 reshuffled=deal.reshuffled)
        return deal

    def decide(self, hand_number: int, plan: DealPlan, first_index: int | None,
               stored: StoredHand, view: TableView | None) -> StreetDeal:
        """The street's cards from the stored deck (or the recorded street, for a repeat),
        checked against the table's public state."""
        recorded = stored.deal_for(plan.street)
        if recorded is not None or view is None:
            assert recorded is not None
            return _repeat(recorded, plan, first_index)
        hand = hand_of(view, hand_number)
        if hand.deck_commitment != stored.commitment or (
                hand.card_commitment and (stored.fair is None
                                          or hand.card_commitment != stored.fair.commitment)):
            raise FailedPrecondition("the hand's published commitment is not this deck's",
                                     reason="commitment_mismatch")
        expected = pending_deal(view.state)
        if expected != plan:
            raise WrongDeal(_wrong_deal(expected))
        streets_public = streets_dealt(hand)
        if len(stored.deals) != streets_public:
            raise FailedPrecondition(
                f"the dealer recorded {len(stored.deals)} streets, the table {streets_public}",
                reason="deal_out_of_step",
            )
        deal = deal_street(self._fair.dealing_deck(stored), stored.deals, plan)
        _check_first_index(deal, first_index)
        return deal


def _wrong_deal(expected: DealPlan | None) -> str:
    if expected is None:
        return "the hand is not waiting for cards"
    return (f"the rules ask for {expected.street.label}: {len(expected.slots)} cards, "
            f"burn={expected.burn}, reshuffle={expected.reshuffle_burns}, to seats "
            + ", ".join(f"{s.seat}:{'up' if s.up else 'down'}" for s in expected.slots))


def _repeat(recorded: StreetDeal, plan: DealPlan, first_index: int | None) -> StreetDeal:
    if not recorded.matches(plan):
        raise WrongDeal(f"{plan.street.label} was already dealt to other slots")
    _check_first_index(recorded, first_index)
    log.info("street_repeated", cards=len(recorded.cards))
    return recorded


def _check_first_index(deal: StreetDeal, first_index: int | None) -> None:
    if first_index is None:
        return
    first = deal.burn_index if deal.burn_index is not None else deal.cards[0].index
    if first != first_index:
        raise WrongDeal(f"{deal.street.label} starts at card {first}, not {first_index}")
