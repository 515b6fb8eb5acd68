"""``make observe``: a local Prometheus beside a running ``make run`` (issue 33).

It scrapes every service ``make run`` started (the ``/metrics`` addresses ``make run`` writes
to ``.run/targets.json``, a ``file_sd`` list Prometheus reads again when it changes, so a
``make run`` started later or again is picked up), evaluates the recording and alerting rules
of ``deploy/observability/rules.yml``, keeps exemplars, prints its URL and runs until Ctrl-C.
Its data goes to ``.run/prometheus``.

Beside it, a trace receiver (:func:`studtools.traces.serve`, OTLP/gRPC) on
``127.0.0.1:4317`` (:data:`studtools.traces.OTLP_PORT`, ``--otlp-port``) appends every span
to ``.run/traces.jsonl`` (rotated past 64 MB to ``traces.jsonl.1``), which ``stud trace
list`` and ``stud trace show TRACE_ID`` read. The
services export there when ``make run OBSERVE=1`` started them (tracing is off otherwise: an
endpoint nobody listens on costs spans, retries and warnings, docs/operations.md); either
may start first: the spans made while nobody listens are dropped, the next ones received.

The binaries are Debian's ``prometheus`` package unpacked (``apt-get download`` and ``dpkg
-x``, no install) under ``build/prometheus`` by the Makefile when missing
(``$STUD_PROMETHEUS_DIR`` names another directory). Debian's build has no
``kubernetes_sd_configs``; none is needed here: the targets are static, on loopback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

from studtools import traces

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "observability" / "rules.yml"
LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 9090
PROMETHEUS_DIR_ENV = "STUD_PROMETHEUS_DIR"


def prometheus_dir() -> Path:
    """Where Debian's package is unpacked (``usr/bin/prometheus``, ``usr/bin/promtool``)."""
    return Path(os.environ.get(PROMETHEUS_DIR_ENV) or ROOT / "build" / "prometheus")


def binary(name: str) -> Path | None:
    """``prometheus`` or ``promtool``: the unpacked one, else one on ``PATH``."""
    unpacked = prometheus_dir() / "usr" / "bin" / name
    if unpacked.is_file():
        return unpacked
    found = shutil.which(name)
    return Path(found) if found else None


def ui_assets(prometheus: Path) -> list[str]:
    """Debian's build serves its (classic) web pages from the package's
    ``usr/share/prometheus/web``: the unpacked copy's, beside the binary."""
    web = prometheus.parent.parent / "share" / "prometheus" / "web"
    return [f"--web.local-assets={web}/"] if web.is_dir() else []


def config(targets_file: Path, rules: Path = RULES, interval: str = "5s") -> dict[str, object]:
    """The local Prometheus's configuration: the services ``make run`` lists in
    ``targets_file`` (their ``job`` is ``stud-<service>``, as the alerts expect) and
    Prometheus itself."""
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(rules.resolve())],
        "scrape_configs": [
            {"job_name": "stud", "file_sd_configs": [
                {"files": [str(targets_file.resolve())], "refresh_interval": "5s"}]},
            {"job_name": "prometheus", "static_configs": [{"targets": []}]},
        ],
    }


def free_port(preferred: int) -> int:
    for port in (preferred, 0):
        with socket.socket() as s:
            try:
                s.bind((LOOPBACK, port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise OSError("no free port")


def start(run_dir: Path, port: int, targets_file: Path | None = None,
          interval: str = "5s") -> tuple[subprocess.Popen[bytes], str]:
    """Start Prometheus with its data under ``run_dir/prometheus``; returns the process and
    its URL once it answers ``/-/ready``."""
    prometheus = binary("prometheus")
    if prometheus is None:
        raise FileNotFoundError(
            "prometheus is not unpacked: `make observe` fetches Debian's package into "
            f"{prometheus_dir()} (apt-get download prometheus; dpkg -x)")
    home = run_dir / "prometheus"
    (home / "data").mkdir(parents=True, exist_ok=True)
    targets_file = targets_file or run_dir / "targets.json"
    if not targets_file.exists():
        targets_file.write_text("[]\n")
    conf = config(targets_file, interval=interval)
    url = f"http://{LOOPBACK}:{port}"
    scrape_configs = conf["scrape_configs"]
    assert isinstance(scrape_configs, list)
    scrape_configs[1]["static_configs"] = [{"targets": [f"{LOOPBACK}:{port}"]}]
    (home / "prometheus.yml").write_text(yaml.safe_dump(conf, sort_keys=False))
    log = (home / "prometheus.log").open("ab")
    process = subprocess.Popen(
        [str(prometheus), f"--config.file={home / 'prometheus.yml'}",
         f"--storage.tsdb.path={home / 'data'}", f"--web.listen-address={LOOPBACK}:{port}",
         "--storage.tsdb.retention.time=2d", "--enable-feature=exemplar-storage",
         "--web.enable-lifecycle", *ui_assets(prometheus)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"prometheus exited ({process.returncode}); see "
                               f"{home / 'prometheus.log'}")
        with contextlib.suppress(OSError), \
                urllib.request.urlopen(f"{url}/-/ready", timeout=1) as reply:
            if reply.status == 200:
                return process, url
        time.sleep(0.2)
    process.terminate()
    raise TimeoutError(f"prometheus did not become ready; see {home / 'prometheus.log'}")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make observe", description=__doc__)
    parser.add_argument("--run-dir", default=".run",
                        help="make run's directory (its targets.json); Prometheus's data "
                             "goes to RUN_DIR/prometheus")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help="Prometheus's port on loopback (another free one when taken)")
    parser.add_argument("--otlp-port", type=int, default=traces.OTLP_PORT,
                        help="the trace receiver's port on loopback, where make run "
                             "OBSERVE=1 exports (fixed: no other is tried)")
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir)
    spans_file = run_dir / "traces.jsonl"
    targets = run_dir / "targets.json"
    if not targets.exists():
        print(f"make observe: no {targets} yet: start `make run` (in another terminal); "
              "Prometheus picks its services up when it writes the file", flush=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        receiver, _, otlp_port = traces.serve(args.otlp_port, spans_file, keep=False,
                                              rotate_bytes=traces.ROTATE_BYTES)
    except OSError as exc:
        receiver = None
        print(f"make observe: no trace receiver ({exc}; another make observe, or a "
              "collector, holds it?)", file=sys.stderr, flush=True)
    try:
        process, url = start(run_dir, free_port(args.port))
    except (OSError, RuntimeError) as exc:
        print(f"make observe: {exc}", file=sys.stderr)
        if receiver is not None:
            receiver.stop(None)
        return 1
    print(f"prometheus {url} (targets: {url}/classic/targets, alerts: {url}/classic/alerts, "
          f"rules: {RULES.relative_to(ROOT)}; scraping the services in {targets})", flush=True)
    if receiver is not None:
        print(f"traces     OTLP/gRPC http://{LOOPBACK}:{otlp_port}, appended to {spans_file} "
              f"(make run OBSERVE=1 exports there; stud trace list --name Bet, then stud "
              f"trace show TRACE_ID)", flush=True)
    print("running; Ctrl-C stops it", flush=True)

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupted)
    try:
        while process.poll() is None:
            time.sleep(0.5)
        print(f"prometheus exited ({process.returncode}); see "
              f"{run_dir / 'prometheus' / 'prometheus.log'}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        stop(process)
        if receiver is not None:
            receiver.stop(None)


if __name__ == "__main__":
    sys.exit(main())
