"""Bearer tokens: issued tokens verify; forged, expired, malformed or missing ones do not."""

from __future__ import annotations

from collections.abc import Callable

import jwt
import pytest

from studkit.auth import (
    DEV_INSECURE_SECRET,
    Forbidden,
    Principal,
    Role,
    TokenIssuer,
    TokenVerifier,
    Unauthorized,
    bearer_metadata,
    main,
    require_role,
    secret_from_env,
)

SECRET = "unit-test-secret-that-is-long-enough-0123"
OTHER_SECRET = "another-secret-that-is-also-long-enough-999"
NOW = 1_700_000_000.0


def clock_at(t: float) -> Callable[[], float]:
    return lambda: t


ALICE = Principal(Role.PLAYER, "alice")


class TestTokens:
    def test_round_trips_a_principal(self) -> None:
        """A token the issuer minted verifies to the same principal."""
        token = TokenIssuer(SECRET, clock_at(NOW)).issue(ALICE, ttl_seconds=60)
        assert TokenVerifier(SECRET, clock_at(NOW + 30)).verify(token) == ALICE

    def test_refuses_a_forged_signature(self) -> None:
        """A token signed with another secret is Unauthorized."""
        token = TokenIssuer(OTHER_SECRET, clock_at(NOW)).issue(ALICE)
        with pytest.raises(Unauthorized):
            TokenVerifier(SECRET, clock_at(NOW)).verify(token)

    def test_refuses_alg_none(self) -> None:
        """An unsigned token (alg none) is Unauthorized."""
        claims = {"sub": "operator:eve", "role": "operator", "iat": int(NOW),
                  "exp": int(NOW) + 60, "iss": "stud-hilo"}
        token = jwt.encode(claims, key=None, algorithm="none")
        with pytest.raises(Unauthorized):
            TokenVerifier(SECRET, clock_at(NOW)).verify(token)

    def test_refuses_an_expired_token(self) -> None:
        """A token past its exp (plus leeway) is Unauthorized with reason token_expired."""
        token = TokenIssuer(SECRET, clock_at(NOW)).issue(ALICE, ttl_seconds=60)
        with pytest.raises(Unauthorized) as info:
            TokenVerifier(SECRET, clock_at(NOW + 61), leeway_seconds=0).verify(token)
        assert info.value.reason == "token_expired"

    def test_refuses_a_subject_that_does_not_match_the_role(self) -> None:
        """sub "player:x" with role "operator" is Unauthorized (no role escalation)."""
        claims = {"sub": "player:mallory", "role": "operator", "iat": int(NOW),
                  "exp": int(NOW) + 60, "iss": "stud-hilo"}
        token = jwt.encode(claims, SECRET.encode(), algorithm="HS256")
        with pytest.raises(Unauthorized):
            TokenVerifier(SECRET, clock_at(NOW)).verify(token)

    def test_refuses_a_wrong_issuer_and_unknown_role(self) -> None:
        """Tokens with another iss or a role outside the four are Unauthorized."""
        base = {"iat": int(NOW), "exp": int(NOW) + 60}
        wrong_iss = {**base, "sub": "player:a", "role": "player", "iss": "elsewhere"}
        bad_role = {**base, "sub": "root:a", "role": "root", "iss": "stud-hilo"}
        verifier = TokenVerifier(SECRET, clock_at(NOW))
        for claims in (wrong_iss, bad_role):
            with pytest.raises(Unauthorized):
                verifier.verify(jwt.encode(claims, SECRET.encode(), algorithm="HS256"))

    def test_refuses_garbage(self) -> None:
        """A string that is not a JWT is Unauthorized and the message omits it."""
        with pytest.raises(Unauthorized) as info:
            TokenVerifier(SECRET).verify("not-a-jwt-secretvalue")
        assert "secretvalue" not in str(info.value)


class TestMetadata:
    def test_reads_the_bearer_entry(self) -> None:
        """The principal comes from ``authorization: Bearer <jwt>``."""
        token = TokenIssuer(SECRET).issue(ALICE)
        assert TokenVerifier(SECRET).verify_metadata(bearer_metadata(token)) == ALICE

    def test_missing_or_non_bearer_is_unauthorized(self) -> None:
        """No authorization entry, or a non-Bearer scheme, is Unauthorized."""
        verifier = TokenVerifier(SECRET)
        with pytest.raises(Unauthorized) as info:
            verifier.verify_metadata((("x-other", "1"),))
        assert info.value.reason == "missing_token"
        with pytest.raises(Unauthorized):
            verifier.verify_metadata((("authorization", "Basic abc"),))


class TestRoles:
    def test_require_role_refuses_other_roles(self) -> None:
        """A player calling an operator-only operation is Forbidden."""
        require_role(Principal(Role.OPERATOR, "ops"), Role.OPERATOR)
        with pytest.raises(Forbidden):
            require_role(ALICE, Role.OPERATOR, Role.SERVICE)


class TestSecrets:
    def test_dev_default_only_in_dev(self) -> None:
        """Without STUD_AUTH_SECRET the dev default is used only when STUD_ENV=dev."""
        assert secret_from_env({"STUD_ENV": "dev"}) == DEV_INSECURE_SECRET
        assert secret_from_env({"STUD_AUTH_SECRET": SECRET}) == SECRET
        with pytest.raises(RuntimeError):
            secret_from_env({})

    def test_short_secrets_are_refused(self) -> None:
        """A secret shorter than 32 bytes is refused."""
        with pytest.raises(ValueError):
            TokenIssuer("short")
        with pytest.raises(ValueError):
            secret_from_env({"STUD_AUTH_SECRET": "short"})

    def test_cli_mints_a_verifiable_token(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``python -m studkit.auth service table`` prints a token for service:table."""
        monkeypatch.setenv("STUD_AUTH_SECRET", SECRET)
        assert main(["service", "table", "--ttl", "60"]) == 0
        token = capsys.readouterr().out.strip()
        assert TokenVerifier(SECRET).verify(token) == Principal(Role.SERVICE, "table")
