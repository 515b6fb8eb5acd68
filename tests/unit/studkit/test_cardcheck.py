"""A player's own check of a hand (studkit.cardcheck), on hands dealt in memory by an honest
dealer (tests/fairhands.py) and then tampered with one way at a time."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest

from rules.events import DownCardDealt, HandStarted
from studkit.cardcheck import (
    CardOpening,
    HandProof,
    Outcome,
    OwnCards,
    OwnSeed,
    PublicOpening,
    Verdict,
    verify_mine,
)
from tests.fairhands import TABLE, DealtHand, deal_hand, with_card_commitment


def check(hand: DealtHand, seat: int = 1, *, proof: HandProof | None = None,
          mine: OwnCards | None = None, seed: OwnSeed | None = None,
          events: list | None = None,  # type: ignore[type-arg]
          seen_commitment: str | None = None) -> Verdict:
    player = f"p{seat}"
    return verify_mine(table_id=TABLE, player_id=player, seen_commitment=seen_commitment,
                       events=hand.events if events is None else events,
                       burn_cards=hand.config.burn_cards,
                       proof=proof or hand.proof(), mine=mine or hand.own(seat),
                       seed=seed if seed is not None else (
                           hand.seed(player) if player in hand.seeds else None))


def honest(seed: int = 1, **kwargs: object) -> DealtHand:
    return with_card_commitment(deal_hand(random.Random(seed), **kwargs))  # type: ignore[arg-type]


class TestHonestHands:
    def test_a_showdown_verifies_for_every_seat(self) -> None:
        """Three players to the showdown: each verifies their own cards, every up card and
        every shown hand, with their seed in the deal order."""
        hand = honest()
        for seat in (1, 2, 3):
            verdict = check(hand, seat)
            assert verdict.outcome is Outcome.VERIFIED, verdict.problems
            assert verdict.own_cards == 3
            assert verdict.public_cards == 21  # everything is shown at the showdown
        assert check(hand, 1).my_seed_used and not check(hand, 3).my_seed_used

    def test_folded_hands_are_checked_without_their_openings(self) -> None:
        """Seats 2 and 3 fold: seat 1 checks its own cards and the up cards; seat 2 checks its
        own folded cards too, whose openings nobody else ever sees."""
        hand = honest(2, folds={2: 4, 3: 5})
        proof = hand.proof()
        shown = {o.draw for o in proof.openings}
        down_of_2 = {d.draw for d in hand.draws if d.seat == 2 and not d.up}
        assert not shown & down_of_2
        for seat in (1, 2):
            verdict = check(hand, seat)
            assert verdict.ok, verdict.problems

    def test_burns_a_reshuffle_and_a_community_card_follow_the_rule(self) -> None:
        """Seven players with burns (the burned cards shuffled back before 7th street) and
        eight (a community card): every position still checks."""
        seven = honest(3, players=7, burn_cards=True)
        assert any(getattr(e, "count", None) for e in seven.events)  # BurnsReshuffled
        eight = honest(4, players=8, burn_cards=True)
        assert any(type(e).__name__ == "CommunityCardDealt" for e in eight.events)
        for hand in (seven, eight):
            assert check(hand, 1).ok, check(hand, 1).problems

    def test_no_player_seed_still_checks_positions(self) -> None:
        """Without any player seed the order follows the dealer's seed alone, and checks."""
        hand = honest(5, seeded=())
        verdict = check(hand, 1)
        assert verdict.ok and verdict.seeds == 0 and not verdict.my_seed_used

    def test_a_seed_the_dealer_dropped_is_not_a_plain_verified(self) -> None:
        """Seat 2's opening was refused after the dealer received it (seat 2 withheld, as
        the dealer tells it): the cards check, but the order rests on the dealer, a separate
        outcome with a warning saying why. Seat 3's commitment refused, or a seed never
        opened, is a note on a verified hand (the dealer never saw the seed); seat 1's seed is
        in: a plain verified."""
        hand = honest(18, seeded=(1, 2), withheld=(2,))
        refused = OwnSeed(seed=hand.seeds["p2"], committed=True, opened=False,
                          refused="OpenSeed: seed_too_late")
        two = check(hand, 2, seed=refused)
        assert two.outcome is Outcome.WITHOUT_YOUR_SEED and not two.ok, two.problems
        assert "refused it (OpenSeed: seed_too_late) after receiving it" in two.seed_note
        assert "WITHOUT YOUR SEED" in two.summary() and "rests on the dealer" in two.summary()
        three = check(hand, 3, seed=OwnSeed(seed=bytes(32), committed=False, opened=False,
                                            refused="CommitSeed: seed_too_late"))
        assert three.outcome is Outcome.VERIFIED
        assert "without your seed: the dealer refused its commitment (CommitSeed: " \
            "seed_too_late) before seeing it" in three.summary()
        unopened = check(hand, 2, seed=replace(refused, refused=""))
        assert unopened.ok and "not opened before the deal" in unopened.summary()
        assert check(hand, 1).outcome is Outcome.VERIFIED and not check(hand, 1).seed_note
        assert check(hand, 3).outcome is Outcome.VERIFIED  # gave no seed: nothing dropped

    def test_a_hand_without_a_card_commitment_is_unverifiable(self) -> None:
        """A hand dealt before the scheme, for a player who gave no seed for it, is reported
        as not verifiable; when the dealer took the player's seed for the hand it had to
        commit to its cards, so leaving the commitment out fails."""
        hand = deal_hand(random.Random(6))
        verdict = check(hand, 3)
        assert verdict.outcome is Outcome.UNVERIFIABLE and "not verifiable" in verdict.summary()
        dropped = check(hand, 1)
        assert dropped.outcome is Outcome.FAILED, dropped
        assert "took your seed for this hand but published no per-card commitment" in \
            dropped.problems[0]
        unseen = check(hand, 1, seed=replace(hand.seed("p1"), committed=False))
        assert unseen.outcome is Outcome.UNVERIFIABLE


