"""Private mutable twins of :class:`~rules.state.HandState` and :class:`~rules.state.Player`
for the hot path of ``fold``.

A twin has the same attribute names and read-only properties as the frozen value, so the
read-only helpers of :mod:`rules.rounds` (typed for both) and :mod:`rules.betting` (by duck
typing; see :meth:`MutableHand.view`) work on it unchanged. A twin is made from a frozen value
(:meth:`MutableHand.thaw`), changed in place by ``evolve``'s hand handlers only (which
``fold`` and ``decide`` run), and turned back into a frozen value once
(:meth:`MutableHand.freeze`); it never leaves the rules package.

Players are copied on write: a thawed hand holds the frozen players it was made from until
one of them changes (:meth:`MutableHand.mutable`), so applying a single event copies only the
player it touches.

Pure (``STUD_PURE=1``, or no compiler), a twin has exactly the slots of its frozen value, in
the same order (the same memory layout), so freezing it copies nothing: the twin *becomes* the
frozen value, its class set to the frozen class (``object.__setattr__(twin, "__class__",
...)``, which Python allows between classes of the same layout and refuses, with a TypeError,
otherwise). Thawing copies with plain attribute stores, several times as fast as the
``object.__setattr__`` a frozen class needs.

Compiled (tools/compile_core.py, :data:`NATIVE`), the twins are mypyc native classes: the
compiled ``evolve`` and :mod:`rules.rounds` read and write their attributes as C struct
fields, which is most of the fold's work; a native instance cannot change its class, so
freezing copies each changed player and the hand into new frozen values by the positional
:func:`maker` (one call each, once per run of hand events).

Either way a frozen value so made is an ordinary instance of its class (``type(x) is
HandState``), holding the same values as one made by its ``__init__`` (which computes and
checks nothing). After :meth:`MutableHand.freeze` the twin is gone: use only what freeze
returned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any, Final, cast

from rules.cards import Card
from rules.events import PotAwarded
from rules.state import HandState, Phase, Player
from rules.streets import Street

_new = object.__new__
_set = object.__setattr__
_COMPLETE = Phase.COMPLETE  # a module constant: cheaper than the enum's lookup

_PLAYER_FIELDS = tuple(f.name for f in fields(Player))
_HAND_FIELDS = tuple(f.name for f in fields(HandState))
assert Player.__slots__ == _PLAYER_FIELDS and HandState.__slots__ == _HAND_FIELDS


def _copier(names: tuple[str, ...], target: type) -> Callable[[object], Any]:
    """A function copying the attributes ``names`` of an object into a new ``target`` (a
    mutable class) made without ``__init__``: straight-line code of plain attribute stores,
    generated once (as ``dataclasses`` does)."""
    lines = [f"    new.{name} = obj.{name}" for name in names]
    source = "def copy(obj):\n    new = _new(target)\n" + "\n".join(lines) + "\n    return new\n"
    namespace: dict[str, Any] = {"_new": _new, "target": target}
    exec(source, namespace)  # the source holds only dataclass field names
    return cast(Callable[[object], Any], namespace["copy"])


def twin_class(frozen: type) -> type:
    """A mutable class with exactly the slots of the frozen, slotted dataclass ``frozen`` (the
    same layout): an instance of it, every slot set, becomes a ``frozen`` value by
    :func:`become` (private to the rules package)."""
    slots = tuple(f.name for f in fields(frozen))
    assert vars(frozen)["__slots__"] == slots
    return type(f"_{frozen.__name__}Twin", (), {"__slots__": slots})


def copier(frozen: type, twin: type) -> Callable[[object], Any]:
    """A function copying a ``frozen`` value into a new ``twin`` (of :func:`twin_class`)."""
    return _copier(tuple(f.name for f in fields(frozen)), twin)


def maker(frozen: type) -> Callable[..., Any]:
    """A constructor of the frozen, slotted dataclass ``frozen`` taking every field by
    position, in field order: the same value as its ``__init__`` (which must compute and check
    nothing: no ``__post_init__``), made with plain stores into a twin of the same layout that
    then becomes the frozen value (private to the rules package; for values built on hot
    paths)."""
    assert "__post_init__" not in vars(frozen)
    names = tuple(f.name for f in fields(frozen))
    lines = [f"    new.{name} = {name}" for name in names]
    source = (f"def make({', '.join(names)}):\n    new = _new(twin)\n" + "\n".join(lines)
              + "\n    _set(new, '__class__', frozen)\n    return new\n")
    namespace: dict[str, Any] = {"_new": _new, "_set": _set, "frozen": frozen,
                                 "twin": twin_class(frozen)}
    exec(source, namespace)  # the source holds only dataclass field names
    return cast(Callable[..., Any], namespace["make"])


def become(twin: object, frozen: type) -> Any:
    """``twin`` (every slot set) turned into a value of ``frozen``, in place: nothing is
    copied, and ``twin`` is the frozen value from now on (TypeError if the layouts differ)."""
    _set(twin, "__class__", frozen)
    return twin


class MutablePlayer:
    """A :class:`Player` that can be changed in place."""

    __slots__ = _PLAYER_FIELDS

    seat: int
    stack: int
    player_id: str
    down: tuple[Card | None, ...]
    up: tuple[Card, ...]
    folded: bool
    street_total: int
    hand_total: int
    acted: bool
    reference: int
    exposed: bool
    mucked: bool
    shown: bool

    def __init__(self, seat: int, stack: int, player_id: str, down: tuple[Card | None, ...],
                 up: tuple[Card, ...], folded: bool, street_total: int, hand_total: int,
                 acted: bool, reference: int, exposed: bool, mucked: bool,
                 shown: bool) -> None:
        self.seat = seat
        self.stack = stack
        self.player_id = player_id
        self.down = down
        self.up = up
        self.folded = folded
        self.street_total = street_total
        self.hand_total = hand_total
        self.acted = acted
        self.reference = reference
        self.exposed = exposed
        self.mucked = mucked
        self.shown = shown

    @staticmethod
    def thaw(player: Player) -> MutablePlayer:
        """A twin of ``player``."""
        return _thaw_player(player)

    def freeze(self) -> Player:
        """This twin turned into the frozen value equal to it (in place: the twin is gone)."""
        if NATIVE:
            return cast(Player, _make_player(
                self.seat, self.stack, self.player_id, self.down, self.up, self.folded,
                self.street_total, self.hand_total, self.acted, self.reference, self.exposed,
                self.mucked, self.shown))
        _set(self, "__class__", Player)
        return cast(Player, self)

    # The properties of Player, read by the helpers in rules.betting.
    @property
    def in_hand(self) -> bool:
        """Dealt in and not folded."""
        return not self.folded

    @property
    def all_in(self) -> bool:
        """In the hand with no chips behind."""
        return not self.folded and self.stack == 0

    @property
    def able(self) -> bool:
        """In the hand and not all-in: able to act."""
        return not self.folded and self.stack > 0

    @property
    def board(self) -> tuple[Card, ...]:
        """The up cards that form the board (never more than four, RULES 8.4)."""
        return self.up[:4]

    def own_cards(self) -> tuple[Card | None, ...]:
        """Down and up cards (the community card is not one of them)."""
        return self.down + self.up


class MutableHand:
    """A :class:`HandState` that can be changed in place; ``players`` is a list holding frozen
    players not changed yet and twins (:class:`MutablePlayer`) of the others."""

    __slots__ = _HAND_FIELDS

    hand_number: int
    players: list[Player | MutablePlayer]
    phase: Phase
    street: Street | None
    to_act: int | None
    target: int
    level: int
    full_wagers: int
    bring_in_seat: int | None
    bring_in_pending: bool
    cap_lifted: bool
    last_wager: tuple[Street, int] | None
    exposed: bool
    dealt: int
    burned: int
    community: Card | None
    deck_commitment: str
    card_commitment: str
    awards: tuple[PotAwarded, ...]
    rake: int
    rake_pots: tuple[int, ...]
    voided: bool

    def __init__(self, hand_number: int, players: list[Player | MutablePlayer], phase: Phase,
                 street: Street | None, to_act: int | None, target: int, level: int,
                 full_wagers: int, bring_in_seat: int | None, bring_in_pending: bool,
                 cap_lifted: bool, last_wager: tuple[Street, int] | None, exposed: bool,
                 dealt: int, burned: int, community: Card | None, deck_commitment: str,
                 card_commitment: str, awards: tuple[PotAwarded, ...], rake: int,
                 rake_pots: tuple[int, ...], voided: bool) -> None:
        self.hand_number = hand_number
        self.players = players
        self.phase = phase
        self.street = street
        self.to_act = to_act
        self.target = target
        self.level = level
        self.full_wagers = full_wagers
        self.bring_in_seat = bring_in_seat
        self.bring_in_pending = bring_in_pending
        self.cap_lifted = cap_lifted
        self.last_wager = last_wager
        self.exposed = exposed
        self.dealt = dealt
        self.burned = burned
        self.community = community
        self.deck_commitment = deck_commitment
        self.card_commitment = card_commitment
        self.awards = awards
        self.rake = rake
        self.rake_pots = rake_pots
        self.voided = voided

    @staticmethod
    def thaw(hand: HandState) -> MutableHand:
        """A twin of ``hand`` (sharing its frozen players until they change).

        Compiled, the twin the latest :meth:`freeze` made ``hand`` from, when it did (a
        twin kept by freeze is handed out once: see :class:`_Kept`)."""
        if NATIVE:
            kept = _KEPT
            if kept.hand is hand:
                taken = kept.twin
                kept.hand = kept.twin = None
                assert taken is not None
                return taken
            return MutableHand(
                hand.hand_number, list(hand.players), hand.phase, hand.street, hand.to_act,
                hand.target, hand.level, hand.full_wagers, hand.bring_in_seat,
                hand.bring_in_pending, hand.cap_lifted, hand.last_wager, hand.exposed,
                hand.dealt, hand.burned, hand.community, hand.deck_commitment,
                hand.card_commitment, hand.awards, hand.rake, hand.rake_pots, hand.voided)
        twin: MutableHand = _copy_hand(hand)
        twin.players = list(hand.players)
        return twin

    def freeze(self) -> HandState:
        """This twin turned into the frozen value equal to it, with its players frozen (in
        place: the twin is gone, use only the value returned).

        Compiled, the twin is kept (:class:`_Kept`) as :meth:`thaw` of the value returned
        would make it: the same fields, its players the value's own (frozen) players."""
        players = self.players
        if NATIVE:
            i = 0
            for p in players:
                if isinstance(p, MutablePlayer):
                    players[i] = p.freeze()  # the twin then holds what the value holds
                i += 1  # noqa: SIM113 (no enumerate on the hot path)
            hand = cast(HandState, _make_hand(
                self.hand_number, tuple(players), self.phase, self.street, self.to_act,
                self.target, self.level, self.full_wagers, self.bring_in_seat,
                self.bring_in_pending, self.cap_lifted, self.last_wager, self.exposed,
                self.dealt, self.burned, self.community, self.deck_commitment,
                self.card_commitment, self.awards, self.rake, self.rake_pots, self.voided))
            kept = _KEPT
            kept.hand, kept.twin = hand, self
            return hand
        for p in players:
            if type(p) is MutablePlayer:
                _set(p, "__class__", Player)
        self.players = tuple(players)  # type: ignore[assignment]
        _set(self, "__class__", HandState)
        return cast(HandState, self)

    def view(self) -> HandState:
        """This twin typed as the frozen hand it mirrors, for the read-only helpers of
        :mod:`rules.betting` (which read only attributes and properties both have)."""
        return cast(HandState, self)

    def mutable(self, seat: int) -> MutablePlayer:
        """The player at ``seat``, as a twin that may be changed (KeyError if not dealt in)."""
        players = self.players
        i = 0
        for p in players:
            if p.seat == seat:
                if isinstance(p, MutablePlayer):
                    return p
                twin: MutablePlayer = _thaw_player(p)
                players[i] = twin
                return twin
            i += 1  # noqa: SIM113 (no enumerate on the hot path)
        raise KeyError(seat)

    def mutable_at(self, index: int) -> MutablePlayer:
        """``players[index]``, as a twin that may be changed."""
        p = self.players[index]
        if isinstance(p, MutablePlayer):
            return p
        twin: MutablePlayer = _thaw_player(p)
        self.players[index] = twin
        return twin

    # The methods and properties of HandState, read by the helpers in rules.betting.
    def player(self, seat: int) -> Player | MutablePlayer:
        """The player at ``seat`` (KeyError if not dealt in)."""
        for p in self.players:
            if p.seat == seat:
                return p
        raise KeyError(seat)

    def has_player(self, seat: int) -> bool:
        """Whether ``seat`` is dealt into this hand."""
        return any(p.seat == seat for p in self.players)

    @property
    def in_hand(self) -> tuple[Player | MutablePlayer, ...]:
        """Players still in the hand."""
        return tuple(p for p in self.players if not p.folded)

    @property
    def able(self) -> tuple[Player | MutablePlayer, ...]:
        """Players able to act."""
        return tuple(p for p in self.players if p.able)

    @property
    def pot_total(self) -> int:
        """All chips committed this hand and not yet awarded, raked or returned."""
        if self.voided:
            return 0
        return (sum(p.hand_total for p in self.players) - sum(a.amount for a in self.awards)
                - self.rake)

    @property
    def is_over(self) -> bool:
        """Whether the hand is complete."""
        return self.phase == _COMPLETE


