"""Hand histories: PHH in and out, and a hand history for people to read.

PHH (the Poker Hand History format, https://github.com/uoftcprg/phh-std) is what PokerKit
and public hand datasets use: a small TOML file per hand. For seven card stud hi/lo
(variant ``F7S/8``) the fields we use are ``antes``, ``bring_in``, ``small_bet``, ``big_bet``,
``starting_stacks``, ``actions`` and, when present, ``finishing_stacks``, ``seats``,
``seat_count`` and ``players``. Actions, as PokerKit 0.7.7 reads and writes them:

- ``d dh pN CARDS``: cards to player N in dealing order, ``??`` for a card not known. On 3rd
  street PokerKit writes the three cards together (down, down, up); later one card a street.
- ``d db CARD``: a board card. In stud only the community card when the deck runs short.
- ``pN pb`` posts the bring-in; ``pN cbr X`` completes, bets or raises *to* X (the player's
  total this street); ``pN cc`` checks or calls; ``pN f`` folds.
- ``pN sm CARDS`` shows (all the player's cards, dealing order); ``pN sm`` mucks;
  ``pN sm -`` shows what is known (PokerKit 0.7.7 still reads it).
- Text after `` # `` is a comment.

Player ``pN`` sits in seat N, or in the N-th entry of ``seats`` when the file has that field.

Burn cards: PokerKit always burns before 4th to 7th street but writes no action for it. The
replay runs our rules without burns (the default, RULES 4.4): PokerKit's choice of a
community card on 7th street ("more players than deck, burns and mucked cards can serve") is
then the same as ours whenever no folded card would be reused, which is exactly the case
RULES 15.3 lists as a difference. Everything here is pure: no I/O, stdlib only.
"""

from __future__ import annotations

import tomllib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum, unique

from rules.betting import WAGERS, ActionKind, legal_actions_for, wager_kind
from rules.cards import DECK, Card, format_cards
from rules.commands import (
    Bet,
    Call,
    Check,
    Command,
    Complete,
    DealStreet,
    DealtCard,
    Fold,
    PostBringIn,
    Raise,
    RevealedHand,
    RevealHands,
    Showdown,
)
from rules.config import TableConfig
from rules.dealing import DealPlan
from rules.driver import TableDriver
from rules.errors import Reason, RuleViolation
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
    PlayerLeft,
    PlayerSatIn,
    PlayerSatOut,
    PlayerSeated,
    PotAwarded,
    Raised,
    Share,
    TableOpened,
    UncalledBetReturned,
    UpCardDealt,
)
from rules.evolve import fold
from rules.state import Phase
from rules.streets import Street

VARIANT = "F7S/8"
"""PHH's code for fixed-limit seven card stud high/low-split eight or better."""
END_OF_ACTIONS = "(end of actions)"
"""The :attr:`Rejection.action` of a file that ends while our hand is not over."""


class PhhError(ValueError):
    """The text is not a PHH hand we can read (bad TOML, a missing field, a bad action)."""


# --- reading PHH ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class PhhHand:
    """The fields of one PHH hand that matter to the rules (amounts in the file's units)."""

    variant: str
    antes: tuple[int, ...]
    bring_in: int
    small_bet: int
    big_bet: int
    starting_stacks: tuple[int, ...]
    actions: tuple[str, ...]
    finishing_stacks: tuple[int, ...] | None = None
    players: tuple[str, ...] | None = None
    seats: tuple[int, ...] | None = None
    seat_count: int | None = None
    ante_trimming_status: bool = False
    hand: str | int | None = None
    table: str | int | None = None
    event: str | None = None
    name: str = ""
    """Where the hand came from (a file name, a table key); not a PHH field."""
    extra: Mapping[str, object] = field(default_factory=dict)
    """Every other field of the file, as TOML gave it."""


_KNOWN_FIELDS = frozenset({
    "variant", "antes", "bring_in", "small_bet", "big_bet", "starting_stacks", "actions",
    "finishing_stacks", "players", "seats", "seat_count", "ante_trimming_status", "hand",
    "table", "event",
})


