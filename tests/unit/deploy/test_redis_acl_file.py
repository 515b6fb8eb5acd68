"""The Kubernetes ACL file (``deploy/k8s/overlays/dev/users.acl``, the model for production's
``redis-acl`` Secret) grants each service exactly what the launcher grants it
(``studtools.redis_server.SERVICE_ACL``, which ``tests/integration/store/test_acl.py`` checks
against real servers), and leaves the ``default`` user off."""

from __future__ import annotations

from pathlib import Path

import pytest

from studtools.redis_server import ADMIN_ACL, DEFAULT_USER_ACL, SERVICE_ACL

ACL_FILE = Path(__file__).resolve().parents[3] / "deploy/k8s/overlays/dev/users.acl"


def users() -> dict[str, list[str]]:
    """User name -> its rules, from the ACL file."""
    parsed: dict[str, list[str]] = {}
    for line in ACL_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            keyword, name, *words = line.split()
            assert keyword == "user" and name not in parsed, line
            rules: list[str] = []
            for word in words:  # a selector, "(~key ... +command)", is one rule
                if rules and rules[-1].startswith("(") and not rules[-1].endswith(")"):
                    rules[-1] += " " + word
                else:
                    rules.append(word)
            parsed[name] = rules
    return parsed


class TestAclFile:
    @pytest.mark.parametrize("service", sorted(SERVICE_ACL))
    def test_service_users_match_the_launcher(self, service: str) -> None:
        """A service user is on, has one password, and then the launcher's rules, keyspace-wide
        denials included."""
        on, password, *rules = users()[service]
        assert on == "on" and password.startswith(">")
        assert rules == ["resetkeys", *SERVICE_ACL[service]]
        assert {"-scan", "-randomkey", "-dbsize"} <= set(rules)

    def test_default_user_is_off_and_admin_needs_a_password(self) -> None:
        """An unauthenticated connection is the ``default`` user: off, with nothing; the
        admin has every key and command, behind a password."""
        acl = users()
        assert acl["default"] == list(DEFAULT_USER_ACL)
        on, password, *rules = acl["admin"]
        assert on == "on" and password.startswith(">") and rules == list(ADMIN_ACL)
        assert set(acl) == {"default", "admin", *SERVICE_ACL}
