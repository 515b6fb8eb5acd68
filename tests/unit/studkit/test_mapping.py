"""Round trips and refusals of ``studkit.mapping``: every rules event and command survives its
proto form and back, stored events written by an older schema still parse, and a malformed
message is refused with an error that names the field.

The strategies live here rather than in ``tests/strategies.py`` (which builds legal play):
these build every dataclass with any valid field values, legal or not in a game."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, get_args

import pytest
from google.protobuf import (  # type: ignore[import-untyped]
    descriptor_pb2,
    descriptor_pool,
    message_factory,
)
from hypothesis import given
from hypothesis import strategies as st

from rules.betting import ActionKind, LegalAction, LegalActions
from rules.cards import DECK, Card, parse_cards
from rules.commands import (
    AddChips,
    Bet,
    Call,
    ChangeStakes,
    Check,
    Command,
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
from rules.config import HeadsUpRaises, Rake, ShowdownOpener, TableConfig
from rules.events import (
    EVENT_TYPES,
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
    HandVoided,
    PlayerLeft,
    PlayerSatIn,
    PlayerSatOut,
    PlayerSeated,
    PotAwarded,
    Raised,
    RakeTaken,
    Share,
    StakesChanged,
    TableOpened,
    UncalledBetReturned,
    UpCardDealt,
)
from rules.streets import Street
from stud.v1 import commands_pb2 as cpb
from stud.v1 import common_pb2 as pb
from stud.v1 import events_pb2 as epb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.errors import BadRequest
from studkit.mapping import (
    SCHEMA_VERSION,
    card_from_proto,
    card_to_proto,
    command_from_proto,
    command_to_proto,
    config_from_proto,
    config_to_proto,
    envelope_at,
    envelope_for,
    event_from_envelope,
    event_from_proto,
    event_to_proto,
    legal_actions_from_proto,
    legal_actions_to_proto,
    street_from_proto,
    street_to_proto,
    timestamp,
)
from studkit.mapping.envelope import (
    _PAYLOADS,
    PAYLOADS_KEPT,
    HoleCardInPublicRecord,
    payload_of,
)
from studkit.mapping.events import event_message

COMMAND_TYPES: tuple[type[Command], ...] = get_args(Command)
WHEN = datetime(2025, 3, 14, 15, 9, 26, 535_000, tzinfo=UTC)

# --- strategies -----------------------------------------------------------------------------

cards = st.sampled_from(DECK)
seats = st.integers(1, 8)
amounts = st.integers(0, 2**53 - 1)
counts = st.integers(0, 52)
streets = st.sampled_from(Street)
hand_numbers = st.integers(1, 2**53)
ids = st.from_regex(r"[A-Za-z0-9_.-]{1,64}", fullmatch=True)
texts = st.text(max_size=40)
downs = st.lists(cards, max_size=3, unique=True).map(tuple)
optional_amounts = st.none() | amounts


rakes = st.none() | st.just(Rake(0, 0)) | st.builds(
    Rake, st.integers(0, 10_000), st.integers(1, 2**53 - 1))


@st.composite
def raked(draw: st.DrawFn) -> RakeTaken:
    """A rake and its parts, which add up to it."""
    pots = tuple(draw(st.lists(st.integers(0, 10**9), min_size=1, max_size=8)))
    return RakeTaken(amount=sum(pots), pots=pots)


reasons = st.text(min_size=1, max_size=40).filter(str.strip)


@st.composite
def configs(draw: st.DrawFn) -> TableConfig:
    """Any valid table configuration."""
    seat_count = draw(st.integers(2, 8))
    small_bet = draw(st.integers(2, 10**9))
    return TableConfig(
        seats=seat_count,
        min_players=draw(st.integers(2, seat_count)),
        small_bet=small_bet,
        big_bet=draw(st.integers(small_bet + 1, 4 * small_bet)),
        ante=draw(st.integers(0, small_bet)),
        bring_in=draw(st.integers(1, small_bet - 1)),
        max_raises=draw(st.integers(0, 10)),
        heads_up_raises=draw(st.sampled_from(HeadsUpRaises)),
        burn_cards=draw(st.booleans()),
        showdown_opener=draw(st.sampled_from(ShowdownOpener)),
        history_reveals_mucked=draw(st.booleans()),
        rake=draw(rakes),
    )


def _seat_wager(cls: type[Any]) -> st.SearchStrategy[Any]:
    return st.builds(cls, seat=seats, amount=amounts, to=amounts)


EVENT_STRATEGIES: dict[type[Event], st.SearchStrategy[Any]] = {
    TableOpened: st.builds(TableOpened, table_id=ids, config=configs()),
    PlayerSeated: st.builds(PlayerSeated, seat=seats, player_id=ids, stack=amounts),
    PlayerLeft: st.builds(PlayerLeft, seat=seats, player_id=ids, stack=amounts),
    PlayerSatOut: st.builds(PlayerSatOut, seat=seats),
    PlayerSatIn: st.builds(PlayerSatIn, seat=seats),
    ChipsAdded: st.builds(ChipsAdded, seat=seats, amount=amounts),
    HandStarted: st.builds(
        HandStarted, hand_number=hand_numbers, deck_commitment=texts,
        seats=st.lists(seats, min_size=2, max_size=8, unique=True).map(sorted).map(tuple)),
    AntePosted: st.builds(AntePosted, seat=seats, amount=amounts),
    CardBurned: st.just(CardBurned()),
    BurnsReshuffled: st.builds(BurnsReshuffled, count=counts),
    DownCardDealt: st.builds(DownCardDealt, seat=seats, street=streets, card=st.none() | cards),
    UpCardDealt: st.builds(UpCardDealt, seat=seats, street=streets, card=cards),
    CommunityCardDealt: st.builds(CommunityCardDealt, card=cards),
    BringInPosted: st.builds(BringInPosted, seat=seats, amount=amounts),
    Completed: _seat_wager(Completed),
    BetMade: _seat_wager(BetMade),
    Raised: _seat_wager(Raised),
    Called: st.builds(Called, seat=seats, amount=amounts),
    Checked: st.builds(Checked, seat=seats),
    Folded: st.builds(Folded, seat=seats),
    ActionTimedOut: st.builds(ActionTimedOut, seat=seats),
    UncalledBetReturned: st.builds(UncalledBetReturned, seat=seats, amount=amounts),
    HandExposed: st.builds(HandExposed, seat=seats, down=downs),
    HandShown: st.builds(HandShown, seat=seats, down=downs),
    HandMucked: st.builds(HandMucked, seat=seats, down=downs),
    PotAwarded: st.builds(PotAwarded, pot=st.integers(0, 7), seat=seats, amount=amounts,
                          share=st.sampled_from(Share), hand=texts),
    HandEnded: st.builds(HandEnded, hand_number=hand_numbers),
    RakeTaken: raked(),
    HandVoided: st.builds(HandVoided, hand_number=hand_numbers, reason=reasons),
    StakesChanged: st.builds(StakesChanged, small_bet=amounts, big_bet=amounts, ante=amounts,
                             bring_in=amounts),
}

revealed_hands = st.lists(st.builds(RevealedHand, seat=seats, down=downs), max_size=8).map(tuple)

COMMAND_STRATEGIES: dict[type[Command], st.SearchStrategy[Any]] = {
    OpenTable: st.builds(OpenTable, table_id=ids, config=configs()),
    SitDown: st.builds(SitDown, seat=seats, player_id=ids, stack=amounts),
    LeaveSeat: st.builds(LeaveSeat, seat=seats),
    SitOut: st.builds(SitOut, seat=seats),
    SitIn: st.builds(SitIn, seat=seats),
    AddChips: st.builds(AddChips, seat=seats, amount=amounts),
    StartHand: st.builds(StartHand, hand_number=hand_numbers, deck_commitment=texts),
    DealStreet: st.builds(
        DealStreet,
        cards=st.lists(st.builds(DealtCard, seat=st.integers(0, 8), up=st.booleans(),
                                 card=st.none() | cards), max_size=24).map(tuple),
        burned=st.integers(0, 1), reshuffled_burns=st.booleans()),
    PostBringIn: st.builds(PostBringIn, seat=seats),
    Complete: st.builds(Complete, seat=seats, to=optional_amounts),
    Bet: st.builds(Bet, seat=seats, to=optional_amounts),
    Raise: st.builds(Raise, seat=seats, to=optional_amounts),
    Call: st.builds(Call, seat=seats),
    Check: st.builds(Check, seat=seats),
    Fold: st.builds(Fold, seat=seats),
    TimeOut: st.builds(TimeOut, seat=seats),
    RevealHands: st.builds(RevealHands, hands=revealed_hands),
    Showdown: st.builds(Showdown, hands=revealed_hands,
                        muck_requests=st.frozensets(seats, max_size=8)),
    VoidHand: st.builds(VoidHand, reason=reasons),
    ChangeStakes: st.builds(ChangeStakes, small_bet=amounts, big_bet=amounts, ante=amounts,
                            bring_in=amounts),
}

legal_actions = st.builds(
    LegalActions, seat=seats,
    actions=st.lists(st.builds(LegalAction, kind=st.sampled_from(ActionKind), amount=amounts,
                               to=amounts, all_in=st.booleans()), max_size=4).map(tuple))


def _name(cls: type) -> str:
    return cls.__name__


# --- round trips ----------------------------------------------------------------------------


class TestEventRoundTrip:
    def test_every_event_type_has_a_message_and_a_strategy(self) -> None:
        """Each rules event has a strategy here and a TableEvent case carrying the message of
        the same name, and there is no other case."""
        oneof = epb.TableEvent.DESCRIPTOR.oneofs_by_name["event"]
        assert {f.message_type.name for f in oneof.fields} == {c.__name__ for c in EVENT_TYPES}
        assert set(EVENT_STRATEGIES) == set(EVENT_TYPES)

    @pytest.mark.parametrize("kind", EVENT_TYPES, ids=_name)
    @given(data=st.data())
    def test_event_survives_proto_bytes_and_back(self, kind: type[Event], data: st.DataObject
                                                 ) -> None:
        """from_proto(to_proto(e)) == e, also through serialized bytes."""
        event = data.draw(EVENT_STRATEGIES[kind])
        message = event_to_proto(event)
        assert event_from_proto(message) == event
        wire = epb.TableEvent.FromString(message.SerializeToString())
        assert event_from_proto(wire) == event

    @pytest.mark.parametrize("kind", EVENT_TYPES, ids=_name)
    @given(data=st.data(), hand=st.integers(0, 2**40), command_id=ids)
    def test_event_survives_its_envelope(self, kind: type[Event], data: st.DataObject,
                                         hand: int, command_id: str) -> None:
        """An envelope names the event's message and carries it as payload; a stored envelope
        reads back as the same event."""
        event = data.draw(EVENT_STRATEGIES[kind])
        if isinstance(event, DownCardDealt):
            event = replace(event, card=None)  # the public stream never holds its value
        envelope = envelope_for(event, table_id="t-1", hand_number=hand,
                                command_id=command_id, occurred_at=WHEN)
        stored = EventEnvelope.FromString(envelope.SerializeToString())
        assert event_from_envelope(stored) == event
        assert (stored.event_type, stored.schema_version) == (kind.__name__, SCHEMA_VERSION)
        assert (stored.table_id, stored.hand_number, stored.command_id) == (
            "t-1", hand, command_id)
        assert stored.occurred_at.ToDatetime(tzinfo=UTC) == WHEN
        typed = getattr(epb, kind.__name__).FromString(stored.payload)
        assert getattr(event_to_proto(event), event_to_proto(event).WhichOneof("event")) == typed

    @pytest.mark.parametrize("kind", EVENT_TYPES, ids=_name)
    @given(data=st.data(), hand=st.integers(0, 2**40), command_id=ids)
    def test_envelope_bytes_are_the_wrapped_message_s(self, kind: type[Event],
                                                      data: st.DataObject, hand: int,
                                                      command_id: str) -> None:
        """An envelope, with its time given as a datetime or as a Timestamp made once, is
        byte for byte the envelope built from the TableEvent case's message and the time set
        from the datetime."""
        event = data.draw(EVENT_STRATEGIES[kind])
        if isinstance(event, DownCardDealt):
            event = replace(event, card=None)
        wrapped = event_to_proto(event)
        expected = EventEnvelope(
            event_type=kind.__name__, schema_version=SCHEMA_VERSION, table_id="t-1",
            hand_number=hand, command_id=command_id,
            payload=getattr(wrapped, str(wrapped.WhichOneof("event"))).SerializeToString(
                deterministic=True))
        expected.occurred_at.FromDatetime(WHEN)
        for envelope in (
                envelope_for(event, table_id="t-1", hand_number=hand, command_id=command_id,
                             occurred_at=WHEN),
                envelope_at(event, table_id="t-1", hand_number=hand, command_id=command_id,
                            occurred_at=timestamp(WHEN))):
            assert envelope.SerializeToString(deterministic=True) == expected.SerializeToString(
                deterministic=True)

    def test_public_down_card_has_no_card_on_the_wire(self) -> None:
        """A down card without its value stays without one: the field is absent."""
        message = event_to_proto(DownCardDealt(seat=3, street=Street.THIRD))
        assert not message.down_card_dealt.HasField("card")
        assert event_from_proto(message) == DownCardDealt(seat=3, street=Street.THIRD)

    def test_envelope_refuses_a_down_card_value(self) -> None:
        """A down card with its value never becomes a public envelope."""
        with pytest.raises(HoleCardInPublicRecord):
            envelope_for(DownCardDealt(seat=3, street=Street.THIRD, card=parse_cards("Ah")[0]),
                         table_id="t", hand_number=1, command_id="c", occurred_at=WHEN)

    def test_envelope_needs_an_aware_time(self) -> None:
        """A naive datetime is refused: the envelope's time must be unambiguous."""
        with pytest.raises(ValueError, match="timezone-aware"):
            envelope_for(CardBurned(), table_id="t", hand_number=1, command_id="c",
                         occurred_at=datetime(2025, 1, 1))

    def test_envelope_time_is_kept_as_an_instant(self) -> None:
        """A time in another zone is stored as the same instant."""
        local = WHEN.astimezone(timezone(timedelta(hours=-5)))
        envelope = envelope_for(CardBurned(), table_id="t", hand_number=1, command_id="c",
                                occurred_at=local)
        assert envelope.occurred_at.ToDatetime(tzinfo=UTC) == WHEN


