"""Protobuf <-> rules commands (``commands.proto``): every command in the Command oneof, so
that commands can be logged and transported. Clients use TableService's RPCs instead."""

from __future__ import annotations

from collections.abc import Iterable
from typing import assert_never

from rules.commands import (
    AddChips,
    Bet,
    Call,
    ChangeStakes,
    Check,
    Command,
    Complete,
    DealStreet,
    DealtCard,
    Fold,
    LeaveSeat,
    OpenTable,
    PostBringIn,
    Raise,
    RevealedHand,
    RevealHands,
    Showdown,
    SitDown,
    SitIn,
    SitOut,
    StartHand,
    TimeOut,
    VoidHand,
)
from stud.v1 import commands_pb2 as cpb
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
    missing,
)


def command_to_proto(command: Command) -> cpb.Command:
    """The wire form of a rules command, wrapped in the Command oneof."""
    c = cpb.Command
    match command:
        case OpenTable():
            return c(open_table=cpb.OpenTable(
                table_id=command.table_id, config=config_to_proto(command.config)))
        case SitDown():
            return c(sit_down=cpb.SitDown(
                seat=command.seat, player_id=command.player_id, stack=command.stack))
        case LeaveSeat():
            return c(leave_seat=cpb.LeaveSeat(seat=command.seat))
        case SitOut():
            return c(sit_out=cpb.SitOut(seat=command.seat))
        case SitIn():
            return c(sit_in=cpb.SitIn(seat=command.seat))
        case AddChips():
            return c(add_chips=cpb.AddChips(seat=command.seat, amount=command.amount))
        case StartHand():
            return c(start_hand=cpb.StartHand(
                hand_number=command.hand_number, deck_commitment=command.deck_commitment,
                card_commitment=command.card_commitment))
        case DealStreet():
            return c(deal_street=cpb.DealStreet(
                cards=[_dealt_card_to_proto(d) for d in command.cards], burned=command.burned,
                reshuffled_burns=command.reshuffled_burns))
        case PostBringIn():
            return c(post_bring_in=cpb.PostBringIn(seat=command.seat))
        case Complete():
            return c(complete=cpb.Complete(seat=command.seat, to=command.to))
        case Bet():
            return c(bet=cpb.Bet(seat=command.seat, to=command.to))
        case Raise():
            return c(raise_=cpb.Raise(seat=command.seat, to=command.to))
        case Call():
            return c(call=cpb.Call(seat=command.seat))
        case Check():
            return c(check=cpb.Check(seat=command.seat))
        case Fold():
            return c(fold=cpb.Fold(seat=command.seat))
        case TimeOut():
            return c(time_out=cpb.TimeOut(seat=command.seat))
        case RevealHands():
            return c(reveal_hands=cpb.RevealHands(hands=_revealed_to_proto(command.hands)))
        case Showdown():
            return c(showdown=cpb.Showdown(hands=_revealed_to_proto(command.hands),
                                           muck_requests=sorted(command.muck_requests)))
        case VoidHand():
            return c(void_hand=cpb.VoidHand(reason=command.reason))
        case ChangeStakes():
            return c(change_stakes=cpb.ChangeStakes(
                small_bet=command.small_bet, big_bet=command.big_bet, ante=command.ante,
                bring_in=command.bring_in))
        case _:
            assert_never(command)


def _dealt_card_to_proto(dealt: DealtCard) -> cpb.DealtCard:
    msg = cpb.DealtCard(seat=dealt.seat, up=dealt.up)
    if dealt.card is not None:
        msg.card.CopyFrom(card_to_proto(dealt.card))
    return msg


def _revealed_to_proto(hands: Iterable[RevealedHand]) -> list[cpb.RevealedHand]:
    return [cpb.RevealedHand(seat=h.seat, down=cards_to_proto(h.down)) for h in hands]


