"""The dealer's use cases: who may ask for what, checked against the table's public stream,
then the deck store. Knows a :class:`~dealer.store.DealerStore` and
:class:`~dealer.tables.PublicTables`, never redis or grpc.

Access: the table service (role ``service``, a name in ``table_services``) starts hands, deals
and asks for reveals; a player reads only the cards of the seat the public stream says they
were dealt into; an auditor reads a finished hand's deck. Nothing here logs a card value, a
deck, a salt or a token: log lines carry ids and counts only, and the domain counters
(:class:`DealerCounters`) carry no label but a card's face (up or down).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass

import structlog

from dealer.dealing import HONEST, Dealing
from dealer.deck import deal_street, seat_draws
from dealer.fair import FairDealer, stored_hand
from dealer.fair import bind_hand as _bind
from dealer.players import OwnCards, PlayerCards
from dealer.shuffle import CSPRNG, Entropy
from dealer.store import (
    IDENTITY,
    DealerStore,
    FairHand,
    Recorded,
    StoredHand,
    hand_from_hash,
    hand_key,
)
from dealer.tables import PublicTables, TableView
from rules import DealPlan, HandState, Street, pending_deal, streets_dealt
from rules.views import revealable_seats
from studkit.auth import Forbidden, Principal, Role, require_role
from studkit.cardcheck import HandProof
from studkit.cardproof import FairDeck
from studkit.commit import Writer, write
from studkit.deckproof import FairAudit, HandAudit, HandDeck, StreetDeal, commit
from studkit.errors import FailedPrecondition, NotFound
from studkit.metrics import ClosedCounter, Metrics
from studkit.store import EventStore

ARCHIVER_SERVICE = "archiver"
"""The service whose token may read a finished hand's record, as an auditor does."""
log = structlog.get_logger("dealer")



class _StreetRecorded(Exception):
    """Another call recorded a street since this one's draw was computed: draw again."""

    def __init__(self, table_id: str, hand_number: int) -> None:
        super().__init__(f"table {table_id} hand {hand_number}: a street was recorded meanwhile")


class WrongDeal(FailedPrecondition):
    """Raised when a deal request is not what the rules say must be dealt now."""

    default_reason = "wrong_deal"


class NotAtShowdown(FailedPrecondition):
    """Raised when a reveal is asked for before the hand's showdown or all-in runout."""

    default_reason = "not_at_showdown"


class SeatNotInHand(FailedPrecondition):
    """Raised when a reveal names a seat that folded or was not dealt in: such a hand is
    never revealed."""

    default_reason = "seat_not_in_hand"


class HandNotOver(FailedPrecondition):
    """Raised when an audit is asked for before the hand has ended."""

    default_reason = "hand_not_over"


@dataclass(frozen=True, slots=True)
class StartedHand:
    """The commitments of a hand's deck: the deck's and the per-card one ('' without)."""

    commitment: str
    card_commitment: str


@dataclass(frozen=True, slots=True)
class DealerCounters:
    """The dealer's domain counters, on the server's metrics registry."""

    hands_started: ClosedCounter
    cards_dealt: ClosedCounter

    @classmethod
    def register(cls, metrics: Metrics) -> DealerCounters:
        """Declare the counters on ``metrics``' registry."""
        return cls(
            hands_started=metrics.counter(
                "stud_dealer_hands_started",
                "Hands whose deck the dealer shuffled (a repeated StartHand is not counted).",
            ),
            cards_dealt=metrics.counter(
                "stud_dealer_cards_dealt",
                "Cards dealt to seats, by face (burns and repeated deals are not counted).",
                {"face": ("up", "down")},
            ),
        )


def _hand_of(view: TableView, hand_number: int) -> HandState:
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


