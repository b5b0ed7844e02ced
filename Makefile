# Shoal — make targets. `make help` lists them.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 30s
BENCHTIME ?= 1s
BENCHCOUNT ?= 3
TOOLS      = $(shell ./scripts/tools.sh)
DISTBENCH ?=

.PHONY: help
help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z_-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/shoal
	$(GO) build -o bin/shoal ./cmd/shoal

.PHONY: image
image: ## build the container image (docker or podman, whichever is installed)
	@if command -v docker >/dev/null && docker info >/dev/null 2>&1; then tool=docker; \
	elif command -v podman >/dev/null; then tool=podman; \
	elif command -v docker >/dev/null; then \
	  echo "make image: docker is installed but no Docker engine answers (docker info fails), and podman is not installed: start the engine or install podman" >&2; exit 1; \
	else \
	  echo "make image: neither docker nor podman is installed: install one of them to build the image of Dockerfile" >&2; exit 1; \
	fi; \
	version=$$(git describe --tags --always --dirty 2>/dev/null || echo dev); \
	ref="$(or $(IMAGE),ghcr.io/shoal-mqtt/shoal):$$version"; \
	echo "$$tool build --build-arg VERSION=$$version -t $$ref ."; \
	"$$tool" build --build-arg VERSION="$$version" -t "$$ref" .

.PHONY: run
run: build ## start Shoal (shoal all) on the embedded backbone; flags in ARGS (ARGS="--log-level debug"), SHOAL_* variables as they are
	./bin/shoal all $(ARGS)

.PHONY: test
test: deps vet proto-check lint unit chart integration ## everything CI runs: test deps, vet, schema checks, lint, unit, Helm chart and integration tests with -race

.PHONY: deps
deps: ## install what the tests drive when missing (mosquitto, mosquitto-clients, haproxy, kcat)
	./scripts/test-deps.sh

.PHONY: vet
vet: ## go vet, and a gofmt check
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags integration ./internal/testutil/...
	cd integration && $(GO) vet -tags integration ./...
	cd bench/trie && $(GO) vet ./...
	cd bench/plot && $(GO) vet ./...
	cd deploy/helm/charttest && $(GO) vet ./...

.PHONY: lint
lint: ## golangci-lint (installed into the tool cache when missing), the main module and the integration module; no "issue N" in the code and docs (scripts/check-refs.sh); no file over its size (scripts/check-sizes.sh)
	./scripts/check-refs.sh
	./scripts/check-sizes.sh
	$(TOOLS)/golangci-lint run --build-tags integration $(PKGS)
	cd integration && $(TOOLS)/golangci-lint run --config ../.golangci.yml --build-tags integration ./...
	cd deploy/helm/charttest && $(TOOLS)/golangci-lint run --config ../../../.golangci.yml ./...

.PHONY: unit
unit: ## unit tests with the race detector; the broker's end-to-end suite again with every record fetched (kafka.local_delivery false)
	$(GO) test -race -count=1 $(PKGS)
	SHOAL_KAFKA_LOCAL_DELIVERY=false $(GO) test -race -count=1 ./compose/broker/
	cd bench/trie && $(GO) test -race -count=1 ./...
	cd bench/plot && $(GO) test -race -count=1 ./...

.PHONY: chart
chart: ## the Helm chart's tests (deploy/helm/charttest): helm lint --strict, every documented combination rendered and decoded strictly, CRD schemas, golden files
	cd deploy/helm/charttest && HELM=$(TOOLS)/helm $(GO) test -race -count=1 ./...

.PHONY: integration
integration: ## integration suites (own module, integration/) against a real Kafka and CQL database: containers with a Docker engine, else local processes (jars fetched once into ~/.cache/shoal)
	./scripts/fetch-kafka.sh >/dev/null
	./scripts/fetch-cassandra.sh >/dev/null
	cd integration && $(GO) test -race -count=1 -tags integration -timeout 40m ./...

.PHONY: chaos
chaos: ## the fault suite's whole schedule: every fault of TestFaults 3 times (SHOAL_FAULT_ROUNDS), the Cassandra rolling restart too (SHOAL_FAULT_SCHEDULE), on 3 Kafka nodes, a Cassandra ring of 3 and the Shoal roles behind HAProxy (docs/faults.md; make test runs each fault once but that one)
	./scripts/fetch-kafka.sh >/dev/null
	./scripts/fetch-cassandra.sh >/dev/null
	cd integration && SHOAL_FAULT_SCHEDULE=1 SHOAL_FAULT_ROUNDS=$${SHOAL_FAULT_ROUNDS:-3} $(GO) test -race -count=1 -tags integration -timeout 90m -run Faults -v ./...

.PHONY: short
short: ## unit tests with -short (skips the slow ones)
	$(GO) test -race -short $(PKGS)

.PHONY: bench
bench: bench-micro bench-compare bench-distributed ## every table of bench/README.md: micro-benchmarks, Shoal vs Mosquitto, distributed mode (about 25 min)

