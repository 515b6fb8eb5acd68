"""Fixed-limit betting: who acts, what they may do and what a wager does (RULES §6-§8).

Who acts first and next, and when a round ends: :mod:`rules.rounds`. The values (the action
kinds, the legal actions) are :mod:`rules.legal`'s, re-exported here."""

from __future__ import annotations

from rules.config import TableConfig
from rules.errors import Reason, RuleViolation
from rules.legal import WAGERS, ActionKind, LegalAction, LegalActions
from rules.legal import legal_action as _legal
from rules.legal import legal_actions as _legal_actions
from rules.rounds import street_bet
from rules.state import HandState, Phase, Player
from rules.streets import Street

__all__ = [
    "ACTION_ORDER", "WAGERS", "ActionKind", "LegalAction", "LegalActions", "is_capped",
    "judge_action", "legal_actions_for", "may_raise", "raise_refusal", "runout_pending",
    "wager_kind",
]

# Enum members as module constants for the hot paths: ``ActionKind.CHECK`` is looked up
# through the enum's metaclass, about ten times the cost of a global.
_BRING_IN, _CHECK, _FOLD, _CALL = (ActionKind.BRING_IN, ActionKind.CHECK, ActionKind.FOLD,
                                   ActionKind.CALL)
_COMPLETE, _BET, _RAISE = ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE
_THIRD = Street.THIRD
_BETTING_PHASE = Phase.BETTING

_JUDGED: dict[tuple[ActionKind, int, int, bool], LegalAction] = {}
"""The legal actions :func:`judge_action` made, by their fields (a frozen value: one made is
as good as another of the same fields; the look-up costs about half the maker's call). Every
field is one the rules computed, so equal keys always mean equal actions
(tests/unit/rules/test_event_cache.py checks them against a fresh build)."""

_JUDGED_KEPT = 4096
"""At most this many legal actions are kept (then forgotten all at once)."""


def _judged(kind: ActionKind, amount: int, to: int, all_in: bool) -> LegalAction:
    """``LegalAction(kind=kind, amount=amount, to=to, all_in=all_in)``, kept."""
    key = (kind, amount, to, all_in)
    action = _JUDGED.get(key)
    if action is None:
        action = _legal(kind, amount, to, all_in)
        if len(_JUDGED) >= _JUDGED_KEPT:
            _JUDGED.clear()
        _JUDGED[key] = action
    return action


def is_capped(hand: HandState, config: TableConfig) -> bool:
    """Whether no more full wagers may be made this round (RULES 6.8)."""
    return hand.full_wagers >= config.cap and not hand.cap_lifted


_RAISE_REFUSALS: tuple[tuple[Reason, str], ...] = (
    (Reason.CAP_REACHED, "the betting is capped: call or fold"),
    (Reason.INSUFFICIENT_CHIPS, "not enough chips to raise"),
    (Reason.ILLEGAL_ACTION, "nobody else can call a wager"),
    (Reason.RAISE_NOT_REOPENED, "the betting was not reopened for you: call or fold"),
)
"""Why a wager is refused, by the index :func:`_raise_block` gives."""


def _raise_block(hand: HandState, config: TableConfig, p: Player) -> int:
    """-1 if ``p`` may bet, complete or raise now, else the index in :data:`_RAISE_REFUSALS`
    of why not (RULES 6.6-6.8): the one test behind :func:`raise_refusal` and the listing of
    :func:`legal_actions_for`, with no refusal built."""
    if hand.full_wagers >= config.cap and not hand.cap_lifted:  # is_capped, inlined
        return 0
    if p.stack <= hand.target - p.street_total:
        return 1
    seat = p.seat
    for q in hand.players:
        if q.seat != seat and not q.folded and q.stack > 0:  # q.able, inlined
            break
    else:
        return 2
    # RULES 6.6: after acting, only wagers adding up to half a bet reopen the raising.
    if p.acted and 2 * (hand.target - p.reference) < street_bet(hand, config):
        return 3
    return -1


def raise_refusal(hand: HandState, config: TableConfig, p: Player) -> RuleViolation | None:
    """Why ``p`` may not bet, complete or raise now, or None if they may (RULES 6.6-6.8)."""
    block = _raise_block(hand, config, p)
    if block < 0:
        return None
    reason, detail = _RAISE_REFUSALS[block]
    return RuleViolation(reason, detail)


def may_raise(hand: HandState, config: TableConfig, p: Player) -> bool:
    """Whether ``p`` may bet, complete or raise now (RULES 6.6-6.8)."""
    return _raise_block(hand, config, p) < 0


def wager_kind(hand: HandState) -> ActionKind:
    """What a wager is called now: completion on 3rd street before a full wager, a bet when
    nothing is to be called, else a raise."""
    if hand.street == _THIRD and hand.level == 0:
        return _COMPLETE
    if hand.target == 0:
        return _BET
    return _RAISE