class TestCommandRoundTrip:
    def test_every_command_type_has_a_message_and_a_strategy(self) -> None:
        """Each rules command has a strategy here and a Command case carrying the message of
        the same name, and there is no other case."""
        oneof = cpb.Command.DESCRIPTOR.oneofs_by_name["command"]
        assert {f.message_type.name for f in oneof.fields} == {c.__name__ for c in COMMAND_TYPES}
        assert set(COMMAND_STRATEGIES) == set(COMMAND_TYPES)

    @pytest.mark.parametrize("kind", COMMAND_TYPES, ids=_name)
    @given(data=st.data())
    def test_command_survives_proto_bytes_and_back(self, kind: type[Command],
                                                   data: st.DataObject) -> None:
        """from_proto(to_proto(c)) == c, also through serialized bytes."""
        command = data.draw(COMMAND_STRATEGIES[kind])
        message = command_to_proto(command)
        assert command_from_proto(message) == command
        assert command_from_proto(cpb.Command.FromString(message.SerializeToString())) == command

    def test_an_absent_to_differs_from_a_zero_to(self) -> None:
        """``to`` is optional on the wire: unset reads as None, 0 as 0."""
        assert command_from_proto(command_to_proto(Bet(seat=1))) == Bet(seat=1, to=None)
        assert command_from_proto(command_to_proto(Bet(seat=1, to=0))) == Bet(seat=1, to=0)


