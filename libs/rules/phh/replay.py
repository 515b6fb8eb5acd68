"""Replaying a PHH hand through our rules, with a verdict on whether the file and our rules
agree.

Burn cards: PokerKit always burns before 4th to 7th street but writes no action for it. The
replay runs our rules without burns (the default, RULES 4.4): PokerKit's choice of a
community card on 7th street ("more players than deck, burns and mucked cards can serve") is
then the same as ours whenever no folded card would be reused, which is exactly the case
RULES 15.3 lists as a difference. Everything here is pure: no I/O, stdlib only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from rules._mutable import maker
from rules.cards import DECK, Card
from rules.commands import (
    Command,
    DealStreet,
    DealtCard,
    OpenTable,
    RevealedHand,
    RevealHands,
    Showdown,
    SitDown,
    StartHand,
)
from rules.config import TableConfig
from rules.dealing import DealPlan, deal_plan
from rules.decide import decide_and_fold
from rules.errors import Reason, RuleViolation
from rules.events import Event
from rules.phh.format import VARIANT, PhhAction, PhhError, PhhHand, parse_action
from rules.phh.table import command_for, replay_config
from rules.phh.verdict import END_OF_ACTIONS, Rejection, ReplayResult, Verdict
from rules.state import HandState, Phase, TableState, initial_state
from rules.streets import Street

_BETTING_VERBS = frozenset({"pb", "cbr", "cc", "f"})

# Enum members as module constants (compiled, ``Phase.BETTING`` is a look-up through the
# enum's metaclass on every read; ``hand.is_over`` an interpreted property call).
_BETTING, _REVEAL, _SHOWDOWN = Phase.BETTING, Phase.REVEAL, Phase.SHOWDOWN
_COMPLETE = Phase.COMPLETE

_DEALT: dict[tuple[int, bool, int], DealtCard] = {}
"""The dealt cards made, by seat, face and the card's ``id`` (a command is a frozen value:
made once, shared; the entry holds the card, so its ``id`` is not reused while it is kept).
Making one, a frozen dataclass of the pure commands, cost several times the look-up."""

_DEALT_KEPT = 4096
"""At most this many dealt cards are kept (then forgotten all at once)."""


def _dealt_card(seat: int, up: bool, card: Card | None) -> DealtCard:
    """``DealtCard(seat=seat, up=up, card=card)``, kept for the next deal of the same card."""
    key = (seat, up, id(card))
    dealt = _DEALT.get(key)
    if dealt is None:
        dealt = DealtCard(seat=seat, up=up, card=card)
        if len(_DEALT) >= _DEALT_KEPT:
            _DEALT.clear()
        _DEALT[key] = dealt
    return dealt


class _Rejected(Exception):
    def __init__(self, rejection: Rejection) -> None:
        super().__init__(rejection.detail)
        self.rejection = rejection


class _Unchecked(Exception):
    pass


def _players(numbers: Iterable[int]) -> str:
    """PHH players by number: ``p1, p3``."""
    return ", ".join(f"p{n}" for n in numbers)


def _still_to_act(hand: HandState) -> str:
    assert hand.street is not None
    return f"seat {hand.to_act} is still to act on {hand.street.label}"


_OPENED: dict[int, tuple[tuple[Event, ...], TableState]] = {}
"""The table just opened (its events and state) by its configuration's ``id``: the same
for every hand of the same stakes (``replay_config`` keeps the configurations; the entry
holds the configuration, its state's, so its ``id`` is not reused while it is kept)."""

_OPENED_KEPT = 1024
"""At most this many opened tables are kept (then forgotten all at once)."""

_SIT_DOWN, _DEAL_STREET = maker(SitDown), maker(DealStreet)
"""Positional makers of the commands the replay builds with every hand (rules._mutable:
plain stores, then the frozen class), about half the cost of the keyword ``__init__``."""

_PLAYER_IDS = tuple(f"p{seat}" for seat in range(9))
"""The player at each seat (1 to 8) of the replay's table."""

_START = StartHand(hand_number=1, deck_commitment="")
"""The hand each replay plays: the first of its table."""


class _Table:
    """The table a hand is replayed on: what :class:`rules.testing.TableDriver` does for the
    replay (the same commands, so the same events), compiled with it where the test driver
    is pure (it was about a tenth of a replay check)."""

    state: TableState
    events: list[Event]

    def __init__(self, config: TableConfig, stacks: dict[int, int]) -> None:
        opened = _OPENED.get(id(config))
        if opened is None or opened[1].config is not config:  # (the id's own object)
            self.state = initial_state()
            self.events = []
            self.apply(OpenTable(table_id="t1", config=config))
            if len(_OPENED) >= _OPENED_KEPT:
                _OPENED.clear()
            _OPENED[id(config)] = (tuple(self.events), self.state)
        else:
            self.events = list(opened[0])
            self.state = opened[1]
        for seat, stack in sorted(stacks.items()):
            self.apply(_SIT_DOWN(seat, _PLAYER_IDS[seat], stack))
        self.apply(_START)

    @property
    def config(self) -> TableConfig:
        config = self.state.config
        assert config is not None
        return config

    @property
    def hand(self) -> HandState:
        hand = self.state.hand
        assert hand is not None
        return hand

    def apply(self, command: Command) -> None:
        events, self.state = decide_and_fold(self.state, command)
        self.events.extend(events)

    def plan(self) -> DealPlan:
        plan = deal_plan(self.hand, self.config)
        if plan is None:
            raise ValueError(f"not dealing (phase {self.hand.phase.value})")
        return plan


class _Replay:
    """One hand's replay: the driver, the file's actions and what the file lets us know."""

    def __init__(self, hand: PhhHand) -> None:
        self.hand = hand
        self.count = len(hand.starting_stacks)
        self.notes: list[str] = []
        self.seats: tuple[int, ...] = ()
        self.driver: _Table | None = None
        self.actions: list[PhhAction] = []
        self.known: dict[int, list[Card | None]] = defaultdict(list)
        self.used: list[Card | None] = []
        """The cards the file shows (None: one it hides), in any order; a set is made of them
        only when a stand-in is chosen (hashing them all was a few per cent of a replay)."""
        self.dealt: dict[int, int] = {}
        """Cards dealt to each seat so far (a seat not dealt to yet: none)."""
        self.pending: dict[int, list[Card | None]] = defaultdict(list)
        self.waiting = 0
        """The cards ``pending`` holds, all seats together."""
        self.board: list[Card | None] = []
        self.stand_ins: set[int] = set()
        self.mucks: set[int] = set()
        self.index = 0
        self.plan_of: HandState | None = None
        """The hand whose deal plan ``plan`` and ``expected`` (cards by seat) hold."""
        self.plan: DealPlan | None = None
        self.expected: dict[int, int] = {}
        self.community = False
        """Whether ``plan`` deals the community card (:attr:`DealPlan.community`, a scan)."""

    # setup ----------------------------------------------------------------------------

    def setup(self) -> None:
        hand = self.hand
        if hand.variant != VARIANT:
            raise _Unchecked(f"variant {hand.variant!r} is not seven card stud hi/lo "
                             f"({VARIANT!r})")
        if not 2 <= self.count <= 8:
            raise _Unchecked(f"{self.count} players; stud seats 2 to 8")
        if any(s <= 0 for s in hand.starting_stacks):
            raise _Unchecked("every starting stack must be positive")
        seats = hand.seats or tuple(range(1, self.count + 1))
        if (len(seats) != self.count or list(seats) != sorted(set(seats))
                or not 1 <= seats[0] <= seats[-1] <= 8):
            raise _Unchecked(f"seats {list(seats)}: need {self.count} increasing seats in 1..8")
        self.seats = tuple(seats)
        try:
            config = replay_config(hand)
            self.actions = [parse_action(text, self.count) for text in hand.actions]
        except PhhError as error:
            raise _Unchecked(str(error)) from None
        for action in self.actions:
            if action.verb == "dh":
                self.known[action.target].extend(action.cards)
            elif action.verb == "sm":
                slots = self.known[action.player]
                for i, card in enumerate(action.cards):
                    if card is None:
                        continue
                    while len(slots) <= i:
                        slots.append(None)
                    if slots[i] is None:
                        slots[i] = card
            self.used.extend(action.cards)
        short = [i + 1 for i, s in enumerate(hand.starting_stacks) if s < config.ante]
        if short and not hand.ante_trimming_status:
            self.notes.append(
                f"ante_trimming_status is false and {_players(short)} cannot post the full "
                "ante: PokerKit then lets them win every full ante; our pots count only what "
                "they put in (RULES 9.3)")
        stacks = dict(zip(self.seats, hand.starting_stacks, strict=True))
        self.driver = _Table(config, stacks)

    @property
    def t(self) -> _Table:
        assert self.driver is not None
        return self.driver

    def player_of(self, seat: int) -> int:
        return self.seats.index(seat) + 1

    def seat_of(self, player: int) -> int:
        return self.seats[player - 1]

    # helpers --------------------------------------------------------------------------

    def reject(self, number: int, text: str, reason: str, detail: str) -> _Rejected:
        return _Rejected(Rejection(number=number, action=text, reason=reason, detail=detail))

    def wrong_deal(self, number: int, text: str, detail: str) -> _Rejected:
        return self.reject(number, text, Reason.WRONG_DEAL.value, detail)

    def apply(self, number: int, text: str, command: Command) -> None:
        try:
            self.t.apply(command)
        except RuleViolation as error:
            raise self.reject(number, text, error.reason.value, error.detail) from None
        self.advance(number, text)

    def advance(self, number: int, text: str) -> None:
        """Turn the hands up for an all-in runout as soon as our rules call for it."""
        hand = self.t.hand
        if hand.phase is _REVEAL:
            self.apply(number, text, RevealHands(hands=self.revealed("an all-in runout")))

    def revealed(self, why: str) -> tuple[RevealedHand, ...]:
        hands = []
        for p in self.t.hand.players:
            if p.folded:
                continue
            player = self.player_of(p.seat)
            if p.seat in self.stand_ins:
                raise _Unchecked(f"p{player} reaches {why} with an up card the file does not "
                                 "record")
            if any(c is None for c in p.down):
                raise _Unchecked(f"p{player} reaches {why} but the file does not show all "
                                 f"of p{player}'s down cards")
            hands.append(RevealedHand(seat=p.seat, down=tuple(c for c in p.down if c is not None)))
        return tuple(hands)

    def next_actor(self) -> int | None:
        """The player of the file's next betting action (who it says acts first)."""
        for action in self.actions[self.index + 1:]:
            if action.verb in _BETTING_VERBS:
                return action.player
        return None

    def stand_in(self, street: Street, seat: int) -> Card:
        """A card for an up card the file does not record, chosen so that our rules pick
        the same first actor as the file: the lowest unused card for the file's bring-in,
        the highest for the file's first actor on later streets, the other way otherwise."""
        first = self.next_actor() == self.player_of(seat)
        low = first if street == Street.THIRD else not first
        used = set(self.used)
        free = [c for c in DECK if c not in used]
        if not free:
            raise _Unchecked("an up card is not recorded and no card is left to stand in")
        card = free[0] if low else free[-1]
        self.used.append(card)
        self.stand_ins.add(seat)
        self.notes.append(f"p{self.player_of(seat)}'s {street.label} up card is not recorded;"
                          f" {card} stands in for it")
        return card

    # actions ----------------------------------------------------------------------------

    def deal(self, number: int, action: PhhAction) -> None:
        hand = self.t.hand
        phase = hand.phase
        if phase is _COMPLETE:
            raise self.reject(number, action.text, "hand_over",
                              "the hand is over for our rules, but the file deals more cards")
        if phase is _BETTING:
            raise self.reject(number, action.text, "betting_not_over", _still_to_act(hand))
        if phase is _SHOWDOWN:
            raise self.reject(number, action.text, "showdown_pending",
                              "our rules go to the showdown now; no more cards")
        if self.plan_of is not hand:  # the hand is a frozen value: same object, same plan
            plan = self.t.plan()
            counts: dict[int, int] = {}
            for slot in plan.slots:
                counts[slot.seat] = counts.get(slot.seat, 0) + 1
            self.plan_of, self.plan, self.expected = hand, plan, counts
            self.community = plan.community
        assert self.plan is not None
        plan, expected, community = self.plan, self.expected, self.community
        if action.verb == "db":
            if not community:
                raise self.wrong_deal(number, action.text,
                                      f"the file deals a board card; our rules deal each of "
                                      f"{len(plan.slots)} players a card on {plan.street.label}")
            self.board.extend(action.cards)
            if len(self.board) > 1:
                raise self.wrong_deal(number, action.text,
                                      "our rules deal one community card, the file more")
        else:
            seat = self.seat_of(action.target)
            if community:
                raise self.wrong_deal(number, action.text,
                                      f"the deck runs short: our rules deal one community "
                                      f"card on 7th street (RULES 10.2), the file deals "
                                      f"p{action.target} a card of their own")
            due = expected.get(seat, 0)
            if not due:
                raise self.wrong_deal(number, action.text,
                                      f"our rules deal seat {seat} no card on {plan.street.label}")
            pending = self.pending[seat]
            pending.extend(action.cards)
            if len(pending) > due:
                raise self.wrong_deal(number, action.text,
                                      f"our rules deal seat {seat} {due} card(s) "
                                      f"on {plan.street.label}, the file {len(pending)}")
            self.waiting += len(action.cards)
        # No seat holds more than it is due (above), so the street is complete when the
        # cards held are as many as the plan's slots.
        complete = (len(self.board) == 1 if community
                    else self.waiting == len(plan.slots))
        if complete:
            self.flush(number, action.text, plan)

    def flush(self, number: int, text: str, plan: DealPlan) -> None:
        dealt: tuple[DealtCard, ...]
        if self.community:
            card = self.board[0]
            if card is None:
                raise _Unchecked("the community card is not recorded")
            dealt = (_dealt_card(0, True, card),)
        else:
            taken: dict[int, int] = {}
            cards = []
            for slot in plan.slots:
                seat = slot.seat
                k = taken.get(seat, 0)
                card = self.pending[seat][k]
                taken[seat] = k + 1
                position = self.dealt.get(seat, 0)
                self.dealt[seat] = position + 1
                if card is None:
                    slots = self.known[self.player_of(seat)]
                    card = slots[position] if position < len(slots) else None
                if card is None and slot.up:
                    card = self.stand_in(plan.street, seat)
                cards.append(_dealt_card(seat, slot.up, card))
            dealt = tuple(cards)
        self.pending.clear()
        self.waiting = 0
        self.board.clear()
        self.apply(number, text, _DEAL_STREET(dealt, 1 if plan.burn else 0,
                                              plan.reshuffle_burns))

    def act(self, number: int, action: PhhAction) -> None:
        if self.pending or self.board:
            raise self.wrong_deal(number, action.text,
                                  "the file acts before the street is fully dealt")
        hand = self.t.hand
        if hand.phase is _COMPLETE:
            raise self.reject(number, action.text, "hand_over",
                              "the hand is over for our rules, but the file goes on")
        seat = self.seat_of(action.player)
        self.apply(number, action.text, command_for(action, seat, hand, self.t.config))

    def finish(self) -> None:
        number = len(self.actions) + 1
        text = END_OF_ACTIONS
        if self.pending or self.board:
            raise self.wrong_deal(number, text, "the file ends in the middle of a street's cards")
        hand = self.t.hand
        if hand.phase is _SHOWDOWN:
            self.apply(number, text, Showdown(hands=self.revealed("the showdown"),
                                              muck_requests=frozenset(self.mucks)))
            hand = self.t.hand
        if hand.phase is _COMPLETE:
            return
        if hand.phase is _BETTING:
            detail = _still_to_act(hand)
        else:
            detail = f"{self.t.plan().street.label} is still to be dealt"
        raise self.reject(number, text, "hand_not_over", f"the file ends but {detail}")

    def run(self) -> None:
        for index, action in enumerate(self.actions):
            self.index = index
            number = index + 1
            if action.verb in ("dh", "db"):
                self.deal(number, action)
            elif action.verb in _BETTING_VERBS:
                self.act(number, action)
            elif action.verb == "sm" and action.muck:
                self.mucks.add(self.seat_of(action.player))
        self.finish()

    # the verdict ------------------------------------------------------------------------

    def stand_in_still_in(self) -> list[int]:
        if self.driver is None or self.driver.state.hand is None:
            return []
        return [self.player_of(p.seat) for p in self.t.hand.players
                if p.seat in self.stand_ins and not p.folded]

    def result(self, verdict: Verdict, *, rejection: Rejection | None = None,
               our_stacks: tuple[int, ...] | None = None,
               file_stacks: tuple[int, ...] | None = None, problem: str = "") -> ReplayResult:
        """The verdict with what every result carries: the notes, our log and our seats."""
        return ReplayResult(
            name=self.hand.name, verdict=verdict, rejection=rejection, our_stacks=our_stacks,
            file_stacks=file_stacks, problem=problem, notes=tuple(self.notes),
            events=tuple(self.driver.events) if self.driver is not None else (),
            seats=self.seats)


def replay_phh(hand: PhhHand) -> ReplayResult:
    """Run a PHH hand through our rules: every action becomes the command it stands for
    (``cbr`` the completion, bet or raise that fits; ``cc`` a check or a call). Reports the
    first action our rules reject, else our finishing stacks against the file's.

    >>> from rules.phh import parse_phh
    >>> h = parse_phh('''variant = 'F7S/8'
    ... antes = [40, 40]
    ... bring_in = 50
    ... small_bet = 200
    ... big_bet = 400
    ... starting_stacks = [1000, 1000]
    ... finishing_stacks = [1040, 960]
    ... actions = ['d dh p1 ????2c', 'd dh p2 ????Kd', 'p1 pb', 'p2 f']''')
    >>> r = replay_phh(h); r.verdict.value, r.our_stacks
    ('ok', (1040, 960))
    >>> from dataclasses import replace
    >>> replay_phh(replace(h, actions=h.actions[:3])).rejection.reason
    'hand_not_over'
    """
    replay = _Replay(hand)
    try:
        replay.setup()
        replay.run()
    except _Unchecked as unchecked:
        return replay.result(Verdict.UNCHECKED, problem=str(unchecked))
    except _Rejected as rejected:
        shaky = replay.stand_in_still_in()
        if shaky:
            r = rejected.rejection
            return replay.result(
                Verdict.UNCHECKED,
                problem=f"action {r.number} ({r.action}) is refused ({r.reason}: {r.detail}), "
                f"but the file does not record up cards of {_players(shaky)}, still in the "
                "hand")
        return replay.result(Verdict.REJECTED, rejection=rejected.rejection,
                             file_stacks=hand.finishing_stacks)
    ours = tuple(replay.t.state.stack(seat) for seat in replay.seats)
    differ = hand.finishing_stacks is not None and tuple(hand.finishing_stacks) != ours
    return replay.result(Verdict.STACKS_DIFFER if differ else Verdict.OK,
                         our_stacks=ours, file_stacks=hand.finishing_stacks)