class StreetWriter(Writer[DealPlan, StreetDeal]):
    """One street's deal as it is written (studkit.commit): the hand's record and the
    table's state it is decided on, read again when another call recorded a street first."""

    conflicts = (_StreetRecorded,)

    def __init__(self, app: DealerApp, table_id: str, hand_number: int, street: Street,
                 first_index: int | None) -> None:
        self.app, self.table_id, self.hand_number = app, table_id, hand_number
        self.street, self.first_index = street, first_index
        self.held: tuple[StoredHand, TableView | None] | None = None

    async def catch_up(self, preloaded: StoredHand | None = None) -> None:
        self.held = await self.app._loaded(self.table_id, self.hand_number, self.street,
                                           preloaded)

    async def propose(self, plan: DealPlan) -> StreetDeal:
        assert self.held is not None
        deal = self.app._decide_deal(self.hand_number, plan, self.first_index, *self.held)
        return await self.app._save_deal(self.table_id, self.hand_number, plan,
                                         self.first_index, self.held[0], deal)


class DealerApp:
    """Use cases of the dealer, one method per RPC."""

    def __init__(
        self,
        store: DealerStore,
        tables: PublicTables,
        *,
        table_services: Collection[str] = ("table",),
        conflict_retries: int = 5,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        metrics: Metrics | None = None,
        seed_wait_ms: int = 1000,
        dealing: Dealing = HONEST,
        entropy: Entropy = CSPRNG,
    ) -> None:
        self._entropy = entropy
        self._dealing = dealing
        """How the cards are chosen and opened (:mod:`dealer.dealing`): always honest in the
        service; only the test support builds an app with another."""
        self._store = store
        self._tables = tables
        self._table_services = frozenset(table_services)
        self._retries = conflict_retries
        self._clock_ms = clock_ms
        self._counters = DealerCounters.register(metrics if metrics is not None else Metrics())
        self._fair = FairDealer(store, tables, clock_ms=clock_ms, seed_wait_ms=seed_wait_ms,
                                dealing=dealing)
        """Seeds, proofs and openings of per-card hands."""
        self._players = PlayerCards(store, tables, self._fair)
        """The players' own cards."""

    # --- who may ask ------------------------------------------------------------------------

    def _require_table(self, principal: Principal) -> None:
        require_role(principal, Role.SERVICE)
        if principal.name not in self._table_services:
            raise Forbidden(f"service {principal.name} is not a table service")

    async def _stored(self, table_id: str, hand_number: int) -> StoredHand:
        return await stored_hand(self._store, table_id, hand_number)

    async def _hand_and_view(self, table_id: str, hand_number: int
                             ) -> tuple[StoredHand | None, TableView]:
        """The dealer's record of the hand (None: no deck made for it) and the table's
        public state, read in one round trip (issue 35: two before)."""
        view, raw = await self._tables.view_and_hash(table_id, hand_key(table_id, hand_number))
        return hand_from_hash(table_id, hand_number, raw), view

    # --- the table's calls ------------------------------------------------------------------

    async def start_hand(self, principal: Principal, table_id: str, hand_number: int
                         ) -> StartedHand:
        """Shuffle the deck of the table's next hand (once) and return its commitments: the
        deck's, and the per-card commitment over the salted cards and the seeds committed
        so far (docs/fairness.md), which closes the hand to new seed commitments."""
        self._require_table(principal)
        _bind(table_id, hand_number)
        existing, view = await self._hand_and_view(table_id, hand_number)
        if existing is not None:
            log.info("hand_deck_reused")
            return StartedHand(existing.commitment,
                               "" if existing.fair is None else existing.fair.commitment)
        state = view.state
        if not state.opened:
            raise NotFound(f"table {table_id} has no public record", reason="unknown_table")
        if state.hand_in_progress or hand_number != state.hands_started + 1:
            raise FailedPrecondition(
                f"the table's next hand is {state.hands_started + 1}"
                + (" after the current one ends" if state.hand_in_progress else ""),
                reason="not_next_hand",
            )
        stacked = self._dealing.stacked_order(table_id, hand_number)
        fair: FairHand | None = None
        if stacked is not None:  # never in the service (dealer.dealing.HonestDealing)
            # A stacked deck is dealt as stacked: no seed may move it, so no card commitment.
            log.warning("stacked_deck_used")
            deck = HandDeck(table_id=table_id, hand_number=hand_number, order=stacked,
                            reshuffle_key=self._entropy.shuffled(),
                            salt=self._entropy.new_salt())
        else:
            seeds = await self._store.close_seeds(table_id, hand_number)
            entropy = self._entropy
            secret = FairDeck(table_id=table_id, hand_number=hand_number,
                              base=entropy.shuffled(), salts=entropy.card_salts(),
                              dealer_seed=entropy.new_seed())
            fair = FairHand(deck=secret, commitment=secret.header(seeds).commitment,
                            seeds=seeds)
            # The reshuffle of a per-card hand follows the seeds: the v1 key is the identity.
            deck = HandDeck(table_id=table_id, hand_number=hand_number, order=secret.base,
                            reshuffle_key=IDENTITY, salt=self._entropy.new_salt())
        ours = commit(deck)
        commitment, cards = await self._store.create_hand(deck, ours, self._clock_ms(), fair)
        if commitment == ours:  # else a concurrent StartHand stored its deck first
            self._counters.hands_started.inc()
        log.info("hand_deck_shuffled", seeds=0 if fair is None else len(fair.seeds))
        return StartedHand(commitment, cards)

    async def deal(self, principal: Principal, table_id: str, hand_number: int,
                   plan: DealPlan, first_index: int | None = None) -> StreetDeal:
        """The cards of one street. The request must be exactly the rules' pending deal of
        the public state (or repeat an earlier request, which gets the same cards)."""
        self._require_table(principal)
        _bind(table_id, hand_number)
        structlog.contextvars.bind_contextvars(street=int(plan.street))
        # The hand's record and the table's state, read together, serve the first attempt
        # unless the hand's seeds are to be frozen first (a per-card hand's first deal,
        # which reads both again after); a retry after a lost race reads afresh.
        stored, view = await self._hand_and_view(table_id, hand_number)
        writer = StreetWriter(self, table_id, hand_number, plan.street, first_index)
        if stored is not None and (stored.fair is None or stored.fair.frozen):
            writer.held = (stored, None if stored.deal_for(plan.street) is not None else view)
        else:
            await self._fair.freeze_seeds(table_id, hand_number, stored, view)
            await writer.catch_up()
        # The one retry every writer shares (studkit.commit): a street recorded by a
        # concurrent call meanwhile loads again and decides again.
        return await write(writer, plan, attempts=self._retries)

    async def _loaded(self, table_id: str, hand_number: int, street: Street,
                      stored: StoredHand | None) -> tuple[StoredHand, TableView | None]:
        """The hand's record (``stored`` if already read) and, unless the street was dealt
        before (a repeat), the table's public state."""
        if stored is not None:
            if stored.deal_for(street) is not None:
                return stored, None  # a repeat: the table's state is not needed
            return stored, await self._tables.view(table_id)
        found, view = await self._hand_and_view(table_id, hand_number)
        if found is None:
            found = await self._stored(table_id, hand_number)  # NotFound, saying why
        return found, None if found.deal_for(street) is not None else view

    async def _save_deal(self, table_id: str, hand_number: int, plan: DealPlan,
                         first_index: int | None, stored: StoredHand, deal: StreetDeal
                         ) -> StreetDeal:
        """Record a street's deal (``_StreetRecorded`` if another call recorded one first)."""
        if stored.deal_for(plan.street) is not None:
            return deal  # a repeat: recorded before
        outcome, existing = await self._store.record_deal(
            table_id, hand_number, deal, len(stored.deals))
        if outcome is Recorded.CONFLICT:
            raise _StreetRecorded(table_id, hand_number)
        if outcome is Recorded.MISSING:
            raise NotFound(f"no deck for hand {hand_number}", reason="unknown_hand")
        if outcome is Recorded.EXISTS and existing is not None:
            return self._repeat(existing, plan, first_index)
        up = sum(1 for card in deal.cards if card.up)
        self._counters.cards_dealt.inc(up, face="up")
        self._counters.cards_dealt.inc(len(deal.cards) - up, face="down")
        log.info("street_dealt", cards=len(deal.cards), burned=deal.burn is not None,
                 reshuffled=deal.reshuffled)
        return deal

    def _decide_deal(self, hand_number: int, plan: DealPlan, first_index: int | None,
                     stored: StoredHand, view: TableView | None) -> StreetDeal:
        """The street's cards from the stored deck (or the recorded street, for a repeat),
        checked against the table's public state."""
        recorded = stored.deal_for(plan.street)
        if recorded is not None or view is None:
            assert recorded is not None
            return self._repeat(recorded, plan, first_index)
        hand = _hand_of(view, hand_number)
        if hand.deck_commitment != stored.commitment or (
                hand.card_commitment and (stored.fair is None
                                          or hand.card_commitment != stored.fair.commitment)):
            raise FailedPrecondition("the hand's published commitment is not this deck's",
                                     reason="commitment_mismatch")
        expected = pending_deal(view.state)
        if expected != plan:
            raise WrongDeal(self._wrong_deal(expected))
        streets_public = streets_dealt(hand)
        if len(stored.deals) != streets_public:
            raise FailedPrecondition(
                f"the dealer recorded {len(stored.deals)} streets, the table {streets_public}",
                reason="deal_out_of_step",
            )
        deal = deal_street(self._fair.dealing_deck(stored), stored.deals, plan)
        _check_first_index(deal, first_index)
        return deal

    # --- seeds and proofs (dealer.fair) -----------------------------------------------------

    async def commit_seed(self, principal: Principal, table_id: str, hand_number: int,
                          commitment: str) -> None:
        """See :meth:`dealer.fair.FairDealer.commit_seed`."""
        await self._fair.commit_seed(principal, table_id, hand_number, commitment)

    async def open_seed(self, principal: Principal, table_id: str, hand_number: int,
                        seed: bytes) -> None:
        """See :meth:`dealer.fair.FairDealer.open_seed`."""
        await self._fair.open_seed(principal, table_id, hand_number, seed)

    async def hand_proof(self, principal: Principal, table_id: str, hand_number: int
                         ) -> HandProof:
        """See :meth:`dealer.fair.FairDealer.hand_proof`."""
        return await self._fair.hand_proof(principal, table_id, hand_number)

    @staticmethod
    def _wrong_deal(expected: DealPlan | None) -> str:
        if expected is None:
            return "the hand is not waiting for cards"
        return (f"the rules ask for {expected.street.label}: {len(expected.slots)} cards, "
                f"burn={expected.burn}, reshuffle={expected.reshuffle_burns}, to seats "
                + ", ".join(f"{s.seat}:{'up' if s.up else 'down'}" for s in expected.slots))

    @staticmethod
    def _repeat(recorded: StreetDeal, plan: DealPlan, first_index: int | None) -> StreetDeal:
        if not recorded.matches(plan):
            raise WrongDeal(f"{plan.street.label} was already dealt to other slots")
        _check_first_index(recorded, first_index)
        log.info("street_repeated", cards=len(recorded.cards))
        return recorded

    async def reveal(self, principal: Principal, table_id: str, hand_number: int,
                     seats: Sequence[int]) -> dict[int, tuple[int, ...]]:
        """The down cards of ``seats`` (all hands still in when empty), only at the
        showdown or an all-in runout, and only for hands still in."""
        self._require_table(principal)
        _bind(table_id, hand_number)
        found, view = await self._hand_and_view(table_id, hand_number)
        hand = _hand_of(view, hand_number)
        wanted = list(seats) or [p.seat for p in hand.players if not p.folded]
        if len(set(wanted)) != len(wanted):
            raise SeatNotInHand("a seat is named twice")
        stored = found if found is not None else await self._stored(table_id, hand_number)
        revealable = revealable_seats(hand)
        out: dict[int, tuple[int, ...]] = {}
        for seat in wanted:
            if not hand.has_player(seat):
                raise SeatNotInHand(f"seat {seat} was not dealt into hand {hand_number}")
            player = hand.player(seat)
            if player.folded:
                raise SeatNotInHand(f"seat {seat} folded; a folded hand is never revealed")
            if seat not in revealable:
                raise NotAtShowdown(f"hand {hand_number} is in phase {hand.phase.value}")
            dealt_down = [d.card for d in seat_draws(stored.deals, seat) if not d.up]
            if len(dealt_down) < len(player.down):
                raise FailedPrecondition(f"seat {seat}: the dealer has fewer down cards than "
                                         "the public record", reason="deal_out_of_step")
            out[seat] = tuple(dealt_down[: len(player.down)])
        log.info("hands_revealed", seats=len(out), phase=hand.phase.value)
        return out

    # --- players ----------------------------------------------------------------------------

    async def own_cards(self, principal: Principal, table_id: str,
                        hand_number: int = 0) -> OwnCards:
        """See :meth:`dealer.players.PlayerCards.own_cards`."""
        return await self._players.own_cards(principal, table_id, hand_number)

    def watch_own_cards(self, principal: Principal, table_id: str,
                        changes: AsyncIterator[object]) -> AsyncIterator[OwnCards]:
        """See :meth:`dealer.players.PlayerCards.watch_own_cards`."""
        return self._players.watch_own_cards(principal, table_id, changes)

    # --- the archiver ------------------------------------------------------------------------

    async def release_hands(self, principal: Principal, table_id: str, through_hand: int
                            ) -> tuple[int, int]:
        """Forget the keys of the table's hands up to ``through_hand``, whose records the
        archive holds; only hands the table's stream no longer holds (docs/history.md)."""
        require_role(principal, Role.SERVICE)
        if principal.name != ARCHIVER_SERVICE:
            raise Forbidden(f"service {principal.name} is not the archiver")
        _bind(table_id, through_hand)
        kept = await first_hand_kept(self._tables.events, table_id)
        if kept is None or through_hand >= kept:
            raise FailedPrecondition(
                f"hand {through_hand} is still in the table's stream (its first kept hand is "
                f"{kept if kept is not None else 'unknown'})", reason="hand_in_redis")
        released, deleted = await self._store.release(table_id, through_hand)
        log.info("hands_released", released_through=released, deleted=deleted)
        return released, deleted

    # --- auditors ---------------------------------------------------------------------------

    async def audit(self, principal: Principal, table_id: str, hand_number: int) -> HandAudit:
        """A finished hand's deck, salt, reshuffle key and the dealer's log of draws: for
        auditors, and for the archiver service, which copies it to the auditor schema of the
        archive of record (docs/history.md)."""
        if not (principal.role is Role.SERVICE and principal.name == ARCHIVER_SERVICE):
            require_role(principal, Role.AUDITOR)
        _bind(table_id, hand_number)
        view = await self._tables.view(table_id)
        hand = view.state.hand
        if hand is None or hand_number > hand.hand_number:
            raise NotFound(f"hand {hand_number} has not started", reason="unknown_hand")
        if hand.hand_number == hand_number and not hand.is_over:
            raise HandNotOver(f"hand {hand_number} is still being played")
        stored = await self._stored(table_id, hand_number)
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


def _check_first_index(deal: StreetDeal, first_index: int | None) -> None:
    if first_index is None:
        return
    first = deal.burn_index if deal.burn_index is not None else deal.cards[0].index
    if first != first_index:
        raise WrongDeal(f"{deal.street.label} starts at card {first}, not {first_index}")
