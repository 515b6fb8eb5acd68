"""The dealer's use cases: who may ask for what, checked against the table's public stream,
then the deck store. Knows a :class:`~dealer.store.DealerStore` and
:class:`~dealer.tables.PublicTables`, never redis or grpc. Shuffling a hand's deck and
revealing at the showdown are here; a street's deal is :mod:`dealer.streets`, seeds and
proofs :mod:`dealer.fair`, a player's own cards :mod:`dealer.players`, and a finished hand's
audit and release :mod:`dealer.records`.

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
from dealer.deck import seat_draws
from dealer.fair import FairDealer, deal_header, stored_hand
from dealer.fair import bind_hand as _bind
from dealer.players import OwnCards, PlayerCards
from dealer.records import HandRecords
from dealer.shuffle import CSPRNG, Entropy
from dealer.store import (
    IDENTITY,
    DealerStore,
    FairHand,
    StoredHand,
    seed_commitments,
    seeds_key,
)
from dealer.streets import StreetDealer, hand_and_view, hand_of
from dealer.tables import PublicTables, TableView
from rules import DealPlan
from rules.views import revealable_seats
from studkit.auth import Forbidden, Principal, Role, require_role
from studkit.cardcheck import HandProof
from studkit.cardproof import FairDeck
from studkit.deckproof import HandAudit, HandDeck, StreetDeal, commit
from studkit.errors import FailedPrecondition, NotFound
from studkit.metrics import ClosedCounter, Metrics

ARCHIVER_SERVICE = "archiver"
"""The service whose token may read a finished hand's record, as an auditor does."""
log = structlog.get_logger("dealer")


class NotAtShowdown(FailedPrecondition):
    """Raised when a reveal is asked for before the hand's showdown or all-in runout."""

    default_reason = "not_at_showdown"


class SeatNotInHand(FailedPrecondition):
    """Raised when a reveal names a seat that folded or was not dealt in: such a hand is
    never revealed."""

    default_reason = "seat_not_in_hand"


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
        self._clock_ms = clock_ms
        self._counters = DealerCounters.register(metrics if metrics is not None else Metrics())
        self._fair = FairDealer(store, tables, clock_ms=clock_ms, seed_wait_ms=seed_wait_ms,
                                dealing=dealing)
        """Seeds, proofs and openings of per-card hands."""
        self._players = PlayerCards(store, tables, self._fair)
        """The players' own cards."""
        self._streets = StreetDealer(store, tables, self._fair,
                                     cards_dealt=self._counters.cards_dealt,
                                     conflict_retries=conflict_retries)
        """Each street's deal."""
        self._records = HandRecords(store, tables)
        """Finished hands' audits and releases."""

    # --- who may ask ------------------------------------------------------------------------

    def _require_table(self, principal: Principal) -> None:
        require_role(principal, Role.SERVICE)
        if principal.name not in self._table_services:
            raise Forbidden(f"service {principal.name} is not a table service")

    async def _stored(self, table_id: str, hand_number: int) -> StoredHand:
        return await stored_hand(self._store, table_id, hand_number)

    async def _hand_and_view(self, table_id: str, hand_number: int
                             ) -> tuple[StoredHand | None, TableView]:
        return await hand_and_view(self._tables, table_id, hand_number)

    # --- the table's calls ------------------------------------------------------------------

    async def start_hand(self, principal: Principal, table_id: str, hand_number: int
                         ) -> StartedHand:
        """Shuffle the deck of the table's next hand (once) and return its commitments: the
        deck's, and the per-card commitment over the salted cards and the seeds committed
        so far (docs/fairness.md), which closes the hand to new seed commitments."""
        self._require_table(principal)
        _bind(table_id, hand_number)
        # The table's state and the seeds committed for the hand, read together; the deck's
        # script creates the hand only with exactly those seeds, closing them (issue 35: the
        # seeds were closed first, a round trip of its own), or gives the stored hand back.
        view, raw_seeds = await self._tables.view_and_hash(table_id,
                                                           seeds_key(table_id, hand_number))
        state = view.state
        if not state.opened or state.hand_in_progress or hand_number != state.hands_started + 1:
            existing = await self._store.load_hand(table_id, hand_number)
            if existing is not None:  # a repeat, once the table recorded the hand
                log.info("hand_deck_reused")
                return StartedHand(existing.commitment,
                                   "" if existing.fair is None else existing.fair.commitment)
            if not state.opened:
                raise NotFound(f"table {table_id} has no public record",
                               reason="unknown_table")
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
            seeds = seed_commitments(raw_seeds)
            entropy = self._entropy
            secret = FairDeck(table_id=table_id, hand_number=hand_number,
                              base=entropy.shuffled(), salts=entropy.card_salts(),
                              dealer_seed=entropy.new_seed())
            fair = FairHand(deck=secret, commitment=deal_header(secret, seeds).commitment,
                            seeds=seeds)
            # The reshuffle of a per-card hand follows the seeds: the v1 key is the identity.
            deck = HandDeck(table_id=table_id, hand_number=hand_number, order=secret.base,
                            reshuffle_key=IDENTITY, salt=self._entropy.new_salt())
        ours = commit(deck)
        created = await self._store.create_hand(deck, ours, self._clock_ms(), fair)
        if created is None and fair is not None:
            # A seed was committed since the read: close the commitments (none is taken
            # after that) and commit to the cards with exactly those.
            seeds = await self._store.close_seeds(table_id, hand_number)
            fair = FairHand(deck=fair.deck, commitment=deal_header(fair.deck, seeds).commitment,
                            seeds=seeds)
            created = await self._store.create_hand(deck, ours, self._clock_ms(), fair)
        if created is None:  # pragma: no cover - closed commitments do not change
            raise FailedPrecondition("the hand's seed commitments keep changing",
                                     reason="conflict")
        commitment, cards = created
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
        return await self._streets.deal(table_id, hand_number, plan, first_index)

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

    async def reveal(self, principal: Principal, table_id: str, hand_number: int,
                     seats: Sequence[int]) -> dict[int, tuple[int, ...]]:
        """The down cards of ``seats`` (all hands still in when empty), only at the
        showdown or an all-in runout, and only for hands still in."""
        self._require_table(principal)
        _bind(table_id, hand_number)
        found, view = await self._hand_and_view(table_id, hand_number)
        hand = hand_of(view, hand_number)
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
                        changes: AsyncIterator[int | None]) -> AsyncIterator[OwnCards]:
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
        return await self._records.release(table_id, through_hand)

    # --- auditors ---------------------------------------------------------------------------

    async def audit(self, principal: Principal, table_id: str, hand_number: int) -> HandAudit:
        """A finished hand's deck, salt, reshuffle key and the dealer's log of draws: for
        auditors, and for the archiver service, which copies it to the auditor schema of the
        archive of record (docs/history.md)."""
        if not (principal.role is Role.SERVICE and principal.name == ARCHIVER_SERVICE):
            require_role(principal, Role.AUDITOR)
        _bind(table_id, hand_number)
        return await self._records.audit(table_id, hand_number)
