"""The process manager: it reacts to each tournament's decisions as its log states them, and
records each outcome as a command of its own, so a crash at any step is carried on from the
log (DESIGN §5c, STYLE §11 "sagas as events").

Each round: the clock (a ``Tick`` whose command id is the version it was decided at, so two
rounds at one version append once), the buy-in of each pending entry (``SettleEntry``), each
refund and prize (``ConfirmPayment``), then the tables (``table_steps``). Every call carries
a key derived from the log (``clients.key``). The manager's command ids are in its own
namespace (``app.stored_id``: no caller can choose one of them), and each step is taken on
its own: one refused never stops the others.

With leases (:mod:`tournament.leases`), a round drives only the tournaments this replica
holds, each write fenced by its lease's epoch: a former owner's append is refused
``not_owner`` and that tournament is left to its new owner.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable

import structlog

from studkit.errors import ServiceError
from studkit.store import NotOwner
from tournament import commands as c
from tournament import events as ev
from tournament.app import Outcome, TournamentApp, Writer
from tournament.clients import Refused, Unavailable, WalletPort
from tournament.leases import Leases
from tournament.state import CANCELLED, FINISHED, Tournament
from tournament.table_steps import TableSteps

log = structlog.get_logger("tournament.driver")


def over(t: Tournament) -> bool:
    return t.phase in (FINISHED, CANCELLED) and set(t.payments) <= t.paid \
        and all(e.paid or e.gone for e in t.field())


async def _record(app: Writer, tournament_id: str, cmd: c.Command,
                  command_id: str) -> Outcome | None:
    """Record one step's outcome; None when the tournament refuses it now (logged, and the
    next round tries again): one refused step never stops the others of the round, above
    all the payments (issue 29, G1: a settlement refused for ever left every refund and
    prize of its tournament unpaid). Fenced (:class:`NotOwner`) and anything else that is
    not a refusal stops the round of this tournament, as before."""
    try:
        return await app.execute(tournament_id, cmd, command_id)
    except ServiceError as exc:
        log.warning("tournament_step_refused", tournament_id=tournament_id,
                    command=type(cmd).__name__, command_id=command_id, reason=exc.reason,
                    detail=exc.detail)
        return None


async def step(app: Writer, wallet: WalletPort, tournament_id: str) -> int:
    """One round for one tournament: the clock, then each money step due, each on its own
    (a refusal of one leaves the others to be taken); the number of steps taken."""
    t = await app.load(tournament_id)
    done = 0
    if t.phase not in (FINISHED, CANCELLED):
        out = await _record(app, tournament_id, c.Tick(), f"tick.{t.version}")
        done += bool(out is not None and out.records)
        t = await app.load(tournament_id)
    for e in t.field():
        if e.paid:
            continue
        try:
            await wallet.enter(tournament_id, e.entry_id, e.player_id, t.cfg.buy_in, t.cfg.fee)
            cmd = c.SettleEntry(e.entry_id, True)
        except Refused as refused:
            cmd = c.SettleEntry(e.entry_id, False, refused.reason)
        except Unavailable:
            continue
        done += await _record(app, tournament_id, cmd, f"settle.{e.entry_id}") is not None
    t = await app.load(tournament_id)
    for payment_id, p in t.payments.items():
        if payment_id in t.paid:
            continue
        try:
            if isinstance(p, ev.RefundDue):
                await wallet.refund(tournament_id, p.entry_id, p.player_id)
            else:
                await wallet.pay(tournament_id, payment_id, p.player_id, p.amount, p.place)
        except (Refused, Unavailable) as exc:
            log.warning("tournament_payment_waits", tournament_id=tournament_id,
                        payment_id=payment_id, error=str(exc))
            continue
        done += await _record(app, tournament_id, c.ConfirmPayment(payment_id),
                              f"paid.{payment_id}") is not None
    return done


async def run(app: TournamentApp, wallet: WalletPort, tick_s: float,
              stop: asyncio.Event, tables: TableSteps | None = None, *,
              writer: Writer | None = None, leases: Leases | None = None) -> None:
    """Round after round over every tournament not over, until ``stop`` is set (a flag, not
    only a cancellation: a cancellation that lands inside a Redis call may be absorbed by
    the client's retry). With ``leases``, only the tournaments this replica holds, through
    ``writer`` (fenced by their epochs); without, every tournament, through ``app``."""
    finished: set[str] = set()
    write: Writer = app if writer is None else writer
    while not stop.is_set():
        ids = [t for t in await app.ids() if t not in finished]
        if leases is not None:
            try:
                ids = await leases.claim(ids)
            except Exception:
                log.exception("tournament_claims_failed")
                ids = sorted(leases.held)
        for tournament_id in ids:
            if stop.is_set():
                break
            if leases is not None and tournament_id not in leases.held:
                continue  # lost during this round: its new owner drives it
            # The money steps and the table steps each on their own: a table that refuses
            # (or a step of theirs the log refuses) never holds a payment back, nor the
            # reverse.
            if not await _guarded(tournament_id, step(write, wallet, tournament_id)):
                continue
            if tables is not None and not await _guarded(tournament_id,
                                                         tables.round(tournament_id)):
                continue
            with contextlib.suppress(Exception):
                if over(await app.load(tournament_id)):
                    finished.add(tournament_id)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), tick_s)


async def _guarded(tournament_id: str, steps: Awaitable[int]) -> bool:
    """Run one part of a tournament's round; False when it was fenced (the tournament is
    not ours now: nothing more of it this round). A refusal or a failure is logged and the
    next round tries again."""
    try:
        await steps
    except NotOwner:  # fenced (logged and counted by the writer): not ours now
        return False
    except ServiceError as exc:  # a lost race or a refusal: the next round retries
        log.info("tournament_step_refused", tournament_id=tournament_id,
                 reason=exc.reason, detail=exc.detail)
    except (Refused, Unavailable) as exc:  # the table or the wallet: the same
        log.info("tournament_call_waits", tournament_id=tournament_id, error=str(exc))
    except Exception:
        log.exception("tournament_step_failed", tournament_id=tournament_id)
    return True
