"""Refusals as cheap as possible (issue 17, F5): another table's ``GetTable`` latency while one
client floods the table service with calls it refuses. Prints figures; asserts nothing.

The room runs as separate processes (Redis, dealer, wallet, table; ``studtest.processes``, logs
at INFO as deployed). A probe asks ``GetTable`` of a quiet table as one of its players, one
call every ``--probe-ms``, for ``--seconds`` with no flood, then again while a flooder (a
process of its own, one client connection, ``--in-flight`` calls outstanding at all times)
sends one of the following; quiet and flooded phases alternate ``--cycles`` times, so that
both meet the same background on a shared machine:

- ``forged``: well-formed tokens under the issuer's key id with a wrong signature, each one
  different (no cache can help; only the per-connection limit before the signature check);
- ``garbage``: random bytes as the bearer token;
- ``rate_limited``: a real player's valid token, far past the player's call rate (the calls
  within the rate, ``STUD_RATE_PER_PLAYER``, are served: their cost is a player's allowance,
  not a refusal's; ``--per-player`` sets it).

Printed per kind: the probe's p50 and p99 quiet and during the flood and the p99 ratio (the
issue's target: under 2x), the flood's calls per second and their status codes, the table
process's CPU share and its CPU per flooded call, and how many refusal lines
(``rpc_rejected``, ``rpc_rejected_summary``) it logged.
Run: ``.venv/bin/python bench/bench_refusals.py`` (about a minute and a half per kind).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import grpc

from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from studkit.auth import TokenBook, bearer_metadata
from studtest.processes import room_processes
from studtest.table import fast_settings, player
from studtools.devkeys import DevKeys
from studtools.redis_server import RedisServer

KINDS = ("forged", "garbage", "rate_limited")
OWN_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)
WARM_UP_S = 3.0
"""Between the flooder's start and the flooded probe: its start-up (a Python process
importing gRPC) and the first burst a fresh connection is allowed are not the flood."""


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged_tokens(kid: str, count: int) -> list[str]:
    """Tokens a verifier must check the signature of: the issuer's kid, valid claims, a
    random signature; each one different."""
    header = b64(json.dumps({"alg": "EdDSA", "kid": kid, "typ": "JWT"}).encode())
    now = int(time.time())
    out = []
    for i in range(count):
        claims = {"sub": f"player:eve{i}", "role": "player", "iat": now, "exp": now + 3600,
                  "iss": "stud-hilo"}
        out.append(f"{header}.{b64(json.dumps(claims).encode())}.{b64(secrets.token_bytes(64))}")
    return out


def cpu_s(pid: int) -> float:
    """A process's user + system CPU time (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


async def probe(target: str, table_id: str, metadata: tuple[tuple[str, str], ...],
                seconds: float, every_ms: float) -> list[float]:
    """GetTable latencies (s) of one caller on a connection of its own."""
    latencies: list[float] = []
    async with grpc.aio.insecure_channel(target, options=OWN_CONNECTION) as channel:
        stub = pb_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
        request = pb.GetTableRequest(table_id=table_id)
        await stub.GetTable(request, metadata=metadata, timeout=10)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            began = time.perf_counter()
            await stub.GetTable(request, metadata=metadata, timeout=10)
            latencies.append(time.perf_counter() - began)
            await asyncio.sleep(max(0.0, every_ms / 1000 - (time.perf_counter() - began)))
    return latencies


async def flood(target: str, table_id: str, kind: str, tokens: list[str], seconds: float,
                in_flight: int) -> None:
    """The flooder process: ``in_flight`` calls outstanding on one connection; prints
    ``calls=... codes={...}`` as JSON."""
    codes: Counter[str] = Counter()
    request = pb.GetTableRequest(table_id=table_id)
    async with grpc.aio.insecure_channel(target, options=OWN_CONNECTION) as channel:
        stub = pb_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
        deadline = time.monotonic() + seconds
        counter = 0

        async def worker(offset: int) -> None:
            nonlocal counter
            i = offset
            while time.monotonic() < deadline:
                token = tokens[i % len(tokens)]
                i += in_flight
                try:
                    await stub.GetTable(request, metadata=bearer_metadata(token), timeout=10)
                    codes["OK"] += 1
                except grpc.aio.AioRpcError as exc:
                    codes[exc.code().name] += 1
                counter += 1

        await asyncio.gather(*(worker(i) for i in range(in_flight)))
    print(json.dumps({"kind": kind, "calls": counter, "codes": codes}), flush=True)


def flooder_tokens(kind: str, keys: DevKeys) -> list[str]:
    if kind == "forged":
        return forged_tokens(keys.issuer().kid, 20_000)
    if kind == "garbage":
        return [b64(secrets.token_bytes(48)) for _ in range(20_000)]
    return [TokenBook(keys).token(player("flooder"))]


