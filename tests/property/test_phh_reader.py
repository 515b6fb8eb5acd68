"""The PHH reader's own TOML path (rules.phh.format._plain_toml) against tomllib, the
reference: every PHH the project can write (export_phh, with any players' names and extra
fields toml_value writes) is read without tomllib to exactly what tomllib reads; and any other
text is either read to what tomllib reads or left to tomllib (None), never read differently,
never accepted where tomllib refuses it. Under ``make test`` this runs on the compiled build,
under ``make test-pure`` on the sources."""

from __future__ import annotations

import tomllib

from hypothesis import given, settings
from hypothesis import strategies as st

from rules.phh import export_phh, parse_phh, parse_phhs
from rules.phh.format import _hand_from_table, _plain_toml, _toml, toml_value
from tests.unit.rules.test_phh import play_ours

_KEYS = st.text(st.sampled_from("abcxyz_-0129ABZ"), min_size=1, max_size=8).filter(
    lambda k: k not in {"variant", "antes", "bring_in", "small_bet", "big_bet",
                        "starting_stacks", "actions", "hand", "seats", "seat_count",
                        "players", "finishing_stacks", "ante_trimming_status"})
_TEXT = st.text(max_size=12)  # any code point: quotes, backslashes, controls, '#', newlines
_SCALARS = st.one_of(st.booleans(), st.integers(-2**63, 2**63 - 1), _TEXT)
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=4))


def _reference(text: str) -> dict[str, object] | None:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), names=st.lists(_TEXT, min_size=8, max_size=8),
       fields=st.dictionaries(_KEYS, _VALUES, max_size=4))
def test_every_phh_the_project_writes_is_read_without_tomllib_as_tomllib_reads_it(
        seed: int, names: list[str], fields: dict[str, object]) -> None:
    t = play_ours(seed)
    seats = [p.seat for p in t.hand.players]
    text = export_phh(t.events, t.config, players=dict(zip(seats, names, strict=False)),
                      fields=fields)
    plain = _plain_toml(text)
    assert plain is not None, text
    assert plain == tomllib.loads(text)
    assert [type(v) for v in plain.values()] == [type(v) for v in tomllib.loads(text).values()]
    assert parse_phh(text) == _hand_from_table(tomllib.loads(text), "")
    assert parse_phhs(text) == [parse_phh(text)]


_FRAGMENTS = st.sampled_from([
    'variant = "F7S/8"', "antes = [40, 40]", "bring_in = 50", "small_bet = 01",
    "big_bet = -0", "big_bet = +4", "big_bet = 1_000", "x = true", "x = false", "x = True",
    "actions = [", '  "p1 f",', '  "p1 f"', "  'p1 f',", "]", "", " ", "# c", "x = [1,2]",
    "x = [1, 2]", "x = [1, [2]]", 'x = "a\\u0009b"', 'x = "a\\u00e9"', 'x = "a\\tb"',
    'x = "a\\"b"', 'x = "a\\\\"', 'x = "a\\"', 'x = "\x7f"', 'x = "\tq"', 'x = "\x01"',
    'x = "a" # c', "x = 1 ", "x.y = 1", '"x" = 1', "[t]", "x = [\n]", "x = []", "x = [ ]",
    'x = ["a", 1]', "x = 1.0", "x = 1e3", 'x = "\ud7ff"', 'x = "\\ud800"', "\ufeffx = 1",
])


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(_FRAGMENTS, max_size=8), ending=st.sampled_from(["\n", "", "\r\n"]))
def test_any_other_text_is_read_as_tomllib_reads_it_or_left_to_tomllib(
        lines: list[str], ending: str) -> None:
    text = "\n".join(lines) + ending
    plain = _plain_toml(text)
    reference = _reference(text)
    if plain is not None:
        assert reference is not None, text
        assert plain == reference
        assert [type(v) for v in plain.values()] == [type(v) for v in reference.values()]
    try:
        assert _toml(text) == reference
    except ValueError:
        assert reference is None


@given(value=_VALUES)
def test_a_written_value_reads_back(value: object) -> None:
    text = f"x = {toml_value(value)}\n"
    plain = _plain_toml(text)
    assert plain is not None
    assert plain == tomllib.loads(text) == {"x": list(value) if isinstance(value, list) else value}


_ELEMENTS = st.sampled_from([
    '  "p1 f",', '  "\x01",', '  "\x7f",', '  "\tq",', '  ",', '  "",', '  "a\\"b",',
    '  "\\u0001",', '  "a"b",', '  "\\",', '  "p1 f"', "  'p1 f',", "  1,", "  -0,", "  01,",
    "  true,", '  "é ü",', '  "\u2028",', '  "# x",', "  [1],", "   1,", '  "a" ,',
])


@settings(max_examples=300, deadline=None)
@given(elements=st.lists(_ELEMENTS, max_size=5), closed=st.booleans())
def test_a_list_one_element_a_line_is_read_as_tomllib_reads_it_or_left_to_it(
        elements: list[str], closed: bool) -> None:
    text = "\n".join(["x = [", *elements, *(["]"] if closed else [])]) + "\n"
    plain = _plain_toml(text)
    reference = _reference(text)
    if plain is not None:
        assert plain == reference, text
        assert reference is not None
        plain_x, reference_x = plain["x"], reference["x"]
        assert isinstance(plain_x, list) and isinstance(reference_x, list)
        assert [type(v) for v in plain_x] == [type(v) for v in reference_x]
