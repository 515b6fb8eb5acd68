"""Settings from the environment, and the dealer's proto mapping: requests are validated
field by field, and an audit record survives the wire unchanged."""

from __future__ import annotations

import pytest

from dealer import mapping
from dealer.config import TEST_ONLY_SETTINGS, Settings, TestOnlySetting
from dealer.deck import deal_street
from dealer.shuffle import new_salt, shuffled
from rules import DealPlan, DealSlot, Street
from stud.v1 import dealer_pb2 as pb
from studkit.deckproof import HandAudit, HandDeck, audit_from_proto, commit
from studkit.errors import BadRequest
from studtools.devkeys import DevKeys


class TestSettings:
    def test_defaults_and_overrides(self, dev_keys: DevKeys) -> None:
        """Everything has a default but the key set; the table services are a list."""
        keys = dev_keys.env("dealer")
        settings = Settings.from_env(keys)
        assert settings.addr == "[::]:50052" and settings.table_services == ("table",)
        settings = Settings.from_env({
            **keys, "DEALER_ADDR": "127.0.0.1:0",
            "DEALER_TABLE_SERVICES": "table, table-canary", "DEALER_SHUTDOWN_GRACE": "1.5",
            "REDIS_URL": "redis://dealer:pw@redis:6379/0"})
        assert settings.table_services == ("table", "table-canary")
        assert settings.shutdown_grace_s == 1.5
        assert settings.redis_url_redacted == "redis://dealer:***@redis:6379/0"
        assert "pw" not in repr(settings)
        assert len(settings.auth_keys) == len(dev_keys.key_set())

    def test_a_key_set_is_required(self, dev_keys: DevKeys) -> None:
        """Without STUD_AUTH_PUBLIC_KEYS the dealer does not start, not even with
        STUD_ENV=dev (there is no built-in key), and the retired shared secret is refused."""
        with pytest.raises(RuntimeError, match="STUD_AUTH_PUBLIC_KEYS"):
            Settings.from_env({})
        with pytest.raises(RuntimeError, match="STUD_AUTH_PUBLIC_KEYS"):
            Settings.from_env({"STUD_ENV": "dev"})
        with pytest.raises(RuntimeError, match="STUD_AUTH_SECRET"):
            Settings.from_env({**dev_keys.env("dealer"), "STUD_AUTH_SECRET": "s" * 40})

    @pytest.mark.parametrize("name", TEST_ONLY_SETTINGS)
    def test_a_test_only_setting_is_refused_whatever_stud_env_says(
            self, dev_keys: DevKeys, name: str) -> None:
        """DEALER_CORRUPT (a dealer that cheats) and DEALER_STACKED_DECKS belong to the test
        support's rigged dealer, which the service does not contain: its settings refuse
        them, even with STUD_ENV=test (issue 29); an empty value is no setting."""
        env = {**dev_keys.env("dealer"), name: "1"}
        for stud_env in ("", "prod", "dev", "test"):
            with pytest.raises(TestOnlySetting, match=name) as caught:
                Settings.from_env({**env, "STUD_ENV": stud_env})
            assert caught.value.names == [name]
        assert Settings.from_env({**env, name: ""}).addr == "[::]:50052"
        assert not any(hasattr(Settings.from_env(dev_keys.env("dealer")), field)
                       for field in ("corruption", "stacked_decks"))


class TestRequests:
    @pytest.mark.parametrize("request_, field", [
        (pb.DealRequest(table_id="t1", hand_number=1, street=3), "slots"),
        (pb.DealRequest(table_id="t1", hand_number=1, street=0,
                        slots=[pb.DealSlot(seat=1)]), "street"),
        (pb.DealRequest(table_id="t1", hand_number=1, street=4,
                        slots=[pb.DealSlot(seat=9, up=True)]), "slots[0].seat"),
    ])
    def test_malformed_deals_are_refused(self, request_: pb.DealRequest, field: str) -> None:
        """No slot, an unspecified street or a seat beyond 8 is INVALID_ARGUMENT."""
        with pytest.raises(BadRequest) as info:
            mapping.plan_from_proto(request_)
        assert info.value.field == field

    def test_a_deal_request_is_a_rules_plan(self) -> None:
        """The request maps to the DealPlan the rules compare it with."""
        request = pb.DealRequest(street=7, slots=[pb.DealSlot(seat=0, up=True)], burn=True,
                                 reshuffle_burns=True)
        assert mapping.plan_from_proto(request) == DealPlan(
            street=Street.SEVENTH, slots=(DealSlot(seat=0, up=True),), burn=True,
            reshuffle_burns=True)

    def test_ids_hand_numbers_and_seats(self) -> None:
        """Table ids follow the key rules; hand numbers start at 1 (0 = latest where said);
        seats are 1..8."""
        for bad in ("", "a b", "x" * 65, "t{1}"):
            with pytest.raises(BadRequest):
                mapping.table_id(bad)
        with pytest.raises(BadRequest):
            mapping.hand_number(0)
        assert mapping.hand_number(0, latest_ok=True) == 0
        with pytest.raises(BadRequest):
            mapping.seats([1, 0])


class TestAuditWire:
    def test_an_audit_round_trips(self) -> None:
        """Deck, salt, reshuffle key, commitment and the log of draws (burns included) come
        back from the wire as they went."""
        deck = HandDeck(table_id="t1", hand_number=3, order=shuffled(),
                        reshuffle_key=shuffled(), salt=new_salt())
        third = deal_street(deck, [], DealPlan(street=Street.THIRD, slots=tuple(
            DealSlot(seat=s, up=p == 2) for p in range(3) for s in (1, 2))))
        fourth = deal_street(deck, [third], DealPlan(
            street=Street.FOURTH, slots=(DealSlot(seat=1, up=True), DealSlot(seat=2, up=True)),
            burn=True))
        audit = HandAudit(deck=deck, commitment=commit(deck), deals=(third, fourth))
        wire = mapping.audit_to_proto(audit)
        assert wire.cards_used == 6 + 1 + 2 and len(wire.deck) == 52
        back = audit_from_proto(pb.HandAudit.FromString(wire.SerializeToString()))
        assert back == audit

    def test_a_deck_that_is_not_a_permutation_is_refused(self) -> None:
        """An audit record whose deck repeats a card is malformed."""
        deck = HandDeck(table_id="t1", hand_number=1, order=shuffled(),
                        reshuffle_key=shuffled(), salt=new_salt())
        wire = mapping.audit_to_proto(HandAudit(deck=deck, commitment=commit(deck)))
        wire.deck[1].CopyFrom(wire.deck[0])
        with pytest.raises(BadRequest):
            audit_from_proto(wire)
