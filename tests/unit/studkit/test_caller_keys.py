"""CallerKeys (issue 29, G6): whose budgets a call spends. From a trusted proxy, the client
address it attests in ``x-forwarded-for`` (the last hop back past the trusted proxies); from
any other peer, or when the proxy attests nothing readable, the connection."""

from __future__ import annotations

import pytest

from studkit.limits import MAX_HOPS, TRUSTED_PROXIES_ENV, CallerKeys, hop_address, peer_address

GATEWAY = "ipv4:10.1.2.3:41000"
STRANGER = "ipv4:198.51.100.7:41000"


def xff(*values: str | bytes) -> list[tuple[str, str | bytes]]:
    return [("x-forwarded-for", v) for v in values]


class TestFromEnv:
    def test_addresses_and_networks_comma_or_space_separated(self) -> None:
        keys = CallerKeys.from_env({TRUSTED_PROXIES_ENV: "10.0.0.0/8, 192.0.2.1 fd00::/8"})
        assert [str(n) for n in keys.trusted] == ["10.0.0.0/8", "192.0.2.1/32", "fd00::/8"]

    @pytest.mark.parametrize("env", [{}, {TRUSTED_PROXIES_ENV: ""},
                                     {TRUSTED_PROXIES_ENV: " , "}])
    def test_unset_trusts_no_one(self, env: dict[str, str]) -> None:
        keys = CallerKeys.from_env(env)
        assert keys.trusted == ()
        assert keys.key(GATEWAY, xff("203.0.113.5")) == GATEWAY

    @pytest.mark.parametrize("bad", ["gateway.local", "10.0.0.0/33", "10.0.0.1:80"])
    def test_a_value_that_is_not_an_address_is_refused_at_start(self, bad: str) -> None:
        with pytest.raises(ValueError, match=TRUSTED_PROXIES_ENV):
            CallerKeys.from_env({TRUSTED_PROXIES_ENV: f"10.0.0.0/8,{bad}"})


class TestKey:
    keys = CallerKeys(["10.0.0.0/8", "2001:db8:aa::/48"])

    def test_the_last_hop_a_trusted_proxy_appended_is_the_client(self) -> None:
        assert self.keys.key(GATEWAY, xff("203.0.113.5")) == "addr:203.0.113.5"

    def test_hops_the_client_wrote_itself_are_never_read(self) -> None:
        assert self.keys.key(GATEWAY, xff("1.2.3.4, 5.6.7.8, 203.0.113.5")) \
            == "addr:203.0.113.5"

    def test_trusted_proxies_before_the_gateway_are_passed(self) -> None:
        assert self.keys.key(GATEWAY, xff("6.6.6.6, 203.0.113.5, 10.9.9.9, 10.0.0.1")) \
            == "addr:203.0.113.5"

    def test_several_header_entries_read_as_one_list_in_order(self) -> None:
        assert self.keys.key(GATEWAY, xff("6.6.6.6", b"203.0.113.5")) == "addr:203.0.113.5"
        assert self.keys.key(GATEWAY, [("X-Forwarded-For", "203.0.113.8")]) \
            == "addr:203.0.113.8"

    @pytest.mark.parametrize("header", [[], xff(""), xff("unknown"), xff("203.0.113.5, junk"),
                                        xff("10.0.0.1"), xff("203.0.113.5, 10.0.0.1, ")])
    def test_a_proxy_that_attests_nothing_readable_is_its_connection(
            self, header: list[tuple[str, str | bytes]]) -> None:
        assert self.keys.key(GATEWAY, header) == GATEWAY

    def test_past_max_hops_of_trusted_proxies_nothing_is_attested(self) -> None:
        hops = ", ".join(["203.0.113.5", *["10.0.0.1"] * MAX_HOPS])
        assert self.keys.key(GATEWAY, xff(hops)) == GATEWAY

    def test_the_header_of_a_peer_that_is_not_trusted_is_ignored(self) -> None:
        for forged in ("203.0.113.5", "10.0.0.1", "203.0.113.5, 10.0.0.1"):
            assert self.keys.key(STRANGER, xff(forged)) == STRANGER
        assert self.keys.key("unix:/run/stud.sock", xff("203.0.113.5")) \
            == "unix:/run/stud.sock"

    def test_ipv6_peers_and_hops(self) -> None:
        peer = "ipv6:[2001:db8:aa::7]:41000"
        assert self.keys.key(peer, xff("[2001:db8:1::5]:4711")) == "addr:2001:db8:1::5"
        encoded = "ipv6:%5B2001:db8:aa::7%5D:41000"
        assert self.keys.key(encoded, xff("2001:db8:1::5")) == "addr:2001:db8:1::5"

    def test_ipv4_written_as_ipv6_is_ipv4(self) -> None:
        """A dual-stack listener names an IPv4 peer ``[::ffff:10.1.2.3]``: it is the trusted
        10.1.2.3; a mapped hop is keyed as the IPv4 address it is."""
        assert self.keys.key("ipv6:[::ffff:10.1.2.3]:41000", xff("::ffff:203.0.113.5")) \
            == "addr:203.0.113.5"


@pytest.mark.parametrize(("peer", "address"), [
    ("ipv4:127.0.0.1:5000", "127.0.0.1"), ("ipv6:[::1]:5000", "::1"),
    ("ipv6:%5B::1%5D:5000", "::1"), ("unix:/tmp/x", None), ("ipv4:garbage", None), ("", None)])
def test_peer_address(peer: str, address: str | None) -> None:
    found = peer_address(peer)
    assert (None if found is None else str(found)) == address


@pytest.mark.parametrize(("hop", "address"), [
    ("203.0.113.5", "203.0.113.5"), (" 203.0.113.5:80 ", "203.0.113.5"),
    ("[2001:db8::1]:80", "2001:db8::1"), ("2001:db8::1", "2001:db8::1"), ("[::1", None),
    ("[::1]x", None), ("unknown", None), ("", None), ("_hidden", None), ("1.2.3", None)])
def test_hop_address(hop: str, address: str | None) -> None:
    found = hop_address(hop)
    assert (None if found is None else str(found)) == address