class TestValueRoundTrip:
    def test_every_card_survives(self) -> None:
        """All 52 cards map to distinct (rank, suit) pairs and back."""
        wire = [card_to_proto(c) for c in DECK]
        assert len({(m.rank, m.suit) for m in wire}) == 52
        assert [card_from_proto(m) for m in wire] == list(DECK)

    def test_rank_numbers_are_the_ranks(self) -> None:
        """The wire rank number is the rules rank (2..14): Ah is RANK_ACE = 14."""
        assert card_to_proto(Card.parse("Ah")) == pb.Card(rank=pb.RANK_ACE, suit=pb.SUIT_HEARTS)
        assert pb.RANK_ACE == 14 and pb.RANK_TWO == 2

    def test_every_street_survives(self) -> None:
        """Streets keep their numbers (3..7) on the wire."""
        for street in Street:
            assert street_to_proto(street) == street.value
            assert street_from_proto(street_to_proto(street)) is street

    @given(configs())
    def test_config_survives(self, config: TableConfig) -> None:
        """Any valid configuration survives proto and back."""
        assert config_from_proto(config_to_proto(config)) == config

    @given(legal_actions)
    def test_legal_actions_survive(self, legal: LegalActions) -> None:
        """What the player to act may do survives proto and back."""
        assert legal_actions_from_proto(legal_actions_to_proto(legal)) == legal


