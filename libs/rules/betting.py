"""Fixed-limit betting: who acts, what they may do and what a wager does (RULES §6-§8)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum, unique

from rules._mutable import maker
from rules.config import HeadsUpRaises, TableConfig
from rules.errors import Reason, RuleViolation
from rules.hands import board_value
from rules.state import HandState, Phase, Player
from rules.streets import Street, bet_size


@unique
class ActionKind(StrEnum):
    """A player action."""

    BRING_IN = "bring_in"
    COMPLETE = "complete"
    BET = "bet"
    RAISE = "raise"
    CALL = "call"
    CHECK = "check"
    FOLD = "fold"


WAGERS = frozenset({ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE})

# Enum members as module constants for the hot paths: ``ActionKind.CHECK`` is looked up
# through the enum's metaclass, about ten times the cost of a global.
_BRING_IN, _CHECK, _FOLD, _CALL = (ActionKind.BRING_IN, ActionKind.CHECK, ActionKind.FOLD,
                                   ActionKind.CALL)
_COMPLETE, _BET, _RAISE = ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE
_ROUND_STARTS_HEADS_UP = HeadsUpRaises.ROUND_STARTS_HEADS_UP
_HEADS_UP_BEFORE_CAP = HeadsUpRaises.HEADS_UP_BEFORE_CAP
_THIRD = Street.THIRD
_BETTING_PHASE = Phase.BETTING


@dataclass(frozen=True, slots=True, kw_only=True)
class LegalAction:
    """One thing the player to act may do: ``amount`` chips in, reaching ``to`` this street."""

    kind: ActionKind
    amount: int = 0
    to: int = 0
    all_in: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class LegalActions:
    """What the player to act may do now."""

    seat: int
    actions: tuple[LegalAction, ...]

    def get(self, kind: ActionKind) -> LegalAction | None:
        """The action of that kind, if legal."""
        for action in self.actions:
            if action.kind == kind:
                return action
        return None

    @property
    def kinds(self) -> frozenset[ActionKind]:
        """The kinds of the legal actions."""
        return frozenset(a.kind for a in self.actions)


_legal: Callable[[ActionKind, int, int, bool], LegalAction] = maker(LegalAction)
"""``_legal(kind, amount, to, all_in)``: ``LegalAction(kind=..., ...)``, built faster."""
_legal_actions: Callable[[int, tuple[LegalAction, ...]], LegalActions] = maker(LegalActions)
"""``_legal_actions(seat, actions)``: ``LegalActions(seat=..., actions=...)``, built faster."""


def clockwise_after(hand: HandState, seat: int, wanted: Callable[[Player], bool]) -> int | None:
    """The first player clockwise after ``seat`` (not ``seat`` itself unless it is the only
    one) for whom ``wanted`` holds."""
    players = hand.players
    for p in players:
        if p.seat > seat and wanted(p):
            return p.seat
    for p in players:
        if p.seat <= seat and wanted(p):
            return p.seat
    return None


def highest_board_seat(hand: HandState) -> int:
    """The player in the hand with the highest board; ties to the lowest seat (RULES 8.1-8.2)."""
    best: tuple[tuple[int, ...], int] | None = None
    for p in hand.players:
        if p.folded:
            continue
        key = (board_value(p.up[:4]), -p.seat)  # p.board, inlined
        if best is None or key > best:
            best = key
    assert best is not None
    return -best[1]


def bring_in_duty(hand: HandState) -> int | None:
    """Who must bring in on 3rd street, or None when fewer than two players dealt in have
    chips (RULES 7.1, 7.8, 7.9)."""
    if sum(1 for p in hand.players if p.stack > 0) < 2:
        return None
    lowest = min(hand.players, key=lambda p: p.up[0].key)
    if lowest.stack > 0:
        return lowest.seat
    return clockwise_after(hand, lowest.seat, lambda p: p.stack > 0)


def first_to_act(hand: HandState) -> int | None:
    """First actor on 4th to 7th street: the highest board, or the next player clockwise able
    to act when that player is all-in (RULES 8.3)."""
    top = highest_board_seat(hand)
    if hand.player(top).able:
        return top
    return clockwise_after(hand, top, lambda p: p.able)


def is_capped(hand: HandState, config: TableConfig) -> bool:
    """Whether no more full wagers may be made this round (RULES 6.8)."""
    return hand.full_wagers >= config.cap and not hand.cap_lifted


def lifts_cap(hand: HandState, config: TableConfig, round_start: bool) -> bool:
    """Whether the heads-up option lifts the cap now (call at round start or after an action)."""
    if hand.cap_lifted:
        return True
    if config.heads_up_raises == _ROUND_STARTS_HEADS_UP:
        return round_start and _able_count(hand) == 2
    if config.heads_up_raises == _HEADS_UP_BEFORE_CAP:
        return _able_count(hand) == 2 and hand.full_wagers < config.cap
    return False


def _able_count(hand: HandState) -> int:
    """How many players are able to act."""
    count = 0
    for p in hand.players:
        if not p.folded and p.stack > 0:  # p.able, inlined
            count += 1
    return count


def street_bet(hand: HandState, config: TableConfig) -> int:
    """The bet size S of the current street."""
    assert hand.street is not None
    return bet_size(config, hand.street)


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


def judge_action(hand: HandState, config: TableConfig, kind: ActionKind
                 ) -> LegalAction | RuleViolation:
    """The player to act taking an action of ``kind`` now: the action with its amounts if
    legal, else the refusal (returned, not raised) with its reason. The one source of
    legality: :func:`legal_actions_for` lists what this allows and ``decide`` raises what it
    refuses, so an offered action is never refused nor a refused one offered (STYLE §10)."""
    assert hand.to_act is not None
    p = hand.player(hand.to_act)
    reach = p.street_total + p.stack
    if hand.bring_in_pending:
        if kind == _BRING_IN:
            amount = min(config.bring_in, p.stack)
            return _legal(kind, amount, amount, amount == p.stack)
        if kind == _COMPLETE and p.stack > config.bring_in:
            to = min(config.small_bet, reach)
            return _legal(kind, to, to, to == reach)
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
        return _legal(kind, 0, p.street_total, False)
    if kind == _FOLD:
        if to_call <= 0:
            return RuleViolation(Reason.FOLD_NOT_ALLOWED,
                                 "folding is not allowed when you can check")
        return _legal(kind, 0, p.street_total, False)
    if kind == _CALL:
        if to_call <= 0:
            return RuleViolation(Reason.ILLEGAL_ACTION, "nothing to call: check")
        amount = min(to_call, p.stack)
        return _legal(kind, amount, p.street_total + amount, amount == p.stack)
    refusal = raise_refusal(hand, config, p)
    if refusal is not None:
        return refusal
    wager = wager_kind(hand)
    if kind != wager:
        return RuleViolation(Reason.ILLEGAL_ACTION, f"this wager is a {wager.value}")
    to = min(hand.level + street_bet(hand, config), reach)
    return _legal(kind, to - p.street_total, to, to == reach)


def legal_actions_for(hand: HandState, config: TableConfig) -> LegalActions | None:
    """Exactly what the player to act may do, with amounts (every kind
    :func:`judge_action` allows, in :data:`ACTION_ORDER`); None when nobody is to act.

    The same list as ``judge_action`` for each kind of :data:`ACTION_ORDER`, keeping the
    legal ones, written out branch by branch so that no refusal is built (checked over random
    play by ``tests/property/test_one_legality.py``)."""
    if hand.phase != _BETTING_PHASE or hand.to_act is None:
        return None
    seat = hand.to_act
    p = hand.player(seat)
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


def round_over(hand: HandState) -> bool:
    """Whether the betting round has ended (RULES 6.10)."""
    target = hand.target
    in_hand = 0
    waiting = False
    for p in hand.players:
        if not p.folded:
            in_hand += 1
            # p.able, inlined: not folded (checked above) and chips behind
            if p.stack > 0 and not (p.acted and p.street_total >= target):
                waiting = True
    return in_hand <= 1 or not waiting


def next_to_act(hand: HandState, after: int) -> int | None:
    """The next player clockwise after ``after`` who still has to act this round."""
    # clockwise_after(hand, after, lambda p: p.able and (not p.acted or p.street_total < T)),
    # inlined: this runs after every action.
    target = hand.target
    players = hand.players
    for p in players:
        if (p.seat > after and not p.folded and p.stack > 0
                and (not p.acted or p.street_total < target)):
            return p.seat
    for p in players:
        if (p.seat <= after and not p.folded and p.stack > 0
                and (not p.acted or p.street_total < target)):
            return p.seat
    return None


def runout_pending(hand: HandState) -> bool:
    """Two or more in the hand but no more betting possible (RULES 9.7, 6.11)."""
    in_hand = [p for p in hand.players if not p.folded]
    if len(in_hand) < 2:
        return False
    able = [p for p in in_hand if p.able]
    if len(able) >= 2:
        return False
    return all(p.street_total >= hand.target for p in able)
