"""Dashboards and Prometheus rules as code (issue 33): writes everything under
``deploy/observability/`` and the ``PrometheusRule`` of ``deploy/k8s/observability/``.

- ``deploy/observability/dashboards/*.json``: Grafana 11.6 dashboards built with the pinned
  Grafana Foundation SDK (``grafana-foundation-sdk``, the dev extra): the room overview, one
  table service replica, money, tournaments, Redis and the gateway (Envoy).
- ``deploy/observability/rules.yml``: the recording and alerting rules, plain (for any
  Prometheus, and ``make observe``); ``deploy/k8s/observability/prometheusrule.yaml`` holds
  the same groups as a prometheus-operator ``PrometheusRule`` (``kubectl apply -k
  deploy/k8s/observability``).
- ``deploy/observability/rules.test.yml``: ``promtool test rules`` cases, synthetic series
  for which each alert fires and for which it stays quiet; the expected annotations are filled
  in from the rules here, so a case names only what it is about.

Run ``python -m tools.observability`` to write them, ``--check`` to fail when a committed
file differs from what this writes (the tests run it). Each alert's ``runbook_url`` points at
its section of ``docs/operations.md``.

Label values never name a player or a table (the services' metrics have bounded label sets);
a query groups by ``instance`` at most.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "deploy" / "observability"
K8S = ROOT / "deploy" / "k8s" / "observability"
RUNBOOK = "https://github.com/stud-hilo/stud-hilo/blob/main/docs/operations.md"
"""Where ``docs/operations.md`` is read by whoever is paged (an anchor per alert)."""

# --- what the queries are about ----------------------------------------------------------

TABLE_SVC = 'service="stud.v1.TableService"'
ACTION_METHODS = ("PostBringIn", "Complete", "Bet", "Raise", "Call", "Check", "Fold")
"""The player actions of the table service: the SLO's calls."""
ACTIONS = f'method=~"(Play/)?({"|".join(ACTION_METHODS)})"'
"""An action as a unary call (``Call``) or taken on a Play stream (``Play/Call``: one
``PlayRequest``, counted as its own call). Prometheus anchors the regex, so the stream itself
(``Play``, open for as long as the player sits) is no action."""
SERVER_ERRORS = 'code=~"INTERNAL|UNKNOWN|UNAVAILABLE|DEADLINE_EXCEEDED|DATA_LOSS"'
"""Codes that are the service's fault; a refusal (FAILED_PRECONDITION, INVALID_ARGUMENT,
ABORTED for a stale decision, RESOURCE_EXHAUSTED for a rate limit) is an answer, not an error."""
ACTION = f"{TABLE_SVC},{ACTIONS}"

GATEWAY = 'envoy_http_conn_manager_prefix="gateway"'
"""The gateway's own HTTP connection manager (studtools.gateway: ``stat_prefix``), not the
metrics listener's."""
GRPC_SERVER_ERRORS = 'envoy_grpc_status=~"2|4|13|14|15"'
"""The gateway's gRPC statuses that are a server's fault (UNKNOWN, DEADLINE_EXCEEDED,
INTERNAL, UNAVAILABLE, DATA_LOSS), as :data:`SERVER_ERRORS` for the services."""
GATEWAY_ERROR_RATIO = 0.05

ACTION_LATENCY_SLO_SECONDS = "0.25"
"""An action is answered within 250 ms (a bucket bound of studkit.metrics.RPC_BUCKETS)."""
ACTION_LATENCY_OBJECTIVE = 0.99
ACTION_ERROR_OBJECTIVE = 0.999
BURN_WINDOWS = ("5m", "30m", "1h", "6h")
FAST_BURN = (14.4, "1h", "5m")
"""2% of a 30-day budget in one hour: page."""
SLOW_BURN = (6.0, "6h", "30m")
"""5% of a 30-day budget in six hours: a ticket."""


# --- rules ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str

    def rule(self) -> dict[str, Any]:
        rule: dict[str, Any] = {"alert": self.name, "expr": self.expr}
        if self.for_ != "0m":
            rule["for"] = self.for_
        rule["labels"] = {"severity": self.severity}
        rule["annotations"] = self.annotations()
        return rule

    def annotations(self) -> dict[str, str]:
        return {"summary": self.summary, "description": self.description,
                "runbook_url": f"{RUNBOOK}#{self.name.lower()}"}


def slo_records() -> list[dict[str, str]]:
    records = []
    for w in BURN_WINDOWS:
        records.append({
            "record": f"stud:action_errors:ratio_rate{w}",
            "expr": (f"sum(rate(stud_grpc_requests_total{{{ACTION},{SERVER_ERRORS}}}[{w}]))\n"
                     f"/ sum(rate(stud_grpc_requests_total{{{ACTION}}}[{w}]))"),
        })
        records.append({
            "record": f"stud:action_slow:ratio_rate{w}",
            "expr": (f"1 - sum(rate(stud_grpc_request_seconds_bucket{{{ACTION},"
                     f'le="{ACTION_LATENCY_SLO_SECONDS}"}}[{w}]))\n'
                     f"/ sum(rate(stud_grpc_request_seconds_count{{{ACTION}}}[{w}]))"),
        })
    return records


def room_records() -> list[dict[str, str]]:
    return [
        {"record": "stud:action_latency_seconds:p99_rate5m",
         "expr": "histogram_quantile(0.99, sum by (le) "
                 f"(rate(stud_grpc_request_seconds_bucket{{{ACTION}}}[5m])))"},
        {"record": "stud:actions:rate5m",
         "expr": f"sum(rate(stud_grpc_requests_total{{{ACTION}}}[5m]))"},
        {"record": "stud:hands_started:rate5m",
         "expr": "sum(rate(stud_dealer_hands_started_total[5m]))"},
        # The gateway's answers that are errors: its own 5xx (no upstream, a timeout, a
        # reset) and the calls the services ended with a server error, of all requests.
        {"record": "stud:gateway_errors:ratio_rate5m",
         "expr": (f'(sum(rate(envoy_http_downstream_rq_xx{{{GATEWAY},'
                  f'envoy_response_code_class="5"}}[5m]))\n'
                  f"+ (sum(rate(envoy_cluster_grpc{{{GRPC_SERVER_ERRORS}}}[5m])) or vector(0)))\n"
                  f"/ sum(rate(envoy_http_downstream_rq_total{{{GATEWAY}}}[5m]))")},
    ]