class TestWireNames:
    """Round trips cannot see two values swapped both ways, so each rules enum member is
    checked against the wire value of the same name."""

    def test_suits_and_ranks(self) -> None:
        """Suit X is SUIT_X and the rank number is the rank."""
        for card in DECK:
            message = card_to_proto(card)
            assert pb.Suit.Name(message.suit) == f"SUIT_{card.suit.name}"
            assert message.rank == card.rank

    def test_streets(self) -> None:
        """Street X is STREET_X."""
        for street in Street:
            assert pb.Street.Name(street_to_proto(street)) == f"STREET_{street.name}"

    def test_config_options(self) -> None:
        """Each option value keeps its name on the wire."""
        for heads_up in HeadsUpRaises:
            wire = config_to_proto(TableConfig(heads_up_raises=heads_up)).heads_up_raises
            assert pb.HeadsUpRaises.Name(wire) == f"HEADS_UP_RAISES_{heads_up.name}"
        for opener in ShowdownOpener:
            shown = config_to_proto(TableConfig(showdown_opener=opener)).showdown_opener
            assert pb.ShowdownOpener.Name(shown) == f"SHOWDOWN_OPENER_{opener.name}"

    def test_action_kinds_and_shares(self) -> None:
        """ActionKind X is ACTION_KIND_X and Share X is SHARE_X."""
        for kind in ActionKind:
            legal = LegalActions(seat=1, actions=(LegalAction(kind=kind),))
            wire = legal_actions_to_proto(legal).actions[0].kind
            assert pb.ActionKind.Name(wire) == f"ACTION_KIND_{kind.name}"
        for share in Share:
            award = event_to_proto(PotAwarded(pot=0, seat=1, amount=1, share=share))
            assert epb.Share.Name(award.pot_awarded.share) == f"SHARE_{share.name}"


# --- schema growth --------------------------------------------------------------------------

types = descriptor_pb2.FieldDescriptorProto

PINNED_EVENT_CASES = {
    1: "table_opened", 2: "player_seated", 3: "player_left", 4: "player_sat_out",
    5: "player_sat_in", 6: "chips_added", 7: "hand_started", 8: "ante_posted",
    9: "card_burned", 10: "burns_reshuffled", 11: "down_card_dealt", 12: "up_card_dealt",
    13: "community_card_dealt", 14: "bring_in_posted", 15: "completed", 16: "bet_made",
    17: "raised", 18: "called", 19: "checked", 20: "folded", 21: "action_timed_out",
    22: "uncalled_bet_returned", 23: "hand_exposed", 24: "hand_shown", 25: "hand_mucked",
    26: "pot_awarded", 27: "hand_ended", 28: "rake_taken", 29: "hand_voided",
    30: "stakes_changed",
}
PINNED_COMMAND_CASES = {
    1: "open_table", 2: "sit_down", 3: "leave_seat", 4: "sit_out", 5: "sit_in",
    6: "add_chips", 7: "start_hand", 8: "deal_street", 9: "post_bring_in", 10: "complete",
    11: "bet", 12: "raise_", 13: "call", 14: "check", 15: "fold", 16: "time_out",
    17: "reveal_hands", 18: "showdown", 19: "void_hand", 20: "change_stakes",
}


