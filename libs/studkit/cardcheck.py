"""A player's own check of a hand, alone, pure and free of I/O (docs/fairness.md): the openings
of their own down cards (from the dealer's ``WatchMyCards``), the dealer's public proof of the
hand (``GetHandProof``: the public cards' openings, the seeds) and the hand's public record
(``GetHandHistory``) must agree with the card commitment published in ``HandStarted`` before
the first card, and every card must sit at the base position that the public deal rule
(:mod:`rules.draws`) and the opened seeds give for its seat and street.

Problems name draws, streets and seats, never a hidden card, so a report may be shown or
logged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum, unique

from rules.cards import Card
from rules.draws import BURN_SEAT, DealRuleBroken, Drawn, deal_hand, hand_plans
from rules.events import (
    CommunityCardDealt,
    DownCardDealt,
    Event,
    HandExposed,
    HandShown,
    HandStarted,
    UpCardDealt,
)
from studkit.cardproof import (
    CardOpening,
    DealHeader,
    deal_order,
    dealer_seed_commitment,
    same,
    seed_commitment,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicOpening:
    """The opening of a card the public record shows, by its draw number."""

    draw: int
    opening: CardOpening


@dataclass(frozen=True, slots=True, kw_only=True)
class HandProof:
    """What the dealer publishes about a hand: the header the card commitment binds, the
    openings of the cards shown so far, and once the hand is over the dealer's seed and every
    committed player's seed (None: committed but not opened in time)."""

    header: DealHeader
    openings: tuple[PublicOpening, ...] = ()
    complete: bool = False
    dealer_seed: bytes | None = field(default=None, repr=False)
    seeds: tuple[tuple[str, bytes | None], ...] = field(default=(), repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnCards:
    """A player's down cards as the dealer gave them, each with its opening (None when the
    dealer sent none)."""

    seat: int
    down: tuple[int, ...] = field(repr=False)
    openings: tuple[CardOpening | None, ...] = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnSeed:
    """The player's seed for the hand and what the dealer answered: ``committed`` when it
    took the commitment (so it must be listed), ``opened`` when it took the opening before
    dealing (so the seed must be in the deal order); ``refused`` the dealer's refusal of the
    commitment or of the opening, if any (e.g. ``"OpenSeed: seed_too_late"``)."""

    seed: bytes = field(repr=False)
    committed: bool
    opened: bool
    refused: str = ""


@unique
class Outcome(StrEnum):
    """How a hand's check ended."""

    VERIFIED = "verified"
    WITHOUT_YOUR_SEED = "verified_without_your_seed"
    """Every card checks, but the dealer refused the opening of the player's seed after
    receiving it, so the seed is not in the deal order: the order rests on the dealer's seed
    (and any other players'), and may have been chosen after the dealer saw yours. A
    warning, not a plain verified mark. (A refused *commitment* is only a note: the dealer
    never saw the seed.) Without a copy of the seed (``seed_known=False``), a commitment
    listed under the player's name whose seed is withheld gets this outcome too: the
    re-check cannot tell a refused opening from one never sent, and says what the live
    check says of the former."""
    FAILED = "failed"
    UNVERIFIABLE = "unverifiable"
    """The hand carries no per-card commitment (dealt before the scheme, by an older dealer
    or from a stacked test deck): nothing to check against. A production dealer always
    commits, so it is shown as a warning; when the dealer took the player's seed for the
    hand it is :attr:`FAILED`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The outcome of :func:`verify_mine`."""

    table_id: str
    hand_number: int
    outcome: Outcome
    problems: tuple[str, ...] = ()
    own_cards: int = 0
    """Own down cards checked."""
    public_cards: int = 0
    """Public cards checked (up cards, the community card, shown hands)."""
    seeds: int = 0
    """Players' seeds in the deal order."""
    my_seed_used: bool = False
    seed_checked: bool = True
    """False when the caller had no copy of their seed (``stud replay verify-mine``): then
    ``my_seed_used`` is unknown and only ``my_seed_listed`` is said."""
    my_seed_listed: bool = False
    """A seed under the player's name was opened into the deal order."""
    seed_note: str = ""
    """Why the seed the player gave is not in the deal order ('' when it is, or none was
    given)."""

    @property
    def ok(self) -> bool:
        """True when the hand was verified."""
        return self.outcome is Outcome.VERIFIED

    def summary(self) -> str:
        """One line for a person."""
        if self.outcome is Outcome.UNVERIFIABLE:
            return f"hand {self.hand_number}: not verifiable ({self.problems[0]})"
        if self.outcome is Outcome.FAILED:
            return (f"hand {self.hand_number}: CHECK FAILED: {self.problems[0]}"
                    + (f" (+{len(self.problems) - 1} more)" if len(self.problems) > 1 else ""))
        counts = f"{self.own_cards} own, {self.public_cards} public cards"
        if self.outcome is Outcome.WITHOUT_YOUR_SEED:
            return (f"hand {self.hand_number}: verified WITHOUT YOUR SEED ({counts}; "
                    f"{self.seeds} player seeds): {self.seed_note}")
        if not self.seed_checked:
            return (f"hand {self.hand_number}: verified ({counts}; {self.seeds} player seeds, "
                    + ("one under your name" if self.my_seed_listed else "none under your name")
                    + "; your seed not checked)")
        seed = "with your seed" if self.my_seed_used else "without your seed"
        if self.seed_note:
            seed = f"{seed}: {self.seed_note}"
        return f"hand {self.hand_number}: verified ({counts}; {self.seeds} player seeds, {seed})"


def _card_events(events: Iterable[Event]) -> list[tuple[int, Card | None]]:
    """(seat, card) of every dealt card in order; seat 0 = community, card None = down."""
    out: list[tuple[int, Card | None]] = []
    for event in events:
        match event:
            case DownCardDealt(seat=seat, card=card):
                out.append((seat, card))
            case UpCardDealt(seat=seat, card=card):
                out.append((seat, card))
            case CommunityCardDealt(card=card):
                out.append((0, card))
            case _:
                pass
    return out


def public_cards(events: Sequence[Event], draws: Sequence[Drawn]) -> dict[int, int]:
    """Draw number -> card index of every card the public record shows face up: up cards,
    the community card and the down cards of shown or exposed hands (never a mucked or
    folded hand's). ``draws`` are the hand's draws by the deal rule."""
    dealt = [d for d in draws if d.seat != BURN_SEAT]
    out: dict[int, int] = {}
    for (seat, card), draw in zip(_card_events(events), dealt, strict=False):
        if card is not None and draw.seat == seat and (draw.up or seat == 0):
            out[draw.draw] = card.index
    for event in events:
        if isinstance(event, HandShown | HandExposed):
            downs = [d for d in dealt if d.seat == event.seat and not d.up]
            for draw, card in zip(downs, event.down, strict=False):
                out[draw.draw] = card.index
    return out


def hidden_draws(events: Sequence[Event], draws: Sequence[Drawn]) -> set[int]:
    """Draw numbers whose card the public record never shows (burns, folded and mucked
    hands, hands won without a showdown)."""
    shown = public_cards(events, draws)
    return {d.draw for d in draws if d.draw not in shown}


def _started(events: Sequence[Event]) -> HandStarted | None:
    return next((e for e in events if isinstance(e, HandStarted)), None)


def verify_mine(*, table_id: str, player_id: str, events: Sequence[Event], burn_cards: bool,
                proof: HandProof, mine: OwnCards | None = None, seed: OwnSeed | None = None,
                seen_commitment: str | None = None, seed_known: bool = True) -> Verdict:
    """Check a finished hand as player ``player_id``: ``events`` are its public record from
    ``HandStarted`` on, ``burn_cards`` the table's option, ``proof`` the dealer's public proof,
    ``mine`` the caller's down cards with their openings (None: not dealt in), ``seed``
    the caller's own seed, if they gave one, and ``seen_commitment`` the card commitment the
    caller saw live in ``HandStarted`` before the first card (None: not watched live). The
    check is against the commitment seen live: a record fetched later that shows another
    fails. ``seed_known=False``: the caller keeps no copy of its seeds, so ``seed=None`` means
    "not known", not "gave none" (the verdict then says the seed was not checked)."""
    started = _started(events)
    number = 0 if started is None else started.hand_number

    def verdict(outcome: Outcome, problems: Sequence[str], **counts: int | bool | str
                ) -> Verdict:
        return Verdict(table_id=table_id, hand_number=number, outcome=outcome,
                       problems=tuple(problems), **counts)  # type: ignore[arg-type]

    if started is None:
        return verdict(Outcome.FAILED, ["the public record has no HandStarted"])
    if seen_commitment is not None and not same(seen_commitment, started.card_commitment):
        return verdict(Outcome.FAILED, ["the hand's record shows another card commitment "
                                        "than the HandStarted seen live before the deal"])
    if not started.card_commitment:
        return without_commitment(table_id, number, seed)
    problems: list[str] = []
    header = proof.header
    if (header.table_id, header.hand_number) != (table_id, number):
        return verdict(Outcome.FAILED, ["the dealer's proof is for another hand"])
    if not same(header.commitment, started.card_commitment):
        return verdict(Outcome.FAILED, ["the dealer's header does not match the card "
                                        "commitment published at hand start"])
    if not proof.complete or proof.dealer_seed is None:
        return verdict(Outcome.FAILED, ["the dealer did not open its seed after the hand"])
    if not same(dealer_seed_commitment(table_id, number, proof.dealer_seed),
                header.dealer_seed):
        problems.append("the dealer's seed does not open its commitment")
    listed = [p for p, _c in header.seeds]
    if sorted(p for p, _s in proof.seeds) != listed:
        problems.append("the opened seeds are not the committed ones")
    opened = 0
    for player, value in proof.seeds:
        commitment = header.seed_of(player)
        if value is None or commitment is None:
            continue
        opened += 1
        if not same(seed_commitment(table_id, number, player, value), commitment):
            problems.append(f"{player}'s seed does not open its commitment")
    my_used = False
    if seed is not None:
        mine_listed = header.seed_of(player_id)
        my_commitment = seed_commitment(table_id, number, player_id, seed.seed)
        if seed.committed and (mine_listed is None or not same(mine_listed, my_commitment)):
            problems.append("your seed commitment is not in the card commitment")
        value = dict(proof.seeds).get(player_id)
        my_used = value == seed.seed
        if seed.opened and not my_used:
            problems.append("your seed was taken before the deal but is not in the deal order")
    if problems:
        return verdict(Outcome.FAILED, problems, seeds=opened, my_seed_used=my_used)
    order = deal_order(table_id, number, proof.dealer_seed, proof.seeds)
    try:
        draws = deal_hand(hand_plans(events, burn_cards), order.deal, order.reshuffle)
    except DealRuleBroken as exc:
        return verdict(Outcome.FAILED, [f"the public record breaks the deal rule: {exc}"],
                       seeds=opened, my_seed_used=my_used)
    own = _check_own(mine, draws, header.root, problems)
    public = _check_public(events, draws, proof, header.root, problems)
    in_order = (dict(proof.seeds).get(player_id) is not None
                and header.seed_of(player_id) is not None)
    counts = {"own_cards": own, "public_cards": public, "seeds": opened,
              "my_seed_used": my_used, "my_seed_listed": in_order,
              "seed_checked": seed is not None or seed_known}
    if problems:
        return verdict(Outcome.FAILED, problems, **counts)
    if seed is None and not seed_known and header.seed_of(player_id) is not None \
            and not in_order:  # committed under the name, withheld from the order
        return verdict(Outcome.WITHOUT_YOUR_SEED, (), **counts, seed_note=(
            "a seed was committed under your name but withheld from the deal order (the "
            "dealer refused its opening, or it was never opened); the deal order rests on "
            "the dealer, not on your seed"))
    if seed is None or my_used:
        return verdict(Outcome.VERIFIED, (), **counts)
    if seed.committed and seed.refused:  # the dealer had the seed, and dropped it
        return verdict(Outcome.WITHOUT_YOUR_SEED, (), **counts, seed_note=(
            f"the dealer refused it ({seed.refused}) after receiving it; the deal order "
            "rests on the dealer, not on your seed"))
    return verdict(Outcome.VERIFIED, (), **counts, seed_note=(
        f"the dealer refused its commitment ({seed.refused}) before seeing it"
        if seed.refused else "it was not opened before the deal"))


def without_commitment(table_id: str, hand_number: int, seed: OwnSeed | None) -> Verdict:
    """The verdict on a hand that carries no per-card commitment: not verifiable, or failed
    when the dealer took the player's seed for it (it then had to commit to the cards)."""
    if seed is not None and seed.committed:
        return Verdict(table_id=table_id, hand_number=hand_number, outcome=Outcome.FAILED,
                       problems=("the dealer took your seed for this hand but published no "
                                 "per-card commitment",))
    return Verdict(table_id=table_id, hand_number=hand_number, outcome=Outcome.UNVERIFIABLE,
                   problems=("the hand has no per-card commitment",))


def _check_card(opening: CardOpening, card: int, position: int, root: str, where: str,
                problems: list[str]) -> None:
    if not opening.opens(root):
        problems.append(f"{where}: the opening does not match the commitment")
    elif opening.card != card:
        problems.append(f"{where}: the opening proves another card")
    elif opening.position != position:
        problems.append(f"{where}: the card is not at the position the deal rule gives")


def _check_own(mine: OwnCards | None, draws: Sequence[Drawn], root: str,
               problems: list[str]) -> int:
    if mine is None:
        return 0
    downs = [d for d in draws if d.seat == mine.seat and not d.up]
    for i, draw in enumerate(downs):
        where = f"your down card {i + 1} ({draw.street.label}, draw {draw.draw})"
        if i >= len(mine.down):
            problems.append(f"{where}: never received")
            continue
        opening = mine.openings[i] if i < len(mine.openings) else None
        if opening is None:
            problems.append(f"{where}: the dealer sent no opening")
            continue
        _check_card(opening, mine.down[i], draw.item, root, where, problems)
    if len(mine.down) > len(downs):
        problems.append("you received more down cards than the public record dealt you")
    return len(downs)


def _check_public(events: Sequence[Event], draws: Sequence[Drawn], proof: HandProof,
                  root: str, problems: list[str]) -> int:
    by_draw = {d.draw: d for d in draws}
    shown = public_cards(events, draws)
    openings = {o.draw: o.opening for o in proof.openings}
    for number, card in sorted(shown.items()):
        draw = by_draw[number]
        where = (f"{draw.street.label}, draw {number}, "
                 + ("the community card" if draw.seat == 0 else f"seat {draw.seat}"))
        opening = openings.get(number)
        if opening is None:
            problems.append(f"{where}: no public opening")
            continue
        _check_card(opening, card, draw.item, root, where, problems)
    # A mucked hand's cards may be in the history (RULES 11.7) but are not shown
    # (public_cards leaves them out): an opening of one is an opening of a card never shown.
    extra = sorted(set(openings) - set(shown))
    if extra:
        problems.append(f"the dealer published openings of {len(extra)} cards never shown")
    return len(shown)