def burn(kind: str, objective: float, speed: tuple[float, str, str]) -> str:
    factor, long, short = speed
    budget = round(1 - objective, 6)
    threshold = f"({factor} * {budget})"
    return (f"stud:action_{kind}:ratio_rate{long} > {threshold}\n"
            f"and stud:action_{kind}:ratio_rate{short} > {threshold}")


ALERTS: tuple[Alert, ...] = (
    Alert("StudActionErrorBudgetBurnFast", burn("errors", ACTION_ERROR_OBJECTIVE, FAST_BURN),
          "2m", "page", "Player actions fail with server errors 14x faster than the SLO allows",
          "Over 1h and 5m, more than 1.44% of Bet/Call/Raise/... calls ended in INTERNAL, "
          "UNAVAILABLE, UNKNOWN, DEADLINE_EXCEEDED or DATA_LOSS (the objective: 99.9% "
          "without)."),
    Alert("StudActionErrorBudgetBurnSlow", burn("errors", ACTION_ERROR_OBJECTIVE, SLOW_BURN),
          "15m", "ticket", "Player actions fail with server errors 6x faster than the SLO allows",
          "Over 6h and 30m, more than 0.6% of player actions ended in a server error."),
    Alert("StudActionLatencyBudgetBurnFast", burn("slow", ACTION_LATENCY_OBJECTIVE, FAST_BURN),
          "2m", "page", "Player actions are slower than 250 ms 14x more often than the SLO allows",
          "Over 1h and 5m, more than 14.4% of player actions took longer than 250 ms (the "
          "objective: 99% within)."),
    Alert("StudActionLatencyBudgetBurnSlow", burn("slow", ACTION_LATENCY_OBJECTIVE, SLOW_BURN),
          "15m", "ticket", "Player actions are slower than 250 ms 6x more often than the SLO "
          "allows", "Over 6h and 30m, more than 6% of player actions took longer than 250 ms."),
    Alert("StudTableStopped", "sum(stud_table_tables_stopped) > 0", "0m", "page",
          "A table was stopped by a failed reconciliation",
          "A table service replica stopped a table: its escrow at the wallet did not equal the "
          "chips on the table. It deals no more hands until an operator looks."),
    Alert("StudLedgerNotBalanced", "sum(stud_wallet_ledger_balance) != 0",
          "5m", "page", "The wallet's ledger does not sum to zero",
          "The sum of every account of the wallet's double-entry ledger has not been 0 for "
          "5 minutes: chips were created or lost."),
    Alert("StudNoHandsDealt",
          "sum(stud_table_seated_players) >= 2\n"
          "and on() sum(rate(stud_dealer_hands_started_total[15m])) == 0",
          "15m", "page", "Players are seated but no hand has been dealt for 15 minutes",
          "Tables have at least two seated players, yet the dealer started no hand in 15 "
          "minutes: the tables' drivers, the dealer or the wallet are stuck."),
    Alert("StudLeaseChurn", "sum(increase(stud_table_lease_takeovers_total[15m])) > 5",
          "30m", "ticket", "Table leases keep changing owner",
          "More than 5 table leases were taken over in every 15 minutes for half an hour: "
          "replicas keep restarting, pausing or losing Redis (a rolling restart's one burst "
          "of takeovers is over sooner)."),
    Alert("StudStaleAppendsRefused",
          "sum(increase(stud_table_stale_appends_refused_total[15m]))\n"
          "+ sum(increase(stud_tournament_stale_appends_refused_total[15m])) > 0",
          "0m", "ticket", "A former owner tried to append after losing its lease",
          "The fence refused an append from a replica that was no longer a table's or a "
          "tournament's owner (paused or partitioned); nothing was written twice."),
    Alert("StudArchiverBehind",
          "histogram_quantile(0.99, sum by (le) (rate(stud_archiver_lag_seconds_bucket[10m])))"
          " > 60", "10m", "ticket", "Settled hands take over a minute to reach PostgreSQL",
          "The archiver's p99 from a hand's end to its copy being durable in PostgreSQL has "
          "been above 60 s for 10 minutes; Redis keeps the hands meanwhile and grows."),
    Alert("StudArchiverStalled", "time() - max(stud_archiver_last_round_unix) > 300",
          "5m", "page", "No archiver has finished a round for 5 minutes",
          "No archiver replica ended a round over the tables in 5 minutes: nothing moves to "
          "PostgreSQL and Redis grows with every hand."),
    Alert("StudArchiverFailing", "sum(increase(stud_archiver_failures_total[15m])) > 0",
          "15m", "ticket", "The archiver cannot write or verify",
          "Archiver steps fail (PostgreSQL unreachable, a verification mismatch): nothing is "
          "trimmed from Redis until they succeed."),
    Alert("StudGatewayErrorRateHigh",
          f"stud:gateway_errors:ratio_rate5m > {GATEWAY_ERROR_RATIO}", "5m", "page",
          "More than 5% of the gateway's requests end in an error",
          "For 5 minutes, more than 5% of the requests through the gateway (Envoy) were "
          "answered 5xx by Envoy itself or ended with a server error of a service (UNKNOWN, "
          "DEADLINE_EXCEEDED, INTERNAL, UNAVAILABLE, DATA_LOSS): browsers and clients "
          "outside the room are failing."),
    Alert("StudTargetDown", 'up{job=~"stud-.*"} == 0', "5m", "page",
          "A service's /metrics does not answer",
          "Prometheus could not scrape a stud service for 5 minutes: the process is down, "
          "restarting or unreachable."),
)


