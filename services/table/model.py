"""How the room runs one table (not the rules' business): clock, buy-in limits, pace,
sit-out limits. Stored beside the table's stream, read back by any owner."""

from __future__ import annotations

from dataclasses import dataclass, replace

from rules import TableConfig
from stud.v1 import table_pb2 as pb
from studkit.errors import BadRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSettings:
    """One table's room settings; amounts in the table's chips, times in ms or s."""

    action_time_s: float = 20.0
    time_bank_s: float = 30.0
    buy_in_min: int = 0
    buy_in_max: int = 0
    next_hand_delay_ms: int = 3000
    timeouts_before_sit_out: int = 2
    sit_out_limit_s: float = 600.0
    rathole_window_s: float = 1800.0
    outage_limit_s: float = 60.0

    def for_config(self, config: TableConfig) -> TableSettings:
        """Defaults that depend on the stakes filled in (20 and 100 big bets)."""
        lo = self.buy_in_min or 20 * config.big_bet
        hi = self.buy_in_max or max(lo, 100 * config.big_bet)
        if lo > hi:
            raise BadRequest("settings.buy_in_min", "must not exceed buy_in_max")
        return replace(self, buy_in_min=lo, buy_in_max=hi)


def settings_from_proto(msg: pb.TableSettings, field: str = "settings") -> TableSettings:
    """Settings from the wire; zero means the default."""
    for name in ("buy_in_min", "buy_in_max"):
        if getattr(msg, name) < 0:
            raise BadRequest(f"{field}.{name}", "must be >= 0")
    if msg.action_time_s > 3600 or msg.time_bank_s > 3600:
        raise BadRequest(f"{field}.action_time_s", "at most 3600 seconds")
    if msg.next_hand_delay_ms > 600_000:
        raise BadRequest(f"{field}.next_hand_delay_ms", "at most 600000")
    d = TableSettings()
    return TableSettings(
        action_time_s=float(msg.action_time_s or d.action_time_s),
        time_bank_s=float(msg.time_bank_s or d.time_bank_s),
        buy_in_min=msg.buy_in_min, buy_in_max=msg.buy_in_max,
        next_hand_delay_ms=(msg.next_hand_delay_ms if msg.next_hand_delay_set
                            or msg.next_hand_delay_ms else d.next_hand_delay_ms),
        timeouts_before_sit_out=msg.timeouts_before_sit_out or d.timeouts_before_sit_out,
        sit_out_limit_s=float(msg.sit_out_limit_s or d.sit_out_limit_s),
        rathole_window_s=float(msg.rathole_window_s or d.rathole_window_s),
        outage_limit_s=float(msg.outage_limit_s or d.outage_limit_s),
    )


def settings_to_proto(s: TableSettings) -> pb.TableSettings:
    """The wire form (every field explicit)."""
    return pb.TableSettings(
        action_time_s=round(s.action_time_s), time_bank_s=round(s.time_bank_s),
        buy_in_min=s.buy_in_min, buy_in_max=s.buy_in_max,
        next_hand_delay_ms=s.next_hand_delay_ms, next_hand_delay_set=True,
        timeouts_before_sit_out=s.timeouts_before_sit_out,
        sit_out_limit_s=round(s.sit_out_limit_s), rathole_window_s=round(s.rathole_window_s),
        outage_limit_s=round(s.outage_limit_s))


def settings_from_stored(msg: pb.TableSettings) -> TableSettings:
    """Settings as stored (a ``SettingsSet`` event, or the old ``:settings`` key): complete,
    so the buy-in limits and the delay are taken as they are."""
    base = settings_from_proto(msg)
    return replace(base, buy_in_min=msg.buy_in_min, buy_in_max=msg.buy_in_max,
                   next_hand_delay_ms=msg.next_hand_delay_ms)