ACTION_ORDER: tuple[ActionKind, ...] = (
    _BRING_IN, _CHECK, _FOLD, _CALL,
    _COMPLETE, _BET, _RAISE,
)
"""The order in which legal actions are listed."""


def _player(hand: HandState, seat: int) -> Player:
    """``hand.player(seat)``, here compiled (the method is an interpreted call)."""
    for p in hand.players:
        if p.seat == seat:
            return p
    raise KeyError(seat)


def judge_action(hand: HandState, config: TableConfig, kind: ActionKind
                 ) -> LegalAction | RuleViolation:
    """The player to act taking an action of ``kind`` now: the action with its amounts if
    legal, else the refusal (returned, not raised) with its reason. The one source of
    legality: :func:`legal_actions_for` lists what this allows and ``decide`` raises what it
    refuses, so an offered action is never refused nor a refused one offered (STYLE §10)."""
    seat = hand.to_act
    assert seat is not None
    p = _player(hand, seat)
    reach = p.street_total + p.stack
    if hand.bring_in_pending:
        if kind == _BRING_IN:
            amount = min(config.bring_in, p.stack)
            return _judged(kind, amount, amount, amount == p.stack)
        if kind == _COMPLETE and p.stack > config.bring_in:
            to = min(config.small_bet, reach)
            return _judged(kind, to, to, to == reach)
        if p.stack > config.bring_in:
            return RuleViolation(Reason.ILLEGAL_ACTION, "post the bring-in or complete")
        return RuleViolation(Reason.ILLEGAL_ACTION,
                             "post the bring-in (too few chips to complete)")
    if kind == _BRING_IN:
        return RuleViolation(Reason.ILLEGAL_ACTION, "the bring-in is already posted")
    to_call = hand.target - p.street_total
    if kind == _CHECK:
        if to_call > 0:
            return RuleViolation(Reason.CHECK_NOT_ALLOWED, "there is a wager to call")
        return _judged(kind, 0, p.street_total, False)
    if kind == _FOLD:
        if to_call <= 0:
            return RuleViolation(Reason.FOLD_NOT_ALLOWED,
                                 "folding is not allowed when you can check")
        return _judged(kind, 0, p.street_total, False)
    if kind == _CALL:
        if to_call <= 0:
            return RuleViolation(Reason.ILLEGAL_ACTION, "nothing to call: check")
        amount = min(to_call, p.stack)
        return _judged(kind, amount, p.street_total + amount, amount == p.stack)
    refusal = raise_refusal(hand, config, p)
    if refusal is not None:
        return refusal
    wager = wager_kind(hand)
    if kind != wager:
        return RuleViolation(Reason.ILLEGAL_ACTION, f"this wager is a {wager.value}")
    to = min(hand.level + street_bet(hand, config), reach)
    return _judged(kind, to - p.street_total, to, to == reach)


def legal_actions_for(hand: HandState, config: TableConfig) -> LegalActions | None:
    """Exactly what the player to act may do, with amounts (every kind
    :func:`judge_action` allows, in :data:`ACTION_ORDER`); None when nobody is to act.

    The same list as ``judge_action`` for each kind of :data:`ACTION_ORDER`, keeping the
    legal ones, written out branch by branch so that no refusal is built (checked over random
    play by ``tests/property/test_one_legality.py``)."""
    if hand.phase != _BETTING_PHASE or hand.to_act is None:
        return None
    seat = hand.to_act
    p = _player(hand, seat)
    stack, street_total = p.stack, p.street_total
    reach = street_total + stack
    if hand.bring_in_pending:
        # judge_action: the bring-in, and completing with more chips than the bring-in.
        amount = min(config.bring_in, stack)
        actions = [_legal(_BRING_IN, amount, amount, amount == stack)]
        if stack > config.bring_in:
            to = min(config.small_bet, reach)
            actions.append(_legal(_COMPLETE, to, to, to == reach))
        return _legal_actions(seat, tuple(actions))
    to_call = hand.target - street_total
    if to_call > 0:  # fold and call (check refused), in ACTION_ORDER
        amount = min(to_call, stack)
        actions = [_legal(_FOLD, 0, street_total, False),
                   _legal(_CALL, amount, street_total + amount, amount == stack)]
    else:  # check (fold and call refused)
        actions = [_legal(_CHECK, 0, street_total, False)]
    if _raise_block(hand, config, p) < 0:  # the one wager kind that fits, last in the order
        to = min(hand.level + street_bet(hand, config), reach)
        actions.append(_legal(wager_kind(hand), to - street_total, to, to == reach))
    return _legal_actions(seat, tuple(actions))


def runout_pending(hand: HandState) -> bool:
    """Two or more in the hand but no more betting possible (RULES 9.7, 6.11)."""
    in_hand = [p for p in hand.players if not p.folded]
    if len(in_hand) < 2:
        return False
    able = [p for p in in_hand if p.able]
    if len(able) >= 2:
        return False
    return all(p.street_total >= hand.target for p in able)
