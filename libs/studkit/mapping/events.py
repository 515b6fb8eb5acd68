"""Protobuf <-> rules events (``events.proto``): every event in the TableEvent oneof."""

from __future__ import annotations

from typing import Any, Final, assert_never

from google.protobuf.message import Message

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
_ONEOF_FIELDS: Final[dict[str, str]] = {
    f.message_type.name: f.name
    for f in epb.TableEvent.DESCRIPTOR.oneofs_by_name["event"].fields
}
"""A message's name (e.g. ``"HandStarted"``) -> the TableEvent oneof field holding it."""


def event_to_proto(event: Event) -> epb.TableEvent:
    """The wire form of a rules event, wrapped in the TableEvent oneof."""
    typed = event_message(event)
    return epb.TableEvent(**{_ONEOF_FIELDS[typed.DESCRIPTOR.name]: typed})


def event_message(event: Event) -> Message:
    """The typed message of a rules event (the TableEvent oneof's case that
    :func:`event_to_proto` wraps it in): what an envelope's payload holds."""
    cards = cards_to_proto
    match event:
        case TableOpened():
            return epb.TableOpened(table_id=event.table_id,
                                   config=config_to_proto(event.config))
        case PlayerSeated():
            return epb.PlayerSeated(
                seat=event.seat, player_id=event.player_id, stack=event.stack)
        case PlayerLeft():
            return epb.PlayerLeft(
                seat=event.seat, player_id=event.player_id, stack=event.stack)
        case PlayerSatOut():
            return epb.PlayerSatOut(seat=event.seat)
        case PlayerSatIn():
            return epb.PlayerSatIn(seat=event.seat)
        case ChipsAdded():
            return epb.ChipsAdded(seat=event.seat, amount=event.amount)
        case HandStarted():
            return epb.HandStarted(
                hand_number=event.hand_number, seats=event.seats,
                deck_commitment=event.deck_commitment, card_commitment=event.card_commitment)
        case AntePosted():
            return epb.AntePosted(seat=event.seat, amount=event.amount)
        case CardBurned():
            return epb.CardBurned()
        case BurnsReshuffled():
            return epb.BurnsReshuffled(count=event.count)
        case DownCardDealt():
            down = epb.DownCardDealt(seat=event.seat, street=street_to_proto(event.street))
            if event.card is not None:
                down.card.CopyFrom(card_to_proto(event.card))
            return down
        case UpCardDealt():
            return epb.UpCardDealt(
                seat=event.seat, street=street_to_proto(event.street),
                card=card_to_proto(event.card))
        case CommunityCardDealt():
            return epb.CommunityCardDealt(card=card_to_proto(event.card))
        case BringInPosted():
            return epb.BringInPosted(seat=event.seat, amount=event.amount)
        case Completed():
            return epb.Completed(seat=event.seat, amount=event.amount, to=event.to)
        case BetMade():
            return epb.BetMade(seat=event.seat, amount=event.amount, to=event.to)
        case Raised():
            return epb.Raised(seat=event.seat, amount=event.amount, to=event.to)
        case Called():
            return epb.Called(seat=event.seat, amount=event.amount)
        case Checked():
            return epb.Checked(seat=event.seat)
        case Folded():
            return epb.Folded(seat=event.seat)
        case ActionTimedOut():
            return epb.ActionTimedOut(seat=event.seat)
        case UncalledBetReturned():
            return epb.UncalledBetReturned(seat=event.seat, amount=event.amount)
        case HandExposed():
            return epb.HandExposed(seat=event.seat, down=cards(event.down))
        case HandShown():
            return epb.HandShown(seat=event.seat, down=cards(event.down))
        case HandMucked():
            return epb.HandMucked(seat=event.seat, down=cards(event.down))
        case PotAwarded():
            return epb.PotAwarded(
                pot=event.pot, seat=event.seat, amount=event.amount,
                share=_SHARES[event.share], hand=event.hand)
        case HandEnded():
            return epb.HandEnded(hand_number=event.hand_number)
        case RakeTaken():
            return epb.RakeTaken(amount=event.amount, pots=event.pots)
        case HandVoided():
            return epb.HandVoided(hand_number=event.hand_number, reason=event.reason)
        case StakesChanged():
            return epb.StakesChanged(
                small_bet=event.small_bet, big_bet=event.big_bet, ante=event.ante,
                bring_in=event.bring_in)
        case _:
            assert_never(event)


def event_from_proto(msg: epb.TableEvent) -> Event:
    """The rules event a TableEvent carries. Field paths in errors start at the oneof case,
    e.g. ``up_card_dealt.card.suit``; an unset oneof is ``event``."""
    kind = msg.WhichOneof("event")
    if kind is None:
        raise _no_event()
    return event_from_message(kind, getattr(msg, kind))


def _no_event() -> BadRequest:
    return BadRequest("event", "no event set (missing, or a kind this reader predates)")


