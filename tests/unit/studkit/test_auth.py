"""Bearer tokens: issued tokens verify; forged, expired, malformed, missing or mis-signed ones
do not; each key signs only for the subjects its key-set entry allows; keys load from the
environment, and rotate (the issuer tool that mints and manages them is tested in
tests/unit/studtools/test_issuer.py)."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path

import jwt
import pytest

from studkit.auth import (
    Forbidden,
    KeySet,
    Principal,
    Role,
    ServiceTokenSource,
    SigningKey,
    TokenBook,
    TokenIssuer,
    TokenVerifier,
    Unauthorized,
    bearer_metadata,
    issuer_from_env,
    require_role,
    require_service,
    service_names,
    service_token_source_from_env,
    verifier_from_env,
)
from studtools.devkeys import DevKeys

NOW = 1_700_000_000.0
KEYS = DevKeys.generate()
ALICE = Principal(Role.PLAYER, "alice")
TABLE = Principal(Role.SERVICE, "table")


def clock_at(t: float) -> Callable[[], float]:
    return lambda: t


def verifier(at: float = NOW, **kwargs: object) -> TokenVerifier:
    return KEYS.verifier(clock_at(at), **kwargs)  # type: ignore[arg-type]


def claims(sub: str = "player:alice", **extra: object) -> dict[str, object]:
    return {"sub": sub, "role": sub.split(":")[0], "iat": int(NOW), "exp": int(NOW) + 60,
            "iss": "stud-hilo", **extra}


class TestTokens:
    def test_round_trips_a_principal(self) -> None:
        """A token the issuer minted verifies to the same principal, with its expiry."""
        token = KEYS.issuer(clock_at(NOW)).issue(ALICE, ttl_seconds=60)
        principal = verifier(NOW + 30).verify(token)
        assert principal == ALICE and principal.expires_at == NOW + 60
        assert jwt.get_unverified_header(token)["kid"] == KEYS.issuer_key.kid

    def test_refuses_a_forged_signature(self) -> None:
        """A token signed with a key outside the key set is Unauthorized, even when it
        claims a trusted kid."""
        stranger = SigningKey.generate()
        with pytest.raises(Unauthorized):
            verifier().verify(TokenIssuer(stranger, clock_at(NOW)).issue(ALICE))
        forged = jwt.encode(claims(), stranger.private_key, algorithm="EdDSA",
                            headers={"kid": KEYS.issuer_key.kid})
        with pytest.raises(Unauthorized):
            verifier().verify(forged)

    def test_refuses_alg_none_and_hmac(self) -> None:
        """An unsigned token (alg none) and an HS256 one are Unauthorized whatever the kid."""
        kid = KEYS.issuer_key.kid
        for token in (jwt.encode(claims("operator:eve"), None, algorithm="none",
                                 headers={"kid": kid}),
                      jwt.encode(claims("operator:eve"), "x" * 40, algorithm="HS256",
                                 headers={"kid": kid})):
            with pytest.raises(Unauthorized):
                verifier().verify(token)

    def test_refuses_an_unknown_or_missing_kid(self) -> None:
        """A token without a kid, or with a kid outside the key set, is Unauthorized."""
        key = KEYS.issuer_key.private_key
        for headers in ({}, {"kid": "nobody"}):
            token = jwt.encode(claims(), key, algorithm="EdDSA", headers=headers)
            with pytest.raises(Unauthorized):
                verifier().verify(token)

    def test_refuses_an_expired_token(self) -> None:
        """A token past its exp (plus leeway) is Unauthorized with reason token_expired."""
        token = KEYS.issuer(clock_at(NOW)).issue(ALICE, ttl_seconds=60)
        with pytest.raises(Unauthorized) as info:
            KEYS.verifier(clock_at(NOW + 66)).verify(token)  # past exp and the 5 s leeway
        assert info.value.reason == "token_expired"

    def test_refuses_a_subject_that_does_not_match_the_role(self) -> None:
        """sub "player:x" with role "operator" is Unauthorized (no role escalation)."""
        payload = {**claims("player:mallory"), "role": "operator"}
        token = jwt.encode(payload, KEYS.issuer_key.private_key, algorithm="EdDSA",
                           headers={"kid": KEYS.issuer_key.kid})
        with pytest.raises(Unauthorized):
            verifier().verify(token)

    def test_refuses_a_wrong_issuer_unknown_role_or_bad_name(self) -> None:
        """Tokens with another iss, a role outside the four, or a malformed name (a trailing
        newline included) are Unauthorized."""
        key, kid = KEYS.issuer_key.private_key, KEYS.issuer_key.kid
        for payload in (claims(iss="elsewhere"), claims("root:a"), claims("player:a b"),
                        claims("player:alice\n")):
            with pytest.raises(Unauthorized):
                verifier().verify(jwt.encode(payload, key, algorithm="EdDSA",
                                             headers={"kid": kid}))

    def test_refuses_garbage(self) -> None:
        """A string that is not a JWT is Unauthorized and the message omits it."""
        with pytest.raises(Unauthorized) as info:
            verifier().verify("not-a-jwt-secretvalue")
        assert "secretvalue" not in str(info.value)


class TestWhoSignsWhat:
    @pytest.mark.parametrize("subject", [Principal(Role.OPERATOR, "x"), ALICE,
                                         Principal(Role.AUDITOR, "a"),
                                         Principal(Role.SERVICE, "other"), TABLE])
    def test_a_service_key_signs_only_its_own_service(self, subject: Principal) -> None:
        """service:dealer's key may not sign for an operator, a player, an auditor or
        another service: Unauthorized."""
        token = TokenIssuer(KEYS.service_key("dealer"), clock_at(NOW)).issue(subject)
        with pytest.raises(Unauthorized, match="may not sign"):
            verifier().verify(token)

    def test_the_issuer_key_signs_no_service(self) -> None:
        """Service tokens come from the service's own key only."""
        with pytest.raises(Unauthorized, match="may not sign"):
            verifier().verify(KEYS.issuer(clock_at(NOW)).issue(TABLE))

    def test_each_key_signs_what_it_may(self) -> None:
        """The issuer signs players, operators and auditors; a service signs itself."""
        book = TokenBook(KEYS, clock=clock_at(NOW))
        for who in (ALICE, Principal(Role.OPERATOR, "o"), Principal(Role.AUDITOR, "a"), TABLE):
            assert KEYS.verifier().verify_metadata(book.metadata(who)) == who

    def test_rotation_trusts_every_published_kid(self) -> None:
        """With an old and a new key for one signer in the set, tokens of both verify;
        once the old kid is retired, its tokens are refused."""
        new = SigningKey.generate()
        both = KEYS.key_set().merged([new.verifying_key("service:table")])
        old_token = KEYS.service_source("table").token()
        new_token = ServiceTokenSource(new, "table").token()
        for token in (old_token, new_token):
            assert TokenVerifier(both).verify(token) == TABLE
        retired = KeySet(k for k in both if k.kid != KEYS.service_key("table").kid)
        assert TokenVerifier(retired).verify(new_token) == TABLE
        with pytest.raises(Unauthorized):
            TokenVerifier(retired).verify(old_token)

    def test_audience_binds_a_token_to_one_callee(self) -> None:
        """A token naming an audience verifies only at that service."""
        token = KEYS.service_source("table").token("wallet")
        assert KEYS.verifier(audience="wallet").verify(token) == TABLE
        for other in (KEYS.verifier(audience="dealer"), KEYS.verifier()):
            with pytest.raises(Unauthorized):
                other.verify(token)