def rule_groups() -> list[dict[str, Any]]:
    return [
        {"name": "stud-slo", "interval": "30s", "rules": [*slo_records(), *room_records()]},
        {"name": "stud-alerts", "rules": [a.rule() for a in ALERTS]},
    ]


# --- promtool test cases -------------------------------------------------------------------

ACT_OK = f'stud_grpc_requests_total{{{TABLE_SVC},method="Bet",code="OK"}}'
ACT_INTERNAL = f'stud_grpc_requests_total{{{TABLE_SVC},method="Call",code="INTERNAL"}}'
ACT_REFUSED = (f'stud_grpc_requests_total{{{TABLE_SVC},method="Call",'
               f'code="FAILED_PRECONDITION"}}')
OTHER_INTERNAL = f'stud_grpc_requests_total{{{TABLE_SVC},method="GetTable",code="INTERNAL"}}'


def calls(method: str, code: str) -> str:
    """The table service's ``stud_grpc_requests_total`` of ``method`` ended with ``code``."""
    return f'stud_grpc_requests_total{{{TABLE_SVC},method="{method}",code="{code}"}}'


def hist(method: str, fast_per_min: int, slow_per_min: int, minutes: int) -> list[dict[str, str]]:
    """A latency histogram of ``method`` with ``fast_per_min`` calls a minute under 250 ms
    (at 10 ms) and ``slow_per_min`` over it (at 1 s)."""
    base = f'stud_grpc_request_seconds_bucket{{{TABLE_SVC},method="{method}",le='
    total = fast_per_min + slow_per_min
    series = []
    for le in ("0.01", "0.1", "0.25", "0.5", "1.0", "+Inf"):
        count = fast_per_min if float(le) < 1 else total
        series.append({"series": f'{base}"{le}"}}', "values": f"0+{count}x{minutes}"})
    series.append({"series": f'stud_grpc_request_seconds_count{{{TABLE_SVC},method="{method}"}}',
                   "values": f"0+{total}x{minutes}"})
    return series


@dataclass
class Case:
    """One ``promtool test rules`` case: ``series`` over ``minutes``, and at ``at`` which
    alerts fire (``fires``: alert -> the labels of each firing one) and which stay quiet."""
    title: str
    series: list[dict[str, str]]
    at: str
    fires: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    quiet: tuple[str, ...] = ()
    values: tuple[tuple[str, float], ...] = ()
    """(PromQL, its one value expected at ``at``, to 0.0001): a recorded series, say."""


def cases() -> list[Case]:
    n = 400  # minutes of synthetic series
    return [
        Case("actions failing with INTERNAL burn the error budget fast",
             [{"series": ACT_OK, "values": f"0+100x{n}"},
              {"series": ACT_INTERNAL, "values": f"0+5x{n}"}], "90m",
             fires={"StudActionErrorBudgetBurnFast": [{}]},
             quiet=("StudActionLatencyBudgetBurnFast",)),
        Case("refusals and errors of other methods are not action errors",
             [{"series": ACT_OK, "values": f"0+100x{n}"},
              {"series": ACT_REFUSED, "values": f"0+50x{n}"},
              {"series": OTHER_INTERNAL, "values": f"0+50x{n}"}], "390m",
             quiet=("StudActionErrorBudgetBurnFast", "StudActionErrorBudgetBurnSlow")),
        Case("a low error rate burns the budget slowly, not fast",
             [{"series": ACT_OK, "values": f"0+1000x{n}"},
              {"series": ACT_INTERNAL, "values": f"0+8x{n}"}], "390m",
             fires={"StudActionErrorBudgetBurnSlow": [{}]},
             quiet=("StudActionErrorBudgetBurnFast",)),
        Case("a brief error spike that is over pages no one",
             [{"series": ACT_OK, "values": f"0+100x{n}"},
              {"series": ACT_INTERNAL, "values": "0+50x10 500+0x390"}], "90m",
             quiet=("StudActionErrorBudgetBurnFast", "StudActionErrorBudgetBurnSlow")),
        Case("a fifth of the actions over 250 ms burns the latency budget fast",
             hist("Bet", 80, 20, n), "90m",
             fires={"StudActionLatencyBudgetBurnFast": [{}]},
             quiet=("StudActionErrorBudgetBurnFast",)),
        Case("under 1% of the actions slow is within the latency objective",
             hist("Bet", 995, 5, n), "390m",
             quiet=("StudActionLatencyBudgetBurnFast", "StudActionLatencyBudgetBurnSlow")),
        Case("7% slow burns the latency budget slowly",
             hist("Bet", 93, 7, n), "390m",
             fires={"StudActionLatencyBudgetBurnSlow": [{}]},
             quiet=("StudActionLatencyBudgetBurnFast",)),
        *play_cases(n),
        Case("a table stopped by reconciliation pages at once, while it stays stopped",
             [{"series": 'stud_table_tables_stopped{instance="t1"}', "values": "0x30 1x60"},
              {"series": 'stud_table_tables_stopped{instance="t2"}', "values": "0x90"}],
             "80m", fires={"StudTableStopped": [{}]}),
        Case("no table stopped on any replica",
             [{"series": 'stud_table_tables_stopped{instance="t1"}', "values": "0x90"},
              {"series": 'stud_table_tables_stopped{instance="t2"}', "values": "0x90"}],
             "60m", quiet=("StudTableStopped",)),
        Case("a stopped table closed by an operator ends the alert",
             [{"series": 'stud_table_tables_stopped{instance="t1"}',
               "values": "0x30 1x10 0x50"}], "60m", quiet=("StudTableStopped",)),
        Case("a ledger off by 5 chips for 5 minutes pages",
             [{"series": 'stud_wallet_ledger_balance{instance="w1"}', "values": "0x10 5x30"}],
             "20m", fires={"StudLedgerNotBalanced": [{}]}),
        Case("a ledger at zero, or off for a moment mid-write, is quiet",
             [{"series": 'stud_wallet_ledger_balance{instance="w1"}',
               "values": "0x10 -3 0x30"}], "20m", quiet=("StudLedgerNotBalanced",)),
        Case("seated players and no hand for 15 minutes pages",
             [{"series": 'stud_table_seated_players{instance="t1"}', "values": "4x60"},
              {"series": "stud_dealer_hands_started_total", "values": "0+2x10 20x50"}],
             "45m", fires={"StudNoHandsDealt": [{}]}),
        Case("hands dealt while players sit is quiet",
             [{"series": 'stud_table_seated_players{instance="t1"}', "values": "4x60"},
              {"series": "stud_dealer_hands_started_total", "values": "0+1x60"}],
             "45m", quiet=("StudNoHandsDealt",)),
        Case("one player alone deals no hand and is no alert",
             [{"series": 'stud_table_seated_players{instance="t1"}', "values": "1x60"},
              {"series": "stud_dealer_hands_started_total", "values": "0x60"}],
             "45m", quiet=("StudNoHandsDealt",)),
        Case("a lease taken over every minute for 50 minutes is churn",
             [{"series": 'stud_table_lease_takeovers_total{instance="t1"}',
               "values": "0+1x60"}], "50m", fires={"StudLeaseChurn": [{}]}),
        Case("a rolling restart moving 300 tables at once is not churn",
             [{"series": 'stud_table_lease_takeovers_total{instance="t1"}',
               "values": "0x5 100 200 300x55"},
              {"series": 'stud_table_lease_takeovers_total{instance="t2"}',
               "values": "0x60"}], "50m", quiet=("StudLeaseChurn",)),
        Case("nor is it churn while the restart's burst is still in the window",
             [{"series": 'stud_table_lease_takeovers_total{instance="t1"}',
               "values": "0x5 100 200 300x55"}], "15m", quiet=("StudLeaseChurn",)),
        Case("a stale append refused by the tournament's fence",
             [{"series": 'stud_table_stale_appends_refused_total{instance="t1"}',
               "values": "0x30"},
              {"series": 'stud_tournament_stale_appends_refused_total{instance="u1"}',
               "values": "0x10 1x20"}], "15m", fires={"StudStaleAppendsRefused": [{}]}),
        Case("no stale append, no alert",
             [{"series": 'stud_table_stale_appends_refused_total{instance="t1"}',
               "values": "0x30"},
              {"series": 'stud_tournament_stale_appends_refused_total{instance="u1"}',
               "values": "0x30"}], "15m", quiet=("StudStaleAppendsRefused",)),
        *archiver_cases(),
        *gateway_cases(),
        Case("a service that stops answering its scrape",
             [{"series": 'up{job="stud-table",instance="t1"}', "values": "1x10 0x20"},
              {"series": 'up{job="stud-wallet",instance="w1"}', "values": "1x30"},
              {"series": 'up{job="node",instance="n1"}', "values": "0x30"}], "20m",
             fires={"StudTargetDown": [{"job": "stud-table", "instance": "t1"}]}),
        Case("every service answering its scrape (another job's target down)",
             [{"series": 'up{job="stud-table",instance="t1"}', "values": "1x30"},
              {"series": 'up{job="node",instance="n1"}', "values": "0x30"}], "20m",
             quiet=("StudTargetDown",)),
    ]