def _amount(value: object, what: str) -> int:
    if isinstance(value, bool):
        raise PhhError(f"{what}: expected a whole amount, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise PhhError(f"{what}: expected a whole amount, got {value!r}")


def _amounts(value: object, what: str, count: int | None = None) -> tuple[int, ...]:
    if isinstance(value, list):
        return tuple(_amount(v, what) for v in value)
    if isinstance(value, dict) and count is not None:
        out = [0] * count
        for key, v in value.items():
            if not str(key).isdigit() or not 0 <= int(key) < count:
                raise PhhError(f"{what}: no player index {key!r}")
            out[int(key)] = _amount(v, what)
        return tuple(out)
    if count is not None:
        return (_amount(value, what),) * count
    raise PhhError(f"{what}: expected a list of amounts, got {value!r}")


def _hand_from_table(raw: Mapping[str, object], name: str) -> PhhHand:
    for required in ("variant", "antes", "bring_in", "small_bet", "big_bet",
                     "starting_stacks", "actions"):
        if required not in raw:
            raise PhhError(f"missing field {required!r}")
    stacks = _amounts(raw["starting_stacks"], "starting_stacks")
    actions = raw["actions"]
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise PhhError("actions: expected a list of strings")
    finishing = raw.get("finishing_stacks")
    players = raw.get("players")
    seats = raw.get("seats")
    seat_count = raw.get("seat_count")
    hand_id = raw.get("hand")
    table = raw.get("table")
    event = raw.get("event")
    return PhhHand(
        variant=str(raw["variant"]),
        antes=_amounts(raw["antes"], "antes", len(stacks)),
        bring_in=_amount(raw["bring_in"], "bring_in"),
        small_bet=_amount(raw["small_bet"], "small_bet"),
        big_bet=_amount(raw["big_bet"], "big_bet"),
        starting_stacks=stacks,
        actions=tuple(actions),
        finishing_stacks=None if finishing is None else _amounts(finishing, "finishing_stacks"),
        players=tuple(str(p) for p in players) if isinstance(players, list) else None,
        seats=None if seats is None else tuple(_amounts(seats, "seats")),
        seat_count=None if seat_count is None else _amount(seat_count, "seat_count"),
        ante_trimming_status=bool(raw.get("ante_trimming_status", False)),
        hand=hand_id if isinstance(hand_id, str | int) else None,
        table=table if isinstance(table, str | int) else None,
        event=event if isinstance(event, str) else None,
        name=name,
        extra={k: v for k, v in raw.items() if k not in _KNOWN_FIELDS},
    )


def _toml(text: str) -> dict[str, object]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PhhError(f"not TOML: {error}") from None


def parse_phh(text: str, name: str = "") -> PhhHand:
    """Read one PHH hand.

    >>> h = parse_phh('''variant = 'F7S/8'
    ... antes = [40, 40]
    ... bring_in = 50
    ... small_bet = 200
    ... big_bet = 400
    ... starting_stacks = [1000, 1000]
    ... actions = ['d dh p1 ????2c', 'd dh p2 ????Kd', 'p1 pb', 'p2 f']''')
    >>> h.variant, h.antes, h.actions[2]
    ('F7S/8', (40, 40), 'p1 pb')
    >>> parse_phh("variant = 'F7S/8'")
    Traceback (most recent call last):
    ...
    rules.history.PhhError: missing field 'antes'
    """
    return _hand_from_table(_toml(text), name)


def parse_phhs(text: str, name: str = "") -> list[PhhHand]:
    """Read a file of one hand (``.phh``) or of several (``.phhs``: one TOML table a hand)."""
    raw = _toml(text)
    if "variant" in raw or "actions" in raw:
        return [_hand_from_table(raw, name)]
    hands = []
    for key, value in raw.items():
        if not isinstance(value, dict):
            raise PhhError(f"{key!r} is not a hand")
        hands.append(_hand_from_table(value, f"{name}[{key}]" if name else str(key)))
    return hands


@dataclass(frozen=True, slots=True, kw_only=True)
class PhhAction:
    """One parsed PHH action. ``player`` is 0 for the dealer (``d``)."""

    text: str
    player: int
    verb: str
    """``dh``, ``db``, ``pb``, ``cbr``, ``cc``, ``f`` or ``sm``; ``""`` for a comment only."""
    target: int = 0
    """The player dealt to by ``dh``."""
    cards: tuple[Card | None, ...] = ()
    amount: int | None = None
    muck: bool = False


def parse_phh_cards(text: str) -> tuple[Card | None, ...]:
    """Cards written together, ``??`` for an unknown one.

    >>> parse_phh_cards("Ac??Td")
    (Card('Ac'), None, Card('Td'))
    """
    if len(text) % 2:
        raise PhhError(f"not PHH cards: {text!r}")
    cards: list[Card | None] = []
    for i in range(0, len(text), 2):
        pair = text[i:i + 2]
        if pair == "??":
            cards.append(None)
            continue
        try:
            cards.append(Card.parse(pair))
        except RuleViolation:
            raise PhhError(f"not a card: {pair!r}") from None
    return tuple(cards)


def _player(token: str, players: int) -> int:
    if token[:1] != "p" or not token[1:].isdigit() or not 1 <= int(token[1:]) <= players:
        raise PhhError(f"no player {token!r}")
    return int(token[1:])


def parse_action(text: str, players: int) -> PhhAction:
    """Parse one PHH action for a hand of ``players`` players.

    >>> parse_action("p2 cbr 250000 # completes", 5)
    PhhAction(text='p2 cbr 250000 # completes', player=2, verb='cbr', target=0, cards=(), \
amount=250000, muck=False)
    >>> parse_action("d dh p1 ????Ah", 2).cards
    (None, None, Card('Ah'))
    """
    body = text.split("#", 1)[0] if "#" in text else text
    words = body.split()
    match words:
        case []:
            return PhhAction(text=text, player=0, verb="")
        case ["d", "dh", who, cards]:
            return PhhAction(text=text, player=0, verb="dh", target=_player(who, players),
                             cards=parse_phh_cards(cards))
        case ["d", "db", cards]:
            return PhhAction(text=text, player=0, verb="db", cards=parse_phh_cards(cards))
        case [who, ("pb" | "cc" | "f") as verb]:
            return PhhAction(text=text, player=_player(who, players), verb=verb)
        case [who, "cbr", amount]:
            try:
                value = _amount(float(amount) if "." in amount else int(amount), "cbr")
            except ValueError:
                raise PhhError(f"not an amount: {amount!r}") from None
            return PhhAction(text=text, player=_player(who, players), verb="cbr", amount=value)
        case [who, "sm"]:
            return PhhAction(text=text, player=_player(who, players), verb="sm", muck=True)
        case [who, "sm", "-"]:
            return PhhAction(text=text, player=_player(who, players), verb="sm")
        case [who, "sm", cards]:
            return PhhAction(text=text, player=_player(who, players), verb="sm",
                             cards=parse_phh_cards(cards))
        case _:
            raise PhhError(f"not a stud action: {text!r}")


# --- replaying PHH through our rules -------------------------------------------------------

@unique
class Verdict(StrEnum):
    """How a replayed hand compares with the file."""

    OK = "ok"
    """Every action is legal for us and the finishing stacks (if the file has them) agree."""
    REJECTED = "rejected"
    """Our rules refuse an action of the file (see :class:`Rejection`)."""
    STACKS_DIFFER = "stacks_differ"
    """Every action is legal but our finishing stacks are not the file's."""
    UNCHECKED = "unchecked"
    """The hand cannot be judged: not stud hi/lo, a malformed file, cards not recorded."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejection:
    """The first action our rules refuse. ``number`` counts actions from 1; one past the
    last action (with ``action`` :data:`END_OF_ACTIONS`) means the file ends while our hand
    is not over."""

    number: int
    action: str
    reason: str
    """A :class:`Reason` value, or ``hand_over``, ``betting_not_over``, ``showdown_pending``,
    ``hand_not_over`` for a file that deals or acts out of our order."""
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    """What replaying one PHH hand through our rules gave."""

    name: str
    verdict: Verdict
    rejection: Rejection | None = None
    our_stacks: tuple[int, ...] | None = None
    file_stacks: tuple[int, ...] | None = None
    problem: str = ""
    """Why the hand is :attr:`Verdict.UNCHECKED`."""
    notes: tuple[str, ...] = ()
    events: tuple[Event, ...] = ()
    """Our event log of the hand (table events included), as far as it got."""
    seats: tuple[int, ...] = ()
    """Our seat of each PHH player, in player order."""

    @property
    def agrees(self) -> bool:
        """Whether the file and our rules agree on this hand."""
        return self.verdict == Verdict.OK


class _Rejected(Exception):
    def __init__(self, rejection: Rejection) -> None:
        super().__init__(rejection.detail)
        self.rejection = rejection


class _Unchecked(Exception):
    pass


def replay_config(hand: PhhHand) -> TableConfig:
    """The table configuration a PHH hand is replayed with: its stakes, the uniform ante,
    no burns (see the module notes), every other option at its default. Raises
    :class:`PhhError` when our rules cannot express the file's stakes."""
    if len(set(hand.antes)) > 1:
        raise PhhError(f"antes differ between players ({list(hand.antes)}); our ante is one "
                       "amount for everyone")
    seats = len(hand.starting_stacks)
    highest = max(hand.seats) if hand.seats else seats
    seat_count = hand.seat_count if hand.seat_count and highest <= hand.seat_count <= 8 else 8
    try:
        return TableConfig(seats=seat_count, small_bet=hand.small_bet, big_bet=hand.big_bet,
                           ante=hand.antes[0] if hand.antes else 0, bring_in=hand.bring_in)
    except RuleViolation as error:
        raise PhhError(str(error)) from None


class _Replay:
    """One hand's replay: the driver, the file's actions and what the file lets us know."""

    def __init__(self, hand: PhhHand) -> None:
        self.hand = hand
        self.count = len(hand.starting_stacks)
        self.notes: list[str] = []
        self.seats: tuple[int, ...] = ()
        self.driver: TableDriver | None = None
        self.actions: list[PhhAction] = []
        self.known: dict[int, list[Card | None]] = defaultdict(list)
        self.used: set[Card] = set()
        self.dealt: dict[int, int] = defaultdict(int)
        self.pending: dict[int, list[Card | None]] = defaultdict(list)
        self.board: list[Card | None] = []
        self.stand_ins: set[int] = set()
        self.mucks: set[int] = set()
        self.index = 0

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
            self.used.update(c for c in action.cards if c is not None)
        short = [i + 1 for i, s in enumerate(hand.starting_stacks) if s < config.ante]
        if short and not hand.ante_trimming_status:
            self.notes.append(
                f"ante_trimming_status is false and p{', p'.join(map(str, short))} cannot post "
                "the full ante: PokerKit then lets them win every full ante; our pots count "
                "only what they put in (RULES 9.3)")
        stacks = dict(zip(self.seats, hand.starting_stacks, strict=True))
        self.driver = TableDriver(config, stacks=stacks)
        self.driver.start()

    @property
    def t(self) -> TableDriver:
        assert self.driver is not None
        return self.driver

    def player_of(self, seat: int) -> int:
        return self.seats.index(seat) + 1

    def seat_of(self, player: int) -> int:
        return self.seats[player - 1]

    # helpers --------------------------------------------------------------------------

    def reject(self, number: int, text: str, reason: str, detail: str) -> _Rejected:
        return _Rejected(Rejection(number=number, action=text, reason=reason, detail=detail))

    def apply(self, number: int, text: str, command: Command) -> None:
        try:
            self.t.apply(command)
        except RuleViolation as error:
            raise self.reject(number, text, error.reason.value, error.detail) from None
        self.advance(number, text)

    def advance(self, number: int, text: str) -> None:
        """Turn the hands up for an all-in runout as soon as our rules call for it."""
        hand = self.t.hand
        if hand.phase == Phase.REVEAL:
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
            if action.verb in ("pb", "cbr", "cc", "f"):
                return action.player
        return None

    def stand_in(self, street: Street, seat: int) -> Card:
        """A card for an up card the file does not record, chosen so that our rules pick
        the same first actor as the file: the lowest unused card for the file's bring-in,
        the highest for the file's first actor on later streets, the other way otherwise."""
        first = self.next_actor() == self.player_of(seat)
        low = first if street == Street.THIRD else not first
        free = [c for c in DECK if c not in self.used]
        if not free:
            raise _Unchecked("an up card is not recorded and no card is left to stand in")
        card = free[0] if low else free[-1]
        self.used.add(card)
        self.stand_ins.add(seat)
        self.notes.append(f"p{self.player_of(seat)}'s {street.label} up card is not recorded;"
                          f" {card} stands in for it")
        return card

    # actions ----------------------------------------------------------------------------

    def deal(self, number: int, action: PhhAction) -> None:
        hand = self.t.hand
        if hand.is_over:
            raise self.reject(number, action.text, "hand_over",
                              "the hand is over for our rules, but the file deals more cards")
        if hand.phase == Phase.BETTING:
            assert hand.street is not None
            raise self.reject(number, action.text, "betting_not_over",
                              f"seat {hand.to_act} is still to act on {hand.street.label}")
        if hand.phase == Phase.SHOWDOWN:
            raise self.reject(number, action.text, "showdown_pending",
                              "our rules go to the showdown now; no more cards")
        plan = self.t.plan()
        expected: dict[int, int] = defaultdict(int)
        for slot in plan.slots:
            expected[slot.seat] += 1
        label = plan.street.label
        if action.verb == "db":
            if not plan.community:
                raise self.reject(number, action.text, Reason.WRONG_DEAL.value,
                                  f"the file deals a board card; our rules deal each of "
                                  f"{len(plan.slots)} players a card on {label}")
            self.board.extend(action.cards)
            if len(self.board) > 1:
                raise self.reject(number, action.text, Reason.WRONG_DEAL.value,
                                  "our rules deal one community card, the file more")
        else:
            seat = self.seat_of(action.target)
            if plan.community:
                raise self.reject(number, action.text, Reason.WRONG_DEAL.value,
                                  f"the deck runs short: our rules deal one community card on "
                                  f"7th street (RULES 10.2), the file deals p{action.target} "
                                  "a card of their own")
            if not expected[seat]:
                raise self.reject(number, action.text, Reason.WRONG_DEAL.value,
                                  f"our rules deal seat {seat} no card on {label}")
            self.pending[seat].extend(action.cards)
            if len(self.pending[seat]) > expected[seat]:
                raise self.reject(number, action.text, Reason.WRONG_DEAL.value,
                                  f"our rules deal seat {seat} {expected[seat]} card(s) on "
                                  f"{label}, the file {len(self.pending[seat])}")
        complete = (len(self.board) == 1 if plan.community
                    else all(len(self.pending[s]) == n for s, n in expected.items()))
        if complete:
            self.flush(number, action.text, plan)

    def flush(self, number: int, text: str, plan: DealPlan) -> None:
        dealt: tuple[DealtCard, ...]
        if plan.community:
            card = self.board[0]
            if card is None:
                raise _Unchecked("the community card is not recorded")
            dealt = (DealtCard(seat=0, up=True, card=card),)
        else:
            taken: dict[int, int] = defaultdict(int)
            cards = []
            for slot in plan.slots:
                card = self.pending[slot.seat][taken[slot.seat]]
                taken[slot.seat] += 1
                position = self.dealt[slot.seat]
                self.dealt[slot.seat] += 1
                if card is None:
                    slots = self.known[self.player_of(slot.seat)]
                    card = slots[position] if position < len(slots) else None
                if card is None and slot.up:
                    card = self.stand_in(plan.street, slot.seat)
                cards.append(DealtCard(seat=slot.seat, up=slot.up, card=card))
            dealt = tuple(cards)
        self.pending.clear()
        self.board.clear()
        self.apply(number, text, DealStreet(cards=dealt, burned=1 if plan.burn else 0,
                                            reshuffled_burns=plan.reshuffle_burns))

    def act(self, number: int, action: PhhAction) -> None:
        if self.pending or self.board:
            raise self.reject(number, action.text, Reason.WRONG_DEAL.value,
                              "the file acts before the street is fully dealt")
        hand = self.t.hand
        if hand.is_over:
            raise self.reject(number, action.text, "hand_over",
                              "the hand is over for our rules, but the file goes on")
        seat = self.seat_of(action.player)
        command: Command
        if action.verb == "pb":
            command = PostBringIn(seat=seat)
        elif action.verb == "f":
            command = Fold(seat=seat)
        elif action.verb == "cc":
            legal = legal_actions_for(hand, self.t.config)
            can_check = (legal is not None and legal.seat == seat
                         and legal.get(ActionKind.CHECK) is not None)
            command = Check(seat=seat) if can_check else Call(seat=seat)
        else:
            kind = ActionKind.BET
            legal = legal_actions_for(hand, self.t.config)
            if legal is not None:
                wager = next((a for a in legal.actions if a.kind in WAGERS), None)
                kind = wager.kind if wager is not None else wager_kind(hand)
                if hand.bring_in_pending:
                    kind = ActionKind.COMPLETE
            if kind == ActionKind.COMPLETE:
                command = Complete(seat=seat, to=action.amount)
            elif kind == ActionKind.BET:
                command = Bet(seat=seat, to=action.amount)
            else:
                command = Raise(seat=seat, to=action.amount)
        self.apply(number, action.text, command)

    def finish(self) -> None:
        number = len(self.actions) + 1
        text = END_OF_ACTIONS
        if self.pending or self.board:
            raise self.reject(number, text, Reason.WRONG_DEAL.value,
                              "the file ends in the middle of a street's cards")
        hand = self.t.hand
        if hand.phase == Phase.SHOWDOWN and not hand.is_over:
            self.apply(number, text, Showdown(hands=self.revealed("the showdown"),
                                              muck_requests=frozenset(self.mucks)))
            hand = self.t.hand
        if hand.is_over:
            return
        if hand.phase == Phase.BETTING:
            assert hand.street is not None
            detail = f"seat {hand.to_act} is still to act on {hand.street.label}"
        else:
            detail = f"{self.t.plan().street.label} is still to be dealt"
        raise self.reject(number, text, "hand_not_over", f"the file ends but {detail}")

    def run(self) -> None:
        for index, action in enumerate(self.actions):
            self.index = index
            number = index + 1
            if action.verb in ("dh", "db"):
                self.deal(number, action)
            elif action.verb in ("pb", "cbr", "cc", "f"):
                self.act(number, action)
            elif action.verb == "sm" and action.muck:
                self.mucks.add(self.seat_of(action.player))
        self.finish()

    def stand_in_still_in(self) -> list[int]:
        if self.driver is None or self.driver.state.hand is None:
            return []
        return [self.player_of(p.seat) for p in self.t.hand.players
                if p.seat in self.stand_ins and not p.folded]


def replay_phh(hand: PhhHand) -> ReplayResult:
    """Run a PHH hand through our rules: every action becomes the command it stands for
    (``cbr`` the completion, bet or raise that fits; ``cc`` a check or a call). Reports the
    first action our rules reject, else our finishing stacks against the file's.

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
    """
    replay = _Replay(hand)
    try:
        replay.setup()
        replay.run()
    except _Unchecked as unchecked:
        return ReplayResult(verdict=Verdict.UNCHECKED, problem=str(unchecked),
                            notes=tuple(replay.notes), events=_events(replay),
                            seats=replay.seats, name=hand.name)
    except _Rejected as rejected:
        shaky = replay.stand_in_still_in()
        if shaky:
            r = rejected.rejection
            return ReplayResult(
                verdict=Verdict.UNCHECKED, name=hand.name, seats=replay.seats,
                problem=f"action {r.number} ({r.action}) is refused ({r.reason}: {r.detail}), "
                f"but the file does not record up cards of p{', p'.join(map(str, shaky))}, "
                "still in the hand", notes=tuple(replay.notes), events=_events(replay))
        return ReplayResult(verdict=Verdict.REJECTED, rejection=rejected.rejection,
                            file_stacks=hand.finishing_stacks, notes=tuple(replay.notes),
                            events=_events(replay), seats=replay.seats, name=hand.name)
    ours = tuple(replay.t.state.stack(seat) for seat in replay.seats)
    differ = hand.finishing_stacks is not None and tuple(hand.finishing_stacks) != ours
    return ReplayResult(verdict=Verdict.STACKS_DIFFER if differ else Verdict.OK,
                        our_stacks=ours, file_stacks=hand.finishing_stacks,
                        notes=tuple(replay.notes), events=_events(replay), seats=replay.seats,
                        name=hand.name)


def _events(replay: _Replay) -> tuple[Event, ...]:
    return tuple(replay.driver.events) if replay.driver is not None else ()


# --- writing PHH ----------------------------------------------------------------------------

def _toml_string(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as PHH")


def _phh_cards(cards: Sequence[Card | None]) -> str:
    return "".join("??" if c is None else str(c) for c in cards)


def _one_hand(events: Sequence[Event]) -> tuple[list[Event], list[Event]]:
    """Split a log into what precedes the (first) hand and the hand's own events."""
    start = next((i for i, e in enumerate(events) if isinstance(e, HandStarted)), None)
    if start is None:
        raise ValueError("no HandStarted event: not a hand")
    end = next((i for i, e in enumerate(events) if i > start and isinstance(e, HandEnded)),
               len(events) - 1)
    return list(events[:start]), list(events[start:end + 1])


def export_phh(
    events: Sequence[Event],
    config: TableConfig,
    *,
    starting_stacks: Mapping[int, int] | None = None,
    players: Mapping[int, str] | None = None,
    fields: Mapping[str, object] | None = None,
) -> str:
    """Write one hand of our event log as PHH text that PokerKit can read.

    ``events`` holds the hand from ``HandStarted`` to ``HandEnded`` (a whole table log works
    too: its first hand is taken and the events before it give the starting stacks and player
    ids). Without that prefix, ``starting_stacks`` (by seat) is needed. A down card written
    ``None`` in the log (the public record) appears as ``??`` unless the log shows it later
    (exposed, shown, or mucked with ``history_reveals_mucked``). The dealt-in seats become
    ``p1..pN`` in seat order and are listed in ``seats``. PHH has no field for ``max_raises``,
    ``heads_up_raises`` or ``burn_cards``; a file is only faithful for the defaults (PokerKit
    caps at four wagers).
    ``fields`` adds optional PHH fields (``table``, ``event``, ...); names not in the PHH
    standard should start with ``_``.

    >>> from rules.driver import TableDriver
    >>> t = TableDriver(TableConfig(), stacks={2: 1000, 5: 1000}); _ = t.start()
    >>> t.deal_from("Ah Kd 7c 7d 2c 9s")
    >>> from rules.commands import PostBringIn, Fold
    >>> _ = t.apply(PostBringIn(seat=2)); _ = t.apply(Fold(seat=5))
    >>> print(export_phh(t.events, t.config))  # doctest: +NORMALIZE_WHITESPACE
    variant = "F7S/8"
    ante_trimming_status = true
    antes = [40, 40]
    bring_in = 50
    small_bet = 200
    big_bet = 400
    starting_stacks = [1000, 1000]
    actions = [
      "d dh p1 Ah7c2c",
      "d dh p2 Kd7d9s",
      "p1 pb",
      "p2 f",
    ]
    hand = 1
    seats = [2, 5]
    seat_count = 8
    players = ["p2", "p5"]
    finishing_stacks = [1040, 960]
    """
    before, hand_events = _one_hand(events)
    started = hand_events[0]
    assert isinstance(started, HandStarted)
    seats = started.seats
    if starting_stacks is None:
        if not before or not isinstance(before[0], TableOpened):
            raise ValueError("give starting_stacks, or the table's events before the hand")
        state = fold(before)
        starting_stacks = {s: state.stack(s) for s in seats}
        if players is None:
            players = {s: occupant.player_id for s in seats
                       if (occupant := state.seat(s)) is not None}
    number = {seat: i + 1 for i, seat in enumerate(seats)}
    stacks = {s: starting_stacks[s] for s in seats}
    revealed: dict[int, tuple[Card, ...]] = {}  # down cards the log shows later on
    for event in hand_events:
        if isinstance(event, HandExposed | HandShown | HandMucked) and event.down:
            revealed[event.seat] = event.down
    own: dict[int, list[Card | None]] = {s: [] for s in seats}
    down_at: dict[int, list[int]] = {s: [] for s in seats}
    actions: list[str] = []
    street_cards: dict[int, list[Card | None]] = {}
    in_hand = set(seats)
    exposed = False
    dealt_down_after_exposure = False
    shown_at_end = False
    comment = ""

    def flush() -> None:
        for seat in sorted(street_cards):
            actions.append(f"d dh p{number[seat]} {_phh_cards(street_cards[seat])}")
        street_cards.clear()

    def show_all() -> None:
        for seat in seats:
            if seat in in_hand:
                actions.append(f"p{number[seat]} sm {_phh_cards(own[seat])}")

    street: Street | None = None
    for event in hand_events[1:]:
        if not isinstance(event, DownCardDealt | UpCardDealt) or event.street != street:
            flush()
        match event:
            case DownCardDealt(seat=seat, card=card) | UpCardDealt(seat=seat, card=card):
                street = event.street
                if isinstance(event, DownCardDealt):
                    later = revealed.get(seat, ())
                    if card is None and len(down_at[seat]) < len(later):
                        card = later[len(down_at[seat])]
                    down_at[seat].append(len(own[seat]))
                elif exposed and event.street == Street.SEVENTH:
                    dealt_down_after_exposure = True  # PokerKit deals 7th down even here
                street_cards.setdefault(seat, []).append(card)
                own[seat].append(card)
            case CommunityCardDealt(card=card):
                actions.append(f"d db {card}")
            case AntePosted(seat=seat, amount=amount):
                stacks[seat] -= amount
            case BringInPosted(seat=seat, amount=amount):
                stacks[seat] -= amount
                actions.append(f"p{number[seat]} pb{comment}")
            case Completed(seat=seat, amount=amount, to=to) | BetMade(
                seat=seat, amount=amount, to=to
            ) | Raised(seat=seat, amount=amount, to=to):
                stacks[seat] -= amount
                actions.append(f"p{number[seat]} cbr {to}{comment}")
            case Called(seat=seat, amount=amount):
                stacks[seat] -= amount
                actions.append(f"p{number[seat]} cc{comment}")
            case Checked(seat=seat):
                actions.append(f"p{number[seat]} cc{comment}")
            case Folded(seat=seat):
                in_hand.discard(seat)
                actions.append(f"p{number[seat]} f{comment}")
            case UncalledBetReturned(seat=seat, amount=amount):
                stacks[seat] += amount
            case HandExposed(seat=seat, down=down):
                for position, card in zip(down_at[seat], down, strict=False):
                    own[seat][position] = card
                exposed = True
                actions.append(f"p{number[seat]} sm {_phh_cards(own[seat])}")
            case HandShown(seat=seat, down=down) | HandMucked(seat=seat, down=down):
                for position, card in zip(down_at[seat], down, strict=False):
                    own[seat][position] = card
                shown_at_end = True
                if isinstance(event, HandMucked):
                    actions.append(f"p{number[seat]} sm")
                else:
                    actions.append(f"p{number[seat]} sm {_phh_cards(own[seat])}")
            case PotAwarded(seat=seat, amount=amount):
                if exposed and dealt_down_after_exposure and not shown_at_end:
                    show_all()
                    shown_at_end = True
                stacks[seat] += amount
            case _:
                pass
        comment = " # timed out" if isinstance(event, ActionTimedOut) else ""
    flush()
    lines = [
        f"variant = {_toml_value(VARIANT)}",
        "ante_trimming_status = true",
        f"antes = {_toml_value([config.ante] * len(seats))}",
        f"bring_in = {config.bring_in}",
        f"small_bet = {config.small_bet}",
        f"big_bet = {config.big_bet}",
        f"starting_stacks = {_toml_value([starting_stacks[s] for s in seats])}",
        "actions = [",
        *(f"  {_toml_value(a)}," for a in actions),
        "]",
        f"hand = {started.hand_number}",
        f"seats = {_toml_value(list(seats))}",
        f"seat_count = {config.seats}",
    ]
    if players:
        lines.append(f"players = {_toml_value([players.get(s, f'seat {s}') for s in seats])}")
    if isinstance(hand_events[-1], HandEnded):
        lines.append(f"finishing_stacks = {_toml_value([stacks[s] for s in seats])}")
    for key, value in (fields or {}).items():
        lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


# --- a hand history for people ---------------------------------------------------------------

def _chips(amount: int) -> str:
    return f"{amount:,}"


def _event_line(event: Event, pots: int) -> str | None:
    match event:
        case TableOpened(table_id=table_id, config=c):
            return (f"Table {table_id}: Seven Card Stud Hi/Lo, {_chips(c.small_bet)}/"
                    f"{_chips(c.big_bet)}, ante {_chips(c.ante)}, bring-in {_chips(c.bring_in)}")
        case PlayerSeated(seat=seat, player_id=player, stack=stack):
            return f"Seat {seat}: {player} sits down with {_chips(stack)}"
        case PlayerLeft(seat=seat, player_id=player, stack=stack):
            return f"Seat {seat}: {player} leaves with {_chips(stack)}"
        case PlayerSatOut(seat=seat):
            return f"Seat {seat} sits out"
        case PlayerSatIn(seat=seat):
            return f"Seat {seat} sits in"
        case ChipsAdded(seat=seat, amount=amount):
            return f"Seat {seat} adds {_chips(amount)}"
        case HandStarted(hand_number=n, seats=seats):
            return f"Hand #{n}: seats {', '.join(map(str, seats))} dealt in"
        case AntePosted(seat=seat, amount=amount):
            return f"Seat {seat} antes {_chips(amount)}"
        case CardBurned():
            return "A card is burned"
        case BurnsReshuffled(count=count):
            return f"The {count} burned cards are shuffled into the stub"
        case DownCardDealt(seat=seat, card=card):
            return f"Seat {seat} is dealt " + ("a down card" if card is None else f"[{card}]")
        case UpCardDealt(seat=seat, card=card):
            return f"Seat {seat} is dealt {card} up"
        case CommunityCardDealt(card=card):
            return f"The deck is short: community card {card}"
        case BringInPosted(seat=seat, amount=amount):
            return f"Seat {seat} brings in for {_chips(amount)}"
        case Completed(seat=seat, to=to):
            return f"Seat {seat} completes to {_chips(to)}"
        case BetMade(seat=seat, to=to):
            return f"Seat {seat} bets {_chips(to)}"
        case Raised(seat=seat, to=to):
            return f"Seat {seat} raises to {_chips(to)}"
        case Called(seat=seat, amount=amount):
            return f"Seat {seat} calls {_chips(amount)}"
        case Checked(seat=seat):
            return f"Seat {seat} checks"
        case Folded(seat=seat):
            return f"Seat {seat} folds"
        case ActionTimedOut(seat=seat):
            return f"Seat {seat} runs out of time"
        case UncalledBetReturned(seat=seat, amount=amount):
            return f"Uncalled {_chips(amount)} returned to seat {seat}"
        case HandExposed(seat=seat, down=down):
            return f"Seat {seat} turns up [{format_cards(down)}]"
        case HandShown(seat=seat, down=down):
            return f"Seat {seat} shows [{format_cards(down)}]"
        case HandMucked(seat=seat, down=down):
            return f"Seat {seat} mucks" + (f" [{format_cards(down)}]" if down else "")
        case PotAwarded(pot=pot, seat=seat, amount=amount, share=share, hand=hand):
            where = "" if pots <= 1 else (" from the main pot" if pot == 0
                                          else f" from side pot {pot}")
            part = "" if share == Share.WHOLE else f" ({share.value})"
            with_hand = f" with {hand}" if hand else ""
            return f"Seat {seat} wins {_chips(amount)}{where}{part}{with_hand}"
        case HandEnded(hand_number=n):
            return f"*** Hand #{n} is over ***"
        case _:
            return None


def render_history(events: Sequence[Event]) -> str:
    """Our event log as a hand history to read, one line per event, with street and
    showdown headings.

    >>> from rules.driver import TableDriver
    >>> from rules.commands import PostBringIn, Fold
    >>> t = TableDriver(TableConfig(), stacks={1: 1000, 3: 1000}); _ = t.start()
    >>> t.deal_from("Ah Kd 7c 7d 2c 9s", hide_down=True)
    >>> _ = t.apply(PostBringIn(seat=1)); _ = t.apply(Fold(seat=3))
    >>> print(render_history(t.events[3:]))
    Hand #1: seats 1, 3 dealt in
    Seat 1 antes 40
    Seat 3 antes 40
    *** 3rd street ***
    Seat 1 is dealt a down card
    Seat 3 is dealt a down card
    Seat 1 is dealt a down card
    Seat 3 is dealt a down card
    Seat 1 is dealt 2c up
    Seat 3 is dealt 9s up
    Seat 1 brings in for 50
    Seat 3 folds
    Uncalled 50 returned to seat 1
    Seat 1 wins 80
    *** Hand #1 is over ***
    """
    lines: list[str] = []
    street: Street | None = None
    in_showdown = False
    pots_by_hand: dict[int, int] = {}
    hand_index = -1
    for event in events:
        if isinstance(event, HandStarted):
            hand_index += 1
        elif isinstance(event, PotAwarded):
            pots_by_hand[hand_index] = max(pots_by_hand.get(hand_index, 0), event.pot + 1)
    hand_index = -1
    for event in events:
        if isinstance(event, HandStarted):
            hand_index += 1
            street, in_showdown = None, False
        if isinstance(event, DownCardDealt | UpCardDealt) and event.street != street:
            street = event.street
            lines.append(f"*** {street.label} ***")
        elif isinstance(event, CommunityCardDealt) and street != Street.SEVENTH:
            street = Street.SEVENTH
            lines.append(f"*** {street.label} ***")
        elif isinstance(event, HandShown | HandMucked) and not in_showdown:
            in_showdown = True
            lines.append("*** Showdown ***")
        line = _event_line(event, pots_by_hand.get(hand_index, 0))
        if line is not None:
            lines.append(line)
    return "\n".join(lines)