def _first_down(hand: DealtHand, seat: int = 1) -> int:
    return next(i for i, d in enumerate(hand.draws) if d.seat == seat and not d.up)


class TestCheating:
    def test_a_card_swapped_after_the_commitment_is_caught(self) -> None:
        """The dealer gives seat 1 another card than the committed one, with an opening
        that claims it: the opening does not match the root."""
        hand = honest(7)
        mine = hand.own(1)
        good = mine.openings[0]
        assert good is not None
        other = next(c for c in range(52) if c not in mine.down)
        forged = CardOpening(position=good.position, card=other, salt=good.salt,
                             path=good.path)
        verdict = check(hand, mine=replace(mine, down=(other, *mine.down[1:]),
                                           openings=(forged, *mine.openings[1:])))
        assert verdict.outcome is Outcome.FAILED
        assert "does not match the commitment" in verdict.problems[0]

    def test_a_card_from_another_position_is_caught(self) -> None:
        """The dealer deals seat 1 a card committed elsewhere, with its honest opening."""
        hand = honest(8)
        mine = hand.own(1)
        draw = hand.draws[_first_down(hand)]
        position = next(p for p in range(52) if p != draw.item and hand.deck.base[p]
                        not in {d.item for d in hand.cards})
        opening = hand.deck.opening(position)
        verdict = check(hand, mine=replace(mine, down=(opening.card, *mine.down[1:]),
                                           openings=(opening, *mine.openings[1:])))
        assert verdict.outcome is Outcome.FAILED
        assert "not at the position the deal rule gives" in verdict.problems[0]

    def test_a_withheld_opening_is_caught(self) -> None:
        """No opening for a down card fails the check."""
        hand = honest(9)
        mine = hand.own(1)
        verdict = check(hand, mine=replace(mine, openings=(None, *mine.openings[1:])))
        assert "sent no opening" in verdict.problems[0]

    def test_the_check_is_against_the_commitment_seen_live(self) -> None:
        """The record fetched after the hand shows another card commitment than the
        HandStarted the player saw before its first card (a history rewritten with a proof
        to match): the check fails, whatever the later copy proves."""
        hand = honest(19)
        started = next(e for e in hand.events if isinstance(e, HandStarted))
        live = started.card_commitment
        assert check(hand, 1, seen_commitment=live).ok
        verdict = check(hand, 1, seen_commitment="0" * 64)
        assert verdict.outcome is Outcome.FAILED
        assert "another card commitment than the HandStarted seen live" in verdict.problems[0]
        assert check(hand, 1, seen_commitment="").outcome is Outcome.FAILED

    def test_a_changed_seed_is_caught(self) -> None:
        """A seed that does not open its commitment, or an order without the player's seed
        although the dealer took it, fails."""
        hand = honest(10)
        assert hand.proof().seeds
        forged = tuple((p, bytes(32) if p == "p2" else s) for p, s in hand.opened)
        assert "p2's seed does not open" in check(
            hand, proof=replace(hand.proof(), seeds=forged)).problems[0]
        dropped = tuple((p, None if p == "p1" else s) for p, s in hand.opened)
        assert "not in the deal order" in check(
            hand, proof=replace(hand.proof(), seeds=dropped)).problems[0]

    def test_a_dropped_seed_commitment_is_caught(self) -> None:
        """The dealer left the player's commitment out of the card commitment."""
        hand = honest(11)
        header = replace(hand.proof().header, seeds=tuple(
            (p, c) for p, c in hand.proof().header.seeds if p != "p1"))
        started = hand.events[0]
        assert isinstance(started, HandStarted)
        events = [replace(started, card_commitment=header.commitment), *hand.events[1:]]
        proof = replace(hand.proof(), header=header, seeds=tuple(
            (p, s) for p, s in hand.opened if p != "p1"))
        verdict = check(hand, proof=proof, events=events)
        assert "your seed commitment is not in the card commitment" in verdict.problems

    def test_another_deck_than_the_committed_one_is_caught(self) -> None:
        """A proof with another header than the one published at hand start fails."""
        hand = honest(12)
        other = honest(13)
        proof = replace(hand.proof(), header=other.proof().header)
        assert "does not match the card commitment" in check(hand, proof=proof).problems[0]

    def test_a_wrong_public_opening_is_caught(self) -> None:
        """An up card whose public opening proves another position fails, as does a missing
        one, and an opening published for a card never shown."""
        hand = honest(14, folds={3: 4})
        proof = hand.proof()
        first, *rest = proof.openings
        moved = PublicOpening(draw=first.draw, opening=hand.deck.opening(
            (first.opening.position + 1) % 52))
        assert check(hand, proof=replace(proof, openings=(moved, *rest))).problems
        assert "no public opening" in check(
            hand, proof=replace(proof, openings=tuple(rest))).problems[0]
        hidden = next(d for d in hand.draws if d.seat == 3 and not d.up)
        leaked = PublicOpening(draw=hidden.draw, opening=hand.deck.opening(hidden.item))
        assert "never shown" in check(
            hand, proof=replace(proof, openings=(*proof.openings, leaked))).problems[-1]

    def test_a_record_that_breaks_the_deal_rule_is_caught(self) -> None:
        """Two down cards swapped between seats in the public record break the rule."""
        hand = honest(15)
        events = list(hand.events)
        i = next(i for i, e in enumerate(events) if isinstance(e, DownCardDealt))
        first = events[i]
        assert isinstance(first, DownCardDealt)
        events[i] = replace(first, seat=2)
        verdict = check(hand, events=events)
        assert "breaks the deal rule" in verdict.problems[0]

    def test_the_dealer_seed_must_open(self) -> None:
        """A dealer seed that does not open its commitment fails; a missing one too."""
        hand = honest(16)
        assert "dealer's seed does not open" in check(
            hand, proof=replace(hand.proof(), dealer_seed=bytes(32))).problems[0]
        assert "did not open its seed" in check(
            hand, proof=replace(hand.proof(), complete=False, dealer_seed=None)).problems[0]