class TestServiceTokenSource:
    def test_mints_short_lived_tokens_and_renews_them(self) -> None:
        """The same token is reused until a minute before expiry, then re-minted."""
        now = [NOW]
        source = KEYS.service_source("table", clock=lambda: now[0])
        first = source.token()
        assert verifier().verify(first).expires_at == NOW + 300
        now[0] = NOW + 200
        assert source.token() == first
        now[0] = NOW + 241
        second = source.token()
        assert second != first
        assert verifier(now[0]).verify(second).expires_at == now[0] + 300
        assert source.metadata() == bearer_metadata(second)

    def test_repr_shows_no_key(self) -> None:
        """Neither the source nor a key prints private material."""
        text = repr(KEYS.service_source("table")) + repr(KEYS) + repr(KEYS.issuer_key)
        assert "PRIVATE" not in text and KEYS.issuer_key.pem() not in text


class TestKeySet:
    def test_round_trips_as_a_jwks(self) -> None:
        """The key set serialises to a JWKS and back, kids and signers intact."""
        keys = KEYS.key_set()
        again = KeySet.from_json(keys.to_json())
        assert [(k.kid, k.signer, k.dev) for k in again] == [
            (k.kid, k.signer, k.dev) for k in keys]
        document = json.loads(keys.to_json())
        assert {k["kty"] for k in document["keys"]} == {"OKP"}
        assert not any("d" in k for k in document["keys"])  # no private member

    @pytest.mark.parametrize("mutate", [
        lambda k: k.update(kid="chosen-by-me"),
        lambda k: k.update(signer="root"),
        lambda k: k.update(signer="service:bad name"),
        lambda k: k.update(kty="RSA"),
        lambda k: k.update(alg="HS256"),
        lambda k: k.update(x="AAAA"),
        lambda k: k.pop("signer"),
        lambda k: k.update(d="cHJpdmF0ZQ"),
    ])
    def test_refuses_malformed_entries(self, mutate: Callable[[dict[str, object]], None]) -> None:
        """A kid that is not the key's thumbprint, an unknown signer, another key type or
        algorithm, a bad public key, a missing signer or a private key (``d``) is refused at
        load."""
        document = json.loads(KEYS.key_set().to_json())
        mutate(document["keys"][0])
        with pytest.raises(ValueError):
            KeySet.from_json(json.dumps(document))

    def test_refuses_empty_duplicate_and_non_json(self) -> None:
        """An empty set, a kid twice, or text that is not a JWKS is refused."""
        entry = json.loads(KEYS.key_set().to_json())["keys"][0]
        for text in ('{"keys": []}', json.dumps({"keys": [entry, entry]}), "[]", "nope"):
            with pytest.raises(ValueError):
                KeySet.from_json(text)


