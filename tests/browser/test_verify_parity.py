"""The browser's deal check (web/src/verify.ts, run by node with its WebCrypto) gives the same
verdict, problems and counts as the SDK's (studkit.cardcheck.verify_mine) on the same hands:
honest hands of 2 to 8 seats with and without burns (the community card and the burns'
reshuffle included), folds, seeds given, withheld or not known, and each kind of tampering
a dealer could do to an opening, a card, a seed or the commitment. No browser is needed:
the same TypeScript the page runs, bundled for node by esbuild."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rules.events import (
    BurnsReshuffled,
    CardBurned,
    CommunityCardDealt,
    DownCardDealt,
    Event,
    Folded,
    HandExposed,
    HandShown,
    HandStarted,
    UpCardDealt,
)
from studkit.cardcheck import HandProof, OwnCards, OwnSeed, PublicOpening, Verdict, verify_mine
from studkit.cardproof import CardOpening
from tests.fairhands import TABLE, DealtHand, deal_hand, with_card_commitment

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"


def deal_event(e: Event) -> dict[str, Any]:
    match e:
        case HandStarted():
            return {"kind": "started", "hand": e.hand_number, "seats": list(e.seats),
                    "cardCommitment": e.card_commitment}
        case DownCardDealt():
            return {"kind": "down", "seat": e.seat, "street": int(e.street)}
        case UpCardDealt():
            return {"kind": "up", "seat": e.seat, "street": int(e.street), "card": e.card.index}
        case CommunityCardDealt():
            return {"kind": "community", "card": e.card.index}
        case CardBurned():
            return {"kind": "burn"}
        case BurnsReshuffled():
            return {"kind": "reshuffle"}
        case Folded():
            return {"kind": "folded", "seat": e.seat}
        case HandExposed():
            return {"kind": "exposed", "seat": e.seat, "down": [c.index for c in e.down]}
        case HandShown():
            return {"kind": "shown", "seat": e.seat, "down": [c.index for c in e.down]}
    return {"kind": "other"}


def opening(o: CardOpening | None) -> dict[str, Any] | None:
    if o is None:
        return None
    return {"position": o.position, "card": o.card, "salt": o.salt.hex(),
            "path": [p.hex() for p in o.path]}


def case(hand: DealtHand, *, player: str, proof: HandProof, mine: OwnCards | None,
         seed: OwnSeed | None, seen: str | None, seed_known: bool = True) -> dict[str, Any]:
    h = proof.header
    return {
        "table": TABLE, "player": player, "events": [deal_event(e) for e in hand.events],
        "burnCards": hand.config.burn_cards,
        "proof": {"header": {"table": h.table_id, "hand": h.hand_number, "root": h.root,
                             "dealerSeed": h.dealer_seed, "seeds": [list(s) for s in h.seeds]},
                  "openings": [{"draw": o.draw, "opening": opening(o.opening)}
                               for o in proof.openings],
                  "complete": proof.complete,
                  "dealerSeed": proof.dealer_seed.hex() if proof.dealer_seed else None,
                  "seeds": [[p, s.hex() if s is not None else None] for p, s in proof.seeds]},
        "mine": None if mine is None else {
            "seat": mine.seat, "down": list(mine.down),
            "openings": [opening(o) for o in mine.openings]},
        "seed": None if seed is None else {"seed": seed.seed.hex(), "committed": seed.committed,
                                           "opened": seed.opened, "refused": seed.refused},
        "seenCommitment": seen, "seedKnown": seed_known,
    }


def python_verdict(hand: DealtHand, c: dict[str, Any], proof: HandProof,
                   mine: OwnCards | None, seed: OwnSeed | None) -> Verdict:
    return verify_mine(table_id=TABLE, player_id=c["player"], events=hand.events,
                       burn_cards=hand.config.burn_cards, proof=proof, mine=mine, seed=seed,
                       seen_commitment=c["seenCommitment"], seed_known=c["seedKnown"])


def flip(data: bytes) -> bytes:
    return bytes([data[0] ^ 1]) + data[1:]


def tamperings(hand: DealtHand, seat: int) -> list[tuple[str, HandProof, OwnCards, str | None]]:
    """(name, proof, own cards, seen commitment) for the honest hand and each tampering."""
    proof, own = hand.proof(), hand.own(seat)
    seen = hand.events[0].card_commitment  # type: ignore[attr-defined]
    first = own.openings[0]
    assert first is not None
    out = [("honest", proof, own, seen)]
    out.append(("salt", proof, replace(own, openings=(replace(first, salt=flip(first.salt)),
                                                      *own.openings[1:])), seen))
    out.append(("card", proof, replace(own, down=((own.down[0] + 1) % 52, *own.down[1:])),
                seen))
    out.append(("withheld opening", proof, replace(own, openings=(None, *own.openings[1:])),
                seen))
    out.append(("extra card", proof, replace(own, down=(*own.down, 0),
                                             openings=(*own.openings, first)), seen))
    if proof.openings:
        o = proof.openings[0]
        bad = PublicOpening(draw=o.draw, opening=replace(o.opening, path=o.opening.path[:-1]))
        out.append(("public path", replace(proof, openings=(bad, *proof.openings[1:])), own,
                    seen))
        out.append(("public missing", replace(proof, openings=proof.openings[1:]), own, seen))
    out.append(("dealer seed", replace(proof, dealer_seed=flip(proof.dealer_seed or b"\0" * 32)),
                own, seen))
    out.append(("not complete", replace(proof, complete=False, dealer_seed=None), own, seen))
    out.append(("another commitment", proof, own, "0" * 64))
    out.append(("not watched live", proof, own, None))
    return out


def node_verdicts(cases: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    node = shutil.which("node") or shutil.which("node", path=str(ROOT / ".venv" / "bin"))
    esbuild = WEB / "node_modules" / ".bin" / "esbuild"
    if node is None or not esbuild.exists() or not (WEB / "src" / "gen").is_dir():
        pytest.fail("node and web/node_modules are needed: run `make web`", pytrace=False)
    bundle = tmp_path / "verify-json.mjs"
    subprocess.run([str(esbuild), str(WEB / "tools" / "verify-json.ts"), "--bundle",
                    "--platform=node", "--format=esm", f"--outfile={bundle}",
                    "--log-level=warning"], check=True, cwd=WEB)
    done = subprocess.run([node, str(bundle)], input=json.dumps(cases).encode(),
                          capture_output=True, check=True, timeout=120)
    out: list[dict[str, Any]] = json.loads(done.stdout)
    return out


def test_the_browsers_check_gives_the_sdks_verdicts(tmp_path: Path) -> None:
    rng = random.Random(20261205)
    cases: list[dict[str, Any]] = []
    expected: list[Verdict] = []
    shapes = [dict(players=2), dict(players=3, burn_cards=True),
              dict(players=4, folds={2: 4}), dict(players=8, burn_cards=True),
              dict(players=8), dict(players=7, burn_cards=True, folds={3: 5}),
              dict(players=3, seeded=(1, 2, 3), withheld=(2,)),
              dict(players=3, seeded=(1, 2), withheld=(1,)),
              dict(players=3, seeded=(2,)), dict(players=2, seeded=())]
    for shape in shapes:
        hand = with_card_commitment(deal_hand(rng, **shape))  # type: ignore[arg-type]
        for name, proof, own, seen in tamperings(hand, 1):
            player = "p1"
            seed = hand.seed(player) if player in hand.seeds else None
            for known in (True, False):
                mine_seed = seed if known else None
                c = case(hand, player=player, proof=proof, mine=own, seed=mine_seed, seen=seen,
                         seed_known=known)
                c["name"] = f"{shape} {name} seed_known={known}"
                cases.append(c)
                expected.append(python_verdict(hand, c, proof, own, mine_seed))
    got = node_verdicts(cases, tmp_path)
    assert len(got) == len(cases)
    outcomes: set[str] = set()
    for c, want, have in zip(cases, expected, got, strict=True):
        mine = {"outcome": want.outcome.value, "problems": list(want.problems),
                "ownCards": want.own_cards, "publicCards": want.public_cards,
                "seeds": want.seeds, "mySeedUsed": want.my_seed_used,
                "seedChecked": want.seed_checked, "mySeedListed": want.my_seed_listed,
                "seedNote": want.seed_note, "summary": want.summary()}
        theirs = {k: have[k] for k in mine}
        assert theirs == mine, c["name"]
        outcomes.add(want.outcome.value)
    # the cases reach every outcome but "unverifiable" (every hand here has a commitment)
    assert {"verified", "failed", "verified_without_your_seed"} <= outcomes, outcomes