@pytest.mark.parametrize("seat", [1, 2])
def test_a_verdict_summary_names_no_card(seat: int) -> None:
    """The one-line summary shows counts, never a card."""
    hand = honest(17)
    text = check(hand, seat).summary()
    assert text.startswith("hand 1: verified")
    assert not re.search(r"(?<![A-Za-z0-9])[2-9TJQKA][cdhs](?![A-Za-z0-9])", text)


def test_without_a_copy_of_the_seed_the_summary_says_not_checked() -> None:
    """``stud replay verify-mine`` keeps no seed: the summary says whether a seed under the
    player's name is in the order and that it was not checked, never "with your seed"."""
    hand = honest(20)
    for seat, under in ((1, "one under your name"), (3, "none under your name")):
        verdict = verify_mine(table_id=TABLE, player_id=f"p{seat}", events=hand.events,
                              burn_cards=hand.config.burn_cards, proof=hand.proof(),
                              mine=hand.own(seat), seed_known=False)
        assert verdict.ok and not verdict.seed_checked
        assert verdict.summary().endswith(f"2 player seeds, {under}; your seed not checked)")
    assert check(hand, 3).summary().endswith("2 player seeds, without your seed)")


def test_without_a_copy_of_the_seed_a_withheld_commitment_is_not_a_plain_verified() -> None:
    """Issue 29, G7: the dealer dropped p2's seed (its commitment is in the header, its
    opening withheld). The live check says ``verified_without_your_seed``; the re-check,
    with no copy of the seed, must say so too, never a plain verified. A player who gave no
    seed at all (p3) still gets a plain verified."""
    hand = honest(18, seeded=(1, 2), withheld=(2,))
    recheck = verify_mine(table_id=TABLE, player_id="p2", events=hand.events,
                          burn_cards=hand.config.burn_cards, proof=hand.proof(),
                          mine=hand.own(2), seed_known=False)
    assert recheck.outcome is Outcome.WITHOUT_YOUR_SEED and not recheck.ok
    assert not recheck.seed_checked and not recheck.my_seed_listed
    assert "committed" in recheck.seed_note and "withheld" in recheck.seed_note
    assert "WITHOUT YOUR SEED" in recheck.summary()
    for seat in (1, 3):
        verdict = verify_mine(table_id=TABLE, player_id=f"p{seat}", events=hand.events,
                              burn_cards=hand.config.burn_cards, proof=hand.proof(),
                              mine=hand.own(seat), seed_known=False)
        assert verdict.outcome is Outcome.VERIFIED, (seat, verdict.summary())
