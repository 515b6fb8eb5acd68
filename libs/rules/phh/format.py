"""PHH, the Poker Hand History format: its hands and actions as values, read from and written
to TOML text.

PHH (https://github.com/uoftcprg/phh-std) is what PokerKit and public hand datasets use: a
small TOML file per hand. For seven card stud hi/lo (variant ``F7S/8``) the fields we use are
``antes``, ``bring_in``, ``small_bet``, ``big_bet``, ``starting_stacks``, ``actions`` and,
when present, ``finishing_stacks``, ``seats``, ``seat_count`` and ``players``. Actions, as
PokerKit 0.7.7 reads and writes them:

- ``d dh pN CARDS``: cards to player N in dealing order, ``??`` for a card not known. On 3rd
  street PokerKit writes the three cards together (down, down, up); later one card a street.
- ``d db CARD``: a board card. In stud only the community card when the deck runs short.
- ``pN pb`` posts the bring-in; ``pN cbr X`` completes, bets or raises *to* X (the player's
  total this street); ``pN cc`` checks or calls; ``pN f`` folds.
- ``pN sm CARDS`` shows (all the player's cards, dealing order); ``pN sm`` mucks;
  ``pN sm -`` shows what is known (PokerKit 0.7.7 still reads it).
- Text after `` # `` is a comment.

Player ``pN`` sits in seat N, or in the N-th entry of ``seats`` when the file has that field.
Replaying a hand is :mod:`rules.phh.replay`, writing one :mod:`rules.phh.export`. Everything
here is pure: no I/O, stdlib only.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rules.cards import DECK, Card
from rules.errors import RuleViolation

VARIANT = "F7S/8"
"""PHH's code for fixed-limit seven card stud high/low-split eight or better."""


class PhhError(ValueError):
    """The text is not a PHH hand we can read (bad TOML, a missing field, a bad action)."""


# --- hands ---------------------------------------------------------------------------------

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
    if isinstance(value, int) and not isinstance(value, bool):
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


# The TOML the project writes (export_phh, toml_value): ``key = value`` lines, a value a basic
# string with only the escapes toml_value writes, a decimal integer, a boolean, or a list of
# those on one line, or a list one element a line (``key = [``, ``  value,``, ``]``). Read
# without tomllib (about a fifth of a replay check's time went to it); any other text, and any
# repeated key, goes to tomllib, which stays the reference (tests/property/test_phh_reader.py).
_STRING = r'"[^"\\\x00-\x1f\x7f]*(?:\\(?:["\\]|u00[01][0-9a-f]|u007f)[^"\\\x00-\x1f\x7f]*)*"'
_SCALAR = rf"{_STRING}|-?(?:0|[1-9][0-9]*)|true|false"
_VALUE = re.compile(rf"(?:{_SCALAR}|\[(?:(?:{_SCALAR})(?:, (?:{_SCALAR}))*)?\])\Z")
_ITEM = re.compile(rf"({_STRING})|(-?(?:0|[1-9][0-9]*))|(true)|(false)")
_LINE = re.compile(r"([A-Za-z0-9_-]+) = (.*)\Z", re.DOTALL)
_ELEMENT = re.compile(rf"  ({_SCALAR}),\Z")
_ESCAPE = re.compile(r'\\(["\\]|u[0-9a-f]{4})')


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    return code if len(code) == 1 else chr(int(code[1:], 16))


def _scalar(match: re.Match[str]) -> object:
    string, number, true = match.group(1, 2, 3)
    if string is not None:
        body = string[1:-1]
        return _ESCAPE.sub(_unescape, body) if "\\" in body else body
    if number is not None:
        return int(number)
    return true is not None


def _plain_string(value: str) -> str | None:
    """The body of a basic string without escapes (``"F7S/8"``), else None."""
    body = value[1:-1]
    if (len(value) >= 2 and value[0] == '"' and value[-1] == '"' and body.isprintable()
            and '"' not in body and "\\" not in body):
        return body
    return None


def _plain_int(value: str) -> int | None:
    """A non-negative decimal integer without a leading zero (``400``), else None."""
    if value.isascii() and value.isdigit() and (value[0] != "0" or value == "0"):
        return int(value)
    return None


def _plain_value(value: str) -> object:
    """The value of a ``key = value`` line in its commonest forms (a plain string, a
    non-negative integer, a boolean, a list of non-negative integers on one line), else None
    (for the regular expressions)."""
    first = value[:1]
    if first == '"':
        return _plain_string(value)
    if first == "[":
        if value[-1] != "]":
            return None
        numbers = []
        for part in value[1:-1].split(", "):
            number = _plain_int(part)
            if number is None:
                return None
            numbers.append(number)
        return numbers
    if value == "true":
        return True
    if value == "false":
        return False
    return _plain_int(value)


def _plain_strings(block: str) -> list[object] | None:
    """The elements of a list one element a line (``block``: its lines, without the
    brackets' lines) when every line is ``  "text",`` with text a plain string's body (a
    PHH's actions), else None (for the element-by-element loop). The bodies hold no quote and
    no line break, so splitting at the separator between two lines gives exactly the lines'
    bodies."""
    if len(block) < 5 or block[:3] != '  "' or block[-2:] != '",':
        return None
    bodies = block[3:-2].split('",\n  "')
    joined = "".join(bodies)
    if joined.isprintable() and '"' not in joined and "\\" not in joined:
        return list(bodies)
    return None


