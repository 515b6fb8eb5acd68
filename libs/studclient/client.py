"""The client: one :class:`Client` per identity (a bearer token), talking to the table, the
dealer and the wallet over ``grpc.aio``.

Commands get a fresh command id (a UUID) unless the caller passes one; a command that fails
with UNAVAILABLE, DEADLINE_EXCEEDED or ABORTED is sent again, *the same request with the same
command id*, after a backoff (the server answers a repeat with the original outcome, so
nothing happens twice), until the attempts are spent *and* the policy's patience has passed
since the first (long enough by default for another table replica to take over a table whose
replica died). An expired token (UNAUTHENTICATED, ``token_expired``) is replaced
once from the token provider and the call repeated. Every other refusal raises a typed
:class:`~studclient.errors.StudError` carrying the server's reason.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import os
import random
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import grpc

from stud.v1 import (
    common_pb2,
    dealer_pb2,
    dealer_pb2_grpc,
    table_pb2,
    table_pb2_grpc,
    wallet_pb2,
    wallet_pb2_grpc,
)
from studclient.errors import (
    StudError,
    TokenExpired,
    from_rpc_error,
)
from studclient.expected import AUTO, ExpectedSequence
from studclient.pace import TABLE_BURST, TABLE_CALLS_PER_S, CallPace
from studclient.play import PlaySession
from studclient.tournament import TournamentClient
from studclient.watch import TableWatch, records_of
from studkit.cardcheck import Verdict
from studkit.commandwindow import new_id

TokenProvider = Callable[[], str | Awaitable[str]]
"""Returns a valid bearer token (called before calls and again after ``token_expired``)."""

T = TypeVar("T")

RETRIED_CODES: Final = frozenset({grpc.StatusCode.UNAVAILABLE,
                                  grpc.StatusCode.DEADLINE_EXCEEDED,
                                  grpc.StatusCode.ABORTED})
"""Status codes a command is retried on, with the same command id."""
READ_RETRIED_CODES: Final = frozenset({grpc.StatusCode.UNAVAILABLE,
                                       grpc.StatusCode.DEADLINE_EXCEEDED})
CHANNEL_OPTIONS: Final = (
    # One TCP connection per client, not one shared by every channel of the process: the
    # dealer bounds streams per connection.
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.keepalive_time_ms", 30_000),
)
VIA_GATEWAY_ENV: Final = "STUD_VIA_GATEWAY"
"""``1``: :meth:`Client.connect`'s default is ``via_gateway=True``."""
TLS_ENV: Final = "STUD_TLS"
"""``1``: :meth:`Client.connect`'s default is TLS (the system's trusted roots)."""
TLS_CA_ENV: Final = "STUD_TLS_CA"
"""A PEM file of the roots to trust (a private CA, a self-signed gateway): TLS with those."""
DEFAULT_PACE: Final = CallPace(TABLE_CALLS_PER_S, TABLE_BURST)
"""A marker: :class:`Client` makes its own pace (never shared between clients)."""
REDIRECTS_AT_ONCE: Final = 3
"""``not_owner`` redirects a call follows without a pause (then after one, while its retry
patience lasts: :meth:`Client._call`)."""
OWNER_HEADER: Final = "stud-owner"
"""Through the gateway, a table call carrying this header (``ip:port``, the ``owner`` of a
``not_owner`` refusal) goes to that table replica (``studtools.gateway.OWNER_HEADER``)."""




@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently retried calls are repeated (exponential backoff with
    jitter)."""

    attempts: int = 6
    initial_backoff_s: float = 0.05
    max_backoff_s: float = 2.0
    multiplier: float = 2.0
    timeout_s: float = 10.0
    """Deadline of each attempt."""
    patience_s: float = 8.0
    """A retried call is repeated (every ``max_backoff_s``) past its attempts until this
    long after the first: a table whose replica died is refused ``UNAVAILABLE`` until
    another replica takes it over, which takes up to a lease (3 s by default,
    ``TABLE_LEASE_MS``) and the survivors' next ownership round (a third of one), plus the
    new owner rebuilding the table. 0: the attempts alone."""

    def delays(self) -> list[float]:
        """The pauses between attempts (before jitter)."""
        out, delay = [], self.initial_backoff_s
        for _ in range(self.attempts - 1):
            out.append(delay)
            delay = min(delay * self.multiplier, self.max_backoff_s)
        return out

    def pause(self, delays: list[float], started: float, now: float) -> float | None:
        """The pause before the next attempt of a call first sent at ``started`` (a
        ``time.monotonic()`` reading), taken from ``delays`` (:meth:`delays`, consumed);
        once they are spent, ``max_backoff_s`` while the patience lasts; None: give up."""
        if delays:
            return delays.pop(0)
        if now - started < self.patience_s:
            return self.max_backoff_s
        return None


def new_command_id() -> str:
    """A fresh table command id, timed: ``t<Unix ms, 13 digits>-<20 hex>``. The table refuses
    a retry of it ``command_expired`` once it is older than the idempotency window (10
    minutes, less a minute of clock skew) and has no record (docs/history.md, "Expired
    commands"): make a new command then. A player's command must carry a timed id (this
    form or a UUIDv7) unless it carries ``expected_sequence``: another id is refused
    ``command_id_untimed``, so a caller passing its own ``command_id`` must make it so."""
    return new_id()


def token_subject(token: str) -> tuple[str, str]:
    """(role, name) from a token's ``sub`` claim, read *without* checking the signature
    (the server checks it; the client only wants to know who it is)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        role, _, name = str(claims["sub"]).partition(":")
        return role, name
    except (IndexError, ValueError, KeyError, TypeError):
        return "", ""


