"""Where the core's time goes: cProfile over ``bench_replay``'s own measured work.

The same seeded hands as ``bench/bench_replay.py`` (its ``play_table``), then, for each part
asked for, the work that benchmark times, once without the profiler (its rate) and once under
it:

- ``fold``: every whole hand folded from memory (``rules.fold`` from the state before it);
- ``check``: ``replay_phh(parse_phh(text))`` for each hand PokerKit reads to the same stacks
  (what ``stud replay check`` does per hand);
- ``verify``: ``studtools.replay_cli.verify`` over every table, written to a real
  ``redis-server`` as the table service writes them (one process, no dealer).

Prints, for each, the top functions by own time (``tottime``) with their module, and the own
time summed by module. Functions of the compiled modules (mypyc) are not seen by the profiler
one by one: their own time goes to the compiled function the interpreter called, or to its
caller. Figures of a profiled run are slower than the benchmark's; only the shares mean much.

Run: ``.venv/bin/python bench/profile_core.py [--hands 400] [--top 12] [fold check verify]``
(``STUD_PURE=1`` for the pure build).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import random
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import redis.asyncio as aioredis
from bench_replay import SEED, PlayedTable, agreeing_texts, play_table, write_table

from rules import fold
from rules.phh import parse_phh, replay_phh
from studtools.redis_server import RedisServer
from studtools.replay_cli import verify
from studtools.replay_source import Settings

Key = tuple[str, int, str]


def where(key: Key) -> tuple[str, str]:
    """(module, function) of a profile entry: a dotted module for Python code, the
    built-in's own name otherwise."""
    filename, _line, name = key
    if filename == "~":
        compiled = re.fullmatch(r"<built-in method (rules\.[\w.]+)\.(\w+)>", name)
        if compiled:  # a function of a compiled module, called from interpreted code
            return f"{compiled[1]} (compiled)", compiled[2]
        return "(built-in)", name
    if filename.startswith("<"):
        return f"{filename} (code made with exec)", name
    parts = Path(filename).with_suffix("").parts
    for root in ("libs", "services", "site-packages", "bench"):
        if root in parts:
            parts = parts[len(parts) - parts[::-1].index(root):]
            break
    else:  # the standard library: what follows pythonX.Y
        python = [i for i, p in enumerate(parts) if p.startswith("python3")]
        parts = parts[python[-1] + 1:] if python else parts[-1:]
    return ".".join(p for p in parts if p != "__init__"), name


def report(title: str, profile: cProfile.Profile, top: int,
           steps: tuple[tuple[str, str], ...] = ()) -> None:
    """The time spent in each of ``steps`` ((module, function) pairs) and all it calls, as
    shares of the run; the top functions by own time, and the own time by module."""
    stats = pstats.Stats(profile)
    raw = stats.stats  # type: ignore[attr-defined]
    entries: dict[Key, tuple[int, float]] = {key: (v[1], v[2]) for key, v in raw.items()}
    total = sum(tt for _n, tt in entries.values())
    run = max(v[3] for v in raw.values())  # the profiled run, all it called included
    print(f"== {title}: {run:.2f} s under the profiler")
    if steps:
        inside: defaultdict[tuple[str, str], float] = defaultdict(float)
        for key, v in raw.items():  # a step's module with or without " (compiled)"
            module, name = where(key)
            inside[module.removesuffix(" (compiled)"), name] += v[3]
        print("  steps, with what they call, share of the run: " + ", ".join(
            f"{module}.{name} {100 * inside[module, name] / run:.0f}%"
            for module, name in steps))
    print(f"  own time, share of the summed own time ({total:.2f} s):")
    print(f"  {'own s':>7} {'share':>6} {'calls':>9}  module: function")
    for key, (calls, tt) in sorted(entries.items(), key=lambda kv: -kv[1][1])[:top]:
        module, name = where(key)
        print(f"  {tt:>7.3f} {100 * tt / total:>5.1f}% {calls:>9,}  {module}: {name}")
    by_module: defaultdict[str, float] = defaultdict(float)
    for key, (_calls, tt) in entries.items():
        by_module[where(key)[0]] += tt
    print("  by module: " + ", ".join(
        f"{module} {100 * tt / total:.1f}%"
        for module, tt in sorted(by_module.items(), key=lambda kv: -kv[1])[:top]))


def timed(run: Callable[[], object]) -> tuple[float, cProfile.Profile]:
    """Seconds of one unprofiled run (after a warm-up), and a profile of another."""
    run()
    started = time.perf_counter()
    run()
    seconds = time.perf_counter() - started
    profile = cProfile.Profile()
    profile.enable()
    run()
    profile.disable()
    return seconds, profile


def profile_fold(tables: list[PlayedTable], top: int) -> None:
    hands = [h for t in tables for h in t.hands]

    def run() -> None:
        for before, events in hands:
            fold(events, before)

    seconds, profile = timed(run)
    report(f"fold: {len(hands)} hands, {len(hands) / seconds:,.0f} hands/s unprofiled",
           profile, top)


def profile_check(tables: list[PlayedTable], top: int) -> None:
    texts = agreeing_texts(tables, len([h for t in tables for h in t.hands]))

    def run() -> None:
        for text in texts:
            replay_phh(parse_phh(text))

    seconds, profile = timed(run)
    report(f"check (parse_phh + replay_phh): {len(texts)} hands, "
           f"{1e3 * seconds / len(texts):.3f} ms/hand unprofiled", profile, top,
           (("rules.phh.format", "parse_phh"), ("tomllib._parser", "loads"),
            ("rules.phh.replay", "replay_phh"),
            ("rules.decide", "decide_and_fold"), ("rules.betting", "judge_action")))


def profile_verify(tables: list[PlayedTable], top: int) -> None:
    hands = sum(len(t.hands) for t in tables)
    with RedisServer(appendonly=False) as server:
        async def write() -> None:
            client = aioredis.Redis.from_url(server.url)
            try:
                for table in tables:
                    await write_table(client, table)
            finally:
                await client.aclose()

        asyncio.run(write())
        settings = Settings(redis_url=server.url)

        def run() -> None:
            verdicts, _notes = asyncio.run(verify(None, None, settings))
            assert len(verdicts) == hands and all(v.ok for v in verdicts)

        seconds, profile = timed(run)
    report(f"verify --all (Redis, no dealer, 1 process): {hands} hands, "
           f"{hands / seconds:,.0f} hands/s unprofiled", profile, top,
           (("studtools.replay_source", "log"), ("studtools.replay_source", "decode_entry"),
            ("studtools.replay_hands", "split_hands"),
            ("studtools.replay_hands", "verify_hand_log"),
            ("studtools.replay_hands", "command_for"), ("rules.decide", "decide_and_fold"),
            ("studtools.replay_hands", "check_money")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", choices=["fold", "check", "verify", []],
                        help="what to profile (default: all three)")
    parser.add_argument("--hands", type=int, default=400)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    rng = random.Random(SEED)
    per = max(1, args.hands // args.tables)
    tables = [play_table(rng, f"bench-{i}", per) for i in range(args.tables)]
    gc.collect()
    gc.freeze()
    import rules.hands

    build = "pure" if str(rules.hands.__file__).endswith(".py") else "compiled (mypyc)"
    print(f"core: {build}; {per * args.tables} hands at {args.tables} tables (seed {SEED})",
          flush=True)
    for part in args.parts or ["fold", "check", "verify"]:
        {"fold": profile_fold, "check": profile_check, "verify": profile_verify}[part](
            tables, args.top)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
