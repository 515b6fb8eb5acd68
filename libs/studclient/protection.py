"""Player protection for the SDK's users and ``stud play`` (docs/player-protection.md):
names of limit kinds, windows and exclusion periods, and readable lines for a player's
protection and for a refusal by a limit or an exclusion. Pure."""

from __future__ import annotations

import datetime as dt
import json
from typing import Final

from stud.v1 import wallet_pb2 as pb
from studclient.errors import StudError

KINDS: Final = {"deposit": pb.LIMIT_KIND_DEPOSIT, "loss": pb.LIMIT_KIND_LOSS,
                "wager": pb.LIMIT_KIND_WAGER}
WINDOWS: Final = {"day": pb.LIMIT_WINDOW_DAY, "week": pb.LIMIT_WINDOW_WEEK,
                  "month": pb.LIMIT_WINDOW_MONTH}
PERIODS: Final = {"day": pb.EXCLUSION_PERIOD_DAY, "week": pb.EXCLUSION_PERIOD_WEEK,
                  "month": pb.EXCLUSION_PERIOD_MONTH,
                  "six_months": pb.EXCLUSION_PERIOD_SIX_MONTHS,
                  "indefinite": pb.EXCLUSION_PERIOD_INDEFINITE}
_KIND_NAMES: Final = {v: k for k, v in KINDS.items()}
_WINDOW_NAMES: Final = {v: k for k, v in WINDOWS.items()}
LIMIT_REASONS: Final = ("deposit_limit", "loss_limit", "wager_limit")
EXCLUSION_REASONS: Final = ("self_excluded", "operator_excluded")


def when(ms: int) -> str:
    """A wallet time (ms since the epoch) as UTC minutes."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def parse_limit(text: str) -> tuple[pb.LimitKind, pb.LimitWindow, int]:
    """``KIND:WINDOW:AMOUNT`` (e.g. ``loss:week:500``; amount 0 removes the limit) as the
    wire's kind, window and amount; ``ValueError`` otherwise."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in KINDS or parts[1] not in WINDOWS:
        raise ValueError(f"a limit is KIND:WINDOW:AMOUNT with KIND one of {', '.join(KINDS)} "
                         f"and WINDOW one of {', '.join(WINDOWS)}")
    amount = int(parts[2])
    if amount < 0:
        raise ValueError("a limit's amount is 0 (none) or more")
    return KINDS[parts[0]], WINDOWS[parts[1]], amount


def parse_kind_window(text: str) -> tuple[pb.LimitKind, pb.LimitWindow]:
    """``KIND:WINDOW`` as the wire's kind and window; ``ValueError`` otherwise."""
    kind, _, window = text.partition(":")
    if kind not in KINDS or window not in WINDOWS:
        raise ValueError("KIND:WINDOW, e.g. wager:day")
    return KINDS[kind], WINDOWS[window]


def protection_lines(reply: pb.ProtectionResponse) -> list[str]:
    """A player's protection, one line each: the exclusion, the reality check, then each
    limit with what is used and left and a raise that waits."""
    lines = []
    if reply.excluded:
        until = "until an operator lifts it" if reply.excluded_until_ms == 0 \
            else f"until {when(reply.excluded_until_ms)}"
        by = f" by {reply.excluded_by} ({reply.exclusion_reason})" if reply.excluded_by \
            else " (self-excluded)"
        lines.append(f"{reply.player_id}: excluded from play {until}{by}")
        if reply.lift_effective_ms:
            lines.append(f"  lifted from {when(reply.lift_effective_ms)}")
    if reply.reality_check_minutes:
        lines.append(f"{reply.player_id}: a reality check every "
                     f"{reply.reality_check_minutes} minutes of play")
    if reply.session_limit_minutes:
        line = f"{reply.player_id}: sessions end after {reply.session_limit_minutes} minutes"
        if reply.session_started_ms:
            line += f"; this one started {when(reply.session_started_ms)}"
        lines.append(line)
    if reply.session_limit_pending:
        target = (f"{reply.session_limit_pending_minutes} minutes"
                  if reply.session_limit_pending_minutes else "no session limit")
        lines.append(f"  session limit raise to {target} from "
                     f"{when(reply.session_limit_effective_ms)}")
    if not reply.limits:
        lines.append(f"{reply.player_id}: no limits set")
    for row in reply.limits:
        line = (f"{_KIND_NAMES[row.kind]:<7} per {_WINDOW_NAMES[row.window]:<5} "
                f"{row.amount:>12,}  used {row.used:>12,}  left {row.remaining:>12,}")
        if row.used:
            line += f"  frees some at {when(row.resets_at_ms)}"
        if row.increase_pending:
            target = f"{row.pending_amount:,}" if row.pending_amount else "no limit"
            line += f"  (raise to {target} from {when(row.pending_effective_ms)})"
        lines.append(line)
    return lines