_ACTIONS: Final[dict[int, str]] = {
    common_pb2.ACTION_KIND_BRING_IN: "PostBringIn",
    common_pb2.ACTION_KIND_COMPLETE: "Complete",
    common_pb2.ACTION_KIND_BET: "Bet",
    common_pb2.ACTION_KIND_RAISE: "Raise",
    common_pb2.ACTION_KIND_CALL: "Call",
    common_pb2.ACTION_KIND_CHECK: "Check",
    common_pb2.ACTION_KIND_FOLD: "Fold",
}


def legal_action(action: common_pb2.LegalAction) -> tuple[str, int | None]:
    """A view's legal action (``hand.legal_actions.actions``) as its unary method's name and
    its amount (``to``: a completion's, bet's or raise's; None for the others)."""
    method = _ACTIONS[action.kind]
    return method, action.to if method in ("Complete", "Bet", "Raise") else None


_REQUESTS: Final[dict[str, Any]] = {
    "PostBringIn": table_pb2.PostBringInRequest,
    "Complete": table_pb2.CompleteRequest,
    "Bet": table_pb2.BetRequest,
    "Raise": table_pb2.RaiseRequest,
    "Call": table_pb2.CallRequest,
    "Check": table_pb2.CheckRequest,
    "Fold": table_pb2.FoldRequest,
    "SitOut": table_pb2.SitOutRequest,
    "SitIn": table_pb2.SitInRequest,
    "LeaveSeat": table_pb2.LeaveSeatRequest,
}


