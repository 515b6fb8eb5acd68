"""TEST ONLY: a deliberately dishonest dealer, so tests can show that a player's own check
catches it (docs/fairness.md). Enabled only by ``DEALER_CORRUPT`` together with
``STUD_ENV=test`` (:mod:`dealer.config` refuses it otherwise); in production it is always
:attr:`Corruption.NONE`. Each card kind touches the first card of every per-card hand (draw 0:
the first down card of the lowest seat dealt in); DROP_SEED touches the players' seeds."""

from __future__ import annotations

from enum import StrEnum, unique


@unique
class Corruption(StrEnum):
    """How the test dealer cheats."""

    NONE = ""
    SWAP = "swap"
    """Deal another card than the committed one at draw 0 and claim, in its opening, that it
    is the committed card (the opening no longer matches the root)."""
    POSITION = "position"
    """Deal the card committed at another position at draw 0, with that card's honest
    opening (its position is not the one the deal rule gives)."""
    WITHHOLD = "withhold"
    """Send no opening for the card at draw 0."""
    DROP_SEED = "drop_seed"
    """Refuse every player's seed opening as too late (``seed_too_late``) after seeing that
    it opens the player's commitment: the deal order rests on the dealer's seed alone."""