def play_cases(n: int) -> list[Case]:
    """The actions taken on a Play stream, counted as ``Play/<Action>``, are player actions
    like the unary calls; the stream itself (``Play``: open for an hour, ended INTERNAL or
    UNAVAILABLE by gRPC's core when a replica goes away) is none."""
    return [
        Case("half the Play stream's calls failing INTERNAL is an action error ratio of 0.5",
             [{"series": calls("Play/Bet", "OK"), "values": f"0+50x{n}"},
              {"series": calls("Play/Call", "INTERNAL"), "values": f"0+50x{n}"}], "90m",
             fires={"StudActionErrorBudgetBurnFast": [{}]},
             values=(("stud:action_errors:ratio_rate5m", 0.5),
                     ("stud:actions:rate5m * 60", 100))),
        Case("Play actions and unary ones are one SLO",
             [{"series": calls("Bet", "OK"), "values": f"0+150x{n}"},
              {"series": calls("Play/Fold", "OK"), "values": f"0+50x{n}"},
              {"series": calls("Play/PostBringIn", "UNAVAILABLE"), "values": f"0+50x{n}"}],
             "90m", fires={"StudActionErrorBudgetBurnFast": [{}]},
             values=(("stud:action_errors:ratio_rate5m", 0.2),)),
        Case("the Play streams' own ends and lengths are no action's error or latency",
             [{"series": calls("Play/Check", "OK"), "values": f"0+999x{n}"},
              {"series": calls("Play/Check", "INTERNAL"), "values": f"0+1x{n}"},
              {"series": calls("Play", "INTERNAL"), "values": f"0+100x{n}"},
              *hist("Play/Check", 100, 0, n), *hist("Play", 0, 100, n)], "390m",
             quiet=("StudActionErrorBudgetBurnFast", "StudActionErrorBudgetBurnSlow",
                    "StudActionLatencyBudgetBurnFast", "StudActionLatencyBudgetBurnSlow"),
             values=(("stud:action_errors:ratio_rate5m", 0.001),
                     ("stud:action_slow:ratio_rate5m", 0))),
        Case("a fifth of the Play stream's actions over 250 ms burns the latency budget fast",
             hist("Play/Raise", 80, 20, n), "90m",
             fires={"StudActionLatencyBudgetBurnFast": [{}]},
             quiet=("StudActionErrorBudgetBurnFast",),
             values=(("stud:action_slow:ratio_rate5m", 0.2),)),
    ]


