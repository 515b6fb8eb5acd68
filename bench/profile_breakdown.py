"""Where a process's time goes, by part of an action: reads a py-spy raw profile (``py-spy
record -p <pid> -f raw -o FILE``: one line per stack, frames joined by ``;``, then the sample
count) and puts each sample in the first part whose pattern one of its frames matches, from
the innermost frame out (gRPC's own callbacks, which py-spy sees as the event loop running a
handle, are the samples no Python frame of ours explains).

Run: ``.venv/bin/python bench/profile_breakdown.py FILE [FILE ...]`` (one column per file).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from typing import Final

PARTS: Final = (
    ("logging", r"structlog|logging/__init__|studkit/log\.py"),
    ("metrics", r"prometheus_client|studkit/metrics\.py"),
    ("auth", r"studkit/auth/|jwt/|cryptography"),
    ("encode", r"record_for|_build_record|views\.py|envelope_for|room_envelope|mapping/"
               r"|SerializeToString|_sealed|FromDatetime|turn_to_proto"),
    ("decide", r"table/room\.py|rules/decide|rules/legal|decide_and_fold|_propose"),
    ("evolve", r"room_state\.py|rules/evolve|rules/_mutable"),
    ("append (redis)", r"redis/|studkit/store\.py|studkit/commit\.py|studkit/uow\.py"),
    ("dealer and wallet calls", r"table/clients\.py|table/money\.py"),
    ("fan-out (watch streams)", r"watching\.py|_fan_out|inbox\.py|WatchTable|expiring"
                                r"|_before_expiry|_wrap_response_stream"),
    ("driver", r"table/driver\.py|table/alarms\.py"),
    ("gRPC unary (interceptors, servicer)", r"grpc_server\.py|grpc_handlers\.py"
                                            r"|table/server\.py|limits\.py|grpc/aio"),
)


def part_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, pattern in PARTS:
            if re.search(pattern, frame):
                return name
    leaf = frames[-1]
    if "Handle._run" in leaf:
        return "gRPC core callbacks (C, run by the loop)"
    if "select" in leaf:
        return "event loop (epoll)"
    if "Thread" in leaf or "threading" in leaf:
        return "gRPC poller thread"
    return "asyncio, other"


def breakdown(path: str) -> tuple[Counter[str], int]:
    parts: Counter[str] = Counter()
    total = 0
    with open(path) as lines:
        for line in lines:
            stack, _, count = line.rstrip().rpartition(" ")
            if not stack:
                continue
            total += int(count)
            parts[part_of(stack.split(";"))] += int(count)
    return parts, total


def main(paths: list[str]) -> None:
    results = [breakdown(p) for p in paths]
    names = sorted({n for parts, _t in results for n in parts},
                   key=lambda n: -results[0][0][n])
    print(f"{'part':<42}" + "".join(f"{p[-24:]:>26}" for p in paths))
    for name in names:
        print(f"{name:<42}" + "".join(f"{100 * parts[name] / max(1, total):25.1f}%"
                                       for parts, total in results))
    print(f"{'samples':<42}" + "".join(f"{total:>26}" for _p, total in results))


if __name__ == "__main__":
    main(sys.argv[1:])