async def measure(args: argparse.Namespace) -> None:
    keys = DevKeys.generate()
    passwords = {name: secrets.token_urlsafe(16) for name in ("table", "dealer", "wallet")}
    with RedisServer(passwords=passwords) as redis_server, \
            tempfile.TemporaryDirectory(prefix="stud-refusals-") as tmp:
        log_dir = Path(tmp) / "logs"
        env = {} if args.per_player is None else {"STUD_RATE_PER_PLAYER": str(args.per_player)}
        async with room_processes(redis_server.url_for, keys, log_dir, extra_env=env) as room, \
                room.clients() as clients:
            assert room.table.proc is not None
            pid = room.table.proc.pid
            quiet = await clients.table.open_table("quiet", settings=fast_settings())
            target_table = await clients.table.open_table("flooded", settings=fast_settings())
            await clients.wallet.create_account("ann")
            await clients.wallet.deposit("ann", 1_000_000, "dep-ann")
            await clients.table.call("SitDown", pb.SitDownRequest(
                table_id=quiet, seat=1, buy_in=10_000), player("ann"))
            ann = clients.table.md(player("ann"))
            target = room.table.target
            rate = args.per_player if args.per_player is not None else "100 (default)"
            print(f"== refusals: {os.cpu_count()} CPUs; probe GetTable every "
                  f"{args.probe_ms:g} ms for {args.seconds:g} s, quiet then during a flood "
                  f"from one connection ({args.in_flight} calls in flight), "
                  f"{args.cycles} cycles; STUD_RATE_PER_PLAYER {rate}", flush=True)
            for kind in args.kinds:
                token_file = Path(tmp) / f"{kind}.tokens"
                token_file.write_text("\n".join(flooder_tokens(kind, keys)))
                token_file.chmod(0o600)
                log_file = log_dir / "table.log"
                calm: list[float] = []
                busy: list[float] = []
                calm_cpu = busy_cpu = calm_s = busy_s = 0.0
                calls, lines = 0, 0
                codes: Counter[str] = Counter()
                # Quiet and flooded phases alternate, so both meet the same background (the
                # machine is shared): their p99s are compared over all the cycles.
                for _cycle in range(args.cycles):
                    cpu0, t0 = cpu_s(pid), time.monotonic()
                    calm += await probe(target, quiet, ann, args.seconds, args.probe_ms)
                    calm_cpu += cpu_s(pid) - cpu0
                    calm_s += time.monotonic() - t0
                    lines0 = log_file.read_text().count("rpc_rejected")
                    flooder = subprocess.Popen(
                        [sys.executable, __file__, "--flooder", target, target_table, kind,
                         str(token_file), str(args.seconds + WARM_UP_S + 1),
                         str(args.in_flight)],
                        stdout=subprocess.PIPE, text=True)
                    # The flood under way: the flooder has started (imports) and spent its
                    # first burst (a fresh connection's budgets) before the probe measures.
                    await asyncio.sleep(WARM_UP_S)
                    cpu1, t1 = cpu_s(pid), time.monotonic()
                    busy += await probe(target, quiet, ann, args.seconds, args.probe_ms)
                    busy_cpu += cpu_s(pid) - cpu1
                    busy_s += time.monotonic() - t1
                    out, _ = await asyncio.to_thread(flooder.communicate)
                    result = json.loads(out.strip().splitlines()[-1])
                    calls += result["calls"]
                    codes.update(result["codes"])
                    await asyncio.sleep(1.0)  # the held refusals answered, summaries written
                    lines += log_file.read_text().count("rpc_rejected") - lines0
                per_s = calls / ((args.seconds + WARM_UP_S + 1) * args.cycles)
                extra = busy_cpu / busy_s - calm_cpu / calm_s
                ratio = pct(busy, 0.99) / max(pct(calm, 0.99), 1e-9)
                print(f"  {kind:>12}: quiet p50 {pct(calm, 0.5):6.2f} ms p99 "
                      f"{pct(calm, 0.99):6.2f} ms | flood p50 {pct(busy, 0.5):6.2f} ms p99 "
                      f"{pct(busy, 0.99):6.2f} ms | p99 ratio {ratio:4.2f}x "
                      f"({len(calm)} and {len(busy)} probes)", flush=True)
                print(f"  {'':>12}  flood {per_s:7.0f} calls/s {dict(codes)}; table CPU "
                      f"{calm_cpu / calm_s:.0%} quiet, {busy_cpu / busy_s:.0%} flooded "
                      f"({extra / per_s * 1e6 if per_s else 0:.0f} us per flooded call); "
                      f"{lines} refusal log lines for {calls} calls", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="length of each quiet and each flooded phase")
    parser.add_argument("--cycles", type=int, default=3,
                        help="quiet and flooded phases, alternating, per kind")
    parser.add_argument("--probe-ms", type=float, default=20.0)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--per-player", type=float, default=None,
                        help="STUD_RATE_PER_PLAYER for the services (the rate_limited "
                             "flooder's calls within it are served, not refused)")
    parser.add_argument("--flooder", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.flooder:
        target, table_id, kind, token_file, seconds, in_flight = args.flooder
        tokens = Path(token_file).read_text().splitlines()
        asyncio.run(flood(target, table_id, kind, tokens, float(seconds), int(in_flight)))
        return
    asyncio.run(measure(args))


if __name__ == "__main__":
    main()
