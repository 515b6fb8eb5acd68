"""Protobuf <-> rules events (``events.proto``): every event in the TableEvent oneof."""

from __future__ import annotations

from typing import Final, assert_never

from rules.cards import Card
from rules.events import (
    ActionTimedOut,
    AntePosted,
    BetMade,
    BringInPosted,
    BurnsReshuffled,
    Called,
    CardBurned,
    Checked,
    ChipsAdded,
    CommunityCardDealt,
    Completed,
    DownCardDealt,
    Event,
    Folded,
    HandEnded,
    HandExposed,
    HandMucked,
    HandShown,
    HandStarted,
    HandVoided,
    PlayerLeft,
    PlayerSatIn,
    PlayerSatOut,
    PlayerSeated,
    PotAwarded,
    Raised,
    RakeTaken,
    Share,
    StakesChanged,
    TableOpened,
    UncalledBetReturned,
    UpCardDealt,
)
from stud.v1 import events_pb2 as epb
from studkit.errors import BadRequest
from studkit.mapping.common import (
    card_from_proto,
    card_to_proto,
    cards_from_proto,
    cards_to_proto,
    check_amount,
    check_hand_number,
    check_ident,
    check_seat,
    check_seats,
    config_from_proto,
    config_to_proto,
    enum_value,
    inverse,
    missing,
    street_from_proto,
    street_to_proto,
)

_SHARES: Final[dict[Share, epb.Share]] = {
    Share.WHOLE: epb.SHARE_WHOLE, Share.HIGH: epb.SHARE_HIGH, Share.LOW: epb.SHARE_LOW,
}
_SHARES_IN: Final = inverse(_SHARES)


def event_to_proto(event: Event) -> epb.TableEvent:
    """The wire form of a rules event, wrapped in the TableEvent oneof."""
    t = epb.TableEvent
    cards = cards_to_proto
    match event:
        case TableOpened():
            return t(table_opened=epb.TableOpened(
                table_id=event.table_id, config=config_to_proto(event.config)))
        case PlayerSeated():
            return t(player_seated=epb.PlayerSeated(
                seat=event.seat, player_id=event.player_id, stack=event.stack))
        case PlayerLeft():
            return t(player_left=epb.PlayerLeft(
                seat=event.seat, player_id=event.player_id, stack=event.stack))
        case PlayerSatOut():
            return t(player_sat_out=epb.PlayerSatOut(seat=event.seat))
        case PlayerSatIn():
            return t(player_sat_in=epb.PlayerSatIn(seat=event.seat))
        case ChipsAdded():
            return t(chips_added=epb.ChipsAdded(seat=event.seat, amount=event.amount))
        case HandStarted():
            return t(hand_started=epb.HandStarted(
                hand_number=event.hand_number, seats=event.seats,
                deck_commitment=event.deck_commitment, card_commitment=event.card_commitment))
        case AntePosted():
            return t(ante_posted=epb.AntePosted(seat=event.seat, amount=event.amount))
        case CardBurned():
            return t(card_burned=epb.CardBurned())
        case BurnsReshuffled():
            return t(burns_reshuffled=epb.BurnsReshuffled(count=event.count))
        case DownCardDealt():
            down = epb.DownCardDealt(seat=event.seat, street=street_to_proto(event.street))
            if event.card is not None:
                down.card.CopyFrom(card_to_proto(event.card))
            return t(down_card_dealt=down)
        case UpCardDealt():
            return t(up_card_dealt=epb.UpCardDealt(
                seat=event.seat, street=street_to_proto(event.street),
                card=card_to_proto(event.card)))
        case CommunityCardDealt():
            return t(community_card_dealt=epb.CommunityCardDealt(card=card_to_proto(event.card)))
        case BringInPosted():
            return t(bring_in_posted=epb.BringInPosted(seat=event.seat, amount=event.amount))
        case Completed():
            return t(completed=epb.Completed(seat=event.seat, amount=event.amount, to=event.to))
        case BetMade():
            return t(bet_made=epb.BetMade(seat=event.seat, amount=event.amount, to=event.to))
        case Raised():
            return t(raised=epb.Raised(seat=event.seat, amount=event.amount, to=event.to))
        case Called():
            return t(called=epb.Called(seat=event.seat, amount=event.amount))
        case Checked():
            return t(checked=epb.Checked(seat=event.seat))
        case Folded():
            return t(folded=epb.Folded(seat=event.seat))
        case ActionTimedOut():
            return t(action_timed_out=epb.ActionTimedOut(seat=event.seat))
        case UncalledBetReturned():
            return t(uncalled_bet_returned=epb.UncalledBetReturned(
                seat=event.seat, amount=event.amount))
        case HandExposed():
            return t(hand_exposed=epb.HandExposed(seat=event.seat, down=cards(event.down)))
        case HandShown():
            return t(hand_shown=epb.HandShown(seat=event.seat, down=cards(event.down)))
        case HandMucked():
            return t(hand_mucked=epb.HandMucked(seat=event.seat, down=cards(event.down)))
        case PotAwarded():
            return t(pot_awarded=epb.PotAwarded(
                pot=event.pot, seat=event.seat, amount=event.amount,
                share=_SHARES[event.share], hand=event.hand))
        case HandEnded():
            return t(hand_ended=epb.HandEnded(hand_number=event.hand_number))
        case RakeTaken():
            return t(rake_taken=epb.RakeTaken(amount=event.amount, pots=event.pots))
        case HandVoided():
            return t(hand_voided=epb.HandVoided(hand_number=event.hand_number,
                                                reason=event.reason))
        case StakesChanged():
            return t(stakes_changed=epb.StakesChanged(
                small_bet=event.small_bet, big_bet=event.big_bet, ante=event.ante,
                bring_in=event.bring_in))
        case _:
            assert_never(event)