def old_message(name: str, fields: tuple[tuple[str, int, int], ...],
                repeated: frozenset[str] = frozenset()) -> Any:
    """A message class as another release declared it: exactly ``fields`` (name, number,
    type), the ``repeated`` ones repeated."""
    proto = descriptor_pb2.FileDescriptorProto(name=f"old_{name}.proto", package="old.v1",
                                               syntax="proto3")
    message = proto.message_type.add(name=name)
    for field_name, number, kind in fields:
        label = types.LABEL_REPEATED if field_name in repeated else types.LABEL_OPTIONAL
        message.field.add(name=field_name, number=number, type=kind, label=label)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"old.v1.{name}"))


def stored(event_type: str, payload: bytes) -> EventEnvelope:
    """An envelope as the event store returns it."""
    return EventEnvelope(event_type=event_type, schema_version=1, table_id="t", sequence=7,
                         payload=payload)


class TestSchemaGrowth:
    def test_oneof_numbers_never_change(self) -> None:
        """The TableEvent and Command case numbers are part of the storage schema: a case
        may be added, never renumbered or renamed."""
        events = epb.TableEvent.DESCRIPTOR.fields_by_number
        commands = cpb.Command.DESCRIPTOR.fields_by_number
        assert {n: events[n].name for n in PINNED_EVENT_CASES} == PINNED_EVENT_CASES
        assert {n: commands[n].name for n in PINNED_COMMAND_CASES} == PINNED_COMMAND_CASES

    def test_event_written_before_a_field_existed_still_parses(self) -> None:
        """A HandStarted stored before ``deck_commitment`` existed reads with it empty."""
        old = old_message("HandStarted", (("hand_number", 1, types.TYPE_UINT64),
                                          ("seats", 2, types.TYPE_UINT32)),
                          repeated=frozenset({"seats"}))
        payload = old(hand_number=4, seats=[1, 3, 6]).SerializeToString()
        assert event_from_envelope(stored("HandStarted", payload)) == HandStarted(
            hand_number=4, seats=(1, 3, 6), deck_commitment="")

    def test_award_written_before_its_hand_description_still_parses(self) -> None:
        """A PotAwarded stored before ``hand`` existed reads with an empty description."""
        old = old_message("PotAwarded", (("pot", 1, types.TYPE_UINT32),
                                         ("seat", 2, types.TYPE_UINT32),
                                         ("amount", 3, types.TYPE_INT64),
                                         ("share", 4, types.TYPE_INT32)))
        payload = old(pot=1, seat=5, amount=120, share=epb.SHARE_LOW).SerializeToString()
        assert event_from_envelope(stored("PotAwarded", payload)) == PotAwarded(
            pot=1, seat=5, amount=120, share=Share.LOW, hand="")

    def test_event_from_a_newer_writer_still_parses(self) -> None:
        """Fields this reader does not know (a newer schema's) are ignored."""
        newer = old_message("Folded", (("seat", 1, types.TYPE_UINT32),
                                       ("reason", 2, types.TYPE_STRING)))
        payload = newer(seat=4, reason="time bank").SerializeToString()
        assert event_from_envelope(stored("Folded", payload)) == Folded(seat=4)

    def test_config_written_before_the_rake_existed_has_no_rake(self) -> None:
        """A TableConfig stored before ``rake`` existed reads as a table without rake."""
        config = config_to_proto(TableConfig())
        assert not config.HasField("rake")
        opened = epb.TableOpened(table_id="t1", config=config).SerializeToString()
        event = event_from_envelope(stored("TableOpened", opened))
        assert isinstance(event, TableOpened) and event.config.rake is None

    def test_a_zero_rake_differs_from_no_rake(self) -> None:
        """Rake(0, 0) is sent as a message; no rake as its absence."""
        config = TableConfig(rake=Rake(0, 0))
        assert config_to_proto(config).HasField("rake")
        assert config_from_proto(config_to_proto(config)) == config

    def test_empty_event_reads_from_an_empty_payload(self) -> None:
        """An event without fields is stored as an empty payload and reads back."""
        assert event_from_envelope(stored("CardBurned", b"")) == CardBurned()



# --- malformed messages ---------------------------------------------------------------------

ACE = pb.Card(rank=pb.RANK_ACE, suit=pb.SUIT_SPADES)
CONFIG = config_to_proto(TableConfig())


def unknown(number: int) -> Any:
    """An enum number that no release of the schema defines (as a newer writer might send)."""
    return number


def bad_config(**changes: Any) -> pb.TableConfig:
    """The default config with some fields changed."""
    config = pb.TableConfig()
    config.CopyFrom(CONFIG)
    for name, value in changes.items():
        if isinstance(value, pb.Rake):
            getattr(config, name).CopyFrom(value)
        else:
            setattr(config, name, value)
    return config


