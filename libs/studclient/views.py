"""Small questions about a :class:`~stud.v1.table_pb2.TableView`, for bots and UIs."""

from __future__ import annotations

from stud.v1 import common_pb2, table_pb2


def hand_over(view: table_pb2.TableView) -> bool:
    """No hand in progress (none yet, or the last one is complete)."""
    return not view.HasField("hand") or view.hand.phase == table_pb2.HAND_PHASE_COMPLETE


def my_turn(view: table_pb2.TableView) -> bool:
    """The viewer is seated and is the one to act now, with something to do."""
    hand = view.hand
    return (bool(view.viewer_seat) and view.HasField("hand")
            and hand.phase == table_pb2.HAND_PHASE_BETTING
            and hand.to_act == view.viewer_seat and bool(hand.legal_actions.actions))


def legal_actions(view: table_pb2.TableView) -> list[common_pb2.LegalAction]:
    """What the player to act may do now (empty when nobody is to act)."""
    return list(view.hand.legal_actions.actions) if view.HasField("hand") else []


def my_cards(view: table_pb2.TableView) -> tuple[list[common_pb2.Card], list[common_pb2.Card]]:
    """The viewer's (down, up) cards in the view's hand; down cards the view does not hold
    (not yet merged in from the dealer) are left out."""
    for player in view.hand.players:
        if player.seat == view.viewer_seat and view.viewer_seat:
            return [d.card for d in player.down if d.HasField("card")], list(player.up)
    return [], []
