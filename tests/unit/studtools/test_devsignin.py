"""The development room's token renewal (:mod:`studtools.devsignin`, make run's
``/auth/renew`` behind the gateway), asked over real HTTP: it renews only a live player's
token and answers every request, however malformed, with a status and a JSON reason (never a
dropped connection). The page's side is tests/browser/test_token_renewal.py."""

from __future__ import annotations

import http.client
import json
import logging
import time
from collections.abc import Iterator

import pytest

from studkit.auth import Principal, Role
from studkit.auth.tokens import TokenIssuer
from studtools import devsignin
from studtools.devkeys import DevKeys

KEYS = DevKeys.generate()


@pytest.fixture
def server() -> Iterator[devsignin.RenewServer]:
    running = devsignin.start(KEYS.issuer(), KEYS.verifier())
    try:
        yield running
    finally:
        running.shutdown()
        running.server_close()


def post(server: devsignin.RenewServer, headers: dict[str, str], body: bytes = b"",
         path: str = devsignin.RENEW_PATH) -> tuple[int, dict[str, object]]:
    """``POST`` with exactly these headers (no content-length added): the status and JSON
    answer; a dropped connection raises."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.putrequest("POST", path, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders(body or None)
        answer = connection.getresponse()
        assert answer.getheader("content-type") == "application/json"
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}", "content-length": "0"}


def token_of(role: Role, name: str, ttl_s: int = 60, issued_ago_s: float = 0.0) -> str:
    """A token signed with the key that may sign for ``role`` (a service's own key, else
    the issuer's), issued ``issued_ago_s`` ago."""
    key = KEYS.service_key(name) if role is Role.SERVICE else KEYS.issuer_key
    return TokenIssuer(key, clock=lambda: time.time() - issued_ago_s).issue(
        Principal(role=role, name=name), ttl_seconds=ttl_s)


def test_a_live_players_token_is_renewed(server: devsignin.RenewServer) -> None:
    status, body = post(server, bearer(token_of(Role.PLAYER, "alice")))
    assert status == 200, body
    renewed = KEYS.verifier().verify(str(body["token"]))
    assert renewed == Principal(Role.PLAYER, "alice")
    assert body["expires_at"] == renewed.expires_at
    assert int(str(body["expires_at"])) - time.time() > devsignin.RENEW_TTL_S - 60


def test_a_service_token_is_refused_not_dropped(server: devsignin.RenewServer) -> None:
    """A valid service token (signed by its service's key): the issuer may not sign for a
    service, so nothing is issued; the caller is told why (it crashed the handler)."""
    service = token_of(Role.SERVICE, "table")
    assert KEYS.verifier().verify(service).role is Role.SERVICE  # live and valid
    assert post(server, bearer(service)) == (403, {"reason": "not_renewable"})


@pytest.mark.parametrize("length", ["abc", "-1", "1e3", ""])
def test_a_malformed_content_length_is_answered_400(server: devsignin.RenewServer,
                                                    length: str) -> None:
    """Not a count of bytes: 400 with a reason (``abc`` crashed the handler; ``-1`` read the
    socket to its end, blocking the request until the client gave up)."""
    headers = {**bearer(token_of(Role.PLAYER, "alice")), "content-length": length}
    assert post(server, headers) == (400, {"reason": "bad_content_length"})


@pytest.mark.parametrize("length", [str(devsignin.MAX_BODY + 1), "9" * 5000])
def test_a_body_too_large_is_answered_413(server: devsignin.RenewServer, length: str) -> None:
    headers = {**bearer(token_of(Role.PLAYER, "alice")), "content-length": length}
    assert post(server, headers) == (413, {"reason": "too_large"})


@pytest.mark.parametrize("role", [Role.OPERATOR, Role.AUDITOR])
def test_only_a_players_token_is_renewed(server: devsignin.RenewServer, role: Role) -> None:
    """An operator's or auditor's short-lived token is not made an hour's, again and again:
    the page renews its player's sign-in, nothing else."""
    assert post(server, bearer(token_of(role, "ops", ttl_s=30))) == (
        403, {"reason": "not_renewable"})


def test_a_token_past_its_exp_is_refused_within_the_leeway(
        server: devsignin.RenewServer) -> None:
    """The verifier takes a token up to 5 s past its ``exp`` (clocks drift); a renewal does
    not: an expired token is refused however recently it ended."""
    ended = token_of(Role.PLAYER, "alice", ttl_s=60, issued_ago_s=62)  # ended 2-3 s ago
    assert (KEYS.verifier().verify(ended).expires_at or 0) <= time.time()  # yet verifies
    assert post(server, bearer(ended)) == (401, {"reason": "token_expired"})
    long_ended = token_of(Role.PLAYER, "alice", ttl_s=60, issued_ago_s=7200)
    assert post(server, bearer(long_ended)) == (401, {"reason": "token_expired"})


def test_a_failure_inside_is_a_json_500_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Whatever fails inside (here a room misconfigured: its issuer key is not one its
    verifier trusts, so the fresh token does not verify) is answered 500 with a reason and
    logged, the token never written; not a dropped connection."""
    stranger = DevKeys.generate()
    server = devsignin.start(stranger.issuer(), KEYS.verifier())
    live = token_of(Role.PLAYER, "alice")
    try:
        with caplog.at_level(logging.ERROR, logger=devsignin.__name__):
            assert post(server, bearer(live)) == (500, {"reason": "internal"})
    finally:
        server.shutdown()
        server.server_close()
    logged = [r for r in caplog.records if r.name == devsignin.__name__]
    assert logged and "POST /auth/renew failed" in logged[0].getMessage(), caplog.text
    assert live not in caplog.text


def test_a_body_never_sent_is_answered_408() -> None:
    """A request declaring a body it does not send holds its thread only so long: 408."""
    server = devsignin.start(KEYS.issuer(), KEYS.verifier(), read_timeout_s=0.5)
    try:
        headers = {**bearer(token_of(Role.PLAYER, "alice")), "content-length": "10"}
        assert post(server, headers) == (408, {"reason": "timeout"})
    finally:
        server.shutdown()
        server.server_close()
