"""Every hand checked by the player alone (docs/fairness.md): :class:`HandVerifier` gives the
dealer a seed for each coming hand (committed a hand or two ahead, opened once the hand's card
commitment is public), keeps the openings of the player's own down cards as ``WatchMyCards``
delivers them, and when a hand ends fetches the dealer's public proof and the hand's record
and runs :func:`studkit.cardcheck.verify_mine`. :func:`verify_hand_alone` checks one past hand
on demand (``stud replay verify-mine``).

The check needs nothing but the player's own token: the dealer's answers are proved against
the card commitment that the table published before the first card.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final

from rules.events import Event
from stud.v1 import dealer_pb2, table_pb2
from studclient.errors import StudError
from studkit.cardcheck import (
    HandProof,
    Outcome,
    OwnCards,
    OwnSeed,
    PublicOpening,
    Verdict,
    verify_mine,
    without_commitment,
)
from studkit.cardproof import SEED_BYTES, CardOpening, DealHeader, seed_commitment
from studkit.errors import BadRequest
from studkit.mapping import card_from_proto, event_from_proto

if TYPE_CHECKING:
    from studclient.client import Client

VerdictHook = Callable[[Verdict], None]
AHEAD: Final = 2
"""Hands ahead a seed is committed for (the dealer takes the next hand and the one after)."""
PROOF_ATTEMPTS: Final = 20


def opening_from_proto(msg: dealer_pb2.CardOpening) -> CardOpening | None:
    """A card's opening, None for an empty one (the dealer sent none)."""
    if not msg.salt:
        return None
    try:
        card = card_from_proto(msg.card).index
    except BadRequest:
        return None
    return CardOpening(position=msg.position, card=card, salt=bytes(msg.salt),
                       path=tuple(bytes(p) for p in msg.path))


def header_from_proto(table_id: str, hand_number: int, msg: dealer_pb2.DealHeader
                      ) -> DealHeader:
    """What a card commitment binds (ValueError when malformed)."""
    return DealHeader(table_id=table_id, hand_number=hand_number, root=msg.root,
                      dealer_seed=msg.dealer_seed_commitment,
                      seeds=tuple((s.player_id, s.commitment) for s in msg.seeds))


def proof_from_proto(msg: dealer_pb2.HandProof) -> HandProof:
    """The dealer's public proof of a hand (ValueError when malformed)."""
    openings = []
    for o in msg.openings:
        opening = opening_from_proto(o)
        if opening is not None:
            openings.append(PublicOpening(draw=o.draw, opening=opening))
    return HandProof(
        header=header_from_proto(msg.table_id, msg.hand_number, msg.header),
        openings=tuple(openings), complete=msg.complete,
        dealer_seed=bytes(msg.dealer_seed) if msg.complete else None,
        seeds=tuple((s.player_id, None if s.withheld else bytes(s.seed)) for s in msg.seeds))


def own_from_proto(msg: dealer_pb2.MyCards) -> OwnCards:
    """A player's down cards with their openings, as received."""
    return OwnCards(seat=msg.seat, down=tuple(card_from_proto(c).index for c in msg.down),
                    openings=tuple(opening_from_proto(o) for o in msg.down_openings))


def history_events(history: table_pb2.HandHistory) -> list[Event]:
    """A hand's record as rules events."""
    return [event_from_proto(r.event) for r in history.events]


async def verify_hand_alone(client: Client, table_id: str, hand_number: int, *,
                            cards: dealer_pb2.MyCards | None = None,
                            seed: OwnSeed | None = None,
                            seen_commitment: str | None = None,
                            seed_known: bool = True) -> Verdict:
    """Check one finished hand with the caller's own token: the hand's record, the table's
    burn option, the dealer's proof and the caller's own cards (asked again when not given;
    none for a hand the caller was not dealt into), against ``seen_commitment``, the card
    commitment seen live in ``HandStarted`` (None: the record's own). ``seed_known=False``:
    the caller keeps no copy of its seeds (the verdict says the seed was not checked)."""
    player = await client.player_id()
    history = await client.hand_history(table_id, hand_number)
    view = await client.get_table(table_id)
    events = history_events(history)
    failed = Verdict(table_id=table_id, hand_number=hand_number, outcome=Outcome.FAILED)
    for attempt in range(PROOF_ATTEMPTS):
        try:
            raw = await client.hand_proof(table_id, hand_number)
        except StudError as exc:
            if exc.reason == "no_card_commitment" and seen_commitment:
                return Verdict(table_id=table_id, hand_number=hand_number,
                               outcome=Outcome.FAILED,
                               problems=("the dealer says the hand has no per-card "
                                         "commitment, but its HandStarted carried one",))
            if exc.reason == "no_card_commitment":
                return without_commitment(table_id, hand_number, seed)
            raise
        if raw.complete or not history.complete:
            break
        await asyncio.sleep(0.05 * (attempt + 1))  # the dealer has not read the end yet
    try:
        proof = proof_from_proto(raw)
    except (ValueError, BadRequest) as exc:
        return Verdict(table_id=failed.table_id, hand_number=hand_number,
                       outcome=Outcome.FAILED, problems=(f"the dealer's proof is malformed: "
                                                         f"{exc}",))
    if cards is None or cards.hand_number != hand_number:
        try:
            cards = await client.my_cards(table_id, hand_number)
        except StudError as exc:
            if exc.reason != "not_dealt_in":
                raise
            cards = None
    mine = None
    if cards is not None:
        try:
            mine = own_from_proto(cards)
        except BadRequest as exc:
            return Verdict(table_id=table_id, hand_number=hand_number,
                           outcome=Outcome.FAILED,
                           problems=(f"the dealer's cards are malformed: {exc}",))
    return verify_mine(table_id=table_id, player_id=player, events=events,
                       burn_cards=view.config.burn_cards, proof=proof, mine=mine, seed=seed,
                       seen_commitment=seen_commitment, seed_known=seed_known)