MALFORMED_EVENTS: list[tuple[epb.TableEvent, str]] = [
    (epb.TableEvent(), "event"),
    (epb.TableEvent(folded=epb.Folded(seat=0)), "folded.seat"),
    (epb.TableEvent(folded=epb.Folded(seat=9)), "folded.seat"),
    (epb.TableEvent(ante_posted=epb.AntePosted(seat=2, amount=-1)), "ante_posted.amount"),
    (epb.TableEvent(raised=epb.Raised(seat=2, amount=5, to=-5)), "raised.to"),
    (epb.TableEvent(down_card_dealt=epb.DownCardDealt(seat=1)), "down_card_dealt.street"),
    (epb.TableEvent(down_card_dealt=epb.DownCardDealt(seat=1, street=unknown(99))),
     "down_card_dealt.street"),
    (epb.TableEvent(up_card_dealt=epb.UpCardDealt(seat=1, street=pb.STREET_FOURTH)),
     "up_card_dealt.card"),
    (epb.TableEvent(up_card_dealt=epb.UpCardDealt(
        seat=1, street=pb.STREET_FOURTH, card=pb.Card(rank=unknown(15), suit=pb.SUIT_CLUBS))),
     "up_card_dealt.card.rank"),
    (epb.TableEvent(up_card_dealt=epb.UpCardDealt(
        seat=1, street=pb.STREET_FOURTH, card=pb.Card(rank=pb.RANK_TEN))),
     "up_card_dealt.card.suit"),
    (epb.TableEvent(community_card_dealt=epb.CommunityCardDealt()), "community_card_dealt.card"),
    (epb.TableEvent(hand_shown=epb.HandShown(seat=1, down=[ACE, pb.Card(suit=pb.SUIT_CLUBS)])),
     "hand_shown.down[1].rank"),
    (epb.TableEvent(hand_started=epb.HandStarted(hand_number=1, seats=[1, 0])),
     "hand_started.seats[1]"),
    (epb.TableEvent(hand_started=epb.HandStarted(seats=[1, 2])), "hand_started.hand_number"),
    (epb.TableEvent(hand_ended=epb.HandEnded()), "hand_ended.hand_number"),
    (epb.TableEvent(pot_awarded=epb.PotAwarded(seat=1, amount=10)), "pot_awarded.share"),
    (epb.TableEvent(player_seated=epb.PlayerSeated(seat=1, player_id="", stack=10)),
     "player_seated.player_id"),
    (epb.TableEvent(player_left=epb.PlayerLeft(seat=1, player_id="a b", stack=10)),
     "player_left.player_id"),
    (epb.TableEvent(player_seated=epb.PlayerSeated(seat=1, player_id="p", stack=-10)),
     "player_seated.stack"),
    (epb.TableEvent(table_opened=epb.TableOpened(table_id="t")), "table_opened.config"),
    (epb.TableEvent(table_opened=epb.TableOpened(config=CONFIG)), "table_opened.table_id"),
    (epb.TableEvent(table_opened=epb.TableOpened(
        table_id="t", config=bad_config(heads_up_raises=pb.HEADS_UP_RAISES_UNSPECIFIED))),
     "table_opened.config.heads_up_raises"),
    (epb.TableEvent(table_opened=epb.TableOpened(
        table_id="t", config=bad_config(showdown_opener=unknown(7)))),
     "table_opened.config.showdown_opener"),
    (epb.TableEvent(table_opened=epb.TableOpened(table_id="t", config=bad_config(ante=-1))),
     "table_opened.config.ante"),
    (epb.TableEvent(table_opened=epb.TableOpened(table_id="t", config=bad_config(bring_in=200))),
     "table_opened.config"),
    (epb.TableEvent(table_opened=epb.TableOpened(table_id="t", config=bad_config(seats=9))),
     "table_opened.config"),
    (epb.TableEvent(table_opened=epb.TableOpened(table_id="t", config=bad_config(
        rake=pb.Rake(percent_bps=500)))), "table_opened.config.rake"),
    (epb.TableEvent(table_opened=epb.TableOpened(table_id="t", config=bad_config(
        rake=pb.Rake(percent_bps=10_001, cap=5)))), "table_opened.config.rake"),
    (epb.TableEvent(table_opened=epb.TableOpened(table_id="t", config=bad_config(
        rake=pb.Rake(percent_bps=5, cap=-5)))), "table_opened.config.rake.cap"),
    (epb.TableEvent(rake_taken=epb.RakeTaken(amount=30, pots=[20])), "rake_taken.pots"),
    (epb.TableEvent(rake_taken=epb.RakeTaken(amount=-1, pots=[-1])),
     "rake_taken.pots[0]"),
    (epb.TableEvent(hand_voided=epb.HandVoided(hand_number=3)), "hand_voided.reason"),
    (epb.TableEvent(hand_voided=epb.HandVoided(reason="x")), "hand_voided.hand_number"),
]