def _elements(block: str) -> list[object] | None:
    """The elements of a list one element a line, each ``  value,``, else None."""
    items: list[object] = []
    for line in block.split("\n"):
        body = line[3:-2]  # the common element: a string without escapes
        if (len(line) > 4 and line[:3] == '  "' and line[-2:] == '",' and body.isprintable()
                and '"' not in body and "\\" not in body):
            items.append(body)
            continue
        element = _ELEMENT.match(line)
        if element is None:
            return None
        items.append(_scalar(_ITEM.fullmatch(element.group(1))))  # type: ignore[arg-type]
    return items


def _plain_toml(text: str) -> dict[str, object] | None:
    """The table of a text made of the lines the project writes, or None for any other."""
    if not text.endswith("\n") or "\r" in text:
        return None
    table: dict[str, object] = {}
    pos = 0
    n = len(text)
    while pos < n:
        end = text.find("\n", pos)  # the text ends with a line break: found
        line = _LINE.match(text, pos, end)
        if line is None:
            return None
        key, value = line.group(1, 2)
        if key in table:
            return None
        pos = end + 1
        if value == "[":
            # The list's lines run to the first line that is "]" (none: not ours).
            if text.startswith("]\n", pos):
                table[key] = []
                pos += 2
                continue
            close = text.find("\n]\n", pos)
            if close < 0:
                return None
            block = text[pos:close]
            items = _plain_strings(block)
            if items is None:
                items = _elements(block)
                if items is None:
                    return None
            table[key] = items
            pos = close + 3
            continue
        plain = _plain_value(value)
        if plain is not None:
            table[key] = plain
        elif _VALUE.match(value) is None:
            return None
        elif value[0] == "[":
            table[key] = [_scalar(m) for m in _ITEM.finditer(value)]
        else:
            table[key] = _scalar(_ITEM.fullmatch(value))  # type: ignore[arg-type]
    return table


def _toml(text: str) -> dict[str, object]:
    plain = _plain_toml(text)
    if plain is not None:
        return plain
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
    rules.phh.format.PhhError: missing field 'antes'
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


# --- actions -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True, init=False)
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

    def __init__(self, *, text: str, player: int, verb: str, target: int = 0,
                 cards: tuple[Card | None, ...] = (), amount: int | None = None,
                 muck: bool = False) -> None:
        # Written out (init=False): compiled, the dataclass's own runs interpreted, five
        # times the cost (tests/unit/rules/test_value_inits.py: the same signature).
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "player", player)
        object.__setattr__(self, "verb", verb)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "cards", cards)
        object.__setattr__(self, "amount", amount)
        object.__setattr__(self, "muck", muck)


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
        card = _CARDS.get(pair)  # a card as PHH writes it ("Ah"); any other text: Card.parse
        if card is None:
            try:
                card = Card.parse(pair)
            except RuleViolation:
                raise PhhError(f"not a card: {pair!r}") from None
        cards.append(card)
    return tuple(cards)


_CARDS: dict[str, Card] = {str(card): card for card in DECK}
"""Each card by its text (``Ah``, ``Td``): the card :meth:`Card.parse` gives for it (the
deck's own), without its interpreted normalising of the text."""


def format_phh_cards(cards: Sequence[Card | None]) -> str:
    """Cards written together, ``??`` for an unknown one: the inverse of
    :func:`parse_phh_cards`.

    >>> format_phh_cards((Card.parse("Ac"), None, Card.parse("Td")))
    'Ac??Td'
    >>> format_phh_cards(())
    ''
    """
    return "".join("??" if c is None else str(c) for c in cards)


def _player(token: str, players: int) -> int:
    if token[:1] != "p" or not token[1:].isdigit() or not 1 <= int(token[1:]) <= players:
        raise PhhError(f"no player {token!r}")
    return int(token[1:])


_ACTIONS: dict[tuple[str, int], PhhAction] = {}
"""Actions already parsed, by text and players (an action is a frozen value: parsed once,
shared). Hands repeat most of their actions' texts (``p1 cc``, ``p2 f``, ...), and making a
:class:`PhhAction` (a frozen dataclass, compiled or not) cost several times the look-up."""

_ACTIONS_KEPT = 4096
"""At most this many actions are kept (then forgotten all at once)."""


def parse_action(text: str, players: int) -> PhhAction:
    """:func:`read_action`, kept for the next action of the same text and players (a text
    that is not an action raises each time)."""
    key = (text, players)
    action = _ACTIONS.get(key)
    if action is None:
        action = read_action(text, players)
        if len(_ACTIONS) >= _ACTIONS_KEPT:
            _ACTIONS.clear()
        _ACTIONS[key] = action
    return action


def read_action(text: str, players: int) -> PhhAction:
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


# --- writing TOML --------------------------------------------------------------------------

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


def toml_value(value: object) -> str:
    """A boolean, whole number, string or list of them as a TOML value, for a PHH field.

    >>> print(toml_value(["p1", 'say "hi"', 40, True]))
    ["p1", "say \\"hi\\"", 40, true]
    >>> toml_value(1.5)
    Traceback (most recent call last):
    ...
    TypeError: cannot write 1.5 as PHH
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as PHH")