.PHONY: bench-micro
bench-micro: ## Go micro-benchmarks with -benchmem (codec, topic trie, router shard, gateway fan-out, trace context, the console's pages with 10,000 clients, trie vs mochi-mqtt); see bench/README.md
	$(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) -count=$(BENCHCOUNT) ./internal/mqtt/...
	$(GO) test -run='^$$' -bench=BenchmarkShardPublish -benchmem -benchtime=$(BENCHTIME) -count=$(BENCHCOUNT) ./router-svc/
	$(GO) test -run='^$$' -bench=BenchmarkFanOut -benchmem -benchtime=20000x -count=$(BENCHCOUNT) ./gateway/
	$(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) -count=$(BENCHCOUNT) ./internal/tracectx/
	$(GO) test -run='^$$' -bench=BenchmarkConsole10kClients -benchtime=2s -count=$(BENCHCOUNT) ./compose/console/
	cd bench/trie && $(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) -count=$(BENCHCOUNT)

.PHONY: bench-compare
bench-compare: ## Shoal vs Mosquitto, every scenario, alternating for ROUNDS rounds (default 3; SCENARIOS, PROFILE, OUT: see scripts/bench-compare.sh)
	ROUNDS=$${ROUNDS:-3} ./scripts/bench-compare.sh

.PHONY: bench-independent
bench-independent: build ## Shoal vs Mosquitto measured with Mosquitto's own clients and hand-made connections, not Shoal's generator (SCENARIOS=steady,saturate; cycle too: a connection's whole life; ROUNDS: see scripts/independent-compare.py)
	@command -v mosquitto >/dev/null && command -v mosquitto_sub >/dev/null || { apt-get install -y -qq --no-install-recommends mosquitto mosquitto-clients >/dev/null || sudo apt-get install -y -qq --no-install-recommends mosquitto mosquitto-clients >/dev/null; }
	SCENARIOS=$${SCENARIOS:-steady,saturate,cycle} ./scripts/independent-compare.py

OUTSIDE ?= 6
.PHONY: bench-distributed
bench-distributed: build ## distributed mode on a real Kafka + Cassandra, latency at 10k msg/s: OUTSIDE (6) rounds of an outside generator from each topology's start, then Shoal's generator's rounds (DISTBENCH=-smoke for a quick check); see bench/README.md
	./scripts/fetch-kafka.sh >/dev/null
	./scripts/fetch-cassandra.sh >/dev/null
	$(GO) run ./bench/cmd/shoal-distbench -shoal bin/shoal -outside $(OUTSIDE) $(DISTBENCH)

.PHONY: bench-units
bench-units: build ## what a message, a connect and a subscription cost each role, Kafka and Cassandra, and the memory they hold, into bench/units.json (UNITS= for more flags); see docs/capacity.md
	./scripts/fetch-kafka.sh >/dev/null
	./scripts/fetch-cassandra.sh >/dev/null
	$(GO) run ./bench/cmd/shoal-distbench -shoal bin/shoal -scenario units -topologies two-gateways -out bench/results/$$(date -u +%F)-units $(UNITS)

STORM ?= 10000
.PHONY: bench-connect-storm
bench-connect-storm: build ## connect storms: STORM (10000) clients connect at once with persistent sessions, their gateway is killed, all resume at once on another; with 1 and 2 session services, into bench/connect-storm.json (about 5 min); see docs/capacity.md
	./scripts/fetch-kafka.sh >/dev/null
	./scripts/fetch-cassandra.sh >/dev/null
	$(GO) run ./bench/cmd/shoal-distbench -shoal bin/shoal -scenario units -unit-storm $(STORM) -storm-sessions 1,2 -topologies two-gateways -out bench/results/$$(date -u +%F)-connect-storm

.PHONY: bench-partition-costs
bench-partition-costs: build ## what the per-partition records (GatewayHeartbeat, SessionTick) cost each process: the idle roles with their default periods, then at 100ms, into bench/partition-costs.json (about 3 min); see docs/capacity.md
	./scripts/fetch-kafka.sh >/dev/null
	./scripts/fetch-cassandra.sh >/dev/null
	$(GO) run ./bench/cmd/shoal-distbench -shoal bin/shoal -scenario units -unit-ticks -unit-idle 20s -topologies two-gateways -out bench/results/$$(date -u +%F)-partition-costs

INDEX ?= 1000000,100000
.PHONY: bench-router-index
bench-router-index: build ## the router index ceiling: 1M concrete and 100k wildcard filters of persistent sessions, the router's heap and CPU per message with them, its rebuild from CQL, and the pause when a second router joins and leaves under load, into bench/router-index.json (about 13 min; INDEX=1000000,100000); see docs/capacity.md
	./scripts/fetch-kafka.sh >/dev/null
	./scripts/fetch-cassandra.sh >/dev/null
	$(GO) run ./bench/cmd/shoal-distbench -shoal bin/shoal -scenario units -unit-index $(INDEX) -topologies two-gateways -out bench/results/$$(date -u +%F)-router-index