def event_line(kind: str, text: str) -> str:
    """One protection event (its ``type`` and its JSON, as ``GetProtection``,
    ``GetStatement``'s protection section and the player's stream hold it) in words."""
    body = json.loads(text)
    limit = f"{body.get('kind', '')} limit per {body.get('window', '')}"
    amount = body.get("amount", 0)
    match kind:
        case "LimitSet":
            return f"{limit} set to {amount:,}"
        case "LimitDecreased":
            return f"{limit} lowered to {amount:,}, at once"
        case "LimitIncreaseRequested":
            target = f"{amount:,}" if amount else "no limit"
            return f"{limit}: raise to {target} requested, from {when(body['effective_ms'])}"
        case "LimitIncreaseCancelled":
            return f"{limit}: the waiting raise cancelled"
        case "SelfExcluded" | "PlayerExcluded":
            until = "indefinitely" if not body["until_ms"] else f"until {when(body['until_ms'])}"
            if kind == "SelfExcluded":
                return f"self-excluded ({body['period']}) {until}"
            return (f"excluded by {body['operator']} ({body['period']}) {until}: "
                    f"{body['reason']}")
        case "ExclusionLiftRequested":
            return (f"exclusion lift by {body['operator']}, from "
                    f"{when(body['effective_ms'])}: {body['reason']}")
        case "SessionLimitSet":
            minutes = body.get("minutes", 0)
            target = f"{minutes} minutes" if minutes else "no session limit"
            if body.get("effective_ms", 0) > body.get("at_ms", 0):
                return f"session limit: raise to {target} requested, from " \
                    f"{when(body['effective_ms'])}"
            return f"session limit set to {target}, at once"
        case "RealityCheckSet":
            minutes = body.get("minutes", 0)
            return f"a reality check every {minutes} minutes" if minutes \
                else "reality checks off"
    return f"{kind} {text}"


def refusal_text(error: StudError) -> str | None:
    """A refusal by a limit or an exclusion in words, or None for any other refusal."""
    meta = error.metadata
    if error.reason in LIMIT_REASONS and "remaining" in meta:
        return (f"Your {meta.get('window', '')} {meta.get('kind', '')} limit of "
                f"{int(meta.get('limit', '0')):,} has {int(meta['remaining']):,} left; "
                f"more frees at {when(int(meta.get('resets_at_ms', '0')))}.")
    if error.reason == "session_limit":
        ended = int(meta.get("ended_ms", "0"))
        return (f"Your session reached its time limit at {when(ended)}; a new one may start "
                "after 30 minutes away from every table.")
    if error.reason in EXCLUSION_REASONS:
        until = int(meta.get("until_ms", "0"))
        return "You are excluded from play " + (
            "until an operator lifts it." if until == 0 else f"until {when(until)}.")
    return None


def reality_check_text(check: pb.RealityCheck) -> str:
    """A reminder in words."""
    minutes = check.session_ms // 60_000
    sign = "+" if check.net_result > 0 else ""
    return (f"Reality check: you have played {minutes // 60} h {minutes % 60:02d} min this "
            f"session; net result {sign}{check.net_result:,}.")
