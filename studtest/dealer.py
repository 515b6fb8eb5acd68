"""Test support: a typed dealer client that calls as anyone, an in-process dealer server, and
:class:`TableRole`, which plays the table service's part against a real dealer and a real
Redis: it decides commands with the rules (``TableDriver``), asks the dealer for commitments,
cards and reveals over gRPC, and appends the public events to the table's stream through the
event store, as the table service will. Down cards never reach it.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

import grpc

from dealer.bootstrap import DealerDeps, build_deps
from dealer.config import Settings
from dealer.server import create_server
from rules import Command, Event, Phase, TableConfig
from rules.betting import ActionKind
from rules.commands import (
    Bet,
    Call,
    Check,
    DealStreet,
    DealtCard,
    Fold,
    PostBringIn,
    RevealedHand,
    RevealHands,
    Showdown,
    SitDown,
    StartHand,
)
from rules.driver import TableDriver
from rules.events import HandStarted
from stud.v1 import dealer_pb2 as pb
from stud.v1 import dealer_pb2_grpc as pb_grpc
from studkit.auth import IssuerSource, Principal, Role, TokenBook
from studkit.grpc_server import GrpcServer
from studkit.mapping import card_from_proto, envelope_for, street_to_proto
from studkit.store import EventStore
from studtest.rigged_dealer import RiggedDealing, rigged_server
from studtools.devkeys import DevKeys

TABLE: Final = Principal(Role.SERVICE, "table")
AUDITOR: Final = Principal(Role.AUDITOR, "audit")
TIMEOUT_S: Final = 10.0


def player(name: str) -> Principal:
    """The principal of player ``name``."""
    return Principal(Role.PLAYER, name)


@dataclass
class DealerClient:
    """The dealer stub plus tokens for any principal."""

    stub: pb_grpc.DealerServiceStub
    keys: IssuerSource
    """Who signs for whom: :class:`~studkit.auth.DevKeys` signs each principal with the key
    that may (the issuer's, or a service's own); a single ``TokenIssuer`` signs everyone
    (forgery tests)."""
    tokens: TokenBook = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = TokenBook(self.keys)

    def metadata(self, who: Principal) -> tuple[tuple[str, str]]:
        """Call metadata carrying a token for ``who``."""
        return self.tokens.metadata(who)

    async def start_hand(self, table_id: str, hand_number: int,
                         who: Principal = TABLE) -> str:
        return (await self.started(table_id, hand_number, who)).commitment

    async def started(self, table_id: str, hand_number: int,
                      who: Principal = TABLE) -> pb.StartHandResponse:
        reply: pb.StartHandResponse = await self.stub.StartHand(
            pb.StartHandRequest(table_id=table_id, hand_number=hand_number),
            metadata=self.metadata(who), timeout=TIMEOUT_S)
        return reply

    # --- per-card commitments (docs/fairness.md) ---

    async def commit_seed(self, table_id: str, hand_number: int, commitment: str,
                          who: Principal) -> None:
        await self.stub.CommitSeed(
            pb.CommitSeedRequest(table_id=table_id, hand_number=hand_number,
                                 commitment=commitment),
            metadata=self.metadata(who), timeout=TIMEOUT_S)

    async def open_seed(self, table_id: str, hand_number: int, seed: bytes,
                        who: Principal) -> None:
        await self.stub.OpenSeed(
            pb.OpenSeedRequest(table_id=table_id, hand_number=hand_number, seed=seed),
            metadata=self.metadata(who), timeout=TIMEOUT_S)

    async def hand_proof(self, table_id: str, hand_number: int,
                         who: Principal) -> pb.HandProof:
        reply: pb.HandProof = await self.stub.GetHandProof(
            pb.GetHandProofRequest(table_id=table_id, hand_number=hand_number),
            metadata=self.metadata(who), timeout=TIMEOUT_S)
        return reply

    async def deal(self, request: pb.DealRequest, who: Principal = TABLE) -> pb.DealResponse:
        reply: pb.DealResponse = await self.stub.Deal(
            request, metadata=self.metadata(who), timeout=TIMEOUT_S)
        return reply

    async def my_cards(self, table_id: str, who: Principal, hand_number: int = 0) -> pb.MyCards:
        reply: pb.MyCards = await self.stub.GetMyCards(
            pb.GetMyCardsRequest(table_id=table_id, hand_number=hand_number),
            metadata=self.metadata(who), timeout=TIMEOUT_S)
        return reply

    async def reveal(self, table_id: str, hand_number: int, seats: Collection[int] = (),
                     who: Principal = TABLE) -> pb.RevealResponse:
        reply: pb.RevealResponse = await self.stub.Reveal(
            pb.RevealRequest(table_id=table_id, hand_number=hand_number, seats=list(seats)),
            metadata=self.metadata(who), timeout=TIMEOUT_S)
        return reply

    async def audit(self, table_id: str, hand_number: int,
                    who: Principal = AUDITOR) -> pb.HandAudit:
        reply: pb.HandAudit = await self.stub.GetAudit(
            pb.GetAuditRequest(table_id=table_id, hand_number=hand_number),
            metadata=self.metadata(who), timeout=TIMEOUT_S)
        return reply


@dataclass
class RunningDealer:
    """An in-process dealer: its dependencies, port and a client on a channel to it."""

    deps: DealerDeps
    port: int
    client: DealerClient
    server: GrpcServer | None = None
    """The server itself, so a test can stop it (an outage) before the block ends."""


@contextlib.asynccontextmanager
async def running_dealer(settings: Settings, keys: DevKeys,
                         rig: RiggedDealing | None = None) -> AsyncIterator[RunningDealer]:
    """Start a dealer for ``settings`` (use ``addr="127.0.0.1:0"``; ``settings.auth_keys``
    should trust ``keys``), stop it on exit; its client signs with ``keys``. ``rig``: the
    test-only rigged dealer (stacked decks, a dishonest dealer), else the honest one."""
    if rig is None:
        deps = build_deps(settings)
        server, port = create_server(settings, deps)
    else:
        deps = build_deps(settings, dealing=rig)
        server, port = rigged_server(rig)(settings, deps)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.DealerServiceStub(channel)  # type: ignore[no-untyped-call]
            client = DealerClient(stub, keys)
            yield RunningDealer(deps=deps, port=port, client=client, server=server)
    finally:
        await server.stop(None)
        await deps.close()


def deal_request(table_id: str, hand_number: int, driver: TableDriver) -> pb.DealRequest:
    """The Deal request for the driver's pending deal (what the table sends)."""
    plan = driver.plan()
    return pb.DealRequest(
        table_id=table_id, hand_number=hand_number, street=street_to_proto(plan.street),
        slots=[pb.DealSlot(seat=s.seat, up=s.up) for s in plan.slots], burn=plan.burn,
        reshuffle_burns=plan.reshuffle_burns)