MALFORMED_COMMANDS: list[tuple[cpb.Command, str]] = [
    (cpb.Command(), "command"),
    (cpb.Command(bet=cpb.Bet(seat=1, to=-1)), "bet.to"),
    (cpb.Command(raise_=cpb.Raise(seat=0)), "raise_.seat"),
    (cpb.Command(call=cpb.Call()), "call.seat"),
    (cpb.Command(sit_down=cpb.SitDown(seat=3, player_id="p", stack=-1)), "sit_down.stack"),
    (cpb.Command(add_chips=cpb.AddChips(seat=3, amount=-5)), "add_chips.amount"),
    (cpb.Command(start_hand=cpb.StartHand()), "start_hand.hand_number"),
    (cpb.Command(open_table=cpb.OpenTable(table_id="t")), "open_table.config"),
    (cpb.Command(open_table=cpb.OpenTable(table_id="t/1", config=CONFIG)),
     "open_table.table_id"),
    (cpb.Command(deal_street=cpb.DealStreet(cards=[cpb.DealtCard(seat=1),
                                                    cpb.DealtCard(seat=9)])),
     "deal_street.cards[1].seat"),
    (cpb.Command(deal_street=cpb.DealStreet(cards=[cpb.DealtCard(seat=1, card=pb.Card(
        rank=pb.RANK_TWO, suit=unknown(5)))])),
     "deal_street.cards[0].card.suit"),
    (cpb.Command(reveal_hands=cpb.RevealHands(hands=[cpb.RevealedHand(seat=2, down=[
        pb.Card(suit=pb.SUIT_HEARTS)])])),
     "reveal_hands.hands[0].down[0].rank"),
    (cpb.Command(showdown=cpb.Showdown(hands=[cpb.RevealedHand(seat=0)])),
     "showdown.hands[0].seat"),
    (cpb.Command(showdown=cpb.Showdown(muck_requests=[2, 5, 2])), "showdown.muck_requests[2]"),
    (cpb.Command(void_hand=cpb.VoidHand(reason="  ")), "void_hand.reason"),
]


def _case_id(case: tuple[object, str]) -> str:
    return case[1]


class TestMalformedMessages:
    @pytest.mark.parametrize("case", MALFORMED_EVENTS, ids=_case_id)
    def test_malformed_event_is_refused_naming_the_field(
            self, case: tuple[epb.TableEvent, str]) -> None:
        """A malformed TableEvent raises BadRequest whose field is the offending path."""
        message, field = case
        with pytest.raises(BadRequest) as caught:
            event_from_proto(message)
        assert caught.value.field == field
        assert str(caught.value).startswith(f"{field}: ")

    @pytest.mark.parametrize("case", MALFORMED_COMMANDS, ids=_case_id)
    def test_malformed_command_is_refused_naming_the_field(
            self, case: tuple[cpb.Command, str]) -> None:
        """A malformed Command raises BadRequest whose field is the offending path."""
        message, field = case
        with pytest.raises(BadRequest) as caught:
            command_from_proto(message)
        assert caught.value.field == field

    def test_community_card_slot_is_seat_zero(self) -> None:
        """Seat 0 is refused for a player but is the community card's slot in a deal."""
        deal = cpb.Command(deal_street=cpb.DealStreet(cards=[cpb.DealtCard(seat=0, up=True,
                                                                            card=ACE)]))
        assert command_from_proto(deal) == DealStreet(
            cards=(DealtCard(seat=0, up=True, card=parse_cards("As")[0]),))

    def test_bad_card_is_a_malformed_card(self) -> None:
        """A bad card carries the rules' reason ``malformed_card``."""
        with pytest.raises(BadRequest) as caught:
            card_from_proto(pb.Card(rank=unknown(1), suit=pb.SUIT_CLUBS), "card")
        assert (caught.value.field, caught.value.reason) == ("card.rank", "malformed_card")

    def test_invalid_config_explains_the_rule(self) -> None:
        """An invalid combination is refused with the rules' reason and explanation."""
        with pytest.raises(BadRequest) as caught:
            config_from_proto(bad_config(big_bet=100))
        assert caught.value.reason == "invalid_config"
        assert "small_bet < big_bet" in caught.value.detail

    def test_unspecified_legal_action_kind_is_refused(self) -> None:
        """A legal action of unspecified kind names its position."""
        with pytest.raises(BadRequest) as caught:
            legal_actions_from_proto(pb.LegalActions(seat=1, actions=[pb.LegalAction()]))
        assert caught.value.field == "legal_actions.actions[0].kind"


class TestMalformedEnvelopes:
    def test_unknown_event_type_is_refused(self) -> None:
        """An event type this reader does not know is refused, not guessed."""
        with pytest.raises(BadRequest) as caught:
            event_from_envelope(stored("HandReplayed", b""))
        assert caught.value.field == "event_type"

    def test_missing_schema_version_is_refused(self) -> None:
        """Envelopes start at schema_version 1; 0 means it was never set."""
        envelope = stored("Folded", epb.Folded(seat=1).SerializeToString())
        envelope.schema_version = 0
        with pytest.raises(BadRequest) as caught:
            event_from_envelope(envelope)
        assert caught.value.field == "schema_version"

    def test_newer_schema_version_still_reads(self) -> None:
        """A compatible growth (schema_version 2) reads with this reader."""
        envelope = stored("Folded", epb.Folded(seat=1).SerializeToString())
        envelope.schema_version = 2
        assert event_from_envelope(envelope) == Folded(seat=1)

    def test_undecodable_payload_is_refused(self) -> None:
        """A payload that is not the named message is refused naming ``payload``."""
        with pytest.raises(BadRequest) as caught:
            event_from_envelope(stored("TableOpened", b"\x0a\x05ab"))
        assert caught.value.field == "payload"

    def test_payload_is_validated_like_any_event(self) -> None:
        """A decodable but invalid payload names the field inside the event."""
        with pytest.raises(BadRequest) as caught:
            event_from_envelope(stored("Folded", epb.Folded(seat=12).SerializeToString()))
        assert caught.value.field == "folded.seat"