def event_from_proto(msg: epb.TableEvent) -> Event:
    """The rules event a TableEvent carries. Field paths in errors start at the oneof case,
    e.g. ``up_card_dealt.card.suit``; an unset oneof is ``event``."""
    kind = msg.WhichOneof("event")
    f = str(kind)

    def seat(value: int) -> int:
        return check_seat(value, f"{f}.seat")

    def amount(value: int, name: str = "amount") -> int:
        return check_amount(value, f"{f}.{name}")

    def player(value: str) -> str:
        return check_ident(value, f"{f}.player_id")

    match kind:
        case "table_opened":
            if not msg.table_opened.HasField("config"):
                raise missing(f"{f}.config")
            return TableOpened(table_id=check_ident(msg.table_opened.table_id, f"{f}.table_id"),
                               config=config_from_proto(msg.table_opened.config, f"{f}.config"))
        case "player_seated":
            return PlayerSeated(seat=seat(msg.player_seated.seat),
                                player_id=player(msg.player_seated.player_id),
                                stack=amount(msg.player_seated.stack, "stack"))
        case "player_left":
            return PlayerLeft(seat=seat(msg.player_left.seat),
                              player_id=player(msg.player_left.player_id),
                              stack=amount(msg.player_left.stack, "stack"))
        case "player_sat_out":
            return PlayerSatOut(seat=seat(msg.player_sat_out.seat))
        case "player_sat_in":
            return PlayerSatIn(seat=seat(msg.player_sat_in.seat))
        case "chips_added":
            return ChipsAdded(seat=seat(msg.chips_added.seat),
                              amount=amount(msg.chips_added.amount))
        case "hand_started":
            return HandStarted(
                hand_number=check_hand_number(msg.hand_started.hand_number, f"{f}.hand_number"),
                seats=check_seats(msg.hand_started.seats, f"{f}.seats"),
                deck_commitment=msg.hand_started.deck_commitment,
                card_commitment=msg.hand_started.card_commitment)
        case "ante_posted":
            return AntePosted(seat=seat(msg.ante_posted.seat),
                              amount=amount(msg.ante_posted.amount))
        case "card_burned":
            return CardBurned()
        case "burns_reshuffled":
            return BurnsReshuffled(count=msg.burns_reshuffled.count)
        case "down_card_dealt":
            down = msg.down_card_dealt
            return DownCardDealt(
                seat=seat(down.seat), street=street_from_proto(down.street, f"{f}.street"),
                card=card_from_proto(down.card, f"{f}.card") if down.HasField("card") else None)
        case "up_card_dealt":
            return UpCardDealt(seat=seat(msg.up_card_dealt.seat),
                               street=street_from_proto(msg.up_card_dealt.street, f"{f}.street"),
                               card=_required_card(msg.up_card_dealt, f))
        case "community_card_dealt":
            return CommunityCardDealt(card=_required_card(msg.community_card_dealt, f))
        case "bring_in_posted":
            return BringInPosted(seat=seat(msg.bring_in_posted.seat),
                                 amount=amount(msg.bring_in_posted.amount))
        case "completed":
            return Completed(seat=seat(msg.completed.seat), amount=amount(msg.completed.amount),
                             to=amount(msg.completed.to, "to"))
        case "bet_made":
            return BetMade(seat=seat(msg.bet_made.seat), amount=amount(msg.bet_made.amount),
                           to=amount(msg.bet_made.to, "to"))
        case "raised":
            return Raised(seat=seat(msg.raised.seat), amount=amount(msg.raised.amount),
                          to=amount(msg.raised.to, "to"))
        case "called":
            return Called(seat=seat(msg.called.seat), amount=amount(msg.called.amount))
        case "checked":
            return Checked(seat=seat(msg.checked.seat))
        case "folded":
            return Folded(seat=seat(msg.folded.seat))
        case "action_timed_out":
            return ActionTimedOut(seat=seat(msg.action_timed_out.seat))
        case "uncalled_bet_returned":
            return UncalledBetReturned(seat=seat(msg.uncalled_bet_returned.seat),
                                       amount=amount(msg.uncalled_bet_returned.amount))
        case "hand_exposed":
            return HandExposed(seat=seat(msg.hand_exposed.seat),
                               down=cards_from_proto(msg.hand_exposed.down, f"{f}.down"))
        case "hand_shown":
            return HandShown(seat=seat(msg.hand_shown.seat),
                             down=cards_from_proto(msg.hand_shown.down, f"{f}.down"))
        case "hand_mucked":
            return HandMucked(seat=seat(msg.hand_mucked.seat),
                              down=cards_from_proto(msg.hand_mucked.down, f"{f}.down"))
        case "pot_awarded":
            award = msg.pot_awarded
            return PotAwarded(pot=award.pot, seat=seat(award.seat), amount=amount(award.amount),
                              share=enum_value(award.share, _SHARES_IN, f"{f}.share"),
                              hand=award.hand)
        case "hand_ended":
            return HandEnded(
                hand_number=check_hand_number(msg.hand_ended.hand_number, f"{f}.hand_number"))
        case "rake_taken":
            taken = msg.rake_taken
            pots = tuple(amount(p, f"pots[{i}]") for i, p in enumerate(taken.pots))
            if sum(pots) != taken.amount:
                raise BadRequest(f"{f}.pots", "the parts must add up to the amount")
            return RakeTaken(amount=amount(taken.amount), pots=pots)
        case "hand_voided":
            if not msg.hand_voided.reason.strip():
                raise missing(f"{f}.reason")
            return HandVoided(
                hand_number=check_hand_number(msg.hand_voided.hand_number, f"{f}.hand_number"),
                reason=msg.hand_voided.reason)
        case "stakes_changed":
            stakes = msg.stakes_changed
            return StakesChanged(small_bet=amount(stakes.small_bet, "small_bet"),
                                 big_bet=amount(stakes.big_bet, "big_bet"),
                                 ante=amount(stakes.ante, "ante"),
                                 bring_in=amount(stakes.bring_in, "bring_in"))
        case _:
            raise BadRequest("event", "no event set (missing, or a kind this reader predates)")


def _required_card(parent: epb.UpCardDealt | epb.CommunityCardDealt, field: str) -> Card:
    if not parent.HasField("card"):
        raise missing(f"{field}.card")
    return card_from_proto(parent.card, f"{field}.card")