class Client:
    """A connection to the room as one identity (player, operator, ...).

    ``async with Client.connect(table_addr, dealer_addr, wallet_addr, token) as client:``;
    ``token`` is a bearer token or a provider (sync or async callable) that returns a valid
    one. The dealer and wallet addresses are optional for a client that does not need them.
    """

    def __init__(self, table: grpc.aio.Channel, dealer: grpc.aio.Channel | None,
                 wallet: grpc.aio.Channel | None, token: str | TokenProvider, *,
                 retry: RetryPolicy | None = None,
                 interceptors: Sequence[grpc.aio.ClientInterceptor] | None = None,
                 tournament: grpc.aio.Channel | None = None,
                 via_gateway: bool = False,
                 table_pace: CallPace | None = DEFAULT_PACE) -> None:
        self.via_gateway = via_gateway
        """Follow ``not_owner`` through the address connected to, with the owner in the
        ``stud-owner`` header, instead of dialing the owner (docs/sdk.md)."""
        self._channels = [c for c in (table, dealer, wallet, tournament) if c is not None]
        self._tournaments = (TournamentClient(self, tournament) if tournament is not None
                             else None)
        self._table = table_pb2_grpc.TableServiceStub(table)  # type: ignore[no-untyped-call]
        self._owners: dict[str, Any] = {}
        """Replicas' table stubs by address (tables owned by another table replica)."""
        self._routes: dict[str, str] = {}
        """table id -> the address of the replica that owns it (learnt from not_owner)."""
        self._interceptors = interceptors
        self._dealer = (dealer_pb2_grpc.DealerServiceStub(dealer)  # type: ignore[no-untyped-call]
                        if dealer is not None else None)
        self._wallet = (wallet_pb2_grpc.WalletServiceStub(wallet)  # type: ignore[no-untyped-call]
                        if wallet is not None else None)
        self._provider: TokenProvider | None = None if isinstance(token, str) else token
        self._token: str | None = token if isinstance(token, str) else None
        self.retry = retry or RetryPolicy()
        self._versions: dict[str, int] = {}
        self._seats: dict[str, int] = {}
        self._rng = random.Random()
        self.table_pace = (CallPace(TABLE_CALLS_PER_S, TABLE_BURST)
                           if table_pace is DEFAULT_PACE else table_pace)
        """The pace a player's table calls keep (:mod:`studclient.pace`): under the table's
        budget, a call waits instead of being refused ``rate_limited``. None: unpaced
        (operators, services and auditors are not budgeted by the table anyway)."""
        self._paced: tuple[str | None, bool] = (None, False)
        """The token last looked at, and whether it is a player's (whose calls are paced)."""

    @classmethod
    def connect(cls, table_addr: str, dealer_addr: str | None = None,
                wallet_addr: str | None = None, token: str | TokenProvider = "", *,
                retry: RetryPolicy | None = None,
                interceptors: Sequence[grpc.aio.ClientInterceptor] | None = None,
                tournament_addr: str | None = None,
                via_gateway: bool | None = None, tls: bool | None = None,
                tls_roots: bytes | None = None,
                table_pace: CallPace | None = DEFAULT_PACE) -> Client:
        """A client for the services at these addresses (``host:port``).
        ``via_gateway``: the addresses are the gateway's (docs/web.md), which alone reaches
        the table replicas; None: ``STUD_VIA_GATEWAY=1`` in the environment says so.
        ``tls``: TLS, trusting ``tls_roots`` (PEM) or else the system's roots; None:
        ``STUD_TLS=1`` or ``STUD_TLS_CA=<PEM file>`` in the environment, else plaintext.
        ``table_pace``: the pace of a player's table calls (:mod:`studclient.pace`; by
        default :data:`~studclient.pace.TABLE_CALLS_PER_S`; None: unpaced)."""
        if via_gateway is None:
            via_gateway = os.environ.get(VIA_GATEWAY_ENV, "").strip() == "1"
        ca = os.environ.get(TLS_CA_ENV, "").strip()
        if tls_roots is None and ca:
            with open(ca, "rb") as pem:
                tls_roots = pem.read()
        if tls is None:
            tls = tls_roots is not None or os.environ.get(TLS_ENV, "").strip() == "1"
        credentials = grpc.ssl_channel_credentials(tls_roots) if tls else None

        def channel(addr: str) -> grpc.aio.Channel:
            if credentials is not None:
                return grpc.aio.secure_channel(addr, credentials, options=CHANNEL_OPTIONS,
                                               interceptors=interceptors)
            return grpc.aio.insecure_channel(addr, options=CHANNEL_OPTIONS,
                                             interceptors=interceptors)
        return cls(channel(table_addr), channel(dealer_addr) if dealer_addr else None,
                   channel(wallet_addr) if wallet_addr else None, token, retry=retry,
                   interceptors=interceptors,
                   tournament=channel(tournament_addr) if tournament_addr else None,
                   via_gateway=via_gateway, table_pace=table_pace)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channels (open watches end)."""
        for channel in self._channels:
            await channel.close()

    # --- identity ------------------------------------------------------------------------

    async def token(self, fresh: bool = False) -> str:
        """The bearer token (asks the provider for a new one when ``fresh`` or none yet)."""
        if self._provider is not None and (fresh or self._token is None):
            value = self._provider()
            self._token = await value if inspect.isawaitable(value) else value
        if not self._token:
            raise ValueError("no token: pass one (or a provider) to Client.connect")
        return self._token

    @property
    def tournaments(self) -> TournamentClient:
        """The tournament service (connect with ``tournament_addr=``)."""
        if self._tournaments is None:
            raise ValueError("no tournament address: pass tournament_addr= to Client.connect")
        return self._tournaments

    @property
    def has_dealer(self) -> bool:
        """Whether a dealer address was given."""
        return self._dealer is not None

    @property
    def refreshable(self) -> bool:
        """Whether an expired token can be replaced (a provider was given)."""
        return self._provider is not None

    async def whoami(self) -> tuple[str, str]:
        """(role, name) of the caller, from the token (unverified)."""
        return token_subject(await self.token())

    async def player_id(self) -> str:
        """The caller's name (a player's id)."""
        return (await self.whoami())[1]

    async def metadata(self, fresh: bool = False) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {await self.token(fresh)}"),)

    def _player_token(self) -> bool:
        """Whether the current token is a player's (read unverified, once per token)."""
        token, player = self._paced
        if token != self._token:
            player = token_subject(self._token or "")[0] == "player"
            self._paced = (self._token, player)
        return player

    # --- calling ---------------------------------------------------------------------------

    def table_stub(self, table_id: str | None = None) -> Any:
        """The table service stub for ``table_id``: the replica that owns it when a call was
        redirected there (``not_owner``), else (and always through a gateway) the address
        given to :meth:`connect`."""
        addr = self._routes.get(table_id or "")
        if addr is None or self.via_gateway:
            return self._table
        if addr not in self._owners:
            channel = grpc.aio.insecure_channel(addr, options=CHANNEL_OPTIONS,
                                                interceptors=self._interceptors)
            self._channels.append(channel)
            self._owners[addr] = table_pb2_grpc.TableServiceStub(  # type: ignore[no-untyped-call]
                channel)
        return self._owners[addr]

    def follow_redirect(self, table_id: str, error: StudError) -> bool:
        """If ``error`` says another table replica owns ``table_id`` (``not_owner``, its
        address in the error's metadata), route the table's calls there; True if so."""
        owner = error.metadata.get("owner", "")
        if error.reason != "not_owner" or not owner or self._routes.get(table_id) == owner:
            return False
        self._routes[table_id] = owner
        return True

    def owner_metadata(self, table_id: str) -> tuple[tuple[str, str], ...]:
        """Through a gateway, the header that sends ``table_id``'s calls to its owner (once
        a redirect named one); else nothing."""
        addr = self._routes.get(table_id)
        return ((OWNER_HEADER, addr),) if self.via_gateway and addr else ()

    def route(self, table_id: str) -> str | None:
        """The table replica ``table_id``'s calls go to, when redirected (else None)."""
        return self._routes.get(table_id)

    def forget_route(self, table_id: str) -> None:
        """Send ``table_id``'s calls to the first address again (its owner went away)."""
        self._routes.pop(table_id, None)

    async def _call(self, rpc: Callable[..., Awaitable[T]] | str, request: Any, *,
                    retry_on: frozenset[grpc.StatusCode] = RETRIED_CODES) -> T:
        """``rpc(request)`` with the token, retrying ``retry_on`` codes and ``rate_limited``
        with the same request and replacing an expired token once. A table method given by
        name is sent to the replica that owns the request's table, following ``not_owner``
        redirects; a player's is sent at the client's pace (:attr:`table_pace`)."""
        delays = self.retry.delays()
        started = time.monotonic()
        refreshed = fresh = False
        redirects = 0
        while True:
            table_id = str(getattr(request, "table_id", ""))
            method = (getattr(self.table_stub(table_id), rpc) if isinstance(rpc, str)
                      else rpc)
            try:
                metadata = await self.metadata(fresh)
                if isinstance(rpc, str):
                    metadata += self.owner_metadata(table_id)
                    if self.table_pace is not None and self._player_token():
                        await self.table_pace.take()
                result: T = await method(request, metadata=metadata,
                                         timeout=self.retry.timeout_s)
                return result
            except grpc.aio.AioRpcError as exc:
                error = from_rpc_error(exc)
                fresh = False
                if isinstance(error, TokenExpired) and self.refreshable and not refreshed:
                    refreshed = fresh = True
                    continue
                if isinstance(rpc, str) and self.follow_redirect(table_id, error):
                    # At the owner it names: at once, the first REDIRECTS_AT_ONCE times;
                    # after that after the not_owner pause below, while the patience
                    # lasts (a replica killed, restarted, its tables taken over: each
                    # step names another owner, and the last one named is the one).
                    redirects += 1
                    if redirects <= REDIRECTS_AT_ONCE:
                        continue
                if isinstance(rpc, str) and exc.code() is grpc.StatusCode.UNAVAILABLE:
                    # The replica it was routed to may be gone: ask the first address again.
                    self.forget_route(table_id)
                # A rate limit (the table's budget set below the client's pace, or the
                # player's calls on more than one client) says to back off and retry.
                retried = (error.reason in ("not_owner", "rate_limited")
                           or exc.code() in retry_on)
                pause = (self.retry.pause(delays, started, time.monotonic()) if retried
                         else None)
                if pause is None:
                    raise error from None
                if error.reason == "not_owner":
                    # The table is changing hands between replicas: wait and ask again.
                    await asyncio.sleep(pause)
                else:
                    await asyncio.sleep(pause * (0.5 + self._rng.random()))

    def saw(self, table_id: str, version: int) -> None:
        """Note that the caller has seen ``table_id`` at ``version`` (a record, a reply, a
        view): what ``expected_sequence=AUTO`` sends next (:meth:`known_version`) never goes
        back. :class:`~studclient.play.PlaySession` calls it for its records and replies."""
        if version > self._versions.get(table_id, -1):
            self._versions[table_id] = version

    def known_version(self, table_id: str) -> int | None:
        """The table version of the client's current view of ``table_id``, if any."""
        return self._versions.get(table_id)

    def _expected(self, table_id: str, expected: ExpectedSequence) -> int | None:
        if expected is AUTO:
            return self._versions.get(table_id)
        return expected if isinstance(expected, int) else None

    async def _command(self, method: str, request: Any) -> table_pb2.CommandReply:
        if not request.command_id:
            request.command_id = new_command_id()
        reply: table_pb2.CommandReply = await self._call(method, request)
        self.saw(request.table_id, reply.version)
        return reply

    async def _seat(self, table_id: str, seat: int | None) -> int:
        if seat:
            return seat
        if table_id not in self._seats:
            view = await self.get_table(table_id)
            if not view.viewer_seat:
                raise ValueError(f"not seated at {table_id}: pass seat=")
            self._seats[table_id] = view.viewer_seat
        return self._seats[table_id]

    async def seat_request(self, method: str, table_id: str, seat: int | None = None,
                           expected: ExpectedSequence = AUTO, command_id: str | None = None,
                           **fields: Any) -> Any:
        """The request of the seat command ``method`` (a betting action's unary method
        name, ``SitOut``, ``SitIn``, ``LeaveSeat``) at ``table_id``, as this client sends
        it: the seat (``seat``, else the caller's seat there, asked once), the command id
        (``command_id``, else a new one: :func:`new_command_id`), ``expected_sequence`` as
        ``expected`` says (``AUTO``: :meth:`known_version`), and ``fields`` (``to=``).
        :class:`~studclient.play.PlaySession` sends the same requests on its stream."""
        request = _REQUESTS[method](table_id=table_id, seat=await self._seat(table_id, seat),
                                    command_id=command_id or new_command_id(), **fields)
        sequence = self._expected(table_id, expected)
        if sequence is not None:
            request.expected_sequence = sequence
        return request

    async def _seat_command(self, method: str, table_id: str, seat: int | None,
                            expected: ExpectedSequence, command_id: str | None,
                            **fields: Any) -> table_pb2.CommandReply:
        request = await self.seat_request(method, table_id, seat, expected, command_id,
                                          **fields)
        return await self._command(method, request)

    # --- lobby -----------------------------------------------------------------------------

    async def list_tables(self) -> list[table_pb2.TableSummary]:
        """The open tables (every page of the lobby)."""
        tables: list[table_pb2.TableSummary] = []
        token = ""
        while True:
            reply: table_pb2.ListTablesResponse = await self._call(
                "ListTables", table_pb2.ListTablesRequest(page_token=token),
                retry_on=READ_RETRIED_CODES)
            tables.extend(reply.tables)
            token = reply.next_page_token
            if not token:
                return tables

    async def open_table(self, table_id: str | None = None,
                         config: common_pb2.TableConfig | Any = None,
                         settings: table_pb2.TableSettings | None = None, *,
                         command_id: str | None = None) -> str:
        """Operators: open a table (``config`` a ``stud.v1.TableConfig`` or a
        ``rules.TableConfig``; default $2/$4 stud). Returns its id."""
        if config is None or not isinstance(config, common_pb2.TableConfig):
            from rules import TableConfig
            from studkit.mapping import config_to_proto
            config = config_to_proto(config if config is not None else TableConfig())
        table_id = table_id or f"t-{uuid.uuid4().hex[:12]}"
        request = table_pb2.OpenTableRequest(table_id=table_id, config=config,
                                             command_id=command_id or "")
        if settings is not None:
            request.settings.CopyFrom(settings)
        await self._command("OpenTable", request)
        return table_id

    async def close_table(self, table_id: str) -> table_pb2.CommandReply:
        """Operators: close the table after the current hand (every seat is cashed out)."""
        return await self._command("CloseTable", table_pb2.CloseTableRequest(table_id=table_id))

    async def get_table(self, table_id: str) -> table_pb2.TableView:
        """The table as the caller may see it now."""
        view: table_pb2.TableView = await self._call(
            "GetTable", table_pb2.GetTableRequest(table_id=table_id),
            retry_on=READ_RETRIED_CODES)
        self.saw(table_id, view.version)
        if view.viewer_seat:
            self._seats[table_id] = view.viewer_seat
        return view

    async def hand_history(self, table_id: str, hand_number: int) -> table_pb2.HandHistory:
        """One hand's events as the caller may see them."""
        reply: table_pb2.HandHistory = await self._call(
            "GetHandHistory",
            table_pb2.GetHandHistoryRequest(table_id=table_id, hand_number=hand_number),
            retry_on=READ_RETRIED_CODES)
        return reply

    def watch(self, table_id: str, *, cards: bool = True,
              on_event: Callable[[table_pb2.TableEventRecord], None] | None = None,
              verify: bool = True, seeds: bool = True,
              on_verdict: Callable[[Verdict], None] | None = None) -> TableWatch:
        """A live view of the table (``async with client.watch(t) as watch:``); with
        ``cards`` a player's own down cards come from the dealer and are merged in;
        ``on_event`` gets every event record, once, in order. For a player with ``cards``,
        ``verify`` checks every hand alone (``watch.verdicts``, ``on_verdict``) and ``seeds``
        gives the dealer a seed for each (docs/fairness.md)."""
        return TableWatch(self, table_id, cards=cards, on_event=on_event, verify=verify,
                          seeds=seeds, on_verdict=on_verdict)

    # --- seats -----------------------------------------------------------------------------

    async def sit(self, table_id: str, seat: int, buy_in: int, *,
                  expected_sequence: int | None = None,
                  command_id: str | None = None) -> table_pb2.CommandReply:
        """Take ``seat``, buying in ``buy_in`` chips from the caller's wallet account."""
        request = table_pb2.SitDownRequest(table_id=table_id, seat=seat, buy_in=buy_in,
                                           command_id=command_id or "")
        if expected_sequence is not None:
            request.expected_sequence = expected_sequence
        reply = await self._command("SitDown", request)
        self._seats[table_id] = seat
        return reply

    async def top_up(self, table_id: str, amount: int, *, seat: int | None = None,
                     expected_sequence: int | None = None,
                     command_id: str | None = None) -> table_pb2.CommandReply:
        """Add ``amount`` chips to the seat (between hands; asked during a hand, when it
        ends)."""
        request = table_pb2.AddChipsRequest(table_id=table_id,
                                            seat=await self._seat(table_id, seat),
                                            amount=amount, command_id=command_id or "")
        if expected_sequence is not None:
            request.expected_sequence = expected_sequence
        return await self._command("AddChips", request)

    async def leave(self, table_id: str, *, seat: int | None = None,
                    expected_sequence: int | None = None,
                    command_id: str | None = None) -> table_pb2.CommandReply:
        """Leave the seat (when the hand in progress ends); the stack goes back to the
        wallet account."""
        reply = await self._seat_command("LeaveSeat", table_id, seat, expected_sequence,
                                         command_id)
        self._seats.pop(table_id, None)
        return reply

    async def sit_out(self, table_id: str, *, seat: int | None = None,
                      command_id: str | None = None) -> table_pb2.CommandReply:
        """Stop being dealt in from the next hand on."""
        return await self._seat_command("SitOut", table_id, seat, None, command_id)

    async def sit_in(self, table_id: str, *, seat: int | None = None,
                     command_id: str | None = None) -> table_pb2.CommandReply:
        """Be dealt in again from the next hand on."""
        return await self._seat_command("SitIn", table_id, seat, None, command_id)

    async def set_muck(self, table_id: str, muck: bool, *, seat: int | None = None,
                       command_id: str | None = None) -> table_pb2.CommandReply:
        """Muck a losing hand at the showdown when the rules allow it (RULES 11.4)."""
        request = table_pb2.SetMuckPreferenceRequest(
            table_id=table_id, seat=await self._seat(table_id, seat), muck=muck,
            command_id=command_id or "")
        return await self._command("SetMuckPreference", request)

    # --- betting ---------------------------------------------------------------------------

    async def _action(self, method: str, table_id: str, seat: int | None,
                      expected: ExpectedSequence, command_id: str | None,
                      to: int | None = None) -> table_pb2.CommandReply:
        fields = {"to": to} if to is not None else {}
        return await self._seat_command(method, table_id, seat, expected, command_id,
                                        **fields)

    async def bring_in(self, table_id: str, *, seat: int | None = None,
                       expected_sequence: ExpectedSequence = AUTO,
                       command_id: str | None = None) -> table_pb2.CommandReply:
        """Post the forced bring-in."""
        return await self._action("PostBringIn", table_id, seat, expected_sequence,
                                  command_id)

    async def complete(self, table_id: str, to: int | None = None, *, seat: int | None = None,
                       expected_sequence: ExpectedSequence = AUTO,
                       command_id: str | None = None) -> table_pb2.CommandReply:
        """Complete the bring-in (``to``: the street total you mean to reach, checked)."""
        return await self._action("Complete", table_id, seat, expected_sequence, command_id,
                                  to)

    async def bet(self, table_id: str, to: int | None = None, *, seat: int | None = None,
                  expected_sequence: ExpectedSequence = AUTO,
                  command_id: str | None = None) -> table_pb2.CommandReply:
        """Bet."""
        return await self._action("Bet", table_id, seat, expected_sequence, command_id, to)

    async def raise_(self, table_id: str, to: int | None = None, *, seat: int | None = None,
                     expected_sequence: ExpectedSequence = AUTO,
                     command_id: str | None = None) -> table_pb2.CommandReply:
        """Raise."""
        return await self._action("Raise", table_id, seat, expected_sequence, command_id, to)

    async def call(self, table_id: str, *, seat: int | None = None,
                   expected_sequence: ExpectedSequence = AUTO,
                   command_id: str | None = None) -> table_pb2.CommandReply:
        """Call (all-in for less when short)."""
        return await self._action("Call", table_id, seat, expected_sequence, command_id)

    async def check(self, table_id: str, *, seat: int | None = None,
                    expected_sequence: ExpectedSequence = AUTO,
                    command_id: str | None = None) -> table_pb2.CommandReply:
        """Check."""
        return await self._action("Check", table_id, seat, expected_sequence, command_id)

    async def fold(self, table_id: str, *, seat: int | None = None,
                   expected_sequence: ExpectedSequence = AUTO,
                   command_id: str | None = None) -> table_pb2.CommandReply:
        """Fold."""
        return await self._action("Fold", table_id, seat, expected_sequence, command_id)

    async def act(self, table_id: str, action: common_pb2.LegalAction, *,
                  seat: int | None = None, expected_sequence: ExpectedSequence = AUTO,
                  command_id: str | None = None) -> table_pb2.CommandReply:
        """Take one of the view's legal actions (``hand.legal_actions.actions``), with its
        amount (``to``) for a completion, bet or raise."""
        method, to = legal_action(action)
        return await self._action(method, table_id, seat, expected_sequence, command_id, to)

    # --- the dealer ------------------------------------------------------------------------

    def _dealer_stub(self) -> Any:
        if self._dealer is None:
            raise ValueError("no dealer address: pass dealer_addr to Client.connect")
        return self._dealer

    async def my_cards(self, table_id: str, hand_number: int = 0) -> dealer_pb2.MyCards:
        """The caller's own cards in a hand (0: the table's latest)."""
        cards: dealer_pb2.MyCards = await self._call(
            self._dealer_stub().GetMyCards,
            dealer_pb2.GetMyCardsRequest(table_id=table_id, hand_number=hand_number),
            retry_on=READ_RETRIED_CODES)
        return cards

    async def commit_seed(self, table_id: str, hand_number: int, commitment: str) -> None:
        """Commit to a seed for a coming hand (docs/fairness.md; ``studclient.fairness``
        does it for every hand)."""
        await self._call(self._dealer_stub().CommitSeed, dealer_pb2.CommitSeedRequest(
            table_id=table_id, hand_number=hand_number, commitment=commitment),
            retry_on=READ_RETRIED_CODES)

    async def open_seed(self, table_id: str, hand_number: int, seed: bytes) -> None:
        """Open the seed committed for a hand, once its card commitment is public."""
        await self._call(self._dealer_stub().OpenSeed, dealer_pb2.OpenSeedRequest(
            table_id=table_id, hand_number=hand_number, seed=seed),
            retry_on=READ_RETRIED_CODES)

    async def hand_proof(self, table_id: str, hand_number: int) -> dealer_pb2.HandProof:
        """The dealer's public proof of a hand (openings of the shown cards, the seeds)."""
        proof: dealer_pb2.HandProof = await self._call(
            self._dealer_stub().GetHandProof,
            dealer_pb2.GetHandProofRequest(table_id=table_id, hand_number=hand_number),
            retry_on=READ_RETRIED_CODES)
        return proof

    def watch_my_cards_call(self, table_id: str, metadata: tuple[tuple[str, str], ...]
                            ) -> Any:
        """The raw WatchMyCards stream (:class:`~studclient.watch.TableWatch` resumes it)."""
        return self._dealer_stub().WatchMyCards(
            dealer_pb2.WatchMyCardsRequest(table_id=table_id), metadata=metadata)

    def watch_table_call(self, table_id: str, after_sequence: int,
                         metadata: tuple[tuple[str, str], ...]) -> Any:
        """The raw WatchTable stream (:class:`~studclient.watch.TableWatch` resumes it),
        batched: a message's records after its first are in its ``more``
        (:func:`~studclient.watch.records_of` hands them over one by one)."""
        return self.table_stub(table_id).WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id, after_sequence=after_sequence,
                                        batched=True),
            metadata=(*metadata, *self.owner_metadata(table_id)))

    def play(self, table_id: str, after_sequence: int = 0) -> PlaySession:
        """The caller's table over one ``Play`` stream (native gRPC only, issue 35): the
        table's records after ``after_sequence`` and the caller's betting actions, each one
        message on the stream answered on it (``async with client.play(table_id) as
        session:``; :class:`~studclient.play.PlaySession`). The same replies and refusals
        as the unary actions, the same retries (the same command id), resumed by itself."""
        return PlaySession(self, table_id, after_sequence)

    async def watch_records(self, table_id: str, after_sequence: int = 0
                            ) -> AsyncGenerator[table_pb2.TableEventRecord, None]:
        """The table's event records after ``after_sequence``, then live ones, one at a time
        and in order, each as the caller may see it; the stream's ending raises its
        :class:`~studclient.errors.StudError`. Batched on the wire; stopping anywhere (inside
        a message too) and calling again with the last record's sequence misses and repeats
        nothing. :meth:`watch` resumes by itself and keeps a view."""
        call = self.watch_table_call(table_id, after_sequence, await self.metadata())
        try:
            async for message in call:
                for record in records_of(message):
                    yield record
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from exc
        finally:
            call.cancel()

    # --- the wallet ------------------------------------------------------------------------

    def _wallet_stub(self) -> Any:
        if self._wallet is None:
            raise ValueError("no wallet address: pass wallet_addr to Client.connect")
        return self._wallet

    async def _account(self, account: str | wallet_pb2.AccountRef | None
                       ) -> wallet_pb2.AccountRef:
        if isinstance(account, wallet_pb2.AccountRef):
            return account
        return wallet_pb2.AccountRef(player_id=account or await self.player_id())

    async def balance(self, account: str | wallet_pb2.AccountRef | None = None) -> int:
        """The balance of the caller's account (operators, auditors: any account, by player
        id or ``AccountRef``)."""
        reply: wallet_pb2.GetBalanceResponse = await self._call(
            self._wallet_stub().GetBalance,
            wallet_pb2.GetBalanceRequest(account=await self._account(account)),
            retry_on=READ_RETRIED_CODES)
        return reply.balance

    async def statement(self, account: str | wallet_pb2.AccountRef | None = None, *,
                        page_size: int = 500) -> list[wallet_pb2.StatementLine]:
        """Every posting of the caller's account (or ``account``), oldest first."""
        ref = await self._account(account)
        lines: list[wallet_pb2.StatementLine] = []
        token = ""
        while True:
            reply: wallet_pb2.GetStatementResponse = await self._call(
                self._wallet_stub().GetStatement,
                wallet_pb2.GetStatementRequest(account=ref, page_size=page_size,
                                               page_token=token),
                retry_on=READ_RETRIED_CODES)
            lines.extend(reply.lines)
            token = reply.next_page_token
            if not token:
                return lines

    async def create_account(self, player_id: str | None = None, *,
                             exist_ok: bool = True) -> None:
        """Open a wallet account (players their own; operators any)."""
        try:
            await self._call(self._wallet_stub().CreateAccount,
                             wallet_pb2.CreateAccountRequest(
                                 player_id=player_id or await self.player_id()),
                             retry_on=READ_RETRIED_CODES)
        except StudError as exc:
            if not (exist_ok and exc.code is grpc.StatusCode.ALREADY_EXISTS):
                raise

    async def deposit(self, player_id: str, amount: int,
                      idempotency_key: str | None = None) -> wallet_pb2.DepositResponse:
        """Operators: money in to ``player_id``'s account (retried with the same key)."""
        reply: wallet_pb2.DepositResponse = await self._call(
            self._wallet_stub().Deposit,
            wallet_pb2.DepositRequest(player_id=player_id, amount=amount,
                                      idempotency_key=idempotency_key or uuid.uuid4().hex))
        return reply

    async def reconcile(self, table_id: str) -> wallet_pb2.ReconcileResponse:
        """Operators, auditors: each occupied seat's escrow at ``table_id``."""
        reply: wallet_pb2.ReconcileResponse = await self._call(
            self._wallet_stub().Reconcile, wallet_pb2.ReconcileRequest(table_id=table_id),
            retry_on=READ_RETRIED_CODES)
        return reply

    # --- player protection (docs/player-protection.md) -------------------------------------

    async def protection(self, player_id: str | None = None) -> wallet_pb2.ProtectionResponse:
        """The caller's limits (with what is used and left), exclusion and protection events;
        services, operators and auditors: any player's."""
        reply: wallet_pb2.ProtectionResponse = await self._call(
            self._wallet_stub().GetProtection,
            wallet_pb2.GetProtectionRequest(player_id=player_id or await self.player_id()),
            retry_on=READ_RETRIED_CODES)
        return reply

    async def set_limit(self, kind: wallet_pb2.LimitKind,
                        window: wallet_pb2.LimitWindow,
                        amount: int) -> wallet_pb2.ProtectionResponse:
        """Set, lower, raise or remove (``amount`` 0) one of the caller's limits: a first or
        lower one applies at once, a higher one (or none) 24 hours later. Asking the same
        again changes nothing, so a retry is safe."""
        reply: wallet_pb2.ProtectionResponse = await self._call(
            self._wallet_stub().SetLimit,
            wallet_pb2.SetLimitRequest(player_id=await self.player_id(), kind=kind,
                                       window=window, amount=amount))
        return reply

    async def cancel_limit_increase(self, kind: wallet_pb2.LimitKind,
                                    window: wallet_pb2.LimitWindow
                                    ) -> wallet_pb2.ProtectionResponse:
        """Withdraw one of the caller's raises before it applies."""
        reply: wallet_pb2.ProtectionResponse = await self._call(
            self._wallet_stub().CancelLimitIncrease,
            wallet_pb2.CancelLimitIncreaseRequest(player_id=await self.player_id(), kind=kind,
                                                  window=window),
            retry_on=frozenset())
        return reply

    async def self_exclude(self, period: wallet_pb2.ExclusionPeriod
                           ) -> wallet_pb2.ProtectionResponse:
        """Exclude the caller from play for ``period`` (a break is a short one). Nobody can
        lift a timed exclusion early."""
        reply: wallet_pb2.ProtectionResponse = await self._call(
            self._wallet_stub().SelfExclude,
            wallet_pb2.SelfExcludeRequest(player_id=await self.player_id(), period=period))
        return reply

    async def exclude_player(self, player_id: str, period: wallet_pb2.ExclusionPeriod,
                             reason: str) -> wallet_pb2.ProtectionResponse:
        """Operators: exclude ``player_id``, with a reason (recorded in the event)."""
        reply: wallet_pb2.ProtectionResponse = await self._call(
            self._wallet_stub().ExcludePlayer,
            wallet_pb2.ExcludePlayerRequest(player_id=player_id, period=period, reason=reason))
        return reply

    async def set_reality_check(self, minutes: int) -> wallet_pb2.ProtectionResponse:
        """A reminder every ``minutes`` of play (0: none), for :meth:`reality_checks`."""
        reply: wallet_pb2.ProtectionResponse = await self._call(
            self._wallet_stub().SetRealityCheck,
            wallet_pb2.SetRealityCheckRequest(player_id=await self.player_id(),
                                              interval_minutes=minutes))
        return reply

    async def set_session_limit(self, minutes: int) -> wallet_pb2.ProtectionResponse:
        """A session time limit of ``minutes`` (0: none; a longer one waits 24 hours): once a
        session has lasted it, no new hand is dealt to the caller and a buy-in is refused
        (``session_limit``)."""
        reply: wallet_pb2.ProtectionResponse = await self._call(
            self._wallet_stub().SetSessionLimit,
            wallet_pb2.SetSessionLimitRequest(player_id=await self.player_id(),
                                              minutes=minutes))
        return reply

    async def reality_checks(self) -> AsyncIterator[wallet_pb2.RealityCheck]:
        """The caller's reminders, each with the session's time and net result; the session
        starts now. Ends when the reminder is turned off; a refusal is raised
        (``reality_check_off`` when none is set)."""
        stream = self._wallet_stub().WatchRealityChecks(
            wallet_pb2.WatchRealityChecksRequest(player_id=await self.player_id()),
            metadata=await self.metadata())
        try:
            async for check in stream:
                yield check
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from None

    async def lift_exclusion(self, player_id: str, reason: str
                             ) -> wallet_pb2.ProtectionResponse:
        """Operators: lift an indefinite exclusion at least six months old (applies 24 hours
        later)."""
        reply: wallet_pb2.ProtectionResponse = await self._call(
            self._wallet_stub().LiftExclusion,
            wallet_pb2.LiftExclusionRequest(player_id=player_id, reason=reason),
            retry_on=frozenset())
        return reply


__all__ = ["AUTO", "RETRIED_CODES", "Client", "PlaySession", "RetryPolicy", "TableWatch",
           "TokenProvider", "token_subject"]
