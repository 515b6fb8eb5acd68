"""The dealer's part of the per-card scheme (docs/fairness.md): the players' seeds (taken,
opened and frozen before a hand's first card), the public proof of a hand and each card's
opening, asking the app's :class:`~dealer.dealing.Dealing` (honest in the service) at each
step. :class:`~dealer.app.DealerApp` owns one :class:`FairDealer` and hands it these calls.
Nothing here logs a card, a salt or a seed: ids and counts only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from functools import lru_cache

import structlog

from dealer.dealing import HONEST, Dealing
from dealer.store import (
    CACHED_HANDS,
    DealerStore,
    SeedTaken,
    StoredHand,
    hand_from_hash,
    hand_key,
)
from dealer.tables import PublicTables, TableView
from studkit.auth import Forbidden, Principal, Role
from studkit.cardcheck import HandProof, PublicOpening
from studkit.cardproof import (
    CardOpening,
    DealHeader,
    FairDeck,
    MerkleTree,
    dealer_seed_commitment,
    seed_commitment,
)
from studkit.deckproof import Draw, HandDeck
from studkit.errors import BadRequest, FailedPrecondition, NotFound

log = structlog.get_logger("dealer")


class SeedTooLate(FailedPrecondition):
    """Raised when a seed commitment comes after the hand's cards were committed, or a seed
    opening after its first card was dealt."""

    default_reason = "seed_too_late"


class SeedTooEarly(FailedPrecondition):
    """Raised when a seed is committed for a hand too far ahead, or opened before the hand's
    card commitment is in the public record."""

    default_reason = "seed_too_early"


class NoCardCommitment(FailedPrecondition):
    """Raised when a hand has no per-card commitment (dealt before the scheme, or from a
    stacked deck in a test)."""

    default_reason = "no_card_commitment"


MAX_SEEDS_AHEAD = 2
"""A seed may be committed for the table's next hand or the one after it."""


@lru_cache(maxsize=CACHED_HANDS)
def _tree(deck: FairDeck) -> tuple[MerkleTree, dict[int, int]]:
    """The Merkle tree of a hand's deck and each card's base position (memoised: a hand's
    openings and header are asked for at every card update of every player, and each
    opening hashed the whole tree again)."""
    return MerkleTree(deck.leaves()), {card: i for i, card in enumerate(deck.base)}


def card_opening(deck: FairDeck, card: int) -> CardOpening:
    """The opening of ``card``: ``deck.opening(deck.position_of(card))``, from the tree made
    once per hand."""
    tree, positions = _tree(deck)
    position = positions[card]
    return CardOpening(position=position, card=card, salt=deck.salts[position],
                       path=tree.path(position))


@lru_cache(maxsize=CACHED_HANDS)
def deal_header(deck: FairDeck, seeds: tuple[tuple[str, str], ...]) -> DealHeader:
    """``deck.header(seeds)``, from the tree made once per hand (memoised)."""
    return DealHeader(table_id=deck.table_id, hand_number=deck.hand_number,
                      root=_tree(deck)[0].root.hex(),
                      dealer_seed=dealer_seed_commitment(deck.table_id, deck.hand_number,
                                                         deck.dealer_seed),
                      seeds=tuple(sorted(seeds)))


def bind_hand(table_id: str, hand_number: int | None = None) -> None:
    """Put the table (and the hand) on every log line of the call."""
    structlog.contextvars.bind_contextvars(table_id=table_id)
    if hand_number is not None:
        structlog.contextvars.bind_contextvars(hand_number=hand_number)


async def stored_hand(store: DealerStore, table_id: str, hand_number: int) -> StoredHand:
    """The dealer's record of a hand (NotFound when there is none)."""
    stored = await store.load_hand(table_id, hand_number)
    if stored is None:
        if hand_number <= await store.released(table_id):
            raise NotFound(f"hand {hand_number} of table {table_id} is archived: its record "
                           "is in the archive's auditor schema", reason="archived")
        raise NotFound(f"no deck for hand {hand_number} of table {table_id}",
                       reason="unknown_hand")
    return stored