def gateway_cases() -> list[Case]:
    total = f'envoy_http_downstream_rq_total{{{GATEWAY},instance="g1"}}'
    fives = (f'envoy_http_downstream_rq_xx{{{GATEWAY},envoy_response_code_class="5",'
             'instance="g1"}')
    fours = (f'envoy_http_downstream_rq_xx{{{GATEWAY},envoy_response_code_class="4",'
             'instance="g1"}')
    metrics = ('envoy_http_downstream_rq_total{envoy_http_conn_manager_prefix="metrics",'
               'instance="g1"}')

    def grpc(status: int, per_min: int) -> dict[str, str]:
        return {"series": f'envoy_cluster_grpc{{envoy_cluster_name="table",'
                          f'envoy_grpc_status="{status}",instance="g1"}}',
                "values": f"0+{per_min}x60"}

    return [
        Case("the gateway answering 10% of its requests 5xx pages",
             [{"series": total, "values": "0+100x60"}, {"series": fives, "values": "0+10x60"}],
             "20m", fires={"StudGatewayErrorRateHigh": [{}]}),
        Case("a service ending 20% of the calls UNAVAILABLE through the gateway pages",
             [{"series": total, "values": "0+100x60"}, {"series": fives, "values": "0x60"},
              grpc(0, 80), grpc(14, 20)], "20m", fires={"StudGatewayErrorRateHigh": [{}]}),
        Case("refusals and 4xx through the gateway are answers, not errors",
             [{"series": total, "values": "0+100x60"}, {"series": fives, "values": "0x60"},
              {"series": fours, "values": "0+30x60"}, grpc(0, 40), grpc(9, 30), grpc(16, 30)],
             "20m", quiet=("StudGatewayErrorRateHigh",)),
        Case("1% of the gateway's requests 5xx, and the metrics listener's own, are quiet",
             [{"series": total, "values": "0+100x60"}, {"series": fives, "values": "0+1x60"},
              {"series": metrics, "values": "0+1x60"}], "20m",
             quiet=("StudGatewayErrorRateHigh",)),
        Case("a 5xx burst younger than five minutes pages no one yet",
             [{"series": total, "values": "0+100x60"},
              {"series": fives, "values": "0x10 0+50x4 200x46"}], "14m",
             quiet=("StudGatewayErrorRateHigh",)),
    ]


def archiver_cases() -> list[Case]:
    def lag(fast_per_min: int, slow_per_min: int) -> list[dict[str, str]]:
        """Hands archived a minute: ``fast`` within 1 s, ``slow`` after 2 minutes."""
        out = []
        for le in ("1.0", "5.0", "60.0", "300.0", "+Inf"):
            count = fast_per_min + (slow_per_min if float(le) >= 300 else 0)
            out.append({"series": f'stud_archiver_lag_seconds_bucket{{le="{le}"}}',
                        "values": f"0+{count}x60"})
        return out

    return [
        Case("hands reaching PostgreSQL after two minutes: the archiver is behind",
             lag(10, 10), "30m", fires={"StudArchiverBehind": [{}]}),
        Case("hands archived within a second: quiet", lag(100, 0), "30m",
             quiet=("StudArchiverBehind",)),
        Case("no round ended for ten minutes: stalled",
             [{"series": 'stud_archiver_last_round_unix{instance="a1"}',
               "values": "0+60x10 600x50"}], "25m", fires={"StudArchiverStalled": [{}]}),
        Case("rounds ending every minute: quiet",
             [{"series": 'stud_archiver_last_round_unix{instance="a1"}',
               "values": "0+60x60"}], "25m", quiet=("StudArchiverStalled",)),
        Case("archiver steps failing for 15 minutes",
             [{"series": 'stud_archiver_failures_total{instance="a1"}',
               "values": "0+1x60"}], "40m", fires={"StudArchiverFailing": [{}]}),
        Case("no archiver failure: quiet",
             [{"series": 'stud_archiver_failures_total{instance="a1"}', "values": "0x60"}],
             "40m", quiet=("StudArchiverFailing",)),
    ]


def rule_tests() -> dict[str, Any]:
    alerts = {a.name: a for a in ALERTS}
    tests = []
    for case in cases():
        expected = []
        for name, firing in case.fires.items():
            expected.append({"eval_time": case.at, "alertname": name, "exp_alerts": [
                {"exp_labels": {"severity": alerts[name].severity, **labels},
                 "exp_annotations": alerts[name].annotations()} for labels in firing]})
        expected += [{"eval_time": case.at, "alertname": name, "exp_alerts": []}
                     for name in case.quiet]
        test: dict[str, Any] = {"name": case.title, "interval": "1m",
                                "input_series": case.series, "alert_rule_test": expected}
        if case.values:
            test["promql_expr_test"] = [
                {"expr": f"round({expr}, 0.0001)", "eval_time": case.at,
                 "exp_samples": [{"labels": "{}", "value": value}]}
                for expr, value in case.values]
        tests.append(test)
    return {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests}


# --- dashboards ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Q:
    """One query of a panel: PromQL and its legend."""
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class P:
    """A panel: ``kind`` timeseries or stat, its queries, unit and width (of 24)."""
    title: str
    queries: tuple[Q, ...]
    unit: str = "short"
    kind: str = "timeseries"
    width: int = 12
    description: str = ""


@dataclass(frozen=True)
class Board:
    uid: str
    title: str
    description: str
    rows: tuple[tuple[str, tuple[P, ...]], ...]
    variables: tuple[tuple[str, str], ...] = ()
    """(name, label_values query) of each query variable, beside the data source."""


RATE = "$__rate_interval"
INST = 'instance=~"$instance"'


def p99(selector: str, by: str = "") -> str:
    group = f"le{', ' + by if by else ''}"
    return (f"histogram_quantile(0.99, sum by ({group}) "
            f"(rate(stud_grpc_request_seconds_bucket{{{selector}}}[{RATE}])))")


def red(selector: str, title: str) -> tuple[P, ...]:
    return (
        P(f"{title}: calls by method", (
            Q(f"sum by (method) (rate(stud_grpc_requests_total{{{selector}}}[{RATE}]))",
              "{{method}}"),), "reqps"),
        P(f"{title}: calls by code", (
            Q(f"sum by (code) (rate(stud_grpc_requests_total{{{selector}}}[{RATE}]))",
              "{{code}}"),), "reqps"),
        P(f"{title}: p99 by method", (Q(p99(selector, "method"), "{{method}}"),), "s"),
    )