class HandVerifier:
    """A player's seeds and checks at one table (see the module docstring). Feed it every
    event record (:meth:`on_record`) and every ``MyCards`` (:meth:`on_cards`); ``verdicts``
    holds each checked hand's :class:`~studkit.cardcheck.Verdict` and ``on_verdict`` is
    called with each. ``seeds=False`` gives no seed (the hands are still checked)."""

    def __init__(self, client: Client, table_id: str, *, seeds: bool = True,
                 on_verdict: VerdictHook | None = None) -> None:
        self.client = client
        self.table_id = table_id
        self.give_seeds = seeds
        self.on_verdict = on_verdict
        self.verdicts: dict[int, Verdict] = {}
        self._seeds: dict[int, OwnSeed] = {}
        self._cards: dict[int, dealer_pb2.MyCards] = {}
        self._commitments: dict[int, str] = {}
        """Each hand's card commitment as seen live in HandStarted: checked against."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()
        self._hands_started = 0

    # --- inputs ----------------------------------------------------------------------------

    def on_view(self, view: table_pb2.TableView) -> None:
        """A view of the table: commit seeds for the coming hands once seated."""
        if view.viewer_seat and self.give_seeds:
            self._hands_started = max(self._hands_started, view.hands_started)
            self._spawn(self._commit_ahead())

    def on_record(self, record: table_pb2.TableEventRecord) -> None:
        """One event of the table, in order."""
        kind = record.event.WhichOneof("event")
        if kind == "hand_started":
            number = record.event.hand_started.hand_number
            self._commitments[number] = record.event.hand_started.card_commitment
            self._hands_started = max(self._hands_started, number)
            self._spawn(self._open(number))
        elif kind == "hand_ended":
            self._spawn(self._verify(record.event.hand_ended.hand_number))

    def on_cards(self, cards: dealer_pb2.MyCards) -> None:
        """The player's own cards (with their openings), as the dealer sends them."""
        self._cards[cards.hand_number] = cards

    async def close(self) -> None:
        """Stop the pending checks."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- seeds -----------------------------------------------------------------------------

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _commit_ahead(self) -> None:
        async with self._lock:
            player = await self.client.player_id()
            for number in range(self._hands_started + 1, self._hands_started + 1 + AHEAD):
                if number in self._seeds:
                    continue
                seed = secrets.token_bytes(SEED_BYTES)
                try:
                    await self.client.commit_seed(
                        self.table_id, number, seed_commitment(self.table_id, number, player,
                                                               seed))
                except StudError as exc:
                    if exc.reason == "seed_too_late":  # that hand goes without this seed:
                        self._seeds[number] = OwnSeed(  # remembered, so its check says so
                            seed=seed, committed=False, opened=False,
                            refused=f"CommitSeed: {exc.reason}")
                        continue
                    if exc.reason == "seed_too_early":
                        continue
                    return  # not seated yet, or the dealer is away: try on the next view
                self._seeds[number] = OwnSeed(seed=seed, committed=True, opened=False)

    async def _open(self, number: int) -> None:
        own = self._seeds.get(number)
        if own is not None and own.committed:
            try:
                await self.client.open_seed(self.table_id, number, own.seed)
                self._seeds[number] = OwnSeed(seed=own.seed, committed=True, opened=True)
            except StudError as exc:  # too late (or no card commitment): the check says so
                self._seeds[number] = OwnSeed(seed=own.seed, committed=True, opened=False,
                                              refused=f"OpenSeed: {exc.reason}")
        if self.give_seeds:
            await self._commit_ahead()

    # --- checks ----------------------------------------------------------------------------

    async def _verify(self, number: int) -> None:
        for attempt in range(PROOF_ATTEMPTS):
            try:
                verdict = await verify_hand_alone(
                    self.client, self.table_id, number, cards=self._cards.get(number),
                    seed=self._seeds.get(number),
                    seen_commitment=self._commitments.get(number))
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                code = exc.code.name if isinstance(exc, StudError) else type(exc).__name__
                reason = exc.reason if isinstance(exc, StudError) else str(exc)
                if not isinstance(exc, StudError) or attempt == PROOF_ATTEMPTS - 1 \
                        or reason in ("unknown_hand", "permission_denied"):
                    verdict = Verdict(table_id=self.table_id, hand_number=number,
                                      outcome=Outcome.FAILED,
                                      problems=(f"the hand could not be checked: "
                                                f"{code} {reason}",))
                    break
                await asyncio.sleep(0.1 * (attempt + 1))
        self._cards.pop(number, None)
        self._seeds.pop(number, None)
        self._commitments.pop(number, None)
        self.verdicts[number] = verdict
        if self.on_verdict is not None:
            self.on_verdict(verdict)