class TestEnvironment:
    def test_reads_keys_inline_or_from_files(self, tmp_path: Path) -> None:
        """STUD_AUTH_PUBLIC_KEYS and STUD_SERVICE_KEY hold inline JSON/PEM or a path."""
        KEYS.write(tmp_path)
        for env in (KEYS.env("table"),
                    {"STUD_AUTH_PUBLIC_KEYS": str(tmp_path / "public-keys.json"),
                     "STUD_SERVICE_KEY": str(tmp_path / "service-table.pem")}):
            source = service_token_source_from_env(env, "table")
            assert verifier_from_env(env).verify(source.token()) == TABLE

    def test_missing_or_bad_values_fail_without_echoing_them(self, tmp_path: Path) -> None:
        """Unset, unreadable or malformed keys raise RuntimeError naming the variable, never
        the value."""
        with pytest.raises(RuntimeError, match="STUD_AUTH_PUBLIC_KEYS"):
            verifier_from_env({})
        with pytest.raises(RuntimeError, match="STUD_AUTH_PUBLIC_KEYS"):
            verifier_from_env({"STUD_AUTH_PUBLIC_KEYS": str(tmp_path / "absent.json")})
        with pytest.raises(RuntimeError, match="STUD_SERVICE_KEY"):
            service_token_source_from_env({}, "table")
        mangled = KEYS.service_key("table").pem().replace("A", "B", 3)
        with pytest.raises(RuntimeError, match="STUD_SERVICE_KEY") as info:
            service_token_source_from_env({"STUD_SERVICE_KEY": mangled}, "table")
        assert mangled not in str(info.value)

    def test_a_service_environment_holds_no_issuer_key(self) -> None:
        """What a service process gets carries its own key and public keys, never the
        issuer's private key; no service can mint an operator token from it."""
        env = KEYS.env("wallet")
        assert KEYS.issuer_key.pem() not in "".join(env.values())
        with pytest.raises(RuntimeError, match="STUD_ISSUER_KEY"):
            issuer_from_env(env)
        wallet_key = service_token_source_from_env(env, "wallet")
        assert verifier_from_env(env).verify(wallet_key.token()).subject == "service:wallet"

    def test_service_names(self) -> None:
        """A list of service names for one duty: trimmed, at least one, each well-formed."""
        assert service_names({}, "X", "table") == ("table",)
        for bad in (",", "table,bad name"):
            with pytest.raises(ValueError):
                service_names({"X": bad}, "X", "table")


