"""The tournament's gRPC face: a thin servicer (proto -> command -> app -> proto) and
``create_server(settings, deps) -> (server, port)``. Refusals are raised, never aborted here:
``studkit``'s error table maps them in the interceptor (each logged and counted)."""

from __future__ import annotations

import math
import re
import unicodedata
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Protocol

import grpc

from stud.v1 import tournament_pb2 as pb
from stud.v1 import tournament_pb2_grpc as pb_grpc
from studkit.auth import Role, require_role
from studkit.errors import BadRequest, OutOfRange, ServiceError
from studkit.grpc_server import BASE_ERRORS, GrpcServer, create_grpc_server, current_principal
from studkit.keys import check_id
from studkit.limits import StreamLimiter
from tournament import commands as c
from tournament import events as ev
from tournament import metrics
from tournament.app import Outcome, TournamentApp
from tournament.bootstrap import TournamentDeps
from tournament.clients import Refused, Unavailable
from tournament.codec import config_from_request
from tournament.config import Settings
from tournament.decide import TournamentRefusal, decide
from tournament.state import CANCELLED, FINISHED, Tournament
from tournament.verdict import Pool, problems, unpaid
from tournament.views import PHASES, summary, view

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["TournamentService"].full_name
PHASE_NAMES = {v: k for k, v in PHASES.items()}
PAGE_TOKEN = re.compile(r"after:([A-Za-z0-9_.-]{1,64})")
"""A ``ListTournaments`` page token: ``after:`` and the last tournament id the previous page
walked (keyset paging: the next page lists the ids below it, in Redis and in the archive's
index alike, so a page's cost does not grow with the archive)."""
LEGACY_TOKEN = re.compile(r"[0-9]{1,9}")
"""The page token before keyset paging: an offset into the whole list, ASCII digits only (a
``str.isdigit`` check took Arabic-Indic digits for a number, and 10,000 digits made ``int``
raise past Python's digit limit: ``INTERNAL``). Still taken, so a client paging across the
deploy goes on, up to :data:`LEGACY_DEPTH`."""
LEGACY_DEPTH = 10_000
"""The deepest legacy offset honoured (reaching it walks that many tournaments); a deeper
one is refused ``INVALID_ARGUMENT``: list again from the first page."""
LISTED_KEPT = 10_000
"""Lobby lines a servicer keeps (least recently listed goes first)."""


def ident(value: str, field: str) -> str:
    try:
        return check_id(value, field)
    except ValueError as exc:
        raise BadRequest(field, str(exc), reason="malformed_id") from None


def reply(outcome: Outcome) -> pb.TournamentReply:
    """The reply to a command; a player's names the entry it made or withdrew (its first
    ``EntryRequested`` or ``EntryWithdrawn``, a retry's re-read from the log)."""
    entry = next((r.event.entry_id for r in outcome.records
                  if isinstance(r.event, ev.EntryRequested | ev.EntryWithdrawn)), "")
    return pb.TournamentReply(version=outcome.version, duplicate=outcome.duplicate,
                              events=[r.to_proto() for r in outcome.records], entry_id=entry)


class Funds(Protocol):
    """The wallet as the servicer reads it: a player's balance, which ``Register`` and
    ``ReEnter`` check (None for a player with no account), and a tournament's pool, which
    ``VerifyTournament`` compares; :class:`Unavailable` or :class:`Refused` when it does not
    say."""

    async def balance(self, player_id: str) -> int | None: ...

    async def pool(self, tournament_id: str) -> Pool: ...


