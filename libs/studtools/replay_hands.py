"""The pure core of ``stud replay list|show|verify|export``: a table's log split into hands,
each command rebuilt from the events it wrote and decided again, chips and the wallet's
settlement checked against the folded result, and cards merged into the public record.

Nothing here does I/O: :mod:`studtools.replay_source` reads Redis and the dealer, and
:mod:`studtools.replay_cli` prints. A table's log is a list of :class:`Logged` events in
stream order; :func:`split_hands` cuts it into :class:`HandLog` values (each with the table's
state before it), :func:`verify_log` re-decides every command and :func:`check_money` compares
a hand with the wallet's postings.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from rules import Card, Command, Event, RuleViolation, TableState, fold, settlement
from rules.commands import (
    AddChips,
    Bet,
    Call,
    ChangeStakes,
    Check,
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
from rules.decide import decide_and_fold
from rules.events import (
    ActionTimedOut,
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
    StakesChanged,
    TableOpened,
    UpCardDealt,
)
from rules.state import Phase


@dataclass(frozen=True, slots=True)
class Logged:
    """One event of a table's stream: its sequence (1-based), the command that wrote it and
    when (seconds since the epoch, 0.0 if the writer set no time)."""

    sequence: int
    command_id: str
    occurred_at: float
    event: Event


class _LoggedTwin:
    """:class:`Logged`'s layout, mutable: :func:`make_logged` fills one, then makes it a
    ``Logged``."""

    __slots__ = ("command_id", "event", "occurred_at", "sequence")
    sequence: int
    command_id: str
    occurred_at: float
    event: Event


_new = object.__new__
_set_class = object.__setattr__


def make_logged(sequence: int, command_id: str, occurred_at: float, event: Event) -> Logged:
    """``Logged(sequence, command_id, occurred_at, event)``, the same value, made by plain
    stores into a twin of its layout that then becomes a ``Logged``: the frozen dataclass's
    ``__init__`` (an ``object.__setattr__`` call a field) cost about 0.9 us more (a log's
    every event is one: ``decode_all`` of bench_replay's logs 73 -> 64 us a hand)."""
    new = _new(_LoggedTwin)
    new.sequence = sequence
    new.command_id = command_id
    new.occurred_at = occurred_at
    new.event = event
    _set_class(new, "__class__", Logged)
    return cast(Logged, new)


assert sorted(_LoggedTwin.__slots__) == sorted(Logged.__slots__)  # the same layout


@dataclass(slots=True)
class HandLog:
    """One hand: the table's state before its ``HandStarted``, its events up to its
    ``HandEnded`` (fewer while it is still being played) and the table events written
    between the previous hand and this one (``lead``)."""

    table_id: str
    number: int
    before: TableState
    events: list[Logged]
    lead: list[Logged] = field(default_factory=list)
    start: TableState | None = None
    """The state before ``lead`` (None: no lead, the same as ``before``)."""

    @property
    def complete(self) -> bool:
        """Whether the hand reached its ``HandEnded``."""
        return bool(self.events) and isinstance(self.events[-1].event, HandEnded)

    def rules_events(self) -> list[Event]:
        """The hand's events as rules values."""
        return [item.event for item in self.events]

    def after(self) -> TableState:
        """The table's state after the hand's last event."""
        return fold(self.rules_events(), self.before)


def split_hands(table_id: str, log: Sequence[Logged], start: TableState | None = None
                ) -> tuple[list[HandLog], TableState]:
    """Cut a table's log into hands; also returns the state after the whole log. Events
    outside any hand (seating, top-ups, leaving) go into the next hand's ``lead``. ``start``
    is the state before the log's first event (default: no table yet; a snapshot's state
    when the log's head was archived)."""
    try:
        return _split_hands(table_id, log, start)
    except Unfoldable as exc:  # the log's own events do not fold: named with the table
        exc.table_id = table_id
        raise


def _split_hands(table_id: str, log: Sequence[Logged], start: TableState | None
                 ) -> tuple[list[HandLog], TableState]:
    hands: list[HandLog] = []
    state = TableState() if start is None else start
    lead: list[Logged] = []
    current: HandLog | None = None
    for item in log:
        event = item.event
        if current is None:
            if isinstance(event, HandStarted):
                start = state
                state = fold_logged(lead, state, event.hand_number)
                current = HandLog(table_id, event.hand_number, state, [item], lead,
                                  start if lead else None)
                lead = []
            else:
                lead.append(item)
            continue
        current.events.append(item)
        if isinstance(event, HandEnded):
            state = fold_logged(current.events, current.before, current.number)
            hands.append(current)
            current = None
    if current is not None:
        hands.append(current)
        state = fold_logged(current.events, current.before, current.number)
        lead = []
    return hands, fold_logged(lead, state, state.hands_started + 1)


# --- commands rebuilt from their events ------------------------------------------------------

_DEAL_EVENTS = (CardBurned, BurnsReshuffled, DownCardDealt, UpCardDealt, CommunityCardDealt)


class Unrebuildable(ValueError):
    """Raised when a command's events do not show enough to rebuild the command (a showdown
    whose mucked cards the public record hides)."""


def command_for(events: Sequence[Event], state: TableState) -> Command | None:
    """The command that wrote ``events`` (one command's events, in order), rebuilt from them;
    None when no command starts with such an event (e.g. a ``PotAwarded`` on its own)."""
    first = events[0]
    # The commonest commands first, by exact type (a match tries each case in turn).
    if isinstance(first, Checked):
        return Check(seat=first.seat)
    if isinstance(first, Called):
        return Call(seat=first.seat)
    if isinstance(first, Folded):
        return Fold(seat=first.seat)
    match first:
        case TableOpened(table_id=table_id, config=config):
            return OpenTable(table_id=table_id, config=config)
        case PlayerSeated(seat=seat, player_id=player_id, stack=stack):
            return SitDown(seat=seat, player_id=player_id, stack=stack)
        case PlayerLeft(seat=seat):
            return LeaveSeat(seat=seat)
        case PlayerSatOut(seat=seat):
            return SitOut(seat=seat)
        case PlayerSatIn(seat=seat):
            return SitIn(seat=seat)
        case ChipsAdded(seat=seat, amount=amount):
            return AddChips(seat=seat, amount=amount)
        case HandStarted(hand_number=number, deck_commitment=commitment,
                         card_commitment=cards):
            return StartHand(hand_number=number, deck_commitment=commitment,
                             card_commitment=cards)
        case CardBurned() | BurnsReshuffled() | DownCardDealt() | UpCardDealt() | \
                CommunityCardDealt():
            return _deal(events)
        case BringInPosted(seat=seat):
            return PostBringIn(seat=seat)
        case Completed(seat=seat, to=to):
            return Complete(seat=seat, to=to)
        case BetMade(seat=seat, to=to):
            return Bet(seat=seat, to=to)
        case Raised(seat=seat, to=to):
            return Raise(seat=seat, to=to)
        case Called(seat=seat):
            return Call(seat=seat)
        case Checked(seat=seat):
            return Check(seat=seat)
        case Folded(seat=seat):
            return Fold(seat=seat)
        case ActionTimedOut(seat=seat):
            return TimeOut(seat=seat)
        case HandExposed():
            return RevealHands(hands=tuple(RevealedHand(seat=e.seat, down=e.down)
                                           for e in events if isinstance(e, HandExposed)))
        case HandShown() | HandMucked():
            return _showdown(events, state)
        case HandVoided(reason=reason):
            return VoidHand(reason=reason)
        case StakesChanged(small_bet=small, big_bet=big, ante=ante, bring_in=bring_in):
            return ChangeStakes(small_bet=small, big_bet=big, ante=ante, bring_in=bring_in)
        case _:
            return None


_DEALT: dict[int, tuple[Event, DealtCard]] = {}
"""Each dealt card's ``DealtCard`` by its event's identity (the event kept with it, as in
:data:`_COMMANDS`): a log's card events are decoded once per distinct payload, and every
down card of the public record is one of a few."""
_DEALT_MAX = 100_000


def _deal(events: Sequence[Event]) -> DealStreet:
    cards: list[DealtCard] = []
    burned = 0
    reshuffled = False
    for event in events:
        kept = _DEALT.get(id(event))
        if kept is not None and kept[0] is event:
            cards.append(kept[1])
            continue
        if isinstance(event, DownCardDealt):
            dealt = DealtCard(seat=event.seat, up=False, card=event.card)
        elif isinstance(event, UpCardDealt):
            dealt = DealtCard(seat=event.seat, up=True, card=event.card)
        elif isinstance(event, CommunityCardDealt):
            dealt = DealtCard(seat=0, up=True, card=event.card)
        else:
            if isinstance(event, CardBurned):
                burned += 1
            elif isinstance(event, BurnsReshuffled):
                reshuffled = True
            continue
        if len(_DEALT) >= _DEALT_MAX:
            _DEALT.clear()
        _DEALT[id(event)] = (event, dealt)
        cards.append(dealt)
    return DealStreet(cards=tuple(cards), burned=burned, reshuffled_burns=reshuffled)


def _showdown(events: Sequence[Event], state: TableState) -> Showdown:
    hand = state.hand
    if hand is None:
        raise Unrebuildable("a showdown with no hand")
    given: dict[int, tuple[Card, ...]] = {}
    mucked: set[int] = set()
    for event in events:
        if isinstance(event, HandShown | HandMucked) and event.down:
            given[event.seat] = event.down
        if isinstance(event, HandMucked):
            mucked.add(event.seat)
    hands = []
    for p in hand.players:
        if p.folded:
            continue
        down = given.get(p.seat)
        if down is None:
            known = tuple(c for c in p.down if c is not None)
            if len(known) != len(p.down):
                raise Unrebuildable(f"seat {p.seat}'s mucked cards are not in the public "
                                    "record (the auditor's view has them)")
            down = known
        hands.append(RevealedHand(seat=p.seat, down=down))
    return Showdown(hands=tuple(hands), muck_requests=frozenset(mucked))


def command_groups(log: Sequence[Logged]) -> list[list[Logged]]:
    """Consecutive events written by one command (one command id), in order."""
    groups: list[list[Logged]] = []
    last = None
    for item in log:
        if groups and item.command_id == last:
            groups[-1].append(item)
        else:
            groups.append([item])
            last = item.command_id
    return groups


# --- verification ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Problem:
    """What is wrong, and the first wrong event (its sequence; None when the fault is not
    in the stream, e.g. a missing ledger entry)."""

    hand: int
    sequence: int | None
    what: str

    def line(self, table_id: str) -> str:
        """``table t1 hand 3: event #57 (Called): ...``"""
        where = f"event #{self.sequence}: " if self.sequence is not None else ""
        return f"table {table_id} hand {self.hand}: {where}{self.what}"


class Unfoldable(ValueError):
    """Raised when the log's own events do not fold (the rules' fold fails on them: a
    tampered log, e.g. an event moved to a seat not in the hand); ``problem`` names the hand
    and the first event that does not fold."""

    def __init__(self, problem: Problem, table_id: str = "") -> None:
        super().__init__(problem.what)
        self.problem = problem
        self.table_id = table_id

    def __str__(self) -> str:
        return self.problem.line(self.table_id)


def fold_logged(items: Sequence[Logged], state: TableState, hand: int) -> TableState:
    """``fold`` of the logged events from ``state``; :class:`Unfoldable` naming the first
    event that does not fold (any exception of the rules' fold) instead of that exception."""
    try:
        return fold([item.event for item in items], state)
    except Exception:  # whatever fails, the log is wrong: find its event
        pass
    for item in items:
        try:
            state = fold([item.event], state)
        except Exception as exc:
            raise Unfoldable(Problem(
                hand, item.sequence, f"{describe(item.event)} does not fold: "
                f"{type(exc).__name__}: {exc}")) from exc
    raise Unfoldable(Problem(hand, items[0].sequence if items else None,
                             "the events do not fold"))


@dataclass(slots=True)
class HandVerdict:
    """The verification of one hand: its problems (empty: verified) and notes (checks that
    could not be made, e.g. without auditor credentials)."""

    table_id: str
    hand: int
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    after: TableState | None = field(default=None, repr=False)
    """The state after the hand, folded from the log (for the money check)."""
    read_from: list[str] = field(default_factory=list)
    """Where the hand was read from: its events' stores (e.g. ``events #1..#9 from
    PostgreSQL``, ``events #10..#31 from Redis``) and its deck's (``deck from the
    dealer``), so that a failure names the store of the wrong bytes."""

    @property
    def ok(self) -> bool:
        """Whether nothing is wrong."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"table": self.table_id, "hand": self.hand, "ok": self.ok,
                "checks": self.checks, "notes": self.notes, "read_from": self.read_from,
                "problems": [{"event": p.sequence, "what": p.what} for p in self.problems]}


def describe(event: Event) -> str:
    """An event in short, e.g. ``Called(seat=2, amount=100)``; no down card value."""
    if isinstance(event, DownCardDealt):
        return f"DownCardDealt(seat={event.seat}, street={int(event.street)})"
    return repr(event)


# The commands rebuilt from their first event alone, by the event's exact type (what
# command_for gives for it): a betting action's. A log repeats them (its events are decoded
# once per distinct payload: studtools.replay_source.decode_all), so each event's command
# is kept, by the event's identity (:func:`_command_of`).
_BY_FIRST: dict[type, Any] = {
    Checked: lambda e: Check(seat=e.seat),
    Called: lambda e: Call(seat=e.seat),
    Folded: lambda e: Fold(seat=e.seat),
    BringInPosted: lambda e: PostBringIn(seat=e.seat),
    Completed: lambda e: Complete(seat=e.seat, to=e.to),
    BetMade: lambda e: Bet(seat=e.seat, to=e.to),
    Raised: lambda e: Raise(seat=e.seat, to=e.to),
    ActionTimedOut: lambda e: TimeOut(seat=e.seat),
}
_COMMANDS: dict[int, tuple[Event, Command]] = {}
"""By ``id(event)``: the event (kept, so that its id is not reused while here) and its
command."""
_COMMANDS_MAX = 100_000


def _command_of(first: Event) -> Command | None:
    """The command of a group starting with ``first`` when it depends on ``first`` alone
    (:data:`_BY_FIRST`), kept; None otherwise (:func:`command_for` rebuilds it)."""
    kept = _COMMANDS.get(id(first))
    if kept is not None and kept[0] is first:
        return kept[1]
    build = _BY_FIRST.get(type(first))
    if build is None:
        return None
    command: Command = build(first)
    if len(_COMMANDS) >= _COMMANDS_MAX:
        _COMMANDS.clear()
    _COMMANDS[id(first)] = (first, command)
    return command


def redecide(state: TableState, group: Sequence[Logged], hand: int
             ) -> tuple[TableState, Problem | None, str | None]:
    """Decide again the command that wrote ``group`` from ``state``; returns the state after
    the group (folded from the log as written), the first problem if the rules give other
    events, and a note when the command could not be rebuilt."""
    command = _command_of(group[0].event)
    if command is not None:  # the commonest case first: a betting action, decided the same
        try:
            decided, after = decide_and_fold(state, command)
        except Exception:  # a RuleViolation or worse: named below
            pass
        else:
            if len(decided) == len(group):
                for want, item in zip(decided, group, strict=True):
                    if want != item.event:
                        break
                else:
                    return after, None, None
    return _redecide(state, group, hand)


def _redecide(state: TableState, group: Sequence[Logged], hand: int
              ) -> tuple[TableState, Problem | None, str | None]:
    events = [item.event for item in group]
    try:
        command = command_for(events, state)
    except Unrebuildable as exc:
        return (fold_logged(group, state, hand), None,
                f"event #{group[0].sequence}: not re-decided: {exc}")
    except Exception as exc:  # a state no legal log reaches
        return fold_logged(group, state, hand), Problem(
            hand, group[0].sequence, f"{describe(events[0])} rebuilds no command: "
            f"{type(exc).__name__}: {exc}"), None
    if command is None:
        return fold_logged(group, state, hand), Problem(
            hand, group[0].sequence,
            f"{describe(events[0])} starts no command the rules know"), None
    try:
        decided, after = decide_and_fold(state, command)
    except RuleViolation as exc:
        return fold_logged(group, state, hand), Problem(
            hand, group[0].sequence,
            f"{describe(events[0])} is illegal: {exc.reason.value}: {exc.detail}"), None
    except Exception as exc:  # a state no legal log reaches
        return fold_logged(group, state, hand), Problem(
            hand, group[0].sequence, f"{describe(events[0])} cannot be decided again: "
            f"{type(exc).__name__}: {exc}"), None
    if decided == tuple(events):
        return after, None, None
    for index, (want, got) in enumerate(zip(decided, events, strict=False)):
        if want != got:
            return fold_logged(group, state, hand), Problem(
                hand, group[index].sequence,
                f"the log has {describe(got)}, the rules decide {describe(want)}"), None
    if len(events) > len(decided):
        extra = group[len(decided)]
        return fold_logged(group, state, hand), Problem(
            hand, extra.sequence, f"{describe(extra.event)} follows from no command"), None
    # The command's own events end early: the first wrong event is the one after them
    # (the caller names it; None here).
    return fold_logged(group, state, hand), Problem(
        hand, None, f"the command of event #{group[0].sequence} stops short at event "
        f"#{group[-1].sequence}: the rules also decide {describe(decided[len(events)])}"
    ), None


def verify_hand_log(hand: HandLog) -> HandVerdict:
    """Re-decide every command of the hand (and of the table events before it), and check
    that the chips are conserved. The money against the wallet is :func:`check_money`."""
    verdict = HandVerdict(hand.table_id, hand.number)
    try:
        return _verify_hand_log(hand, verdict)
    except Unfoldable as exc:  # the log's own events do not fold: named, nothing after it
        verdict.problems[:] = [exc.problem]
        verdict.checks.append("legal")
        verdict.after = None
        return verdict


def _verify_hand_log(hand: HandLog, verdict: HandVerdict) -> HandVerdict:
    before = hand.before
    if hand.start is not None:
        state = hand.start
        for group in command_groups(hand.lead):
            state, problem, note = redecide(state, group, hand.number)
            _record(verdict, problem, note)
        before = state
    state = before
    # The hand's commands (runs of one command id, as command_groups cuts them) in one loop:
    # a betting action decided and compared in place (redecide's fast path, without a list
    # per group), anything else, or anything that differs, through redecide.
    items = hand.events
    count = len(items)
    start = 0
    while start < count:
        command_id = items[start].command_id
        end = start + 1
        while end < count and items[end].command_id == command_id:
            end += 1
        command = _command_of(items[start].event)
        if command is not None:
            try:
                decided, after = decide_and_fold(state, command)
            except Exception:  # a RuleViolation, or a state no legal log
                decided = ()   # reaches: _redecide names it
            if len(decided) == end - start:
                at = start
                for want in decided:
                    if want != items[at].event:
                        break
                    at += 1
                else:
                    state, start = after, end
                    continue
        state, problem, note = _redecide(state, items[start:end], hand.number)
        if problem is not None and problem.sequence is None:
            following = items[end].sequence if end < count else None
            problem = Problem(problem.hand, following, problem.what)
        _record(verdict, problem, note)
        if problem is not None:
            break
        start = end
    verdict.checks.append("legal")
    verdict.after = state
    if verdict.ok and hand.complete:
        verdict.problems.extend(conservation(hand.number, before, state, hand.events[-1]))
        verdict.checks.append("chips")
    return verdict


def _record(verdict: HandVerdict, problem: Problem | None, note: str | None) -> None:
    if problem is not None and not verdict.problems:
        verdict.problems.append(problem)
    if note is not None:
        verdict.notes.append(note)


def conservation(number: int, before: TableState, after: TableState,
                 last: Logged) -> list[Problem]:
    """Chips conserved over a complete hand: each seat's stack moves by what it won less what
    it put in, and what went in equals what was won plus the rake."""
    result = settlement(after)
    if result is None:
        return [Problem(number, last.sequence, "the hand is not over after its HandEnded")]
    problems = []
    won = sum(s.amount_won for s in result.seats)
    if won + result.rake != result.amount_in:
        problems.append(Problem(number, last.sequence, f"chips not conserved: won {won} + "
                                f"rake {result.rake} != put in {result.amount_in}"))
    for s in result.seats:
        start, end = before.stack(s.seat), after.stack(s.seat)
        if end != start + s.net:
            problems.append(Problem(number, last.sequence,
                                    f"seat {s.seat} ends with {end}, not {start} + {s.net}"))
    return problems


def verify_hands(table_id: str, log: Sequence[Logged], start: TableState | None = None
                 ) -> list[tuple[HandLog, HandVerdict]]:
    """Every hand of the log (as :func:`split_hands` cuts it) with its verdict
    (:func:`verify_hand_log`). The state before each hand is the one the hand before left:
    its re-decision computes it (``decide_and_fold`` returns ``fold(events, state)`` of the
    events it checked equal to the log's), so a hand re-decided in full is not folded a second
    time; after a hand with a problem, the log's own events are folded, as ``split_hands``
    does."""
    return list(iter_verify_hands(table_id, log, start))


def iter_verify_hands(table_id: str, log: Sequence[Logged], start: TableState | None = None
                      ) -> Iterator[tuple[HandLog, HandVerdict]]:
    """:func:`verify_hands`, each hand given as soon as it is verified (a caller may do
    other work between two: ``stud replay verify`` lets the next table's read go on)."""
    state = TableState() if start is None else start
    lead: list[Logged] = []
    current: HandLog | None = None
    for item in log:
        event = item.event
        if current is None:
            if isinstance(event, HandStarted):
                try:
                    before = fold_logged(lead, state, event.hand_number) if lead else state
                except Unfoldable as exc:  # the table's verification stops here
                    hand = HandLog(table_id, event.hand_number, state, [item], lead, state)
                    yield hand, HandVerdict(table_id, event.hand_number, [exc.problem])
                    return
                current = HandLog(table_id, event.hand_number, before, [item], lead,
                                  state if lead else None)
                lead = []
            else:
                lead.append(item)
            continue
        current.events.append(item)
        if isinstance(event, HandEnded):
            verdict = verify_hand_log(current)
            if verdict.ok and verdict.after is not None:
                state = verdict.after
            else:
                try:
                    state = fold_logged(current.events, current.before, current.number)
                except Unfoldable as exc:  # the table's verification stops here
                    if verdict.ok:
                        verdict.problems.append(exc.problem)
                    yield current, verdict
                    return
            yield current, verdict
            current = None
    if current is not None:
        yield current, verify_hand_log(current)


def verify_log(table_id: str, log: Sequence[Logged], hands: Iterable[int] | None = None
               ) -> list[HandVerdict]:
    """Verify the hands of a table's log (all, or those numbered in ``hands``): every
    command re-decided (the table events between hands included, with the hand after
    them), chips conserved."""
    wanted = None if hands is None else set(hands)
    split, _ = split_hands(table_id, log)
    return [verify_hand_log(hand) for hand in split if wanted is None or hand.number in wanted]


# --- money against the wallet ---------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class LedgerTx:
    """A settlement transaction of the wallet's ledger: its entry id and postings by
    account key (``seat:<table>:<seat>``, ``house``)."""

    entry_id: str
    postings: tuple[tuple[str, int], ...]


def expected_postings(table_id: str, after: TableState) -> dict[str, int]:
    """The postings the wallet must have made for the hand that ``after`` ends: each seat's
    net (non-zero only) and the rake to the house."""
    result = settlement(after)
    if result is None:
        return {}
    out = {f"seat:{table_id}:{s.seat}": s.net for s in result.seats if s.net}
    if result.rake:
        out["house"] = result.rake
    return out


def check_money(hand: HandLog, after: TableState,
                settlements: Sequence[LedgerTx]) -> list[Problem]:
    """The wallet settled the hand once, with exactly the postings the folded result gives."""
    last = hand.events[-1].sequence
    if not settlements:
        return [Problem(hand.number, last,
                        f"the wallet has no settlement of h{hand.number}")]
    if len(settlements) > 1:
        return [Problem(hand.number, last, f"the wallet settled h{hand.number} "
                        f"{len(settlements)} times ({', '.join(t.entry_id for t in settlements)})")]
    want = expected_postings(hand.table_id, after)
    got: dict[str, int] = {}
    for account, amount in settlements[0].postings:
        got[account] = got.get(account, 0) + amount
    got = {k: v for k, v in got.items() if v}
    if got == want:
        return []
    problems = []
    for account in sorted(set(want) | set(got)):
        if want.get(account, 0) != got.get(account, 0):
            problems.append(Problem(
                hand.number, _event_for_account(hand, account),
                f"ledger entry {settlements[0].entry_id} posts {got.get(account, 0)} to "
                f"{account}, the hand's result is {want.get(account, 0)}"))
    return problems[:1]


def _event_for_account(hand: HandLog, account: str) -> int:
    """The first event that decided an account's result: the seat's first award, else the
    hand's rake or its end."""
    seat = int(account.rsplit(":", 1)[1]) if account.startswith("seat:") else None
    for item in hand.events:
        event = item.event
        if seat is not None and isinstance(event, PotAwarded) and event.seat == seat:
            return item.sequence
        if seat is None and type(event).__name__ == "RakeTaken":
            return item.sequence
    return hand.events[-1].sequence


# --- cards -----------------------------------------------------------------------------------

def merge_down_cards(events: Sequence[Logged], down: Mapping[int, Sequence[Card]]
                     ) -> list[Logged]:
    """The events with each seat's down cards (in dealing order) filled in where the public
    record has "a down card"; seats not in ``down`` stay hidden."""
    taken: dict[int, int] = {}
    out = []
    for item in events:
        event = item.event
        if isinstance(event, DownCardDealt) and event.card is None and event.seat in down:
            index = taken.get(event.seat, 0)
            taken[event.seat] = index + 1
            cards = down[event.seat]
            if index < len(cards):
                event = DownCardDealt(seat=event.seat, street=event.street, card=cards[index])
                item = Logged(item.sequence, item.command_id, item.occurred_at, event)
        elif isinstance(event, DownCardDealt):
            taken[event.seat] = taken.get(event.seat, 0) + 1
        out.append(item)
    return out


# --- listing ---------------------------------------------------------------------------------

def summary(hand: HandLog) -> dict[str, Any]:
    """One line of ``stud replay list``: number, start time, players by seat, pot, rake,
    winners (seat -> chips won) and whether the hand is over."""
    after = hand.after()
    players = {p.seat: p.player_id for p in after.hand.players} if after.hand else {}
    result = settlement(after)
    won: dict[int, int] = {}
    if after.hand is not None:
        for award in after.hand.awards:
            won[award.seat] = won.get(award.seat, 0) + award.amount
    pot = (result.amount_in if result is not None
           else sum(p.hand_total for p in after.hand.players) if after.hand else 0)
    phase = after.hand.phase if after.hand is not None else Phase.DEALING
    return {
        "hand": hand.number,
        "time": hand.events[0].occurred_at,
        "players": {str(seat): name for seat, name in sorted(players.items())},
        "pot": pot,
        "rake": result.rake if result is not None else 0,
        "winners": {str(seat): amount for seat, amount in sorted(won.items())},
        "voided": bool(after.hand is not None and after.hand.voided),
        "complete": hand.complete,
        "phase": phase.value,
        "events": len(hand.events),
    }
