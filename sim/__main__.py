"""``python -m sim`` (``make sim``): many seeds of the deterministic simulation in parallel
processes, then ``seeds=... hands=... faults=... violations=...`` last; ``--seed N`` replays
one seed exactly and prints what led up to its first violation (``make sim SEED=N``)."""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import sys
import time
from collections import Counter

from sim.run import Result, run_seed


def _one(args: tuple[int, int, int]) -> Result:
    seed, tables, hands = args
    try:
        return run_seed(seed, tables=tables, hands=hands)
    except Exception as exc:  # the simulator's own failure is reported with its seed
        return Result(seed, violations=[f"crash: the run raised {type(exc).__name__}: {exc}"],
                      first_step=0)


def _report(result: Result, verbose: bool) -> None:
    if result.violations:
        print(f"VIOLATION seed={result.seed} step={result.first_step}: {result.violations[0]}")
        for line in result.violations[1:5]:
            print(f"  also: {line}")
        print(f"  replay: make sim SEED={result.seed}")
    if verbose:
        print(f"seed {result.seed}: hands={result.hands} steps={result.steps} "
              f"faults={result.faults} digest={result.digest}")
        print("faults injected: " + ", ".join(f"{k}={v}" for k, v in
                                              sorted(result.fault_counts.items())))
        if result.aimed:
            print("aimed crashes, after: " + ", ".join(f"{k}={v}" for k, v in
                                                        sorted(result.aimed.items())))
        for line in result.log[-30:]:
            print(f"  {line}")
        if result.tail:
            print("the events leading up to the first violation:")
            for line in result.tail:
                print(f"  {line}")


def _tune_gc() -> None:
    """A run allocates short-lived values by the million and keeps its logs: the modules
    and the setup are frozen out of the collector's scans, and the youngest generation is
    collected less often (the collector's full scans of the logs cost a few percent)."""
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__)
    parser.add_argument("--seed", type=int, default=None, help="replay this one seed")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--hands", type=int, default=100_000, help="hands in all")
    parser.add_argument("--hands-per-seed", type=int, default=400)
    parser.add_argument("--tables", type=int, default=8, help="tables per seed")
    parser.add_argument("--jobs", type=int, default=2, help="processes")
    args = parser.parse_args(argv)
    started = time.monotonic()
    _tune_gc()  # before the workers fork: they inherit it
    if args.seed is not None:
        results = [_one((args.seed, args.tables, args.hands_per_seed))]
        _report(results[0], verbose=True)
    else:
        count = max(1, -(-args.hands // args.hands_per_seed))
        work = [(seed, args.tables, args.hands_per_seed)
                for seed in range(args.first_seed, args.first_seed + count)]
        results = []
        # A worker runs seed after seed: a seed's run is the same whatever its process ran
        # before (tests/sim/test_sim.py), so one reported here replays as `--seed N`.
        with multiprocessing.Pool(args.jobs) as pool:
            for result in pool.imap_unordered(_one, work):
                results.append(result)
                _report(result, verbose=False)
    elapsed = time.monotonic() - started
    hands = sum(r.hands for r in results)
    bad = [r for r in results if r.violations]
    cpu = sum(r.cpu_s for r in results)
    aimed: Counter[str] = Counter()
    for r in results:
        aimed.update(r.aimed)
    print("aimed_crashes_after=" + ",".join(f"{k}:{v}" for k, v in sorted(aimed.items())),
          file=sys.stderr)
    print(f"elapsed_s={elapsed:.1f} hands_per_s={hands / max(elapsed, 1e-9):.1f} "
          f"cpu_s={cpu:.1f} hands_per_cpu_s={hands / max(cpu, 1e-9):.1f}", file=sys.stderr)
    print(f"seeds={len(results)} hands={hands} faults={sum(r.faults for r in results)} "
          f"violations={sum(len(r.violations) for r in bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
