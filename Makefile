# One Makefile drives everything. `make test` works on a fresh machine: it creates .venv,
# installs the pinned dependencies, generates the protobuf code and runs the whole suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTO_SRC := $(wildcard protos/stud/v1/*.proto)
PROTO_STAMP := protos/gen/.stamp
PYTEST := $(PY) -m pytest

.PHONY: all venv protos test test-unit test-property test-integration test-e2e test-room failover chaos fuzz audit load lint \
	test-cluster bench bench-rules bench-store bench-room bench-replay run reset clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -c 'import site, pathlib; root = pathlib.Path.cwd(); \
	  pathlib.Path(site.getsitepackages()[0], "stud-hilo-roots.pth").write_text( \
	  "\n".join(str(root / p) for p in ("libs", "services", "protos/gen")) + "\n")'
	touch $(STAMP)

venv: $(STAMP)

$(PROTO_STAMP): $(STAMP) $(PROTO_SRC)
	rm -rf protos/gen && mkdir -p protos/gen
	$(if $(PROTO_SRC),$(PY) -m grpc_tools.protoc -I protos --python_out=protos/gen \
	  --pyi_out=protos/gen --grpc_python_out=protos/gen $(PROTO_SRC))
	touch $(PROTO_STAMP)

protos: $(PROTO_STAMP)

test: $(PROTO_STAMP)
	$(PYTEST) -m "not slow" -p no:cacheprovider

test-unit: $(PROTO_STAMP)
	$(PYTEST) tests/unit libs/rules libs/studkit

test-property: $(PROTO_STAMP)
	$(PYTEST) tests/property

test-integration: $(PROTO_STAMP)
	$(PYTEST) tests/integration

test-e2e: $(PROTO_STAMP)
	$(PYTEST) tests/e2e

# The integration and end-to-end suites on a local three-master Redis Cluster (same
# redis-server binary, started by studkit.redis_cluster); `make test` runs the short version
# (tests/integration/cluster, on a cluster of its own).
test-cluster: $(PROTO_STAMP)
	STUD_TEST_REDIS=cluster $(PYTEST) tests/integration tests/e2e -m "not slow" -p no:cacheprovider

# The full room campaign (slow): dealer, wallet and table as processes, bots at three tables,
# the table killed with SIGKILL at random points; money and logs checked at the end.
test-room: $(PROTO_STAMP)
	$(PYTEST) tests/e2e/table/test_room_e2e.py -m slow -s

# Three table replicas as processes: kill -9, SIGSTOP/SIGCONT, a rolling restart, while bots
# play; prints `tables=... takeovers=... max_takeover_s=... lost_events=0 ...` last.
failover: $(PROTO_STAMP)
	$(PY) -m table.failover --tables 6 --seconds-between 3

# Load: throughput beside the bare ceiling, then tables at human pace until p99 > 100 ms;
# prints `ratio=... p99_ms=... tables_at_human_pace=...` last.
load: $(PROTO_STAMP)
	$(PY) bench/load.py

# Faults: kill -9 table replicas, the dealer, the wallet and Redis at random points across
# 300 hands; prints `hands=... kills=... chips_lost=0 duplicate_settlements=0 unverified=0`.
chaos: $(PROTO_STAMP)
	$(PY) -m table.chaos --hands 300 --kills 12 --tables 4

# Secrecy: 1,000 hands with every watch stream, view, history, log and metric captured and
# searched for down cards against the dealer's record; prints `hands=... leaks=0` last.
audit: $(PROTO_STAMP)
	$(PY) -m table.secrecy --hands 1000 --tables 4

# Hostile clients: 10,000 hypothesis-style requests to every RPC of every service; the
# services' logs go to .run/fuzz.log; prints `cases=... crashes=0 internal=0 changed=0` last.
fuzz: $(PROTO_STAMP)
	@mkdir -p .run; FUZZ_CASES=$${FUZZ_CASES:-10000} $(PYTEST) tests/fuzz -q -s \
	  -p no:cacheprovider > .run/fuzz.log 2>&1; status=$$?; \
	  grep -E '^(INTERNAL|CHANGED|\{)' .run/fuzz.log; tail -3 .run/fuzz.log | grep -v '^cases=' ; \
	  grep '^cases=' .run/fuzz.log | tail -1; exit $$status

lint: $(PROTO_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy libs services

bench: bench-rules bench-store bench-room bench-replay

bench-rules: $(PROTO_STAMP)
	$(PY) bench/bench_rules.py

bench-store: $(PROTO_STAMP)
	$(PY) bench/bench_store.py

bench-replay: $(PROTO_STAMP)
	$(PY) bench/bench_replay.py

bench-room: $(PROTO_STAMP)
	$(PY) bench/bench_room.py

# Redis, the services and the demo room (bots at table "demo", its feed here) until Ctrl-C;
# the data (.run/redis) is kept across runs, the logs are in .run/logs.
run: $(PROTO_STAMP)
	$(PY) -m studkit.devrun

# Forget what make run kept: deletes .run/redis (tables, balances, hand logs) and .run/logs
# (refused while a make run is running); the dev keys in .run/keys stay.
reset: $(PROTO_STAMP)
	$(PY) -m studkit.devrun --reset

clean:
	rm -rf $(VENV) protos/gen .pytest_cache .mypy_cache .ruff_cache .hypothesis .run