class FairDealer:
    """Seeds, proofs and openings of per-card hands, over the dealer's store and the tables'
    public records. ``seed_wait_ms`` bounds the wait for seed openings before a hand's first
    card; ``dealing`` is :data:`~dealer.dealing.HONEST` but in the test support."""

    def __init__(self, store: DealerStore, tables: PublicTables, *,
                 clock_ms: Callable[[], int], seed_wait_ms: int,
                 dealing: Dealing = HONEST) -> None:
        self._store = store
        self._tables = tables
        self._clock_ms = clock_ms
        self._seed_wait_ms = seed_wait_ms
        self._dealing = dealing

    async def _view_and_hand(self, table_id: str, hand_number: int
                             ) -> tuple[TableView, StoredHand | None]:
        """The table's public state and the dealer's record of the hand (None: none, then
        :func:`stored_hand` says why), read in one round trip (issue 35: two)."""
        view, raw = await self._tables.view_and_hash(table_id, hand_key(table_id, hand_number))
        return view, hand_from_hash(table_id, hand_number, raw)

    # --- seeds ------------------------------------------------------------------------------

    def awaits_seeds(self, stored: StoredHand, view: TableView) -> bool:
        """Whether a per-card hand not frozen yet must wait before its first card: a seed
        committed by a player dealt in is not opened and the wait (``seed_wait_ms`` after the
        hand's deck was made) is not over. When it need not, the first street freezes the
        seeds itself, with its record (:meth:`dealer.store.DealerStore.record_deal`)."""
        fair = stored.fair
        if fair is None or fair.frozen:
            return False
        dealt_in = set(view.seatings.get(stored.deck.hand_number, {}).values())
        pending = {p for p, _c in fair.seeds if p in dealt_in} - set(fair.opened)
        return bool(pending) and self._clock_ms() < stored.created_ms + self._seed_wait_ms

    async def freeze_seeds(self, table_id: str, hand_number: int,
                           stored: StoredHand | None = None, view: TableView | None = None
                           ) -> StoredHand | None:
        """Before a per-card hand's first card: wait (until ``seed_wait_ms`` after the hand's
        deck was made) for the committed seeds of the players dealt in to be opened, then
        freeze the seeds, so the deal order is fixed before anything is dealt (a first street
        that need not wait, :meth:`awaits_seeds`, freezes them with its record instead).
        ``stored`` and ``view``: the hand and the table as just read (else read here).

        Returns the hand as loaded when nothing was left to freeze (no per-card commitment,
        or frozen already: the record a deal may start from, without loading it again); the
        hand as frozen (read by the freeze itself) when this call froze it without waiting,
        so ``view`` is as fresh as a deal's own read; None when there is no such hand or this
        call waited (load it and the table again)."""
        if stored is None:
            stored = await self._store.load_hand(table_id, hand_number)
        if stored is None or stored.fair is None or stored.fair.frozen:
            return stored
        if view is None:
            view = await self._tables.view(table_id)
        dealt_in = set(view.seatings.get(hand_number, {}).values())
        awaited = {p for p, _c in stored.fair.seeds if p in dealt_in}
        fair = stored.fair
        deadline = stored.created_ms + self._seed_wait_ms
        waited = False
        while awaited - set(fair.opened) and self._clock_ms() < deadline:
            waited = True
            await asyncio.sleep(0.01)
            again = await self._store.load_hand(table_id, hand_number)
            if again is None or again.fair is None or again.fair.frozen:
                return None
            fair = again.fair
        frozen = await self._store.freeze_seeds(table_id, hand_number)
        log.info("seeds_frozen", committed=len(fair.seeds), opened=len(fair.opened))
        return None if waited else frozen

    async def commit_seed(self, principal: Principal, table_id: str, hand_number: int,
                          commitment: str) -> None:
        """Take a seated player's seed commitment for the table's next hand or the one after
        it, before the dealer commits to that hand's cards."""
        if principal.role is not Role.PLAYER:
            raise Forbidden("only a player may commit a seed")
        bind_hand(table_id, hand_number)
        view = await self._tables.view(table_id)
        state = view.state
        if not state.opened:
            raise NotFound(f"table {table_id} has no public record", reason="unknown_table")
        if not any(s is not None and s.player_id == principal.name for s in state.seats):
            raise Forbidden("only a player seated at the table may commit a seed",
                            reason="not_seated")
        if hand_number <= state.hands_started:
            raise SeedTooLate(f"hand {hand_number} has started")
        if hand_number > state.hands_started + MAX_SEEDS_AHEAD:
            raise SeedTooEarly(f"seeds are taken for hands {state.hands_started + 1} and "
                               f"{state.hands_started + MAX_SEEDS_AHEAD} only")
        taken = await self._store.commit_seed(table_id, hand_number, principal.name,
                                              commitment, max_seeds=len(state.seats))
        if taken is SeedTaken.TOO_LATE:
            raise SeedTooLate(f"the cards of hand {hand_number} are committed")
        if taken is SeedTaken.TOO_MANY:  # pragma: no cover - one per seated player
            raise FailedPrecondition("too many seeds for one hand", reason="too_many_seeds")
        log.info("seed_committed")

    async def open_seed(self, principal: Principal, table_id: str, hand_number: int,
                        seed: bytes) -> None:
        """Take a player's seed, once the hand's card commitment is in the public record and
        before its first card is dealt."""
        if principal.role is not Role.PLAYER:
            raise Forbidden("only a player may open a seed")
        bind_hand(table_id, hand_number)
        view, found = await self._view_and_hand(table_id, hand_number)
        hand = view.state.hand
        if not view.state.opened:
            raise NotFound(f"table {table_id} has no public record", reason="unknown_table")
        if hand is None or hand.hand_number < hand_number or not hand.card_commitment:
            raise SeedTooEarly(f"hand {hand_number}'s card commitment is not public yet")
        if hand.hand_number > hand_number:
            raise SeedTooLate(f"hand {hand_number} is over")
        stored = found or await stored_hand(self._store, table_id, hand_number)
        if stored.fair is None or stored.fair.commitment != hand.card_commitment:
            raise NoCardCommitment(f"hand {hand_number} has no per-card commitment")
        committed = dict(stored.fair.seeds).get(principal.name)
        if committed is None:
            raise FailedPrecondition(f"you committed no seed for hand {hand_number}",
                                     reason="no_seed_committed")
        if seed_commitment(table_id, hand_number, principal.name, seed) != committed:
            raise BadRequest("seed", "the seed does not open your commitment",
                             reason="seed_mismatch")
        if not self._dealing.takes_seed(table_id, hand_number, principal.name):
            raise SeedTooLate(f"hand {hand_number}'s first card was dealt")
        taken = await self._store.open_seed(table_id, hand_number, principal.name, seed)
        if taken is not SeedTaken.OK:
            raise SeedTooLate(f"hand {hand_number}'s first card was dealt")
        log.info("seed_opened")

    # --- the proof of a hand ----------------------------------------------------------------

    async def hand_proof(self, principal: Principal, table_id: str, hand_number: int
                         ) -> HandProof:
        """What anyone may know about a per-card hand: its header, the openings of the cards
        the public record shows so far (up cards, the community card, shown and exposed
        hands; never a folded or mucked hand's, nor a burned card's) and, once the hand is
        over, the dealer's seed and the players' seeds."""
        if principal.role not in (Role.PLAYER, Role.AUDITOR, Role.OPERATOR, Role.SERVICE):
            raise Forbidden("no such role")
        bind_hand(table_id, hand_number)
        view, found = await self._view_and_hand(table_id, hand_number)
        if not view.state.opened:
            raise NotFound(f"table {table_id} has no public record", reason="unknown_table")
        latest = view.state.hand
        if latest is None or hand_number > latest.hand_number:
            raise NotFound(f"hand {hand_number} has not started", reason="unknown_hand")
        record = await self._tables.started_hand(view, hand_number, counted=True)
        stored = found or await stored_hand(self._store, table_id, hand_number)
        fair = stored.fair
        if fair is None:
            raise NoCardCommitment(f"hand {hand_number} has no per-card commitment")
        over = latest.hand_number > hand_number or latest.is_over
        public, shown = record.draws, record.shown
        openings = tuple(
            PublicOpening(draw=d.index, opening=card_opening(fair.deck, d.card))
            for deal in stored.deals for d in deal.cards
            if d.index < public and (d.up or d.seat in shown))
        header = deal_header(fair.deck, fair.seeds)
        log.info("hand_proof_given", openings=len(openings), complete=over)
        if not over:
            return HandProof(header=header, openings=openings)
        return HandProof(header=header, openings=openings, complete=True,
                         dealer_seed=fair.deck.dealer_seed, seeds=fair.seed_openings())

    # --- the deck dealt and the openings given -----------------------------------------------

    def dealing_deck(self, stored: StoredHand) -> HandDeck:
        """The deck the hand's streets are dealt from."""
        return self._dealing.dealing_deck(stored)

    def openings(self, stored: StoredHand, draws: Sequence[Draw]
                 ) -> tuple[CardOpening | None, ...]:
        """The openings of ``draws`` (a player's down cards), none for a hand without a
        per-card commitment."""
        fair = stored.fair
        if fair is None:
            return ()
        return tuple(self._dealing.opening(stored, draw, card_opening(fair.deck, draw.card))
                     for draw in draws)
