"""The Lua scripts the stores run, ported to Python line for line (``studkit/append.lua``,
``wallet/apply.lua``, the dealer's ``create_hand.lua``, ``record_deal.lua`` and ``seeds.lua``),
each run on the simulated Redis's keys between two awaits, so atomically.
``tests/sim/test_store_contract.py`` holds the append's port to the real script."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from redis.exceptions import ResponseError

from studkit import keys

if TYPE_CHECKING:
    from sim.redis import Data, SimRedis


MAX_BALANCE = 9007199254740991
"""``apply.lua``'s MAX: no balance beyond 2^53 - 1 either way."""
SETTLED_KEPT = 100
"""``apply.lua``'s SETTLED_KEPT: a table's settlement records kept (its latest hands)."""


def _b(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode()


def script_name(source: str) -> str:
    for name, mark in (("apply", "Apply one wallet transaction"), ("seeds", "'too_late'"),
                       ("protect_append", "'XLEN'"),
                       ("create_hand", "'commitment'"), ("record_deal", "'missing'")):
        if mark in source:
            return name
    raise ValueError("the simulated store has no port of this script")


_TOURNAMENT = keys.TOURNAMENT_PREFIX.encode()

GENESIS = bytes(32)
"""``append.lua``'s GENESIS: the link of a stream's first event (``studkit.chain``)."""


def append_script(data: Data, keys_: list[bytes], argv: list[bytes]) -> list[Any]:
    """``studkit/append.lua``, in Python."""
    stream, commands, version_key, owner, trimmed_key, chain = keys_
    expected, command_id, table, fingerprint, epoch, link, head = argv[:7]
    payloads = argv[7:]
    hashes = data.hashes
    recorded = hashes.get(commands, {}).get(command_id)
    if recorded is not None:
        seen = hashes[commands].get(command_id + b"#fp")
        if seen is not None and fingerprint != b"" and seen != fingerprint:
            return [b"reused", recorded]
        return [b"duplicate", recorded]
    fence = hashes.get(owner, {}).get(b"epoch")
    if fence is not None and fence != epoch and not data.unfenced:
        return [b"not_owner", int(fence)]
    current = int(data.strings.get(version_key, b"0"))
    if current != int(expected):
        return [b"conflict", current]
    length = len(data.streams.get(stream, []))
    trimmed = int(data.strings.get(trimmed_key, b"0"))
    if length + trimmed != current:
        raise ResponseError(f"STORECORRUPT stream length {length} + trimmed {trimmed} "
                            f"!= version {current}")
    if payloads:
        known = hashes.get(chain, {}).get(b"head")
        if known is not None:
            if known != link:
                return [b"broken_link", known]
        elif current == 0 and link != GENESIS:
            return [b"broken_link", GENESIS]
        else:
            hashes.setdefault(chain, {})[b"since"] = b"%d" % (current + 1)
    ids = [data.xadd(stream, b"0-%d" % (current + i), {b"envelope": payload})
           for i, payload in enumerate(payloads, start=1)]
    version = current + len(ids)
    outcome = b"%d" % version
    if ids:
        outcome += b" " + b" ".join(ids)
        data.strings[version_key] = b"%d" % version
        hashes.setdefault(chain, {})[b"head"] = head
    hashes.setdefault(commands, {})[command_id] = outcome
    if fingerprint != b"":
        hashes[commands][command_id + b"#fp"] = fingerprint
    data.appends.append((stream.decode(), epoch.decode(), len(ids)))
    if ids and stream.startswith(_TOURNAMENT):
        data.tournament_log.setdefault(stream, []).extend(payloads)
    if data.audit is not None:
        data.audit.appended(table.decode(), stream, epoch, command_id, payloads, length,
                            current)
    return [b"appended", outcome]


def _apply(r: SimRedis, keys_: list[bytes], argv: list[bytes]) -> list[Any]:
    """``wallet/apply.lua``, in Python (decoded replies: the wallet decodes)."""
    h = r.data.hashes
    ledger, balances, idem, accounts, seats, last_hand = keys_[:6]
    scope, fingerprint = argv[0], argv[1].decode()
    excluded, timed_out, reasons, sessions = _excluded(r, keys_,
                                                       argv[5] if len(argv) > 5 else b"")
    seen = h.get(idem, {}).get(scope)
    if seen is not None:
        record = json.loads(seen)
        if record["fingerprint"] != fingerprint:
            return ["error", "idempotency_key_reused", scope.decode()]
        return ["ok", record["outcome"], 1, excluded, timed_out, _held(r, keys_, argv), reasons]
    plan = json.loads(argv[2])
    match = re.fullmatch(r"h([0-9]+)", plan["hand_id"]) if plan["kind"] == "settlement" else None
    settled_n = int(match.group(1)) if match else None
    expired = b"expired:" + _b(plan["table_id"])
    if settled_n is not None and settled_n <= int(h.get(idem, {}).get(expired, b"-1")):
        return ["error", "settlement_expired", f"{plan['table_id']} {plan['hand_id']}"]
    if "pool" in plan:
        raise ValueError("apply.lua's tournament pools are not simulated")
    for player in plan["players"]:
        if _b(player) not in h.get(accounts, {}):
            return ["error", "unknown_account", f"player:{player}"]
    protect = json.loads(argv[4]) if len(argv) > 4 and argv[4] != b"" else None
    usage_entry = session_after = None
    if protect is not None:
        refusal, session_after = _session(r, keys_, protect)
        if refusal is None:
            refusal = _protect(r, keys_, protect)
        if refusal is not None:
            return refusal
        usage = protect["usage"]
        usage_entry = _b(f"{protect['now']}:{usage[0]}:{usage[1]}:{usage[2]}")
    held = h.get(seats, {})
    for rule in plan["seats"]:
        holder = held.get(_b(rule["seat"]))
        holder_s = None if holder is None else holder.decode()
        if rule["action"] == "claim":
            if holder_s is not None and holder_s != rule["player"]:
                return ["error", "seat_taken",
                        f"seat {rule['seat']} is held for another player"]
        elif rule["action"] == "claim_free":
            if holder_s is not None:
                whom = "this player already" if holder_s == rule["player"] else "another player"
                return ["error", "seat_taken", f"seat {rule['seat']} is held for {whom}"]
        elif holder_s != rule["player"]:
            return ["error", "seat_not_held",
                    f"seat {rule['seat']} is not held for {rule['player']}"]

    def balance(account: str) -> int:
        return int(h.get(balances, {}).get(_b(account), b"0"))

    for guard in plan["guards"]:
        have, want = balance(guard["account"]), int(guard["value"])
        if guard["op"] == "at_least" and have < want:
            return ["error", "insufficient_funds", guard["account"]]
        if guard["op"] == "exactly" and have != want:
            return ["error", "balance_changed", guard["account"]]
    after: dict[str, int] = {}
    posting_after = []
    for posting in plan["postings"]:
        account = posting["account"]
        value = after.get(account, balance(account)) + int(posting["amount"])
        if value < 0 and account != "external":
            return ["error", "insufficient_funds", account]
        if value > MAX_BALANCE or value < -MAX_BALANCE:
            return ["error", "balance_limit", account]
        after[account] = value
        posting_after.append(value)
    tx_fields = {b"tx": argv[3], b"scope": scope}
    tx_id = r.data.xadd(ledger, None, tx_fields)
    data = r.data
    if data.mint_every and plan["postings"]:  # (a settlement that moves nothing has none)
        data._mints += 1
        if data._mints % data.mint_every == 0:
            first = plan["postings"][0]["account"]
            after[first] += 1
    if data.audit is not None:
        data.audit.applied(scope.decode(), {a: balance(a) for a in after}, after)
    for account, value in after.items():
        h.setdefault(balances, {})[_b(account)] = b"%d" % value
    lines = []
    for i, posting in enumerate(plan["postings"]):
        line = {  # KEYS[7] is the (unsimulated) pool's
            b"tx_id": tx_id, b"kind": _b(plan["kind"]), b"amount": _b(posting["amount"]),
            b"balance_after": b"%d" % posting_after[i], b"table_id": _b(plan["table_id"]),
            b"hand_id": _b(plan["hand_id"]), b"tournament_id": b""}
        line_id = r.data.xadd(keys_[10 + i], None, line)
        r.data.statement_log.setdefault(keys_[10 + i], []).append((line_id, line))
        lines.append((line_id, posting_after[i]))
    r.data.ledger_log.append((tx_id, tx_fields, tuple(lines)))
    for rule in plan["seats"]:
        if rule["action"] in ("claim", "claim_free"):
            h.setdefault(seats, {})[_b(rule["seat"])] = _b(rule["player"])
        elif rule["action"] == "release":
            h.get(seats, {}).pop(_b(rule["seat"]), None)
    if plan["hand_id"] != "":
        h.setdefault(last_hand, {})[_b(plan["table_id"])] = _b(plan["hand_id"])
    if usage_entry is not None and protect is not None:
        kept = r.data.lists.setdefault(keys_[8], [])
        kept.insert(0, usage_entry)
        r.data.protection_log.append(("move", protect["player"], usage_entry.decode(),
                                      tuple(protect["checks"]), bool(protect["blocked"])))
        old = int(protect["now"]) - int(protect["kept_ms"])
        while kept and int(kept[-1].split(b":")[0]) <= old:
            kept.pop()
    if session_after is not None and protect is not None:
        h.setdefault(keys_[9], {})[_b(protect["player"])] = session_after
    for player, session in sessions:
        h.setdefault(keys_[9], {})[_b(player)] = session
    report = {a: str(after.get(a, balance(a))) for a in plan["report"]}
    outcome = json.dumps({"tx_id": tx_id.decode(), "balances": report or None,
                          "amount": plan["amount"]})
    h.setdefault(idem, {})[scope] = _b(json.dumps({"fingerprint": fingerprint,
                                                   "outcome": outcome}))
    if settled_n is not None and settled_n > SETTLED_KEPT:
        old = settled_n - SETTLED_KEPT
        through = int(h[idem].get(expired, b"0"))
        if old > through:
            for n in range(max(through + 1, old - 63), old + 1):
                h[idem].pop(_b(f"settle:{plan['table_id']}:h{n}"), None)
            h[idem][expired] = b"%d" % old
    return ["ok", outcome, 0, excluded, timed_out, _held(r, keys_, argv), reasons]


def _held(r: SimRedis, keys_: list[bytes], argv: list[bytes]) -> list[str]:
    """``apply.lua``'s held(): seat, player, escrow of each seat held at ARGV[6]'s table."""
    if len(argv) <= 5 or argv[5] == b"":
        return []
    table = json.loads(argv[5]).get("table")
    if not table:
        return []
    out: list[str] = []
    balances = r.data.hashes.get(keys_[1], {})
    for seat, player in r.data.hashes.get(keys_[4], {}).items():
        escrow = balances.get(_b(f"seat:{table}:{seat.decode()}"), b"0")
        out += [seat.decode(), player.decode(), escrow.decode()]
    return out


def _in_force(exclusion: dict[str, Any], now: int) -> bool:
    """``apply.lua``'s in_force: an exclusion not lifted and not over at ``now``."""
    lift, until = int(exclusion["lift_ms"]), int(exclusion["until_ms"])
    return not (lift > 0 and now >= lift) and (until == 0 or now < until)


def _excluded(r: SimRedis, keys_: list[bytes], ask: bytes
              ) -> tuple[list[str], list[str], list[str], list[tuple[str, bytes]]]:
    """``apply.lua``'s ARGV[6]: which of the players asked about are excluded at its now
    (and why), which of the others have a session past the session limit in force, and each
    one's session seen at its now (written once the settlement applies)."""
    if ask == b"":
        return [], [], [], []
    query = json.loads(ask)
    now, held = int(query["now"]), r.data.hashes.get(keys_[7], {})
    out: list[str] = []
    timed_out: list[str] = []
    reasons: list[str] = []
    sessions: list[tuple[str, bytes]] = []
    for player in query["players"]:
        raw = held.get(_b(player))
        state = json.loads(raw) if raw is not None else {}
        started, last, _ = _seen(r, keys_, player, now, int(query["session_gap_ms"]))
        sessions.append((player, b"%d:%d" % (started, last)))
        minutes = _session_minutes(state, now)
        exclusion = state.get("exclusion")
        if exclusion and _in_force(exclusion, now):
            out.append(player)
            reasons.append(exclusion["reason"])
        elif minutes > 0 and now >= started + minutes * 60_000:
            timed_out.append(player)
    return out, timed_out, reasons, sessions


def _session_minutes(state: dict[str, Any], now: int) -> int:
    """``apply.lua``'s session_minutes: the session limit in force at ``now`` (0: none)."""
    limit = state.get("session_limit")
    if not limit:
        return 0
    if limit["pending"] != "" and now >= int(limit["effective_ms"]):
        return int(limit["pending"])
    return int(limit["amount"])


def _seen(r: SimRedis, keys_: list[bytes], player: str, now: int, gap: int
          ) -> tuple[int, int, bool]:
    """``apply.lua``'s seen: the player's session after being seen at ``now``, and whether
    it goes on (False: a new one starts)."""
    text = r.data.hashes.get(keys_[9], {}).get(_b(player))
    if text is not None:
        started, last = (int(p) for p in text.split(b":"))
        if now - last < gap:
            return started, max(last, now), True
    return now, now, False


_WINDOWS: Final = (("day", 86_400_000), ("week", 604_800_000), ("month", 2_592_000_000))


def _session(r: SimRedis, keys_: list[bytes], protect: dict[str, Any]
             ) -> tuple[list[Any] | None, bytes | None]:
    """``apply.lua``'s buy-in session check: a refusal once the running session has lasted
    the limit in force, else None and the session after the buy-in (None: not a buy-in)."""
    if "session_gap_ms" not in protect:
        return None, None
    now = int(protect["now"])
    started, last, goes_on = _seen(r, keys_, protect["player"], now,
                                   int(protect["session_gap_ms"]))
    raw = r.data.hashes.get(keys_[7], {}).get(_b(protect["player"]))
    minutes = _session_minutes(json.loads(raw) if raw is not None else {}, now)
    ends = started + minutes * 60_000
    if goes_on and minutes > 0 and now >= ends:
        return ["error", "session_limit", f"{started}:{ends}"], None
    return None, b"%d:%d" % (started, last)


def _protect(r: SimRedis, keys_: list[bytes], protect: dict[str, Any]) -> list[Any] | None:
    """``apply.lua``'s player protection: an active exclusion, then the limit with the least
    left among those the move would pass; None when it may go."""
    now = int(protect["now"])
    raw = r.data.hashes.get(keys_[7], {}).get(_b(protect["player"]))
    if raw is None:
        return None
    state = json.loads(raw)
    exclusion = state.get("exclusion")
    if protect["blocked"] and exclusion and _in_force(exclusion, now):
        return ["error", exclusion["reason"], exclusion["until_ms"]]
    worst: tuple[str, str, int, int, int] | None = None
    usage = [[int(p) for p in text.split(b":")] for text in r.data.lists.get(keys_[8], [])]
    for kind in protect["checks"]:
        field_ = {"deposit": 1, "wager": 2, "loss": 3}[kind]
        for window, span in _WINDOWS:
            limit = state["limits"].get(f"{kind}:{window}")
            if limit is None:
                continue
            amount: int | None = int(limit["amount"])
            if limit["pending"] != "" and now >= int(limit["effective_ms"]):
                amount = int(limit["pending"]) or None
            if amount is None:
                continue
            inside = [u for u in usage if now - span < u[0]]
            total = max(0, sum(u[field_] for u in inside))
            counted = [u[0] for u in inside if u[field_] > 0]
            remaining = max(0, amount - total)
            if total + int(protect["usage"][field_ - 1]) > amount and (
                    worst is None or remaining < worst[2]):
                worst = (kind, window, remaining, amount,
                         min(counted) + span if counted else now)
    if worst is not None:
        return ["error", f"{worst[0]}_limit",
                f"{worst[1]}:{worst[3]}:{worst[2]}:{worst[4]}"]
    return None


def _protect_append(r: SimRedis, keys_: list[bytes], argv: list[bytes]) -> Any:
    """``wallet/protection_store.py``'s append script: the player's events, if the stream
    holds the expected number, with the projection."""
    stream, projection, accounts = keys_
    player = argv[0]
    if player not in r.data.hashes.get(accounts, {}):
        return -1
    if len(r.data.streams.get(stream, [])) != int(argv[1]):
        return -2
    for event in argv[3:]:
        r.data.xadd(stream, None, {b"event": event})
        r.data.protection_log.append(("event", player.decode(), event.decode(), (), False))
    r.data.hashes.setdefault(projection, {})[player] = argv[2]
    return len(argv) - 3


def _create_hand(r: SimRedis, keys_: list[bytes], argv: list[bytes]) -> list[Any]:
    """``dealer/create_hand.lua``."""
    h = r.data.hashes.setdefault(keys_[0], {})
    if b"commitment" in h:
        return [0, h[b"commitment"], h.get(b"card_commitment", b"")]
    if len(keys_) > 1:
        seeds = r.data.hashes.setdefault(keys_[1], {})
        held = {p: c for p, c in seeds.items() if p != b"~closed"}
        if held != {p.encode(): c.encode() for p, c in json.loads(argv[8])}:
            r.data.hashes.pop(keys_[0])  # nothing written, as the script writes nothing
            return [-1, b"", b""]
        seeds[b"~closed"] = b"1"
    h.update({b"order": argv[0], b"reshuffle_key": argv[1], b"salt": argv[2],
              b"commitment": argv[3], b"created_ms": argv[4], b"deals": b"0"})
    if len(argv) > 5 and argv[5] != b"":
        h.update({b"card_commitment": argv[5], b"card_salts": argv[6],
                  b"dealer_seed": argv[7], b"seed_commitments": argv[8]})
    return [1, argv[3], argv[5] if len(argv) > 5 else b""]


def _record_deal(r: SimRedis, keys_: list[bytes], argv: list[bytes]) -> list[Any]:
    """``dealer/record_deal.lua``."""
    h = r.data.hashes.get(keys_[0])
    if not h:
        return [b"missing"]
    if argv[0] in h:
        return [b"exists", h[argv[0]]]
    deals = int(h.get(b"deals", b"0"))
    if deals != int(argv[1]):
        return [b"conflict", deals]
    if len(argv) > 3 and argv[3] == b"freeze":
        opened = {name for name in h if name.startswith(b"seed:")}
        if opened != {b"seed:" + p for p in argv[4:]} or len(argv) - 4 != len(opened):
            return [b"conflict", deals]
        h[b"seeds_frozen"] = b"1"
    h[argv[0]] = argv[2]
    h[b"deals"] = b"%d" % (deals + 1)
    return [b"recorded"]


def _seeds(r: SimRedis, keys_: list[bytes], argv: list[bytes]) -> Any:
    """``dealer/seeds.lua`` (no player commits seeds in the simulation; close and freeze)."""
    hashes = r.data.hashes
    op = argv[0]
    if op == b"close":
        seeds = hashes.setdefault(keys_[0], {})
        seeds[b"~closed"] = b"1"
        return [x for k, v in seeds.items() for x in (k, v)]
    if op == b"freeze":
        hand = hashes.setdefault(keys_[1], {})
        hand[b"seeds_frozen"] = b"1"
        return [x for k in sorted(hand) for x in (k, hand[k])]
    raise ValueError(f"seeds.lua {op!r} is not simulated")


def trim_script(data: Data, keys_: list[bytes], argv: list[bytes]) -> list[Any]:
    """``studkit/trim.lua``, in Python: the archiver's trim of a stream's head."""
    stream, version_key, trimmed_key, snapshot = keys_[:4]
    expected, upto = int(argv[0]), int(argv[1])
    trimmed = int(data.strings.get(trimmed_key, b"0"))
    if trimmed != expected:
        return [b"conflict", trimmed]
    version = int(data.strings.get(version_key, b"0"))
    if upto > version:
        return [b"beyond", version]
    at = int(data.hashes.get(snapshot, {}).get(b"version", b"-1"))
    if at < upto:
        return [b"no_snapshot", at]
    entries = data.streams.get(stream, [])
    if len(entries) + trimmed != version:
        raise ResponseError(f"STORECORRUPT stream length {len(entries)} + trimmed {trimmed} "
                            f"!= version {version}")
    if upto <= trimmed:
        return [b"trimmed", trimmed]
    if not entries or entries[0][0] != b"0-%d" % (trimmed + 1):
        raise ResponseError(f"STORECORRUPT the stream does not start at event {trimmed + 1}")
    ids = data.stream_ids[stream]
    keep = next((i for i, (_ms, seq) in enumerate(ids) if seq > upto), len(ids))
    del entries[:keep]
    del ids[:keep]
    data.strings[trimmed_key] = b"%d" % upto
    if len(keys_) > 4:
        commands_upto = min(int(argv[2]) if len(argv) > 2 else upto, upto)
        records = data.hashes.get(keys_[4], {})
        for name in [n for n in records if not n.endswith(b"#fp")]:
            head = records[name].split(b" ", 1)[0]
            if head.isdigit() and int(head) <= commands_upto:
                records.pop(name, None)
                records.pop(name + b"#fp", None)
    return [b"trimmed", upto]


def tournament_trim_script(data: Data, keys_: list[bytes], argv: list[bytes]) -> list[Any]:
    """``studhistory.tournament_archive.TRIM_LUA``, in Python: a finished tournament's keys
    removed, and its tombstone set, only while its stream is the one verified. Before the
    keys go, ``data.on_tournament_trim`` is told (the invariant that nothing leaves Redis
    before PostgreSQL holds it)."""
    events, version_key, chain = keys_[0], keys_[1], keys_[5]
    version = int(data.strings.get(version_key, b"0"))
    length = len(data.streams.get(events, ()))
    if version == 0 and length == 0:
        return [b"gone", 0]
    wanted = int(argv[0])
    if version != wanted or length != wanted or int(data.strings.get(keys_[4], b"0")) != 0:
        return [b"changed", version]
    last = data.streams[events][-1][0]
    if last != b"0-%d" % wanted:
        return [b"changed", version]
    head = data.hashes.get(chain, {}).get(b"head")
    if head is not None and head != argv[1]:
        return [b"changed", version]
    if data.on_tournament_trim is not None:
        data.on_tournament_trim(events, wanted)
    for key in keys_[:6]:
        data.strings.pop(key, None)
        data.hashes.pop(key, None)
        data.streams.pop(key, None)
        data.stream_ids.pop(key, None)
    data.strings[keys_[6]] = b"%d" % wanted
    return [b"trimmed", wanted]


SCRIPTS: dict[str, Callable[[SimRedis, list[bytes], list[bytes]], Any]] = {
    "apply": _apply, "create_hand": _create_hand, "record_deal": _record_deal,
    "seeds": _seeds, "protect_append": _protect_append}
