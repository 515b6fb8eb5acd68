"""``make run``'s gateway (issue 32): a ``web`` line with the page's URL and, per dev player,
a sign-in link carrying a dev token in the URL fragment (never in a query string); the page
answers there, and a gRPC-Web call with the link's token reaches the services as that player,
through the real Envoy. The launcher stops the gateway with everything else."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from stud.v1 import table_pb2, wallet_pb2
from studtest.gateway import web_call
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_make_run_prints_the_page_and_sign_in_links_that_work(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    run = subprocess.Popen(
        [sys.executable, "-m", "studtools.devrun", "--no-demo", "--data-dir",
         str(tmp_path / "redis"), "--pg-dir", str(tmp_path / "pg"), "--keys-dir",
         str(tmp_path / "keys"), "--logs-dir", str(tmp_path / "logs"), "--env-file",
         str(tmp_path / "env")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    lines: list[str] = []
    try:
        assert run.stdout is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = run.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if line.startswith("running;"):
                break
        said = "\n".join(lines)
        web = [line for line in lines if line.startswith("web ")]
        assert len(web) == 1, said
        page = web[0].split()[1]
        assert page.startswith("http://127.0.0.1:") and page.endswith("/"), web
        links = {line.split()[3]: line.split()[4] for line in lines
                 if line.startswith("  sign in as ")}
        assert set(links) == {"alice", "bob"}, said
        keys = DevKeys.load(tmp_path / "keys")
        for name, link in links.items():
            parts = urllib.parse.urlsplit(link)
            assert parts.query == "" and "token" not in link.split("#")[0], link
            assert f"{parts.scheme}://{parts.netloc}{parts.path}" == page
            fragment = urllib.parse.parse_qs(parts.fragment)
            assert keys.verifier().verify(fragment["token"][0]).subject == f"player:{name}"
        with urllib.request.urlopen(page, timeout=10) as answer:
            assert answer.status == 200
        # The TLS page (its own self-signed certificate, kept in .run/tls) speaks HTTP/2.
        (tls_line,) = [line for line in lines if line.startswith("  multi-tabling ")]
        secure = urllib.parse.urlsplit(tls_line.split()[1])
        assert secure.scheme == "https" and secure.hostname == "127.0.0.1", tls_line
        assert (tmp_path / "tls" / "tls.crt").exists()
        context = ssl.create_default_context(cafile=str(tmp_path / "tls" / "tls.crt"))
        context.set_alpn_protocols(["h2", "http/1.1"])
        with socket.create_connection((secure.hostname, secure.port), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname=secure.hostname) as conn:
            assert conn.selected_alpn_protocol() == "h2"
        # The link's token, through the gateway, is alice to the services.
        token = urllib.parse.parse_qs(urllib.parse.urlsplit(links["alice"]).fragment)["token"][0]
        balance = web_call(page, "/stud.v1.WalletService/GetBalance",
                           wallet_pb2.GetBalanceRequest(
                               account=wallet_pb2.AccountRef(player_id="alice")), token=token)
        # (--no-demo: nobody funded alice, so her own account is not there yet)
        assert (balance.status, balance.reason) == (5, "unknown_account"), balance.metadata
        assert "player:alice" in balance.message
        others = web_call(page, "/stud.v1.WalletService/GetBalance",
                          wallet_pb2.GetBalanceRequest(
                              account=wallet_pb2.AccountRef(player_id="bob")), token=token)
        assert others.status == 7, others.metadata  # PERMISSION_DENIED: she is alice
        tables = web_call(page, "/stud.v1.TableService/ListTables",
                          table_pb2.ListTablesRequest(), token=token)
        assert tables.status == 0
        # Each call is in the gateway's access log (written out within a few seconds).
        log = tmp_path / "logs" / "gateway.log"
        for _ in range(100):
            if "/stud.v1.WalletService/GetBalance" in log.read_text():
                break
            time.sleep(0.1)
        assert "/stud.v1.WalletService/GetBalance" in log.read_text(), log.read_text()[-2000:]
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGTERM)
        run.wait(timeout=30)
    assert run.returncode == 0, "\n".join(lines)
