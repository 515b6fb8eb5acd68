"""The room benchmark, side by side: the services of another revision (``--base``, checked out
with ``git archive`` into a temporary directory and put first on their path) against this
tree's, in alternating rounds of the same run on the same machine, so that a change's effect
on the table's CPU per action is read as a ratio (the machine is noisy; one run of each says
little). The bots, the harness and the generated protobuf code are this tree's in both, so the
base must speak this tree's protos (a revision of the same API).

Run: ``.venv/bin/python bench/room_ab.py --base main --rounds 3 --seconds 8``. Prints each
round's figures, then the medians and ``table_cpu_ratio=…`` (this tree's table CPU per action
over the base's) last. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import secrets
import statistics
import subprocess
import tarfile
import tempfile
from pathlib import Path

from campaigns.throughput import SERVICES, bench_room
from studtools.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent


def checkout(revision: str, into: Path) -> None:
    """``revision``'s tree (``git archive``) unpacked into ``into``."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            tar.extractall(into, filter="data")
        else:  # Debian 12's 3.11.2: a tree of our own git archive
            tar.extractall(into)


async def one(label: str, python_path: str | None, args: argparse.Namespace
              ) -> tuple[float, float, float]:
    """(table CPU ms per action, actions/s, p99 ms) of one round."""
    saved = os.environ.get("PYTHONPATH")
    if python_path is not None:
        os.environ["PYTHONPATH"] = python_path
    try:
        passwords = {name: secrets.token_urlsafe(16) for name in SERVICES}
        with RedisServer(passwords=passwords) as redis_server, \
                tempfile.TemporaryDirectory(prefix="room-ab-") as tmp:
            assert redis_server.process is not None
            room, _bots, cpu = await bench_room(
                redis_server.url_for, Path(tmp), args.tables, args.bots, args.seconds, 2.0,
                "WARNING", redis_server.process.pid)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    per_action = cpu["table"] / max(1, room.count) * 1000
    print(f"  {label:<5} table CPU {per_action:5.2f} ms per action   {room.per_s:6.0f} "
          f"actions/s   p99 {room.pct(0.99):6.2f} ms", flush=True)
    return per_action, room.per_s, room.pct(0.99)


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="room-ab-src-") as src:
        checkout(args.base, Path(src))
        base_path = os.pathsep.join(str(Path(src) / p) for p in ("services", "libs"))
        rows: dict[str, list[tuple[float, float, float]]] = {"base": [], "this": []}
        print(f"== room A/B: base {args.base} against this tree, {args.rounds} rounds of "
              f"{args.seconds:.0f} s, {args.tables} tables x {args.bots} bots")
        for _round in range(args.rounds):
            rows["base"].append(await one("base", base_path, args))
            rows["this"].append(await one("this", None, args))
    medians = {k: [statistics.median(r[i] for r in v) for i in range(3)]
               for k, v in rows.items()}
    for k, (cpu, rate, p99) in medians.items():
        print(f"  median {k:<5} table CPU {cpu:5.2f} ms per action   {rate:6.0f} actions/s   "
              f"p99 {p99:6.2f} ms")
    print(f"table_cpu_ratio={medians['this'][0] / medians['base'][0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="main", help="the revision to compare against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--bots", type=int, default=4)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
