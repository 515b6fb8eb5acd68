"""TEST ONLY: the rigged dealer, a :class:`dealer.dealing.Dealing` that the test support passes
to the dealer it builds, so that tests can play known hands (stacked decks, RULES §16) and
show that a player's own check catches a dishonest dealer (docs/fairness.md). It lives here,
in the repository's test support, which no image contains
(``tests/unit/deploy/test_image_files.py``); the service has no such dealer and ``python -m
dealer`` refuses to start with these settings set.

In process: ``running_dealer(settings, keys, rig=RiggedDealing(...))`` and
``running_room(..., rig=...)``. As a process: ``python -m studtest.rigged_dealer``, the
dealer's own settings plus

- ``DEALER_CORRUPT=swap|position|withhold|drop_seed``: cheat (see :class:`Corruption`);
- ``DEALER_STACKED_DECKS=1``: serve ``DealerTestingService.StackDeck`` (operators) and deal
  the queued orders.

Each card kind of corruption touches the first card of every per-card hand (draw 0: the first
down card of the lowest seat dealt in); DROP_SEED touches the players' seeds."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from enum import StrEnum, unique
from typing import Final

import grpc
import structlog

from dealer import mapping
from dealer.bootstrap import DealerDeps, build_deps
from dealer.config import TEST_ONLY_SETTINGS, Settings
from dealer.fair import bind_hand
from dealer.server import create_server
from dealer.store import StoredHand
from rules import DECK, Card
from stud.v1 import dealer_pb2 as pb
from stud.v1 import dealer_pb2_grpc as pb_grpc
from studkit import service
from studkit.auth import Role, require_role
from studkit.cardproof import CardOpening
from studkit.deckproof import Draw, HandDeck
from studkit.errors import BadRequest
from studkit.grpc_server import GrpcServer, ServiceRegistration, current_principal
from studkit.mapping.common import cards_from_proto

TESTING_SERVICE_NAME: Final = pb.DESCRIPTOR.services_by_name["DealerTestingService"].full_name
log = structlog.get_logger("rigged_dealer")


@unique
class Corruption(StrEnum):
    """How the rigged dealer cheats."""

    NONE = ""
    SWAP = "swap"
    """Deal another card than the committed one at draw 0 and claim, in its opening, that it
    is the committed card (the opening no longer matches the root)."""
    POSITION = "position"
    """Deal the card committed at another position at draw 0, with that card's honest
    opening (its position is not the one the deal rule gives)."""
    WITHHOLD = "withhold"
    """Send no opening for the card at draw 0."""
    DROP_SEED = "drop_seed"
    """Refuse every player's seed opening as too late (``seed_too_late``) after seeing that
    it opens the player's commitment: the deal order rests on the dealer's seed alone."""


def full_order(prefix: Sequence[Card]) -> tuple[int, ...]:
    """The deck order (card indices, top first) that starts with ``prefix`` and goes on with
    the remaining cards in rank-major order.

    >>> from rules import parse_cards
    >>> full_order(parse_cards("As 2c"))[:3]
    (51, 0, 1)
    """
    indices = [card.index for card in prefix]
    if len(set(indices)) != len(indices):
        raise ValueError("a card is stacked twice")
    chosen = set(indices)
    return (*indices, *(card.index for card in DECK if card.index not in chosen))


class StackedDecks:
    """Queued deck orders by (table, hand)."""

    def __init__(self) -> None:
        self._orders: dict[tuple[str, int], tuple[int, ...]] = {}

    def put(self, table_id: str, hand_number: int, order: tuple[int, ...]) -> None:
        """The next StartHand of ``table_id``'s hand ``hand_number`` deals ``order``."""
        self._orders[(table_id, hand_number)] = order

    def take(self, table_id: str, hand_number: int) -> tuple[int, ...] | None:
        """The queued order of that hand, if any (consumed)."""
        return self._orders.pop((table_id, hand_number), None)