def boards() -> list[Board]:
    action = ACTION
    return [
        Board("stud-room", "Stud: room overview",
              "The whole room: tables, players, hands, the action SLO and its error budget.", (
                  ("Room", (
                      P("Tables open", (Q("sum(stud_table_tables_open)"),), kind="stat",
                        width=6),
                      P("Seated players", (Q("sum(stud_table_seated_players)"),), kind="stat",
                        width=6),
                      P("Hands per minute",
                        (Q("sum(rate(stud_table_hands_ended_total[$__rate_interval])) * 60"),),
                        kind="stat", width=6),
                      P("Tables stopped (reconciliation)",
                        (Q("sum(stud_table_tables_stopped)"),), kind="stat", width=6),
                  )),
                  ("Player actions (SLO: 99% within 250 ms, 99.9% without a server error)", (
                      P("Actions per second", (Q("stud:actions:rate5m", "actions"),), "reqps"),
                      P("Action p99", (Q("stud:action_latency_seconds:p99_rate5m", "p99"),),
                        "s"),
                      P("Error ratio", (Q("stud:action_errors:ratio_rate5m", "5m"),
                                        Q("stud:action_errors:ratio_rate1h", "1h")),
                        "percentunit"),
                      P("Slow ratio (> 250 ms)", (Q("stud:action_slow:ratio_rate5m", "5m"),
                                                  Q("stud:action_slow:ratio_rate1h", "1h")),
                        "percentunit"),
                  )),
                  ("Table events", (
                      P("Turn time-outs and voided hands", (
                          Q(f"sum(rate(stud_table_turn_timeouts_total[{RATE}])) * 60",
                            "time-outs/min"),
                          Q(f"sum(rate(stud_table_hands_voided_total[{RATE}])) * 60",
                            "voided/min")), "short"),
                      P("Table status changes", (Q(
                          f"sum by (status) (rate(stud_table_status_changes_total[{RATE}])) * 60",
                          "{{status}}/min"),), "short"),
                  )),
                  ("Saturation", (
                      P("Event loop lag p99 by service", (Q(
                          "histogram_quantile(0.99, sum by (le, job) "
                          f"(rate(stud_event_loop_lag_seconds_bucket[{RATE}])))", "{{job}}"),),
                        "s"),
                      P("Lease takeovers and stale appends refused (15m)", (
                          Q("sum(increase(stud_table_lease_takeovers_total[15m]))",
                            "table takeovers"),
                          Q("sum(increase(stud_table_stale_appends_refused_total[15m]))",
                            "table stale appends"),
                          Q("sum(increase(stud_tournament_stale_appends_refused_total[15m]))",
                            "tournament stale appends")), "short"),
                  )),
              )),
        Board("stud-table-replica", "Stud: one table service replica",
              "One table service replica (pick the instance): its calls, latency, leases and "
              "event loop.", (
                  ("Calls", red(f"{TABLE_SVC},{INST}", "Table")),
                  ("Actions", (
                      P("Action p99", (Q(p99(f"{action},{INST}"), "p99"),), "s"),
                      P("Actions by code", (Q(
                          f"sum by (code) (rate(stud_grpc_requests_total{{{action},{INST}}}"
                          f"[{RATE}]))", "{{code}}"),), "reqps"),
                  )),
                  ("Ownership", (
                      P("Tables open here", (Q(f"sum(stud_table_tables_open{{{INST}}})"),),
                        kind="stat", width=6),
                      P("Seated players here", (Q(f"sum(stud_table_seated_players{{{INST}}})"),),
                        kind="stat", width=6),
                      P("Lease takeovers and stale appends refused", (
                          Q(f"sum(increase(stud_table_lease_takeovers_total{{{INST}}}[15m]))",
                            "takeovers (15m)"),
                          Q(f"sum(increase(stud_table_stale_appends_refused_total{{{INST}}}"
                            "[15m]))", "stale appends (15m)")), width=12),
                      P("Event loop lag p99", (Q(
                          "histogram_quantile(0.99, sum by (le) "
                          f"(rate(stud_event_loop_lag_seconds_bucket{{{INST}}}[{RATE}])))",
                          "p99"),), "s"),
                      P("Redis call p99 by command", (Q(
                          "histogram_quantile(0.99, sum by (le, command) "
                          f"(rate(stud_redis_call_seconds_bucket{{{INST}}}[{RATE}])))",
                          "{{command}}"),), "s"),
                      P("Stream length of the five longest tables", (Q(
                          f"max by (rank) (stud_table_stream_length{{{INST}}})",
                          "#{{rank}}"),), "short"),
                  )),
              ), variables=(("instance", 'label_values(stud_grpc_requests_total{'
                                         f'{TABLE_SVC}}}, instance)'),)),
        Board("stud-money", "Stud: money",
              "The wallet: the ledger (must be 0), settlements and tournament money.", (
                  ("Ledger", (
                      P("Ledger balance (must be 0)", (Q("sum(stud_wallet_ledger_balance)"),),
                        kind="stat", width=8),
                      P("Settlements refused (1h)", (Q(
                          'sum(increase(stud_wallet_settlements_total{outcome="refused"}[1h]))'
                      ),), kind="stat", width=8),
                      P("Settlement p99", (Q(
                          "histogram_quantile(0.99, sum by (le) "
                          f"(rate(stud_wallet_settlement_seconds_bucket[{RATE}])))"),),
                        "s", kind="stat", width=8),
                  )),
                  ("Flows", (
                      P("Settlements by outcome", (Q(
                          f"sum by (outcome) (rate(stud_wallet_settlements_total[{RATE}]))",
                          "{{outcome}}"),), "ops"),
                      P("Tournament money by kind and outcome", (Q(
                          "sum by (kind, outcome) "
                          f"(rate(stud_wallet_tournament_transactions_total[{RATE}]))",
                          "{{kind}} {{outcome}}"),), "ops"),
                      *red('service="stud.v1.WalletService"', "Wallet"),
                  )),
              )),
        Board("stud-tournaments", "Stud: tournaments",
              "Tournaments running, registrations, hand-for-hand and the process manager's "
              "fence.", (
                  ("Tournaments", (
                      P("Running", (Q("sum(stud_tournament_running)"),), kind="stat", width=8),
                      P("Hand for hand", (Q("sum(stud_tournament_hand_for_hand)"),),
                        kind="stat", width=8),
                      P("Registrations (1h)",
                        (Q("sum(increase(stud_tournament_registrations_total[1h]))"),),
                        kind="stat", width=8),
                      P("Stale appends refused", (Q(
                          f"sum(rate(stud_tournament_stale_appends_refused_total[{RATE}]))"),),
                        "ops"),
                  )),
                  ("Calls", red('service="stud.v1.TournamentService"', "Tournament")),
              )),
        Board("stud-gateway", "Stud: gateway",
              "The gateway (Envoy, gRPC-Web and native gRPC from outside the room): requests "
              "and their codes, the services' gRPC statuses, upstream latency of the unary "
              "calls, open streams and connections.", (
                  ("Requests", (
                      P("Requests per second", (
                          Q(f"sum(rate(envoy_http_downstream_rq_total{{{GATEWAY}}}[{RATE}]))",
                            "requests"),), "reqps"),
                      P("Responses by HTTP code class", (Q(
                          "sum by (envoy_response_code_class) "
                          f"(rate(envoy_http_downstream_rq_xx{{{GATEWAY}}}[{RATE}]))",
                          "{{envoy_response_code_class}}xx"),), "reqps"),
                      P("gRPC calls by status", (Q(
                          "sum by (envoy_grpc_status) "
                          f'(rate(envoy_cluster_grpc{{envoy_grpc_status!=""}}[{RATE}]))',
                          "{{envoy_grpc_status}}"),), "reqps",
                        description="0 OK, 2 UNKNOWN, 4 DEADLINE_EXCEEDED, 5 NOT_FOUND, "
                                    "9 FAILED_PRECONDITION, 13 INTERNAL, 14 UNAVAILABLE, "
                                    "16 UNAUTHENTICATED (the services' codes, as "
                                    "the clients got them)"),
                      P("Error ratio (5xx and server gRPC errors)", (
                          Q("stud:gateway_errors:ratio_rate5m", "5m"),), "percentunit"),
                  )),
                  ("Upstreams", (
                      P("Unary call p99 by service (upstream time)", (Q(
                          "histogram_quantile(0.99, sum by (le, envoy_route) (rate("
                          'envoy_vhost_route_upstream_rq_time_bucket{envoy_virtual_host="stud",'
                          f'envoy_route=~".+_unary"}}[{RATE}])))', "{{envoy_route}}"),), "ms"),
                      P("Server gRPC errors by service", (Q(
                          "sum by (envoy_cluster_name) "
                          f"(rate(envoy_cluster_grpc{{{GRPC_SERVER_ERRORS}}}[{RATE}]))",
                          "{{envoy_cluster_name}}"),), "reqps"),
                      P("Open streams and calls by service", (Q(
                          "sum by (envoy_cluster_name) (envoy_cluster_upstream_rq_active)",
                          "{{envoy_cluster_name}}"),), "short"),
                      P("Open requests and connections from clients", (
                          Q(f"sum(envoy_http_downstream_rq_active{{{GATEWAY}}})",
                            "requests and streams"),
                          Q(f"sum(envoy_http_downstream_cx_active{{{GATEWAY}}})",
                            "connections")), "short"),
                  )),
              )),
        Board("stud-redis", "Stud: Redis",
              "Redis as the services see it: call latency and errors, stream lengths, and the "
              "archiver that moves settled hands to PostgreSQL.", (
                  ("Calls", (
                      P("Redis call p99 by command", (Q(
                          "histogram_quantile(0.99, sum by (le, command) "
                          f"(rate(stud_redis_call_seconds_bucket[{RATE}])))",
                          "{{command}}"),), "s"),
                      P("Redis call p99 by instance", (Q(
                          "histogram_quantile(0.99, sum by (le, instance) "
                          f"(rate(stud_redis_call_seconds_bucket[{RATE}])))",
                          "{{instance}}"),), "s"),
                      P("Redis calls by command", (Q(
                          f"sum by (command) (rate(stud_redis_call_seconds_count[{RATE}]))",
                          "{{command}}"),), "ops"),
                      P("Redis errors by kind", (Q(
                          f"sum by (error) (rate(stud_redis_errors_total[{RATE}]))",
                          "{{error}}"),), "ops"),
                      P("Longest table streams", (Q("topk(5, stud_table_stream_length)",
                                                    "{{instance}} #{{rank}}"),), "short",
                        width=24),
                  )),
                  ("Archiver", (
                      P("Archive lag p99", (Q(
                          "histogram_quantile(0.99, sum by (le) "
                          f"(rate(stud_archiver_lag_seconds_bucket[{RATE}])))", "p99"),), "s"),
                      P("Since the last round", (Q("time() - max(stud_archiver_last_round_unix)"),),
                        "s", kind="stat", width=6),
                      P("Hands archived and events trimmed", (
                          Q(f"sum(rate(stud_archiver_hands_total[{RATE}]))", "hands"),
                          Q(f"sum(rate(stud_archiver_trimmed_events_total[{RATE}]))",
                            "events trimmed"),
                          Q(f"sum(rate(stud_archiver_failures_total[{RATE}]))", "failures")),
                        "ops", width=18),
                  )),
              )),
    ]


