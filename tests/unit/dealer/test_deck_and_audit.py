"""The deck model, the commitment and the audit, pure: streets are drawn in the rules' dealing
order, the commitment opens only with the exact deck, salt and reshuffle key, and a hand's
public record verifies against its deck exactly when every public card came from it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from dealer.deck import deal_street, down_cards, seat_draws
from dealer.shuffle import new_salt, shuffled
from rules import Card, Event, TableConfig, card_from_index, parse_cards
from rules.betting import ActionKind
from rules.commands import (
    Bet,
    Call,
    Check,
    DealStreet,
    DealtCard,
    Fold,
    PostBringIn,
    RevealedHand,
    Showdown,
)
from rules.driver import TableDriver
from rules.events import HandShown, UpCardDealt
from rules.state import Phase
from studkit.deckproof import (
    DeckInconsistent,
    HandAudit,
    HandDeck,
    StreetDeal,
    commit,
    encode,
    replay,
    verify_commitment,
    verify_hand,
)

TABLE = "t-audit"


def deck_from(text: str = "", table_id: str = TABLE, hand_number: int = 1) -> HandDeck:
    """A deck whose top cards are ``text`` and the rest in index order."""
    top = [c.index for c in parse_cards(text)]
    rest = [i for i in range(52) if i not in top]
    return HandDeck(table_id=table_id, hand_number=hand_number, order=tuple(top + rest),
                    reshuffle_key=tuple(range(52)), salt=bytes(32))


def random_deck(hand_number: int = 1) -> HandDeck:
    return HandDeck(table_id=TABLE, hand_number=hand_number, order=shuffled(),
                    reshuffle_key=shuffled(), salt=new_salt())


def cards(indexes: tuple[int, ...]) -> tuple[Card, ...]:
    return tuple(card_from_index(i) for i in indexes)


def play_hand(deck: HandDeck, stacks: Mapping[int, int], *, config: TableConfig | None = None,
              folds: Mapping[int, int] | None = None, bet_on: int | None = None,
              ) -> tuple[TableDriver, list[StreetDeal]]:
    """Play one hand as the table would: cards from ``deck`` through ``deal_street``, down
    cards hidden in the record, everyone calling or checking except seats in ``folds``
    (seat -> street on which they fold) and a bet by the first actor on ``bet_on``."""
    t = TableDriver(config or TableConfig(), stacks=stacks, table_id=deck.table_id)
    commitment = commit(deck)
    t.start(commitment)
    deals: list[StreetDeal] = []
    folds = folds or {}
    while not t.hand.is_over:
        phase = t.hand.phase
        if phase == Phase.DEALING:
            deal = deal_street(deck, deals, t.plan())
            deals.append(deal)
            t.apply(DealStreet(
                cards=tuple(DealtCard(seat=d.seat, up=d.up,
                                      card=card_from_index(d.card) if d.up else None)
                            for d in deal.cards),
                burned=0 if deal.burn is None else 1, reshuffled_burns=deal.reshuffled))
        elif phase == Phase.BETTING:
            legal = t.legal()
            seat = legal.seat
            street = int(t.hand.street or 3)
            kinds = {a.kind for a in legal.actions}
            folding = {s for s, st in folds.items()
                       if st == street and not t.hand.player(s).folded}
            if ActionKind.BRING_IN in kinds:
                t.apply(PostBringIn(seat=seat))
            elif seat in folding and ActionKind.FOLD in kinds:
                t.apply(Fold(seat=seat))
            elif ActionKind.BET in kinds and seat not in folding and (
                    bet_on == street or folding):
                t.apply(Bet(seat=seat))
            elif ActionKind.CALL in kinds:
                t.apply(Call(seat=seat))
            else:
                t.apply(Check(seat=seat))
        elif phase in (Phase.SHOWDOWN, Phase.REVEAL):
            hands = tuple(RevealedHand(seat=p.seat, down=cards(down_cards(deals, p.seat)))
                          for p in t.hand.players if not p.folded)
            assert phase == Phase.SHOWDOWN
            t.apply(Showdown(hands=hands))
        else:  # pragma: no cover - a hand never waits in another phase
            raise AssertionError(phase)
    return t, deals


class TestDealing:
    def test_third_street_goes_round_three_times_from_the_lowest_seat(self) -> None:
        """RULES E28: seats 1, 3 and 8 get c1, c2, c3 down, c4, c5, c6 down, c7, c8, c9 up;
        when seat 1 folds, 4th street gives c10 to seat 3 and c11 to seat 8."""
        deck = deck_from("2c 3c 4c 5c 6c 7c 9c 8c Tc Jc Qc")
        t, deals = play_hand(deck, {1: 1000, 3: 1000, 8: 1000}, folds={1: 3})
        assert t.hand.player(1).folded
        third = deals[0]
        assert [(d.seat, d.up, str(card_from_index(d.card))) for d in third.cards] == [
            (1, False, "2c"), (3, False, "3c"), (8, False, "4c"),
            (1, False, "5c"), (3, False, "6c"), (8, False, "7c"),
            (1, True, "9c"), (3, True, "8c"), (8, True, "Tc"),
        ]
        fourth = deals[1]
        assert [(d.seat, str(card_from_index(d.card))) for d in fourth.cards] == [
            (3, "Jc"), (8, "Qc")]
        assert [d.index for d in third.cards + fourth.cards] == list(range(11))

    def test_burns_take_a_draw_before_each_later_street(self) -> None:
        """With burn_cards on, 4th to 7th street each start with a burned card."""
        deck = random_deck()
        config = TableConfig(burn_cards=True)
        _t, deals = play_hand(deck, {1: 5000, 2: 5000}, config=config)
        assert [d.burn is not None for d in deals] == [False, True, True, True, True]
        assert replay(deck, deals).drawn == 6 + 4 * 3

    def test_eight_players_reshuffle_burns_and_share_a_community_card(self) -> None:
        """RULES E25(c): eight players to 7th street with burns: stub and burns are shuffled
        together (in reshuffle-key order), one is burned, one community card is dealt."""
        deck = random_deck()
        config = TableConfig(burn_cards=True)
        t, deals = play_hand(deck, dict.fromkeys(range(1, 9), 10_000), config=config)
        seventh = deals[-1]
        assert seventh.reshuffled and seventh.burn is not None
        assert [(d.seat, d.up) for d in seventh.cards] == [(0, True)]
        assert t.hand.is_over
        assert verify_hand(HandAudit(deck=deck, commitment=commit(deck), deals=tuple(deals)),
                           t.events).ok

    def test_replay_detects_a_tampered_record(self) -> None:
        """A stored draw that is not the deck's card at that point is refused."""
        deck = random_deck()
        _t, deals = play_hand(deck, {1: 1000, 2: 1000})
        first = deals[0]
        wrong = dataclasses.replace(first.cards[0], card=(first.cards[0].card + 1) % 52)
        tampered = dataclasses.replace(first, cards=(wrong, *first.cards[1:]))
        with pytest.raises(DeckInconsistent):
            replay(deck, [tampered, *deals[1:]])

    def test_reprs_never_show_cards(self) -> None:
        """Reprs of decks, draws and deals carry no card value or salt (they may be logged)."""
        deck = deck_from("As Ks")
        _t, deals = play_hand(deck, {1: 1000, 2: 1000})
        text = repr(deck) + repr(deals) + repr(seat_draws(deals, 1))
        assert "card=" not in text and "order" not in text and "salt" not in text