.PHONY: bench-router-10m
bench-router-10m: ## the router's index simulated in one process with its real shards: 10M concrete and 100k wildcard filters (and 1M, set against bench/router-index.json): heap per filter, load and Apply CPU, match CPU per publish, into bench/router-10m.json (about 1 min, 6 GiB); see docs/capacity.md
	$(GO) run ./bench/cmd/shoal-indexsim -concrete 1000000 -wildcard 100000 -out bench/results/$$(date -u +%F)-router-10m/router-1m.json -readme ""
	$(GO) run ./bench/cmd/shoal-indexsim -concrete 10000000 -wildcard 100000 -out bench/router-10m.json -readme bench/results/$$(date -u +%F)-router-10m/README.md -beside bench/results/$$(date -u +%F)-router-10m/router-1m.json

HOLD ?= 100000
.PHONY: bench-fleet-hold
bench-fleet-hold: build ## a fleet held idle: HOLD (100000) devices with persistent sessions and a subscription each, across 6 gateways (one generator process each, under the per-process open-file limit): memory per device in every process and the kernel, CPU per device-second, then a second session service started and stopped under persistent QoS 1 pairs (the pause), into bench/fleet-hold.json (about 9 min); see docs/capacity.md
	./scripts/fetch-kafka.sh >/dev/null
	./scripts/fetch-cassandra.sh >/dev/null
	$(GO) run ./bench/cmd/shoal-distbench -shoal bin/shoal -scenario units -unit-hold $(HOLD) -hold-gateways 6 -hold-scale -unit-idle 20s -topologies two-gateways -out bench/results/$$(date -u +%F)-fleet-hold

.PHONY: screenshots
screenshots: ## the web console's screenshots in docs/console/, taken by TestConsoleInBrowser in Debian's headless chromium
	./scripts/test-deps.sh
	SHOAL_CONSOLE_SCREENSHOTS=1 $(GO) test -count=1 -run TestConsoleInBrowser ./compose/console/

.PHONY: capacity
capacity: ## the capacity model: node counts for the fleets of docs/capacity.md from bench/*.json, written into docs/capacity.md (CAPACITY= for flags: -vcpu, -mem-gib, -cpu-target, -rf, ...)
	$(GO) run ./bench/cmd/shoal-capacity -write docs/capacity.md $(CAPACITY)

.PHONY: bench-bridge
bench-bridge: build ## the Kafka data bridge: throughput with and without a mapping, MQTT <-> Kafka latency through kcat and mosquitto_sub, catch-up after a stop (about 8 min; BRIDGEBENCH=-smoke for a quick check); see bench/README.md
	./scripts/test-deps.sh
	$(GO) run ./bench/cmd/shoal-bridgebench -shoal bin/shoal $(BRIDGEBENCH)

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 30s)
	@grep -rl --include='*_test.go' '^func Fuzz' . | while read -r f; do \
	  dir=$$(dirname "$$f"); \
	  for fn in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$$f" | sed 's/^func //'); do \
	    echo "fuzz $$dir $$fn ($(FUZZTIME))"; \
	    $(GO) test -run='^$$' -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) "./$$dir" || exit 1; \
	  done; \
	done

.PHONY: proto
proto: ## regenerate schemas/eventspb from schemas/proto with buf
	cd schemas && PATH="$(TOOLS):$$PATH" buf generate

.PHONY: proto-check
proto-check: ## buf lint, buf breaking against schemas/BASELINE, and a diff check of the generated Go
	cd schemas && PATH="$(TOOLS):$$PATH" buf lint
	@if [ -s schemas/BASELINE ]; then \
	  ref=$$(tr -d '[:space:]' < schemas/BASELINE); \
	  if git cat-file -e "$$ref^{commit}" 2>/dev/null; then \
	    echo "buf breaking against $$ref"; \
	    (cd schemas && PATH="$(TOOLS):$$PATH" buf breaking --against "../.git#ref=$$ref,subdir=schemas/proto"); \
	  else echo "buf breaking: baseline $$ref is not in this clone (shallow?): skipped" >&2; fi; \
	fi
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  cp -r schemas/proto schemas/buf.yaml schemas/buf.gen.yaml "$$tmp"/; \
	  (cd "$$tmp" && PATH="$(TOOLS):$$PATH" buf generate); \
	  if ! diff -r -q -x doc.go "$$tmp/eventspb" schemas/eventspb; then \
	    echo "schemas/eventspb is stale: run make proto"; exit 1; fi

.PHONY: fmt
fmt: ## gofmt the tree
	gofmt -w $$(git ls-files '*.go')

.PHONY: clean
clean: ## remove build output and the default data directory
	rm -rf bin shoal-data