def build_dashboard(board: Board) -> Any:
    """The SDK's model of ``board``."""
    from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
    from grafana_foundation_sdk.models.dashboard import DataSourceRef

    ds = DataSourceRef(type_val="prometheus", uid="${datasource}")
    builder = (dashboard.Dashboard(board.title).uid(board.uid).description(board.description)
               .tags(["stud-hilo"]).refresh("30s").time("now-3h", "now").timezone("utc")
               .with_variable(dashboard.DatasourceVariable("datasource")
                              .label("Data source").type("prometheus")))
    for name, query in board.variables:
        builder = builder.with_variable(
            dashboard.QueryVariable(name).datasource(ds).query(query).include_all(True)
            .multi(True))
    panel_id = 0
    for row_title, panels in board.rows:
        panel_id += 1
        builder = builder.with_row(dashboard.Row(row_title).id(panel_id))
        for panel in panels:
            panel_id += 1
            kind = stat.Panel() if panel.kind == "stat" else timeseries.Panel()
            kind = (kind.id(panel_id).title(panel.title).datasource(ds).unit(panel.unit)
                    .span(panel.width).height(4 if panel.kind == "stat" else 8))
            if panel.description:
                kind = kind.description(panel.description)
            for ref, q in zip("ABCDEFGH", panel.queries, strict=False):
                target = prometheus.Dataquery().expr(q.expr).ref_id(ref).datasource(ds)
                if q.legend:
                    target = target.legend_format(q.legend)
                if "histogram_quantile(" in q.expr and "_seconds_bucket" in q.expr:
                    # the slow buckets' exemplars (trace ids) as dots on the latency graph
                    target = target.exemplar(True)
                kind = kind.with_target(target)
            builder = builder.with_panel(kind)
    return builder.build()