class TestCommitment:
    def test_the_commitment_opens_with_the_deck(self) -> None:
        """The commitment verifies for the deck it was made from."""
        deck = random_deck()
        assert verify_commitment(deck, commit(deck))
        assert len(commit(deck)) == 64 and commit(deck) == commit(deck)

    def test_the_encoding_is_canonical(self) -> None:
        """Domain, table, hand number, salt, order and key, separated by '|'."""
        deck = deck_from("2c", hand_number=7)
        assert encode(deck) == (b"stud-hilo-deck-v1|t-audit|7|" + bytes(32) + b"|"
                                + bytes(deck.order) + b"|" + bytes(range(52)))

    @pytest.mark.parametrize("change", ["swap_two_cards", "salt", "reshuffle_key", "hand",
                                        "table"])
    def test_any_change_breaks_it(self, change: str) -> None:
        """Altering any card's position, the salt, the reshuffle key, the hand number or the
        table makes the commitment fail."""
        deck = random_deck()
        commitment = commit(deck)
        order = list(deck.order)
        order[10], order[11] = order[11], order[10]
        key = list(deck.reshuffle_key)
        key[0], key[51] = key[51], key[0]
        salt = bytes([deck.salt[0] ^ 1]) + deck.salt[1:]
        altered = {
            "swap_two_cards": dataclasses.replace(deck, order=tuple(order)),
            "salt": dataclasses.replace(deck, salt=salt),
            "reshuffle_key": dataclasses.replace(deck, reshuffle_key=tuple(key)),
            "hand": dataclasses.replace(deck, hand_number=2),
            "table": dataclasses.replace(deck, table_id="t-other"),
        }[change]
        assert not verify_commitment(altered, commitment)

    def test_a_deck_must_be_a_permutation(self) -> None:
        """A deck with a repeated card cannot even be built."""
        with pytest.raises(ValueError):
            HandDeck(table_id=TABLE, hand_number=1, order=(0,) * 52,
                     reshuffle_key=tuple(range(52)), salt=bytes(32))


