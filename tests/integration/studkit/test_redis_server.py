"""The launcher's Redis (``studtools.redis_server``, used by ``make run`` and the tests) keeps
its secrets: passwords never appear on the server's command line, its data directory (the AOF
holds decks in play) is private, and one data directory serves one live server at a time."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from studtools.redis_server import DataDirInUse, RedisServer, lock_holder

PASSWORDS = {"table": "table-cmdline-pw", "dealer": "dealer-cmdline-pw"}


class TestRedisServer:
    def test_command_line_names_no_password(self, tmp_path: Path) -> None:
        """``ps`` shows any local user a process's arguments (Redis retitles itself, but only
        once it runs): the users' passwords are given as SHA-256 only, and the admin password
        is generated per server."""
        with RedisServer(appendonly=False, passwords=PASSWORDS, data_dir=tmp_path) as server:
            assert server.process is not None
            assert isinstance(server.process.args, list)
            argv = " ".join(map(str, server.process.args)).encode()
            cmdline = Path(f"/proc/{server.process.pid}/cmdline").read_bytes()
            for secret in (*PASSWORDS.values(), server.admin_password):
                assert secret.encode() not in argv and secret.encode() not in cmdline
            assert argv.count(b" #") == 1 + len(PASSWORDS) and len(server.admin_password) >= 32
            client = redis.Redis.from_url(server.url)
            assert client.acl_whoami() == "admin"
            client.close()
            other = RedisServer(appendonly=False, data_dir=tmp_path / "other").start()
            assert other.admin_password != server.admin_password
            other.stop()

    def test_data_directory_is_private(self, tmp_path: Path) -> None:
        """The data directory is made 0700, even when it existed with looser permissions."""
        data_dir = tmp_path / "redis"
        data_dir.mkdir(mode=0o755)
        with RedisServer(data_dir=data_dir):
            assert data_dir.stat().st_mode & 0o777 == 0o700

    def test_second_server_on_a_data_directory_is_refused(self, tmp_path: Path) -> None:
        """Two servers appending to one AOF corrupt it: the second is refused with the first's
        pid, and the directory is free again once the first is gone."""
        first = RedisServer(data_dir=tmp_path).start()
        try:
            assert first.process is not None
            assert lock_holder(tmp_path) == first.process.pid
            with pytest.raises(DataDirInUse, match=f"pid {first.process.pid}") as refused:
                RedisServer(data_dir=tmp_path).start()
            assert refused.value.pid == first.process.pid
        finally:
            first.stop()
        assert lock_holder(tmp_path) is None
        RedisServer(data_dir=tmp_path).start().stop()

    def test_the_server_holds_the_lock_not_its_launcher(self, tmp_path: Path) -> None:
        """The lock lives exactly as long as the server process: a crashed server frees the
        directory for its restart, as ``test_durability`` needs."""
        server = RedisServer(data_dir=tmp_path).start()
        server.kill()
        assert lock_holder(tmp_path) is None
        server.start()
        try:
            assert server.process is not None
            assert lock_holder(tmp_path) == server.process.pid
        finally:
            server.stop()