class TableRole:
    """Plays the table service's part for one table (see the module docstring)."""

    def __init__(self, events: EventStore, dealer: DealerClient, table_id: str,
                 config: TableConfig, players: Mapping[int, str], stack: int = 10_000,
                 stacks: Mapping[int, int] | None = None) -> None:
        self.events = events
        self.dealer = dealer
        self.table_id = table_id
        self.config = config
        self.players = dict(players)
        self.stacks = {seat: (stacks or {}).get(seat, stack) for seat in players}
        self.driver: TableDriver | None = None
        self.replies: list[pb.DealResponse] = []

    @property
    def t(self) -> TableDriver:
        assert self.driver is not None, "call open() first"
        return self.driver

    async def open(self) -> None:
        """Open the table and seat the players (events appended to the stream)."""
        self.driver = TableDriver(self.config, None, self.table_id)
        await self._append(list(self.t.events), "open")
        for seat, name in sorted(self.players.items()):
            await self.apply(SitDown(seat=seat, player_id=name, stack=self.stacks[seat]))

    async def apply(self, command: Command) -> tuple[Event, ...]:
        """Decide ``command`` with the rules and append its events."""
        events = self.t.apply(command)
        await self._append(list(events), type(command).__name__)
        return events

    async def _append(self, events: list[Event], what: str) -> None:
        expected = len(self.t.events) - len(events)
        hand = self.t.state.hand
        now = datetime.now(UTC)
        envelopes = []
        for event in events:
            number = event.hand_number if isinstance(event, HandStarted) else (
                hand.hand_number if hand is not None else 0)
            envelopes.append(envelope_for(event, table_id=self.table_id, hand_number=number,
                                          command_id="", occurred_at=now))
        await self.events.append(self.table_id, envelopes, expected,
                                 f"{what}-{uuid.uuid4().hex[:12]}")

    @property
    def hand_number(self) -> int:
        return self.t.hand.hand_number

    async def start_hand(self) -> str:
        """Ask the dealer for the next hand's commitments and start the hand with them."""
        number = self.t.state.hands_started + 1
        reply = await self.dealer.started(self.table_id, number)
        await self.apply(StartHand(hand_number=number, deck_commitment=reply.commitment,
                                   card_commitment=reply.card_commitment))
        return str(reply.commitment)

    async def deal(self) -> pb.DealResponse:
        """Ask the dealer for the pending street and deal it (down cards stay unknown)."""
        reply = await self.dealer.deal(deal_request(self.table_id, self.hand_number, self.t))
        self.replies.append(reply)
        cards = tuple(
            DealtCard(seat=c.seat, up=c.up, card=card_from_proto(c.card) if c.up else None)
            for c in reply.cards)
        await self.apply(DealStreet(cards=cards, burned=reply.burned,
                                    reshuffled_burns=reply.reshuffled_burns))
        return reply

    async def act(self, folds: Mapping[int, int] | None = None,
                  bet_on: int | None = None) -> None:
        """One betting action: the bring-in, a fold for a seat in ``folds`` (seat -> street;
        another seat bets first so that there is a wager to fold to), a bet on street
        ``bet_on``, else call or check."""
        legal = self.t.legal()
        kinds = {a.kind for a in legal.actions}
        street = int(self.t.hand.street or 3)
        seat = legal.seat
        folds = folds or {}
        # Folding needs a wager to face: someone else bets on a street where a seat folds.
        folding_now = {s for s, st in folds.items() if st == street
                       and self.t.hand.has_player(s) and not self.t.hand.player(s).folded}
        if ActionKind.BRING_IN in kinds:
            await self.apply(PostBringIn(seat=seat))
        elif seat in folding_now and ActionKind.FOLD in kinds:
            await self.apply(Fold(seat=seat))
        elif (ActionKind.BET in kinds and seat not in folding_now
              and (bet_on == street or folding_now)):
            await self.apply(Bet(seat=seat))
        elif ActionKind.CALL in kinds:
            await self.apply(Call(seat=seat))
        else:
            await self.apply(Check(seat=seat))

    async def revealed(self) -> tuple[RevealedHand, ...]:
        """The dealer's reveal of every hand still in."""
        reply = await self.dealer.reveal(self.table_id, self.hand_number)
        return tuple(RevealedHand(seat=h.seat, down=tuple(card_from_proto(c) for c in h.down))
                     for h in reply.hands)

    async def step(self, folds: Mapping[int, int] | None = None,
                   bet_on: int | None = None) -> Phase:
        """Advance the hand by one command; returns the phase it was in."""
        phase = self.t.hand.phase
        if phase == Phase.DEALING:
            await self.deal()
        elif phase == Phase.BETTING:
            await self.act(folds, bet_on)
        elif phase == Phase.REVEAL:
            await self.apply(RevealHands(hands=await self.revealed()))
        elif phase == Phase.SHOWDOWN:
            await self.apply(Showdown(hands=await self.revealed()))
        return phase

    async def play_until(self, phase: Phase, folds: Mapping[int, int] | None = None,
                         bet_on: int | None = None) -> None:
        """Step until the hand waits in ``phase`` (or is over)."""
        while not self.t.hand.is_over and self.t.hand.phase != phase:
            await self.step(folds, bet_on)

    async def play_hand(self, folds: Mapping[int, int] | None = None,
                        bet_on: int | None = None) -> None:
        """Start a hand and play it to the end."""
        await self.start_hand()
        while not self.t.hand.is_over:
            await self.step(folds, bet_on)


MakeTable = Callable[..., Awaitable[TableRole]]
"""A fixture's factory: ``await make_table({seat: player_id}, config, stacks=...)``."""