NATIVE: Final = not hasattr(MutableHand, "__slots__")
"""Whether this module is compiled (mypyc: the twins are native classes, which keep no
``__slots__``, so a twin cannot become its frozen value by a class change and is copied into
one by a positional :func:`maker` instead; their attributes are read natively by the compiled
fold). Pure, the twins have the frozen values' layouts and become them in place."""



class _Kept:
    """The hand the latest :meth:`MutableHand.freeze` returned and the twin it froze,
    compiled (:data:`NATIVE`): the next :meth:`MutableHand.thaw` of that very hand (by
    identity) takes the twin instead of copying the hand into a new one, which a replay's
    next command does (it decides on the state the previous one left).

    Sound because the twin is then exactly what thaw would make (freeze puts the frozen
    players back into its list), and because nobody can change it after freeze: a twin
    never leaves the rules package, and its only holders (``decide``'s ``_follow``,
    ``evolve`` and ``fold``) drop it when they freeze it, so the one reference left is
    here (tests/unit/rules/test_kept_twin.py checks both after every command of random
    hands). It is handed out once: a second thaw of the same hand (another command tried
    on the same state) copies as before, so one branch never sees another's changes. This
    object holds the kept hand alive, so an identity match is never a recycled address.
    Pure, freeze turns the twin itself into the value and nothing is kept.

    One keeper a process and no lock: the rules are called from one thread at a time (the
    services run them on their asyncio loop; ``stud replay verify --jobs`` forks processes).
    A caller that ran them in several threads at once would need a keeper per thread."""

    __slots__ = ("hand", "twin")

    def __init__(self) -> None:
        self.hand: HandState | None = None
        self.twin: MutableHand | None = None


_KEPT: Final = _Kept()


def forget() -> None:
    """Drop the kept twin (the next thaw copies): for tests comparing with a fresh copy."""
    _KEPT.hand = _KEPT.twin = None


_copy_player = _copier(_PLAYER_FIELDS, MutablePlayer)
_copy_hand = _copier(_HAND_FIELDS, MutableHand)
_make_player, _make_hand = maker(Player), maker(HandState)


def _thaw_player(p: Player) -> MutablePlayer:
    """A twin of ``p``: by its native constructor compiled, else by plain stores."""
    if NATIVE:
        return MutablePlayer(p.seat, p.stack, p.player_id, p.down, p.up, p.folded,
                             p.street_total, p.hand_total, p.acted, p.reference, p.exposed,
                             p.mucked, p.shown)
    twin: MutablePlayer = _copy_player(p)
    return twin
