"""Where the tests' Redis comes from: ``REDIS_URL``, else a local Redis Cluster when asked,
else a Docker engine, else a local redis-server; never a fake."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from studtest.redis import RedisSource, choose_redis_source


def engine(answers: bool) -> tuple[list[int], Callable[[], bool]]:
    """A fake engine probe that records how often it was asked."""
    calls: list[int] = []

    def probe() -> bool:
        calls.append(1)
        return answers

    return calls, probe


class TestChooseRedisSource:
    @pytest.mark.parametrize("answers", [True, False])
    def test_redis_url_wins_without_probing_the_engine(self, answers: bool) -> None:
        """With REDIS_URL set, that URL is used and no Docker engine is probed."""
        calls, probe = engine(answers)
        env = {"REDIS_URL": "redis://example:6379/0"}
        assert choose_redis_source(env, probe) is RedisSource.ENV
        assert calls == []

    def test_an_answering_engine_gives_a_container(self) -> None:
        """Without REDIS_URL, a Docker engine that answers means testcontainers."""
        calls, probe = engine(True)
        assert choose_redis_source({}, probe) is RedisSource.CONTAINER
        assert calls == [1]

    def test_no_engine_gives_a_local_redis_server(self) -> None:
        """Without REDIS_URL and without an engine, a local redis-server is started."""
        _calls, probe = engine(False)
        assert choose_redis_source({}, probe) is RedisSource.LOCAL

    def test_an_empty_redis_url_counts_as_unset(self) -> None:
        """REDIS_URL="" does not select the environment."""
        _calls, probe = engine(False)
        env = {"REDIS_URL": ""}
        assert choose_redis_source(env, probe) is RedisSource.LOCAL

    @pytest.mark.parametrize("value", ["cluster", "Cluster "])
    def test_asking_for_a_cluster_gives_a_local_cluster(self, value: str) -> None:
        """STUD_TEST_REDIS=cluster (make test-cluster) starts a local Redis Cluster, without
        probing the engine; REDIS_URL still wins."""
        calls, probe = engine(True)
        assert choose_redis_source({"STUD_TEST_REDIS": value}, probe) is RedisSource.CLUSTER
        assert calls == []
        env = {"STUD_TEST_REDIS": value, "REDIS_URL": "redis://example:6379/0"}
        assert choose_redis_source(env, probe) is RedisSource.ENV