def test_room_envelope_bytes_with_its_time_made_once() -> None:
    """A room event's envelope, with its time given as a datetime or as a Timestamp made
    once, is byte for byte the envelope with the time set from the datetime; its type is
    one :func:`is_room_event` knows."""
    from stud.v1 import room_pb2 as rpb
    from studkit.mapping import (
        ROOM_EVENT_TYPES,
        ROOM_EVENTS,
        is_room_event,
        room_envelope,
        room_envelope_at,
    )

    event = rpb.BuyInRequested(seat=3, player_id="p-1", amount=500, wallet_key="w",
                               command_id="c")
    expected = EventEnvelope(event_type="BuyInRequested", schema_version=1, table_id="t-1",
                             hand_number=4, command_id="x",
                             payload=event.SerializeToString(deterministic=True))
    expected.occurred_at.FromDatetime(WHEN)
    for envelope in (
            room_envelope(event, table_id="t-1", hand_number=4, command_id="x",
                          occurred_at=WHEN),
            room_envelope_at(event, table_id="t-1", hand_number=4, command_id="x",
                             occurred_at=timestamp(WHEN))):
        assert envelope.SerializeToString() == expected.SerializeToString()
        assert is_room_event(envelope)
    assert set(ROOM_EVENTS) == ROOM_EVENT_TYPES


@given(st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False, allow_infinity=False))
def test_a_time_in_seconds_makes_the_timestamp_its_datetime_makes(seconds: float) -> None:
    from studkit.mapping import timestamp, timestamp_of
    assert timestamp_of(seconds) == timestamp(datetime.fromtimestamp(seconds, UTC))
    assert timestamp_of(round(seconds, 3)) == timestamp(
        datetime.fromtimestamp(round(seconds, 3), UTC))


# --- payloads kept (issue 35) ---------------------------------------------------------------


@pytest.mark.parametrize("kind", EVENT_TYPES, ids=_name)
@given(data=st.data())
def test_a_payload_is_its_own_event_s_kept_or_not(kind: type[Event], data: st.DataObject
                                                  ) -> None:
    """``payload_of`` gives every event its own message's bytes, whether its kind is kept or
    not, the first time and every time after (events of the same kind and fields but another
    card, seat or amount in between)."""
    events = data.draw(st.lists(EVENT_STRATEGIES[kind], min_size=1, max_size=12))
    for event in [*events, *reversed(events)]:
        assert payload_of(event) == event_message(event).SerializeToString(deterministic=True)


def test_payloads_kept_are_bounded() -> None:
    """The keeper holds at most ``PAYLOADS_KEPT`` payloads, then forgets them at once; what it
    gives after that is still each event's own."""
    events = [Called(seat=1 + n % 8, amount=n) for n in range(PAYLOADS_KEPT + 10)]
    for event in events:
        payload_of(event)
        assert len(_PAYLOADS) <= PAYLOADS_KEPT
    assert 0 < len(_PAYLOADS) < PAYLOADS_KEPT
    for event in events[::97]:
        assert payload_of(event) == event_message(event).SerializeToString(deterministic=True)


@pytest.mark.parametrize("kind", EVENT_TYPES, ids=_name)
@given(data=st.data())
def test_an_envelope_reads_as_its_own_event_kept_or_not(kind: type[Event],
                                                        data: st.DataObject) -> None:
    """``event_from_envelope`` gives every stored envelope its own event, the first time
    and every time after (the events the table writes most are kept by their type and
    payload: issue 35), with envelopes of the same kind in between."""
    events = data.draw(st.lists(EVENT_STRATEGIES[kind], min_size=1, max_size=12))
    events = [replace(e, card=None) if isinstance(e, DownCardDealt) else e for e in events]
    stored = [EventEnvelope.FromString(envelope_for(
        e, table_id="t-1", hand_number=1, command_id="c", occurred_at=WHEN).SerializeToString())
        for e in events]
    pairs = list(zip(events, stored, strict=True))
    for event, envelope in [*pairs, *reversed(pairs)]:
        assert event_from_envelope(envelope) == event


def test_a_payload_that_does_not_read_is_refused_every_time() -> None:
    """A payload that does not decode is never kept: refused again, and the good one of the
    same type still reads."""
    good = envelope_for(Called(seat=2, amount=40), table_id="t-1", hand_number=1,
                        command_id="c", occurred_at=WHEN)
    bad = EventEnvelope.FromString(good.SerializeToString())
    bad.payload = b"\x08"  # a key with no value
    for _ in range(2):
        with pytest.raises(BadRequest):
            event_from_envelope(bad)
        assert event_from_envelope(good) == Called(seat=2, amount=40)