class TestDevKeys:
    def test_write_then_load_gives_the_same_keys(self, tmp_path: Path) -> None:
        """Saved keys load back to the same kids; private files are owner-only."""
        KEYS.write(tmp_path / "keys")
        loaded = DevKeys.load(tmp_path / "keys")
        assert loaded.issuer_key.kid == KEYS.issuer_key.kid
        assert {n: k.kid for n, k in loaded.service_keys.items()} == {
            n: k.kid for n, k in KEYS.service_keys.items()}
        for pem in (tmp_path / "keys").glob("*.pem"):
            assert stat.S_IMODE(pem.stat().st_mode) == 0o600
        assert stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700

    def test_load_or_generate_keeps_existing_keys(self, tmp_path: Path) -> None:
        """A second run reuses the saved keys and adds only a missing service's key."""
        first = DevKeys.load_or_generate(tmp_path, services=("dealer",))
        second = DevKeys.load_or_generate(tmp_path, services=("dealer", "table"))
        assert second.issuer_key.kid == first.issuer_key.kid
        assert second.service_key("dealer").kid == first.service_key("dealer").kid
        assert "table" in DevKeys.load(tmp_path).service_keys


class TestMetadata:
    def test_reads_the_bearer_entry(self) -> None:
        """The principal comes from ``authorization: Bearer <jwt>``."""
        token = KEYS.issuer().issue(ALICE)
        assert KEYS.verifier().verify_metadata(bearer_metadata(token)) == ALICE

    def test_missing_or_non_bearer_is_unauthorized(self) -> None:
        """No authorization entry, or a non-Bearer scheme, is Unauthorized."""
        with pytest.raises(Unauthorized) as info:
            KEYS.verifier().verify_metadata((("x-other", "1"),))
        assert info.value.reason == "missing_token"
        with pytest.raises(Unauthorized):
            KEYS.verifier().verify_metadata((("authorization", "Basic abc"),))


class TestRoles:
    def test_require_role_refuses_other_roles(self) -> None:
        """A player calling an operator-only operation is Forbidden."""
        require_role(Principal(Role.OPERATOR, "ops"), Role.OPERATOR)
        with pytest.raises(Forbidden):
            require_role(ALICE, Role.OPERATOR, Role.SERVICE)

    def test_require_service_names_the_service(self) -> None:
        """Only the named services pass; another service or a player is Forbidden."""
        require_service(TABLE, ("table",), "table")
        for who in (Principal(Role.SERVICE, "dealer"), ALICE):
            with pytest.raises(Forbidden):
                require_service(who, ("table",), "table")


def test_a_cached_token_still_expires() -> None:
    """The verifier remembers checked tokens, but a remembered token past its expiry is
    refused as expired, and a forged one is never taken from the cache."""
    from studkit.auth import Principal as _Principal
    from studkit.auth import Role as _Role
    from studkit.auth import TokenVerifier as _TokenVerifier
    from studkit.auth import Unauthorized as _Unauthorized
    from studtools.devkeys import DevKeys as _DevKeys

    now = [1_000_000.0]
    keys = _DevKeys.generate()
    token = keys.issuer(clock=lambda: now[0]).issue(_Principal(_Role.PLAYER, "ann"), 60)
    verifier = _TokenVerifier(keys.key_set(), clock=lambda: now[0])
    assert verifier.verify(token).name == "ann"
    assert verifier.verify(token).name == "ann"  # from the cache
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    with pytest.raises(_Unauthorized):
        verifier.verify(forged)
    now[0] += 120
    with pytest.raises(_Unauthorized) as caught:
        verifier.verify(token)
    assert caught.value.reason == "token_expired"


def test_known_answers_from_the_cache_alone() -> None:
    """``known`` (what the servers ask before a client's refused-call budget, issue 29 G6)
    gives the principal of a token verified before and not expired, and None, raising
    nothing and decoding nothing, for a token never seen, one refused, an expired one, or
    no token."""
    now = [NOW]
    clock = lambda: now[0]  # noqa: E731
    check = KEYS.verifier(clock)  # type: ignore[arg-type]
    good = bearer_metadata(KEYS.issuer(clock).issue(ALICE, ttl_seconds=60))
    assert check.known(good) is None  # never verified yet
    assert check.verify_metadata(good) == check.known(good)
    known = check.known(good)
    assert known is not None and known.name == "alice"
    bad = bearer_metadata("not-a-token")
    with pytest.raises(Unauthorized):
        check.verify_metadata(bad)
    assert check.known(bad) is None
    assert check.known(()) is None
    assert check.known([("authorization", "Basic abc")]) is None
    now[0] += 120
    assert check.known(good) is None  # expired: verify_metadata refuses it