def command_from_proto(msg: cpb.Command) -> Command:
    """The rules command a Command carries. Field paths in errors start at the oneof case,
    e.g. ``bet.to``; an unset oneof is ``command``."""
    kind = msg.WhichOneof("command")
    f = str(kind)

    def seat(value: int) -> int:
        return check_seat(value, f"{f}.seat")

    def to(wager: cpb.Complete | cpb.Bet | cpb.Raise) -> int | None:
        return check_amount(wager.to, f"{f}.to") if wager.HasField("to") else None

    match kind:
        case "open_table":
            if not msg.open_table.HasField("config"):
                raise missing(f"{f}.config")
            return OpenTable(table_id=check_ident(msg.open_table.table_id, f"{f}.table_id"),
                             config=config_from_proto(msg.open_table.config, f"{f}.config"))
        case "sit_down":
            return SitDown(seat=seat(msg.sit_down.seat),
                           player_id=check_ident(msg.sit_down.player_id, f"{f}.player_id"),
                           stack=check_amount(msg.sit_down.stack, f"{f}.stack"))
        case "leave_seat":
            return LeaveSeat(seat=seat(msg.leave_seat.seat))
        case "sit_out":
            return SitOut(seat=seat(msg.sit_out.seat))
        case "sit_in":
            return SitIn(seat=seat(msg.sit_in.seat))
        case "add_chips":
            return AddChips(seat=seat(msg.add_chips.seat),
                            amount=check_amount(msg.add_chips.amount, f"{f}.amount"))
        case "start_hand":
            return StartHand(
                hand_number=check_hand_number(msg.start_hand.hand_number, f"{f}.hand_number"),
                deck_commitment=msg.start_hand.deck_commitment,
                card_commitment=msg.start_hand.card_commitment)
        case "deal_street":
            deal = msg.deal_street
            return DealStreet(
                cards=tuple(_dealt_card_from_proto(d, f"{f}.cards[{i}]")
                            for i, d in enumerate(deal.cards)),
                burned=deal.burned, reshuffled_burns=deal.reshuffled_burns)
        case "post_bring_in":
            return PostBringIn(seat=seat(msg.post_bring_in.seat))
        case "complete":
            return Complete(seat=seat(msg.complete.seat), to=to(msg.complete))
        case "bet":
            return Bet(seat=seat(msg.bet.seat), to=to(msg.bet))
        case "raise_":
            return Raise(seat=seat(msg.raise_.seat), to=to(msg.raise_))
        case "call":
            return Call(seat=seat(msg.call.seat))
        case "check":
            return Check(seat=seat(msg.check.seat))
        case "fold":
            return Fold(seat=seat(msg.fold.seat))
        case "time_out":
            return TimeOut(seat=seat(msg.time_out.seat))
        case "reveal_hands":
            return RevealHands(hands=_revealed_from_proto(msg.reveal_hands.hands, f"{f}.hands"))
        case "showdown":
            return Showdown(hands=_revealed_from_proto(msg.showdown.hands, f"{f}.hands"),
                            muck_requests=_seat_set(msg.showdown.muck_requests,
                                                    f"{f}.muck_requests"))
        case "void_hand":
            if not msg.void_hand.reason.strip():
                raise missing(f"{f}.reason")
            return VoidHand(reason=msg.void_hand.reason)
        case "change_stakes":
            stakes = msg.change_stakes
            return ChangeStakes(small_bet=stakes.small_bet, big_bet=stakes.big_bet,
                                ante=stakes.ante, bring_in=stakes.bring_in)
        case _:
            raise BadRequest("command", "no command set (missing, or a kind this reader predates)")


def _dealt_card_from_proto(msg: cpb.DealtCard, field: str) -> DealtCard:
    return DealtCard(
        seat=check_seat(msg.seat, f"{field}.seat", community=True), up=msg.up,
        card=card_from_proto(msg.card, f"{field}.card") if msg.HasField("card") else None)


def _revealed_from_proto(msgs: Iterable[cpb.RevealedHand], field: str) -> tuple[RevealedHand, ...]:
    return tuple(
        RevealedHand(seat=check_seat(h.seat, f"{field}[{i}].seat"),
                     down=cards_from_proto(h.down, f"{field}[{i}].down"))
        for i, h in enumerate(msgs)
    )


def _seat_set(values: Iterable[int], field: str) -> frozenset[int]:
    seats = check_seats(values, field)
    for i, s in enumerate(seats):
        if s in seats[:i]:
            raise BadRequest(f"{field}[{i}]", f"seat {s} repeated")
    return frozenset(seats)