class TournamentServicer(pb_grpc.TournamentServiceServicer):
    def __init__(self, app: TournamentApp, limiter: StreamLimiter,
                 retry_after_s: float = 1.0, funds: Funds | None = None) -> None:
        self._app = app
        self._limiter = limiter
        self._funds = funds
        self._retry_after_ms = max(1, math.ceil(retry_after_s * 1000))
        """When a refusal that waits on the process manager (``payment_pending``) may be
        retried: its round, ``TOURNAMENT_TICK_S``."""
        self._listed: OrderedDict[str, tuple[int, str, pb.TournamentSummary]] = \
            OrderedDict()
        """tournament -> (its version, phase and lobby line when last listed), the
        :data:`LISTED_KEPT` latest: a lobby walks the live tournaments on every page, and the
        app keeps the states of the latest read only, so one is folded again only when its
        version moved (a few hundred bytes a tournament)."""

    async def _listing(self, tournament_id: str, archived: bool = False
                       ) -> tuple[str, pb.TournamentSummary]:
        """Its phase and lobby line; an ``archived`` one (its stream left Redis: it will
        never change) from the line kept, else read from the archive once."""
        listed = self._listed.get(tournament_id)
        if not archived or listed is None:
            version = -1 if archived else await self._app.store.version(tournament_id)
            if listed is None or listed[0] != version:
                t = await self._app.load(tournament_id)
                listed = self._listed[tournament_id] = (t.version, t.phase, summary(t))
        self._listed.move_to_end(tournament_id)
        while len(self._listed) > LISTED_KEPT:
            self._listed.popitem(last=False)
        return listed[1], listed[2]

    async def CreateTournament(self, request: pb.CreateTournamentRequest,
                               context: grpc.aio.ServicerContext) -> pb.TournamentReply:
        tid = ident(request.tournament_id, "tournament_id")
        command_id = ident(request.command_id, "command_id")
        if not request.HasField("config"):
            raise BadRequest("config", "required")
        config = config_from_request(request.config)
        return reply(await self._app.create(current_principal(), tid, config, command_id))

    async def CancelTournament(self, request: pb.CancelTournamentRequest,
                               context: grpc.aio.ServicerContext) -> pb.TournamentReply:
        tid = ident(request.tournament_id, "tournament_id")
        command_id = ident(request.command_id, "command_id")
        if not 1 <= len(request.reason) <= 200:
            raise BadRequest("reason", "1 to 200 characters")
        if any(unicodedata.category(ch)[0] == "C" for ch in request.reason):
            raise BadRequest("reason", "printable characters only (shown to the players)")
        return reply(await self._app.cancel(current_principal(), tid, request.reason,
                                            command_id))

    async def _player(self, request: pb.RegisterRequest | pb.UnregisterRequest
                      | pb.ReEnterRequest, make: type[c.Register | c.Unregister | c.ReEnter]
                      ) -> pb.TournamentReply:
        tid = ident(request.tournament_id, "tournament_id")
        command_id = ident(request.command_id, "command_id")
        who = current_principal()
        if make is not c.Unregister and who.role is Role.PLAYER:
            await self._can_pay(tid, make(who.name))
        try:
            return reply(await self._app.player_command(who, tid, make, command_id))
        except TournamentRefusal as refused:
            if refused.reason == "payment_pending":
                raise self._retry_later(refused) from None
            raise

    async def _can_pay(self, tid: str, cmd: c.Command) -> None:
        """Refuse at once an entry the wallet's balance shows cannot be paid (no account:
        ``unknown_account``; less than the buy-in and fee: ``insufficient_funds``), where it
        was taken and dropped later on the stream only. Only an entry the tournament would
        take now is checked (anything else, a retry's duplicate included, is the command's
        to answer), and only when the wallet answers: the charge stays the authority (money
        spent between this check and the charge still drops the entry)."""
        if self._funds is None:
            return
        t = await self._app.load(tid)
        try:
            decide(t, cmd, self._app.now())
        except ServiceError:
            return
        player = getattr(cmd, "player_id", "")
        try:
            balance = await self._funds.balance(player)
        except (Refused, Unavailable):
            return
        cost = t.cfg.buy_in + t.cfg.fee
        if balance is None:
            raise TournamentRefusal(f"{player} has no wallet account",
                                    reason="unknown_account")
        if balance < cost:
            raise TournamentRefusal(f"the buy-in and fee are {cost:,}; the balance is "
                                    f"{balance:,}", reason="insufficient_funds")

    def _retry_later(self, refused: TournamentRefusal) -> TournamentRefusal:
        """The refusal with when to retry: ``retry_after_ms`` in its ErrorInfo metadata
        and in its message (the buy-in is charged at the process manager's next round)."""
        return TournamentRefusal(f"{refused.detail}; retry in {self._retry_after_ms} ms",
                                 reason=refused.reason, retry_after_ms=self._retry_after_ms)

    async def Register(self, request: pb.RegisterRequest,
                       context: grpc.aio.ServicerContext) -> pb.TournamentReply:
        reply = await self._player(request, c.Register)
        metrics.REGISTRATIONS.inc()
        return reply

    async def Unregister(self, request: pb.UnregisterRequest,
                         context: grpc.aio.ServicerContext) -> pb.TournamentReply:
        return await self._player(request, c.Unregister)

    async def ReEnter(self, request: pb.ReEnterRequest,
                      context: grpc.aio.ServicerContext) -> pb.TournamentReply:
        return await self._player(request, c.ReEnter)

    async def ListTournaments(self, request: pb.ListTournamentsRequest,
                              context: grpc.aio.ServicerContext) -> pb.ListTournamentsResponse:
        """A page of the lobby, ids in descending order: the tournaments below the token's
        id (:data:`PAGE_TOKEN`), of the phase asked, ``page_size`` of them; the next token
        names the last id walked while any remains below it (one more walked to know)."""
        current_principal()
        size = request.page_size or 50
        if not 1 <= size <= 200:
            raise BadRequest("page_size", "1 to 200")
        phase = PHASE_NAMES.get(request.phase, "")
        before = await self._page_start(request.page_token)
        out = pb.ListTournamentsResponse()
        last: str | None = None
        async for tid, outcome in self._app.lobby(before, phase, size + 1):
            if len(out.tournaments) == size:
                out.next_page_token = f"after:{last}"
                break
            last = tid
            listed_phase, line = await self._listing(tid, outcome is not None)
            if not phase or listed_phase == phase:
                out.tournaments.append(line)
        return out

    async def _page_start(self, token: str) -> str | None:
        """The id a page starts below (None: the first page), from its token; a legacy
        offset (:data:`LEGACY_TOKEN`) found by walking that many tournaments."""
        if not token:
            return None
        keyset = PAGE_TOKEN.fullmatch(token)
        if keyset is not None:
            return keyset.group(1)
        if LEGACY_TOKEN.fullmatch(token) is None:
            raise BadRequest("page_token", "a token from a previous page")
        offset = int(token)
        if offset > LEGACY_DEPTH:
            raise BadRequest("page_token", "a page token from before this release, too deep: "
                             "list again from the first page")
        if offset == 0:
            return None
        walked = 0
        async for tid, _ in self._app.lobby(None, "", min(offset, 1000)):
            walked += 1
            if walked == offset:
                return tid
        return ""  # past the end: an empty page ("" sorts below every id)

    async def GetTournament(self, request: pb.GetTournamentRequest,
                            context: grpc.aio.ServicerContext) -> pb.TournamentView:
        current_principal()
        t = await self._app.load(ident(request.tournament_id, "tournament_id"))
        return view(t)

    async def VerifyTournament(self, request: pb.VerifyTournamentRequest,
                               context: grpc.aio.ServicerContext) -> pb.TournamentVerdict:
        require_role(current_principal(), Role.AUDITOR, Role.OPERATOR)
        t = await self._app.load(ident(request.tournament_id, "tournament_id"))
        pool: Pool | None = None
        if self._funds is not None:
            try:
                pool = await self._funds.pool(t.tournament_id)
            except (Refused, Unavailable):
                pool = None
        return verdict_of(t, pool)

    async def WatchTournament(self, request: pb.WatchTournamentRequest,
                              context: grpc.aio.ServicerContext
                              ) -> AsyncIterator[pb.TournamentEventRecord]:
        principal = current_principal()
        tid = ident(request.tournament_id, "tournament_id")
        version = (await self._app.load(tid)).version
        if request.after_sequence > version:  # it would wait, silent, for events to come
            raise OutOfRange(f"the tournament is at sequence {version}; resume at or before "
                             "it", reason="after_the_end")
        async with self._limiter.hold(principal, context.peer()):
            async for record in self._app.follow(tid, request.after_sequence):
                yield record.to_proto()


def verdict_of(t: Tournament, pool: Pool | None) -> pb.TournamentVerdict:
    """The verdict of ``t`` against the wallet's ``pool`` (None: not read)."""
    found, owed = problems(t, pool), unpaid(t)
    over = t.phase in (FINISHED, CANCELLED)
    return pb.TournamentVerdict(
        tournament_id=t.tournament_id, version=t.version, phase=PHASES[t.phase],
        verified=pool is not None and not found and not (over and owed), problems=found,
        unpaid=owed, pool_checked=pool is not None, pool=t.pool(),
        pool_held=pool.balance if pool is not None else 0)


def create_server(settings: Settings, deps: TournamentDeps) -> tuple[GrpcServer, int]:
    """The tournament server bound to ``settings.addr`` (not started) and its port."""
    server = create_grpc_server(
        settings.addr,
        [(pb_grpc.add_TournamentServiceServicer_to_server,
          TournamentServicer(deps.app, StreamLimiter(
              per_principal=settings.watches_per_player,
              per_peer=settings.watches_per_connection), settings.tick_s, deps.wallet),
          SERVICE_NAME)],
        verifier=deps.verifier, errors=BASE_ERRORS, metrics=deps.metrics)
    return server, server.port