def to_json(model: Any) -> dict[str, Any]:
    from grafana_foundation_sdk.cog.encoder import JSONEncoder

    data: dict[str, Any] = json.loads(json.dumps(model, cls=JSONEncoder))
    return data


def panel_queries(dashboard_json: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    """(panel title, expr) of every query of every panel of a dashboard's JSON."""
    for panel in dashboard_json.get("panels", []):
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets", []) or []:
                if "expr" in target:
                    yield inner.get("title", ""), target["expr"]


def variable_queries(dashboard_json: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    """(variable name, the series selector inside label_values(...)) of query variables."""
    for var in dashboard_json.get("templating", {}).get("list", []):
        query = var.get("query")
        if var.get("type") == "query" and isinstance(query, str) \
                and query.startswith("label_values("):
            selector = query[len("label_values("):].rsplit(",", 1)[0]
            yield var["name"], selector


PROMQL_WORDS = frozenset({
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "offset", "bool", "inf", "nan"})


def metric_names(expr: str) -> set[str]:
    """The metric (and recorded series) names a PromQL expression reads: identifiers outside
    strings, label matchers, ranges and grouping clauses that are neither functions nor
    keywords.

    >>> sorted(metric_names('sum by (le) (rate(a_bucket{x="y{z}"}[5m])) / on() b + 1e3'))
    ['a_bucket', 'b']
    """
    import re

    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"(?<![\w.])([A-Za-z_:][\w:]*)\s*(\()?", text):
        word, call = match.group(1), match.group(2)
        if call or word.lower() in PROMQL_WORDS:
            continue
        names.add(word)
    return names


def recorded_names() -> set[str]:
    return {r["record"] for g in rule_groups() for r in g["rules"] if "record" in r}


def used_metric_names(prefix: str = "stud_") -> dict[str, set[str]]:
    """Every exported metric name starting with ``prefix`` the rules and dashboards read ->
    where (recorded series, ``up`` and the like are left out). ``stud_``: the services';
    ``envoy_``: the gateway's (``tests/integration/gateway/test_gateway_metrics.py``)."""
    recorded = recorded_names()
    used: dict[str, set[str]] = {}
    exprs = [(f"rule {r.get('record') or r.get('alert')}", r["expr"])
             for g in rule_groups() for r in g["rules"]]
    for board in boards():
        data = to_json(build_dashboard(board))
        exprs += [(f"{board.uid}: {title}", e) for title, e in panel_queries(data)]
        exprs += [(f"{board.uid}: ${name}", e) for name, e in variable_queries(data)]
    for where, expr in exprs:
        for name in metric_names(expr) - recorded - {"up"}:
            if name.startswith(prefix):
                used.setdefault(name, set()).add(where)
    return used


# --- output --------------------------------------------------------------------------------

HEADER = ("# Generated by `python -m tools.observability` (tools/observability.py); edit that "
          "and run it again.\n")


class _Dumper(yaml.SafeDumper):  # type: ignore[misc]
    """Multi-line strings (the longer PromQL) as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(data: Any) -> str:
    return HEADER + str(yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=100,
                                  allow_unicode=True))


def prometheus_rule() -> dict[str, Any]:
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "stud-hilo", "labels": {"app.kubernetes.io/part-of":
                                                         "stud-hilo"}},
            "spec": {"groups": rule_groups()}}


def kustomization() -> dict[str, Any]:
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "namespace": "stud-hilo", "resources": ["prometheusrule.yaml"]}


def outputs() -> dict[Path, str]:
    """Every generated file and its text."""
    files = {
        OUT / "rules.yml": dump_yaml({"groups": rule_groups()}),
        OUT / "rules.test.yml": dump_yaml(rule_tests()),
        K8S / "prometheusrule.yaml": dump_yaml(prometheus_rule()),
        K8S / "kustomization.yaml": (
            HEADER + "# The alerting and recording rules for a cluster that runs the "
            "prometheus-operator (its\n# PrometheusRule CRD): kubectl apply -k "
            "deploy/k8s/observability\n"
            + yaml.safe_dump(kustomization(), sort_keys=False)),
    }
    for board in boards():
        files[OUT / "dashboards" / f"{board.uid}.json"] = (
            json.dumps(to_json(build_dashboard(board)), indent=2, sort_keys=True) + "\n")
    return files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a committed file differs")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        old = path.read_text() if path.exists() else ""
        if old == text:
            continue
        if args.check:
            stale.append(path)
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(keepends=True), text.splitlines(keepends=True),
                str(path.relative_to(ROOT)), "generated", n=1))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"{len(stale)} generated file(s) out of date: run python -m tools.observability",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
