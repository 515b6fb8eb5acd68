"""The development room's token renewal (docs/web.md "Web client: signing in, resuming,
tabs"): ``POST /auth/renew`` with a valid token (``authorization: Bearer ...``) answers a
fresh token for the same principal, signed with the dev issuer key, as JSON
``{"token": "...", "expires_at": <Unix seconds>}``; ``GET /auth/renew`` says that the room
renews (``{"renews": true}``; a production gateway answers 404). ``make run`` serves it on
loopback and its gateway routes ``/auth/renew`` here (``GatewaySettings.signin``), so the web
page renews its sign-in before it ends instead of asking for the link again.

Only a player's token that verifies and has not reached its ``exp`` is renewed (an expired
one, even within the verifier's few seconds' leeway, a forged or a foreign one is refused
``401`` with its reason; an operator's, an auditor's or a service's ``403 not_renewable``):
whoever holds a live sign-in can keep it alive, as a refresh would, and no one gets a token
without one. Every request is answered with a JSON reason, never a dropped connection: a
``content-length`` that is not a count of bytes ``400 bad_content_length``, a body over
:data:`MAX_BODY` ``413 too_large``, one not sent within :data:`READ_TIMEOUT_S` ``408
timeout``, anything failing inside ``500 internal`` (logged, the token never). A production
room has no such endpoint: its identity
provider signs players in (and renews them) with the issuer key; the gateway routes
``/auth/renew`` nowhere there (``404``) and the page says to sign in again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from studkit.auth import Principal, Role, Unauthorized
from studkit.auth.tokens import TokenIssuer, TokenVerifier

log = logging.getLogger(__name__)

RENEW_PATH = "/auth/renew"
RENEW_TTL_S = 3600
"""A renewed token lives as long as make run's sign-in links' tokens (one hour)."""
MAX_BODY = 1024
READ_TIMEOUT_S = 10.0
"""How long a request may take to arrive (its line, headers and body): a client that
declares a body it does not send is answered 408, its thread freed."""


class RenewServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], issuer: TokenIssuer,
                 verifier: TokenVerifier, ttl_s: int = RENEW_TTL_S,
                 clock: Callable[[], float] = time.time,
                 read_timeout_s: float = READ_TIMEOUT_S) -> None:
        super().__init__(address, _Handler)
        self.read_timeout_s = read_timeout_s
        self.issuer = issuer
        self.verifier = verifier
        self.ttl_s = ttl_s
        self.clock = clock

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def renew(self, authorization: str) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON answer) for a request carrying ``authorization``."""
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return 401, {"reason": "missing_token"}
        try:
            principal = self.verifier.verify(token.strip())
        except Unauthorized as refused:
            return 401, {"reason": refused.reason or "invalid_token"}
        if principal.expires_at is None or principal.expires_at <= self.clock():
            # The verifier allows clocks a few seconds' drift past exp; a renewal does not
            # (an ended sign-in is not extended).
            return 401, {"reason": "token_expired"}
        if principal.role is not Role.PLAYER:
            # The page renews its player's sign-in and nothing else: an operator's or an
            # auditor's short-lived token is not made an hour's again and again, and a
            # service's is its own key's to mint (the issuer key may not sign it).
            return 403, {"reason": "not_renewable"}
        fresh = Principal(role=principal.role, name=principal.name)
        renewed = self.issuer.issue(fresh, ttl_seconds=self.ttl_s)
        claims = self.verifier.verify(renewed)
        return 200, {"token": renewed, "expires_at": int(claims.expires_at or 0)}


class _Handler(BaseHTTPRequestHandler):
    server: RenewServer
    _answered = False

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.read_timeout_s)

    def do_POST(self) -> None:
        self._serve(self._post)

    def do_GET(self) -> None:
        self._serve(self._get)

    def _serve(self, handle: Callable[[], None]) -> None:
        """``handle`` the request; whatever fails inside is answered 500 ``internal`` (when
        nothing was answered yet) and logged: never a connection dropped unanswered."""
        try:
            handle()
        except Exception:
            log.exception("%s %s failed", self.command, RENEW_PATH
                          if self.path == RENEW_PATH else "(another path)")
            if not self._answered:
                with contextlib.suppress(OSError):  # the client is gone
                    self._answer(500, {"reason": "internal"})
            self.close_connection = True

    def _post(self) -> None:
        if self.path != RENEW_PATH:
            self._answer(404, {"reason": "not_found"})
            return
        declared = self.headers.get("content-length")
        if declared is None:
            length = 0
        elif re.fullmatch(r"[0-9]+", digits := declared.strip()):
            length = int(digits) if len(digits) <= 18 else MAX_BODY + 1
        else:  # not a count of bytes (a negative one would read the socket to its end)
            self._answer(400, {"reason": "bad_content_length"})
            return
        if length > MAX_BODY:
            self._answer(413, {"reason": "too_large"})
            return
        try:
            self.rfile.read(length)
        except TimeoutError:
            self._answer(408, {"reason": "timeout"})
            self.close_connection = True
            return
        status, body = self.server.renew(self.headers.get("authorization", ""))
        self._answer(status, body)

    def _get(self) -> None:
        """Whether this room renews tokens (the page asks once, at load)."""
        if self.path == RENEW_PATH:
            self._answer(200, {"renews": True, "ttl_s": self.server.ttl_s})
        else:
            self._answer(404, {"reason": "not_found"})

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self._answered = True
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("cache-control", "no-store")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a token is never written to a log."""


def start(issuer: TokenIssuer, verifier: TokenVerifier, host: str = "127.0.0.1",
          port: int = 0, ttl_s: int = RENEW_TTL_S,
          read_timeout_s: float = READ_TIMEOUT_S) -> RenewServer:
    """The renewal endpoint on ``host:port`` (0: any free port), served by a daemon thread;
    ``server.shutdown()`` stops it."""
    server = RenewServer((host, port), issuer, verifier, ttl_s,
                         read_timeout_s=read_timeout_s)
    threading.Thread(target=server.serve_forever, name="stud-renew", daemon=True).start()
    return server
