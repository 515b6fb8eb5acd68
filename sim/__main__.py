"""``python -m sim`` (``make sim``): many seeds of the deterministic simulation in parallel
processes, then ``seeds=... hands=... faults=... violations=...`` last; ``--seed N`` replays
one seed exactly and prints what led up to its first violation (``make sim SEED=N``)."""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import queue
import sys
import time
from collections import Counter
from dataclasses import replace

from sim.run import Result, run_seed
from sim.world import Probabilities


def _one(args: tuple[int, int, int, float, float]) -> Result:
    seed, tables, hands, protection, archive = args
    try:
        if protection or archive:  # issue 34: players set limits and take breaks; issue
            # 31: the archiver copies and trims the tables' streams
            return run_seed(seed, tables=tables, hands=hands, probabilities=replace(
                Probabilities(), protection=protection, archive=archive))
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


class Plan:
    """The seeds a run of at least ``hands`` hands takes: seeds ``first``, ``first + 1``, ...,
    the fewest of them whose settled hands add up to ``hands`` (a seed settles at least
    ``per_seed`` unless it breaks an invariant), and never more than ``hands / per_seed``
    (rounded up). A seed is started only while the ones before it could still fall short
    (each not yet done counted as ``per_seed``), so the seeds a run takes are the same
    whatever order its processes finish them in, and it runs few past ``hands``."""

    def __init__(self, first: int, hands: int, per_seed: int) -> None:
        self.first = first
        self.hands = hands
        self.per_seed = per_seed
        self.limit = max(1, -(-hands // per_seed))
        self.started = 0
        self.done: dict[int, int] = {}
        """seed -> the hands it settled."""

    def next(self) -> int | None:
        """The next seed to start, or None when none is needed now."""
        if self.started >= self.limit:
            return None
        seeds = range(self.first, self.first + self.started)
        if sum(self.done.get(seed, self.per_seed) for seed in seeds) >= self.hands:
            return None
        self.started += 1
        return self.first + self.started - 1

    def finish(self, seed: int, hands: int) -> None:
        self.done[seed] = hands

    def taken(self) -> list[int] | None:
        """The run's seeds, once the ones done decide them (None until then)."""
        total = 0
        for seed in range(self.first, self.first + self.limit):
            if seed not in self.done:
                return None
            total += self.done[seed]
            if total >= self.hands:
                return list(range(self.first, seed + 1))
        return list(range(self.first, self.first + self.limit))


def _run_seeds(args: argparse.Namespace) -> list[Result]:
    """The plan's seeds, ``args.jobs`` at a time; a seed run past the plan's is left out
    unless it found a violation."""
    plan = Plan(args.first_seed, args.hands, args.hands_per_seed)
    finished: queue.SimpleQueue[Result | BaseException] = queue.SimpleQueue()
    results: dict[int, Result] = {}
    # A worker runs seed after seed: a seed's run is the same whatever its process ran
    # before (tests/sim/test_sim.py), so one reported here replays as `--seed N`.
    with multiprocessing.Pool(args.jobs) as pool:  # its exit stops a seed not needed
        running = 0
        while (taken := plan.taken()) is None:
            while running < args.jobs and (seed := plan.next()) is not None:
                pool.apply_async(_one, ((seed, args.tables, args.hands_per_seed,
                                         args.protection, args.archive),),
                                 callback=finished.put, error_callback=finished.put)
                running += 1
            item = finished.get()
            running -= 1
            if isinstance(item, BaseException):
                raise item
            results[item.seed] = item
            plan.finish(item.seed, item.hands)
            _report(item, verbose=False)
    return [r for seed, r in sorted(results.items()) if seed in taken or r.violations]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__)
    parser.add_argument("--seed", type=int, default=None, help="replay this one seed")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--hands", type=int, default=100_000, help="hands in all")
    parser.add_argument("--hands-per-seed", type=int, default=400)
    parser.add_argument("--tables", type=int, default=8, help="tables per seed")
    parser.add_argument("--jobs", type=int, default=2, help="processes")
    parser.add_argument("--protection", type=float, default=0.0, metavar="RATE",
                        help="per player and tick: a limit set or a day's break (issue 34; "
                             "e.g. 0.02); off by default")
    parser.add_argument("--archive", type=float, default=0.0, metavar="RATE",
                        help="per table and simulated second: the archiver's step (copy, "
                             "verify, trim; issue 31; e.g. 0.2); off by default")
    args = parser.parse_args(argv)
    started = time.monotonic()
    _tune_gc()  # before the workers fork: they inherit it
    if args.seed is not None:
        results = [_one((args.seed, args.tables, args.hands_per_seed, args.protection,
                         args.archive))]
        _report(results[0], verbose=True)
    else:
        results = _run_seeds(args)
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
    archived: Counter[str] = Counter()
    for r in results:
        archived.update(r.archive)
    extra = "".join(f" archive_{k}={v}" for k, v in archived.items())
    print(f"seeds={len(results)} hands={hands} faults={sum(r.faults for r in results)}"
          f"{extra} violations={sum(len(r.violations) for r in bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
