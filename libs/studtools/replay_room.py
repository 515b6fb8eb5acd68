"""The room's events of a table's log as lines a support agent reads (``stud replay room``,
and the settlement line of ``stud replay show``): buy-ins and their refunds, top-ups,
cash-outs, closes, settlements, reconciliations, and a tournament table's mode, queued
stakes and pauses."""

from __future__ import annotations

from google.protobuf.message import Message

from stud.v1 import room_pb2 as rpb


def room_line(event: Message) -> str:
    """One room event in words."""
    e: object = event
    match e:
        case rpb.SettingsSet(settings=s):
            return (f"Settings: buy-in {s.buy_in_min:,}..{s.buy_in_max:,}, action "
                    f"{s.action_time_s}s + time bank {s.time_bank_s}s")
        case rpb.BuyInRequested():
            return f"Seat {e.seat}: {e.player_id} asks to sit down with {e.amount:,}"
        case rpb.BuyInFailed():
            return f"Seat {e.seat}: {e.player_id}'s buy-in failed ({e.reason or 'refused'})"
        case rpb.BuyInRefundDue():
            return f"Seat {e.seat}: {e.player_id}'s buy-in to be refunded ({e.reason})"
        case rpb.BuyInRefunded():
            return f"Seat {e.seat}: {e.player_id}'s buy-in of {e.amount:,} refunded"
        case rpb.TopUpQueued():
            return f"Seat {e.seat}: {e.player_id} adds {e.amount:,} (queued)"
        case rpb.TopUpDropped():
            return f"Seat {e.seat}: {e.player_id}'s top-up dropped ({e.reason})"
        case rpb.CashOutRequested():
            return f"Seat {e.seat}: {e.player_id} cashes out {e.amount:,}"
        case rpb.CashOutPaid():
            return f"Seat {e.seat}: {e.player_id}'s cash-out paid"
        case rpb.LeaveRequested():
            return f"Seat {e.seat}: {e.player_id} leaves after the hand"
        case rpb.MuckPreferenceSet():
            return f"Seat {e.seat}: {e.player_id} {'mucks' if e.muck else 'shows'} losing hands"
        case rpb.TableClosed():
            return f"Table closed by {e.by or 'an operator'}"
        case rpb.HandSettled():
            return f"Hand #{e.hand_number} settled (rake {e.rake:,}; by the wallet at a cash table)"
        case rpb.DealingStopped():
            return f"Dealing stopped: {e.reason}"
        case rpb.DealingResumed():
            return "Dealing resumed: every escrow equals its stack"
        case rpb.OrphanEscrowRefunded():
            return (f"Seat {e.seat}: an escrow of {e.amount:,} the log did not know was paid "
                    f"back to {e.player_id}")
        case rpb.TournamentModeSet():
            return f"Tournament table of tournament {e.tournament_id}: no wallet, no rake"
        case rpb.StakesQueued():
            return (f"Stakes {e.small_bet:,}/{e.big_bet:,}, ante {e.ante:,}, bring-in "
                    f"{e.bring_in:,} asked for: from the next hand")
        case rpb.DealingPaused():
            if e.one_hand:
                return (f"Dealing resumed by the tournament for one hand, then paused "
                        f"({e.reason or 'hand_for_hand'})")
            return (f"Dealing paused ({e.reason or 'no reason given'})" if e.paused
                    else "Dealing resumed by the tournament")
    return str(event.DESCRIPTOR.name)