def audit_of(deck: HandDeck, deals: list[StreetDeal]) -> HandAudit:
    return HandAudit(deck=deck, commitment=commit(deck), deals=tuple(deals))


def replace_event(events: list[Event], index: int, event: Event) -> list[Event]:
    return [*events[:index], event, *events[index + 1:]]


class TestVerifyHand:
    def test_a_real_hand_verifies(self) -> None:
        """Commitment, dealer log and every public card agree for a hand played to the
        showdown."""
        deck = random_deck()
        t, deals = play_hand(deck, {2: 2000, 5: 2000, 7: 2000}, bet_on=5)
        result = verify_hand(audit_of(deck, deals), t.events)
        assert result.ok, result.problems
        assert result.draws == 21 and result.cards_checked == 4 * 3 + 3 * 3
        assert any(isinstance(e, HandShown) for e in t.events)

    def test_folded_hands_verify_too(self) -> None:
        """A hand where players folded: their draws are accounted for, never shown."""
        deck = random_deck()
        t, deals = play_hand(deck, {1: 2000, 2: 2000, 3: 2000}, folds={2: 4})
        assert t.hand.player(2).folded and len(t.hand.player(2).up) == 2
        assert verify_hand(audit_of(deck, deals), t.events).ok

    def test_an_altered_up_card_fails(self) -> None:
        """An up card in the public record that is not the deck's card at its draw fails."""
        deck = random_deck()
        t, deals = play_hand(deck, {1: 2000, 2: 2000})
        events = list(t.events)
        i = next(i for i, e in enumerate(events) if isinstance(e, UpCardDealt))
        up = events[i]
        assert isinstance(up, UpCardDealt)
        other = card_from_index((up.card.index + 1) % 52)
        result = verify_hand(audit_of(deck, deals),
                             replace_event(events, i, dataclasses.replace(up, card=other)))
        assert not result.ok and "not the deck's card" in result.problems[0]

    def test_an_altered_shown_hand_fails(self) -> None:
        """Down cards shown at the showdown must be the ones dealt to that seat."""
        deck = random_deck()
        t, deals = play_hand(deck, {1: 2000, 2: 2000})
        events = list(t.events)
        i = next(i for i, e in enumerate(events) if isinstance(e, HandShown))
        shown = events[i]
        assert isinstance(shown, HandShown)
        swapped = (shown.down[1], shown.down[0], *shown.down[2:])
        result = verify_hand(audit_of(deck, deals),
                             replace_event(events, i, dataclasses.replace(shown, down=swapped)))
        assert not result.ok

    def test_an_altered_salt_or_card_fails(self) -> None:
        """The revealed deck must open the published commitment."""
        deck = random_deck()
        t, deals = play_hand(deck, {1: 2000, 2: 2000})
        bad_salt = dataclasses.replace(deck, salt=bytes(32))
        assert not verify_hand(HandAudit(deck=bad_salt, commitment=commit(deck),
                                         deals=tuple(deals)), t.events).ok
        order = list(deck.order)
        order[0], order[1] = order[1], order[0]
        swapped = dataclasses.replace(deck, order=tuple(order))
        result = verify_hand(HandAudit(deck=swapped, commitment=commit(deck),
                                       deals=tuple(deals)), t.events)
        assert not result.ok and any("commitment" in p for p in result.problems)

    def test_a_deck_for_another_hand_fails(self) -> None:
        """A deck committed for hand 1 cannot pass for hand 2's."""
        deck = random_deck()
        t, deals = play_hand(deck, {1: 2000, 2: 2000})
        other = dataclasses.replace(deck, hand_number=2)
        assert not verify_hand(HandAudit(deck=other, commitment=commit(other),
                                         deals=tuple(deals)), t.events).ok