def event_from_message(kind: str, m: Any) -> Event:
    """The rules event of the typed message ``m`` of the TableEvent oneof's case ``kind``
    (e.g. ``"up_card_dealt"``, the name error paths start at): :func:`event_from_proto`
    without the wrapper, for a reader that parsed the typed message itself."""
    f = kind

    def seat(value: int) -> int:
        return check_seat(value, f"{f}.seat")

    def amount(value: int, name: str = "amount") -> int:
        return check_amount(value, f"{f}.{name}")

    def player(value: str) -> str:
        return check_ident(value, f"{f}.player_id")

    match kind:
        case "table_opened":
            if not m.HasField("config"):
                raise missing(f"{f}.config")
            return TableOpened(table_id=check_ident(m.table_id, f"{f}.table_id"),
                               config=config_from_proto(m.config, f"{f}.config"))
        case "player_seated":
            return PlayerSeated(seat=seat(m.seat),
                                player_id=player(m.player_id),
                                stack=amount(m.stack, "stack"))
        case "player_left":
            return PlayerLeft(seat=seat(m.seat),
                              player_id=player(m.player_id),
                              stack=amount(m.stack, "stack"))
        case "player_sat_out":
            return PlayerSatOut(seat=seat(m.seat))
        case "player_sat_in":
            return PlayerSatIn(seat=seat(m.seat))
        case "chips_added":
            return ChipsAdded(seat=seat(m.seat),
                              amount=amount(m.amount))
        case "hand_started":
            return HandStarted(
                hand_number=check_hand_number(m.hand_number, f"{f}.hand_number"),
                seats=check_seats(m.seats, f"{f}.seats"),
                deck_commitment=m.deck_commitment,
                card_commitment=m.card_commitment)
        case "ante_posted":
            return AntePosted(seat=seat(m.seat),
                              amount=amount(m.amount))
        case "card_burned":
            return CardBurned()
        case "burns_reshuffled":
            return BurnsReshuffled(count=m.count)
        case "down_card_dealt":
            down = m
            return DownCardDealt(
                seat=seat(down.seat), street=street_from_proto(down.street, f"{f}.street"),
                card=card_from_proto(down.card, f"{f}.card") if down.HasField("card") else None)
        case "up_card_dealt":
            return UpCardDealt(seat=seat(m.seat),
                               street=street_from_proto(m.street, f"{f}.street"),
                               card=_required_card(m, f))
        case "community_card_dealt":
            return CommunityCardDealt(card=_required_card(m, f))
        case "bring_in_posted":
            return BringInPosted(seat=seat(m.seat),
                                 amount=amount(m.amount))
        case "completed":
            return Completed(seat=seat(m.seat), amount=amount(m.amount),
                             to=amount(m.to, "to"))
        case "bet_made":
            return BetMade(seat=seat(m.seat), amount=amount(m.amount),
                           to=amount(m.to, "to"))
        case "raised":
            return Raised(seat=seat(m.seat), amount=amount(m.amount),
                          to=amount(m.to, "to"))
        case "called":
            return Called(seat=seat(m.seat), amount=amount(m.amount))
        case "checked":
            return Checked(seat=seat(m.seat))
        case "folded":
            return Folded(seat=seat(m.seat))
        case "action_timed_out":
            return ActionTimedOut(seat=seat(m.seat))
        case "uncalled_bet_returned":
            return UncalledBetReturned(seat=seat(m.seat),
                                       amount=amount(m.amount))
        case "hand_exposed":
            return HandExposed(seat=seat(m.seat),
                               down=cards_from_proto(m.down, f"{f}.down"))
        case "hand_shown":
            return HandShown(seat=seat(m.seat),
                             down=cards_from_proto(m.down, f"{f}.down"))
        case "hand_mucked":
            return HandMucked(seat=seat(m.seat),
                              down=cards_from_proto(m.down, f"{f}.down"))
        case "pot_awarded":
            award = m
            return PotAwarded(pot=award.pot, seat=seat(award.seat), amount=amount(award.amount),
                              share=enum_value(award.share, _SHARES_IN, f"{f}.share"),
                              hand=award.hand)
        case "hand_ended":
            return HandEnded(
                hand_number=check_hand_number(m.hand_number, f"{f}.hand_number"))
        case "rake_taken":
            taken = m
            pots = tuple(amount(p, f"pots[{i}]") for i, p in enumerate(taken.pots))
            if sum(pots) != taken.amount:
                raise BadRequest(f"{f}.pots", "the parts must add up to the amount")
            return RakeTaken(amount=amount(taken.amount), pots=pots)
        case "hand_voided":
            if not m.reason.strip():
                raise missing(f"{f}.reason")
            return HandVoided(
                hand_number=check_hand_number(m.hand_number, f"{f}.hand_number"),
                reason=m.reason)
        case "stakes_changed":
            stakes = m
            return StakesChanged(small_bet=amount(stakes.small_bet, "small_bet"),
                                 big_bet=amount(stakes.big_bet, "big_bet"),
                                 ante=amount(stakes.ante, "ante"),
                                 bring_in=amount(stakes.bring_in, "bring_in"))
        case _:
            raise _no_event()


def _required_card(parent: epb.UpCardDealt | epb.CommunityCardDealt, field: str) -> Card:
    if not parent.HasField("card"):
        raise missing(f"{field}.card")
    return card_from_proto(parent.card, f"{field}.card")
