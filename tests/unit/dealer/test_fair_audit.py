"""The auditor's per-card checks (studkit.deckproof: ``FairAudit.problems`` and
``verify_hand`` on a hand with a card commitment), on a hand dealt in memory by an honest
dealer (tests/fairhands.py, with the dealer's own log of draws), then with one thing of the
dealer's secret changed at a time."""

from __future__ import annotations

import random
from dataclasses import replace

from dealer.deck import deal_street
from rules.draws import hand_plans
from rules.events import HandStarted
from studkit.cardproof import FairDeck
from studkit.deckproof import FairAudit, HandAudit, HandDeck, StreetDeal, commit, verify_hand
from tests.fairhands import TABLE, DealtHand, deal_hand, with_card_commitment


def audited(seed: int = 1) -> tuple[DealtHand, HandAudit]:
    """An honest hand as the table records it and the dealer's audit of it."""
    hand = with_card_commitment(deal_hand(random.Random(seed)))
    base = HandDeck(table_id=TABLE, hand_number=1, order=hand.deck.base,
                    reshuffle_key=tuple(range(52)), salt=bytes(32))
    started = hand.events[0]
    assert isinstance(started, HandStarted)
    hand = replace(hand, events=[replace(started, deck_commitment=commit(base)),
                                 *hand.events[1:]])
    header = hand.proof().header
    fair = FairAudit(deck=hand.deck, seeds=header.seeds, opened=hand.opened,
                     commitment=header.commitment)
    dealing = fair.dealing_deck(base.salt)
    deals: list[StreetDeal] = []
    for plan in hand_plans(hand.events, hand.config.burn_cards):
        deals.append(deal_street(dealing, deals, plan))
    return hand, HandAudit(deck=base, commitment=commit(base), deals=tuple(deals), fair=fair)


def problems(hand: DealtHand, audit: HandAudit) -> tuple[str, ...]:
    return verify_hand(audit, hand.events).problems


def with_fair(audit: HandAudit, **changes: object) -> HandAudit:
    assert audit.fair is not None
    return replace(audit, fair=replace(audit.fair, **changes))  # type: ignore[arg-type]


def test_an_honest_hand_passes_the_audit() -> None:
    hand, audit = audited()
    assert problems(hand, audit) == ()
    assert verify_hand(audit, hand.events).cards_checked > 0


def test_a_changed_salt_does_not_match_the_card_commitment() -> None:
    hand, audit = audited(2)
    assert audit.fair is not None
    deck = audit.fair.deck
    salts = (bytes(32), *deck.salts[1:])
    found = problems(hand, with_fair(audit, deck=FairDeck(
        table_id=deck.table_id, hand_number=deck.hand_number, base=deck.base, salts=salts,
        dealer_seed=deck.dealer_seed)))
    assert "the salted cards and seeds do not match the card commitment" in found


def test_a_per_card_base_deck_that_is_not_the_committed_deck_is_caught() -> None:
    hand, audit = audited(3)
    order = list(audit.deck.order)
    order[0], order[1] = order[1], order[0]
    other = replace(audit.deck, order=tuple(order))
    found = problems(hand, replace(audit, deck=other, commitment=commit(other)))
    assert "the per-card base deck is not the committed deck" in found


def test_a_seed_that_does_not_open_its_commitment_is_caught() -> None:
    hand, audit = audited(4)
    assert audit.fair is not None
    (first, _seed), *rest = audit.fair.opened
    found = problems(hand, with_fair(audit, opened=((first, bytes(32)), *rest)))
    assert f"{first}'s seed does not open its commitment" in found
    found = problems(hand, with_fair(audit, opened=tuple(rest)))
    assert "the opened seeds are not the committed ones" in found


def test_a_hand_with_a_card_commitment_but_no_per_card_secret_fails() -> None:
    hand, audit = audited(5)
    found = problems(hand, replace(audit, fair=None))
    assert "the dealer gave no per-card secret for a hand with a card commitment" in found