class RiggedDealing:
    """A :class:`dealer.dealing.Dealing` that deals stacked decks (``stacked``) and cheats
    as ``corruption`` says; with neither it deals as the honest one does."""

    def __init__(self, corruption: Corruption = Corruption.NONE, *,
                 stacked: bool = False) -> None:
        self.corruption = corruption
        self.stacked: StackedDecks | None = StackedDecks() if stacked else None

    def stacked_order(self, table_id: str, hand_number: int) -> tuple[int, ...] | None:
        return None if self.stacked is None else self.stacked.take(table_id, hand_number)

    def dealing_deck(self, stored: StoredHand) -> HandDeck:
        deck = stored.dealing_deck()
        if stored.fair is None or self.corruption not in (Corruption.SWAP,
                                                          Corruption.POSITION):
            return deck
        order = list(deck.order)  # deal the last card first: not the committed order
        order[0], order[-1] = order[-1], order[0]
        return HandDeck(table_id=deck.table_id, hand_number=deck.hand_number,
                        order=tuple(order), reshuffle_key=deck.reshuffle_key, salt=deck.salt)

    def opening(self, stored: StoredHand, draw: Draw, honest: CardOpening
                ) -> CardOpening | None:
        if draw.index != 0 or stored.fair is None:
            return honest
        if self.corruption is Corruption.WITHHOLD:
            return None
        if self.corruption is Corruption.SWAP:  # the committed card's opening, another card
            fair = stored.fair
            committed = fair.deck.opening(fair.order().deal[0], fair.deck.leaves())
            return CardOpening(position=committed.position, card=draw.card,
                               salt=committed.salt, path=committed.path)
        return honest

    def takes_seed(self, table_id: str, hand_number: int, player_id: str) -> bool:
        return self.corruption is not Corruption.DROP_SEED  # seen, then dropped

    def services(self) -> list[ServiceRegistration]:
        """The test-only gRPC services to register beside the dealer's."""
        if self.stacked is None:
            return []
        return [(pb_grpc.add_DealerTestingServiceServicer_to_server,
                 DealerTestingServicer(self.stacked), TESTING_SERVICE_NAME)]


class DealerTestingServicer(pb_grpc.DealerTestingServiceServicer):
    """``StackDeck``: an operator queues the deck order of one future hand."""

    def __init__(self, stacked: StackedDecks) -> None:
        self._stacked = stacked

    async def StackDeck(self, request: pb.StackDeckRequest,
                        context: grpc.aio.ServicerContext) -> pb.StackDeckResponse:
        principal = current_principal()
        table_id = mapping.table_id(request.table_id)
        hand = mapping.hand_number(request.hand_number)
        try:
            order = full_order(cards_from_proto(request.cards, "cards"))
        except ValueError as exc:
            raise BadRequest("cards", str(exc)) from None
        require_role(principal, Role.OPERATOR)
        bind_hand(table_id, hand)
        self._stacked.put(table_id, hand, order)
        log.warning("stacked_deck_queued")
        return pb.StackDeckResponse()


def rigged_server(rig: RiggedDealing
                  ) -> Callable[[Settings, DealerDeps], tuple[GrpcServer, int]]:
    """``create_server`` of a dealer built with ``rig``: the dealer's services and the
    rig's."""

    def create(settings: Settings, deps: DealerDeps) -> tuple[GrpcServer, int]:
        return create_server(settings, deps, rig.services())

    return create


def rig_from_env(env: dict[str, str]) -> RiggedDealing:
    """The rig ``DEALER_CORRUPT`` and ``DEALER_STACKED_DECKS`` describe (ValueError when
    the corruption is unknown)."""
    try:
        corruption = Corruption(env.get("DEALER_CORRUPT", "").strip().lower())
    except ValueError:
        raise ValueError("DEALER_CORRUPT must be swap, position, withhold or drop_seed"
                         ) from None
    stacked = env.get("DEALER_STACKED_DECKS", "").strip().lower() in ("1", "true", "yes")
    return RiggedDealing(corruption, stacked=stacked)


def main() -> None:
    """``python -m studtest.rigged_dealer``: the dealer, rigged as the environment says."""
    env = dict(os.environ)
    try:
        rig = rig_from_env(env)
    except ValueError as exc:
        sys.exit(f"studtest.rigged_dealer: {exc}")
    settings = Settings.from_env({k: v for k, v in env.items()
                                  if k not in TEST_ONLY_SETTINGS})

    def deps(settings: Settings) -> DealerDeps:
        return build_deps(settings, dealing=rig)

    service.main("rigged_dealer", settings, deps, rigged_server(rig),
                 table_services=list(settings.table_services),
                 corruption=rig.corruption.value, stacked_decks=rig.stacked is not None,
                 warning="TEST ONLY: a rigged dealer; never in production")


if __name__ == "__main__":
    main()
