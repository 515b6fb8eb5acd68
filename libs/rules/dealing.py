"""Who gets the next cards, face up or down, and when the deck runs short (RULES §4, §10).

The rules never draw cards: :func:`deal_plan` (for a table: ``rules.pending_deal(state)``)
says what the dealer must deliver next and ``DealStreet`` brings the cards in as data."""

from __future__ import annotations

from dataclasses import dataclass

from rules.cards import DECK_SIZE
from rules.config import TableConfig
from rules.state import HandState, Phase
from rules.streets import Street, card_is_up


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class DealSlot:
    """One card to deal: to ``seat`` (0 = the community card), face up or down."""

    seat: int
    up: bool

    def __init__(self, *, seat: int, up: bool) -> None:
        # Written out (init=False): compiled, the dataclass's own runs interpreted, five
        # times the cost (tests/unit/rules/test_value_inits.py: the same signature).
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "up", up)


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class DealPlan:
    """The cards of the next street, in dealing order."""

    street: Street
    slots: tuple[DealSlot, ...]
    burn: bool = False
    reshuffle_burns: bool = False
    """Shuffle the burned cards into the stub before burning and dealing (RULES 10.4)."""

    def __init__(self, *, street: Street, slots: tuple[DealSlot, ...], burn: bool = False,
                 reshuffle_burns: bool = False) -> None:
        # Written out (init=False): compiled, the dataclass's own runs interpreted, five
        # times the cost (tests/unit/rules/test_value_inits.py: the same signature).
        object.__setattr__(self, "street", street)
        object.__setattr__(self, "slots", slots)
        object.__setattr__(self, "burn", burn)
        object.__setattr__(self, "reshuffle_burns", reshuffle_burns)

    @property
    def community(self) -> bool:
        """Whether this deal is one community card (RULES 10.2)."""
        return any(s.seat == 0 for s in self.slots)


def stub_size(hand: HandState) -> int:
    """Cards left in the deck."""
    return DECK_SIZE - hand.dealt - hand.burned


def streets_dealt(hand: HandState) -> int:
    """How many streets the hand has dealt (0 before 3rd street), e.g. for a dealer to check
    that its record of the hand keeps step with the table's."""
    return 0 if hand.street is None else int(hand.street) - int(Street.THIRD) + 1


def deal_plan(hand: HandState, config: TableConfig) -> DealPlan | None:
    """What must be dealt next, or None when the hand is not waiting for cards.

    In an all-in runout every card is dealt face up: the hands are already exposed.
    """
    if hand.phase != Phase.DEALING:
        return None
    street = Street.THIRD if hand.street is None else hand.street.next()
    assert street is not None
    return street_plan(street, tuple(p.seat for p in hand.players),
                       tuple(p.seat for p in hand.players if not p.folded),
                       exposed=hand.exposed, stub=stub_size(hand), burned=hand.burned,
                       burn_cards=config.burn_cards)


_PLANS: dict[tuple[object, ...], DealPlan] = {}
"""Plans already made, by what they depend on (a plan is a frozen value: made once, shared).
A hand's plans repeat from hand to hand (the same seats, the same streets), and making one
(its slots and itself frozen dataclasses, compiled or not) cost several times the look-up."""

_PLANS_KEPT = 4096
"""At most this many plans are kept (then forgotten all at once): seat sets, streets and, on
7th street, the stub's size and the burned cards make a few thousand at most."""


def street_plan(street: Street, dealt_in: tuple[int, ...], still_in: tuple[int, ...], *,
                exposed: bool, stub: int, burned: int, burn_cards: bool) -> DealPlan:
    """:func:`plan_street`, kept for the next hand with the same arguments (the stub's size
    and the burned cards count only on 7th street: elsewhere they are not in the key)."""
    if street == Street.SEVENTH:
        key: tuple[object, ...] = (street, dealt_in, still_in, exposed, burn_cards, stub, burned)
    else:
        key = (street, dealt_in, still_in, exposed, burn_cards)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= _PLANS_KEPT:
            _PLANS.clear()
        plan = _PLANS[key] = plan_street(street, dealt_in, still_in, exposed=exposed,
                                         stub=stub, burned=burned, burn_cards=burn_cards)
    return plan


def plan_street(street: Street, dealt_in: tuple[int, ...], still_in: tuple[int, ...], *,
                exposed: bool, stub: int, burned: int, burn_cards: bool) -> DealPlan:
    """The public deal rule for one street (RULES 4.2-4.4, 10): on 3rd street three passes
    over the seats dealt in, in seat order (down, down, up); on each later street one card to
    each seat still in, in seat order (folded seats are skipped), up on 4th to 6th and down
    on 7th (up for all in an all-in runout), after a burn when the table burns; on 7th street
    one community card when the stub cannot give every seat its card, after shuffling the
    burned cards back in if that is enough (RULES 10.4). ``stub`` is the number of cards left
    in the deck and ``burned`` the burned cards that could be shuffled back.

    >>> street_plan(Street.FOURTH, (1, 2, 3), (1, 3), exposed=False, stub=43, burned=0,
    ...             burn_cards=False).slots
    (DealSlot(seat=1, up=True), DealSlot(seat=3, up=True))
    >>> street_plan(Street.SEVENTH, (1,), (1,), exposed=False, stub=0, burned=0,
    ...             burn_cards=False).community
    True
    """
    if street == Street.THIRD:
        slots = tuple(
            DealSlot(seat=s, up=card_is_up(street, pass_number))
            for pass_number in range(3)
            for s in dealt_in
        )
        return DealPlan(street=street, slots=slots)
    up = card_is_up(street) or exposed
    burn = burn_cards
    if street != Street.SEVENTH:
        return DealPlan(street=street, slots=tuple(DealSlot(seat=s, up=up) for s in still_in),
                        burn=burn)
    need = len(still_in) + (1 if burn else 0)
    reshuffle = False
    if stub < need and burn:
        reshuffle = True
        stub += burned
    if stub >= need:
        return DealPlan(street=street, slots=tuple(DealSlot(seat=s, up=up) for s in still_in),
                        burn=burn, reshuffle_burns=reshuffle)
    return DealPlan(street=street, slots=(DealSlot(seat=0, up=True),), burn=burn,
                    reshuffle_burns=reshuffle)
