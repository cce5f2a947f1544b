# skipq: `make run` brings the service up on a machine with only Go and this
# repository; `make test` runs the whole suite against a real PostgreSQL.

SHELL := /bin/bash

# The test cluster that testdb starts (devpg.EnsureDaemon) and `test` stops.
TEST_CLUSTER := .skipq/test

.PHONY: postgres-bin pgbouncer-bin browser-bin build image manifests bench run test check lint fuzz chaos failover screenshots generate clean

# postgres-bin: the PostgreSQL server binaries (Debian's postgresql package)
# and the unprivileged "postgres" user that runs private clusters for root.
postgres-bin:
	@if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then \
		sudo=; \
		if [ "$$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo=sudo; fi; \
		echo "Installing PostgreSQL server binaries (apt-get install postgresql)"; \
		$$sudo apt-get update && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql; \
	fi
	@if [ "$$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then \
		useradd --system --user-group --home-dir /var/lib/postgresql --no-create-home --shell /bin/bash postgres; \
	fi

# pgbouncer-bin: Debian's PgBouncer (1.18 on bookworm), which `test` runs in
# front of the test cluster for the API suite's second pass. It listens on a
# private unix socket only, so the system service the package may start on
# port 6432 is in nobody's way.
pgbouncer-bin:
	@if ! command -v pgbouncer >/dev/null && [ ! -x /usr/sbin/pgbouncer ]; then \
		sudo=; \
		if [ "$$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo=sudo; fi; \
		echo "Installing PgBouncer (apt-get install pgbouncer)"; \
		$$sudo apt-get update && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y pgbouncer; \
	fi

# browser-bin: Debian's chromium-headless-shell (about 100 MB), which the
# web console's browser tests drive with chromedp (internal/console/). Under CI=true
# those tests fail when no browser can be found.
browser-bin:
	@if ! command -v chromium-headless-shell >/dev/null && [ ! -x /usr/bin/chromium-headless-shell ]; then \
		sudo=; \
		if [ "$$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo=sudo; fi; \
		echo "Installing Chromium's headless shell (apt-get install chromium-headless-shell)"; \
		$$sudo apt-get update && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium-headless-shell; \
	fi

# build: the skipq binary, without the paths of this machine (-trimpath),
# its symbol table or DWARF (-s -w): stack traces and `go version -m` still
# work, and the binary is about a third smaller.
build:
	go build -trimpath -ldflags="-s -w" -o bin/skipq ./cmd/skipq

# image: the node's OCI image, built in Go (internal/image, with
# go-containerregistry; no container engine): the static binary as /skipq on
# no base image, user 65532, ENTRYPOINT ["/skipq"], CMD ["serve"], port 8080.
# Written as an OCI layout in bin/image/ and as bin/skipq-image.tar, which
# `podman load`/`docker load` read. Reproducible: the same commit and Go
# give the same digest (every time in it is SOURCE_DATE_EPOCH, by default
# the commit's time). See docs/DEPLOY.md.
IMAGE_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
image:
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go run ./internal/image/mkimage \
		-version $(IMAGE_VERSION) -revision "$(IMAGE_REVISION)" -layout bin/image -archive bin/skipq-image.tar

# manifests: render deploy/kubernetes/ from the Helm chart's defaults
# (deploy/helm/skipq); `make test` fails while they differ.
manifests:
	SKIPQ_UPDATE_MANIFESTS=1 go test -count=1 -run TestPlainManifestsAreRendered ./internal/deploycheck/

# bench: skipq-bench, the measurements of docs/PERFORMANCE.md, a command of
# its own (the server binary carries neither it nor the AWS SDK it drives);
# flags in BENCH_FLAGS, e.g. make bench BENCH_FLAGS="--quick --scenario lifecycle".
bench: postgres-bin
	go build -o bin/skipq-bench ./cmd/skipq-bench
	./bin/skipq-bench $(BENCH_FLAGS)

# run: the service against SKIPQ_DATABASE_URL/DATABASE_URL when set, else
# `skipq dev` with a private cluster under .skipq/dev.
run: postgres-bin build
	@if [ -n "$${SKIPQ_DATABASE_URL:-}$${DATABASE_URL:-}" ]; then \
		exec ./bin/skipq serve; \
	else \
		exec ./bin/skipq dev; \
	fi

# lint: golangci-lint, pinned as a Go tool in go.mod, with .golangci.yml
# (bugs, not taste: errcheck, govet, ineffassign, staticcheck, unused, gofmt).
# The first run on a machine builds it (about a minute).
lint:
	go tool golangci-lint run --build-tags chaos,failover ./...

# test: the loop to run often. Lint, vet, check that sqlc's generated code
# and internal/migrations/current/ are current, run every test of every package
# (but skipq-bench's scenario tests, which `check` runs) against a real PostgreSQL, then stop the shared test cluster whether the
# tests passed or not, keeping the first failure's exit status.
test: postgres-bin pgbouncer-bin browser-bin lint
	go vet ./...
	@if [ -f sqlc.yaml ]; then echo "go tool sqlc diff"; go tool sqlc diff; fi
	@status=0; \
	go test -count=1 -timeout 20m ./... || status=$$?; \
	go run ./internal/devpg/stopcluster $(TEST_CLUSTER) || true; \
	exit $$status

# check: the slow suites, which CI runs after `make test` (.ci/run): the HTTP
# API suite (apitest) a second time with the nodes' database URL, a plain
# one, through PgBouncer in transaction-pooling mode and their LISTEN
# connection direct (internal/node/nodetest), skipq-bench's scenario tests
# (SKIPQ_TEST_BENCH=1, about a minute and a half), the concurrent packages
# under the race detector (RACE_PACKAGES), the fault test once (make chaos's TestChaos,
# about 50 s: 100,000 messages through killed nodes, two PostgreSQL crashes
# and terminated backends), the failover and online-migration tests once
# (make failover, about 1 minute); then the cluster stops as in `test`.
check: postgres-bin pgbouncer-bin
	@status=0; \
	echo "SKIPQ_TEST_PGBOUNCER=1 go test -count=1 -timeout 20m ./internal/apitest/"; \
	SKIPQ_TEST_PGBOUNCER=1 go test -count=1 -timeout 20m ./internal/apitest/ || status=$$?; \
	echo "SKIPQ_TEST_BENCH=1 go test -count=1 ./internal/bench/"; \
	SKIPQ_TEST_BENCH=1 go test -count=1 -timeout 20m ./internal/bench/ || { s=$$?; [ $$status != 0 ] || status=$$s; }; \
	echo "go test -race $(RACE_PACKAGES)"; \
	go test -race -count=1 -timeout 20m $(RACE_PACKAGES) || { s=$$?; [ $$status != 0 ] || status=$$s; }; \
	echo "go test -tags chaos -run TestChaos ./internal/chaos/"; \
	go test -tags chaos -count=1 -timeout 10m -run TestChaos ./internal/chaos/ || { s=$$?; [ $$status != 0 ] || status=$$s; }; \
	echo "go test -tags failover -run 'TestFailover|TestOnlineMigration' ./internal/chaos/"; \
	go test -tags failover -count=1 -timeout 10m -run 'TestFailover|TestOnlineMigration' ./internal/chaos/ || { s=$$?; [ $$status != 0 ] || status=$$s; }; \
	go run ./internal/devpg/stopcluster $(TEST_CLUSTER) || true; \
	exit $$status

# The packages whose goroutines meet (the long-poll hub, the client's
# Consume, the rate limiter, the node's wiring, the API under concurrent
# requests, the KubeMQ endpoint's streams and lease renewals) run a second
# time under the race detector: about 4 minutes here.
RACE_PACKAGES := ./internal/handlers/ ./internal/service/ ./internal/wake/ ./client/ ./internal/node/... ./internal/db/ ./internal/apitest/ ./internal/kubemq/

# fuzz: run every fuzz target for FUZZTIME each (their seed corpora already
# run in `make test`).
FUZZTIME ?= 5m
FUZZ_TARGETS := ./internal/handlers:FuzzRoutes ./internal/service:FuzzParseReceipt ./internal/service:FuzzCursors \
	./internal/service:FuzzPrepareMessage ./internal/service:FuzzQueueName ./internal/sqs:FuzzSQS
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzzing $$name in $$pkg for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

# chaos: three nodes and a private PostgreSQL under faults (SIGKILLed nodes,
# two PostgreSQL crashes, terminated backends), with nacks, releases,
# requeues, delays and dead letters; fails on any lost or doubly settled
# message, a settle the database's audit disagrees with, a delivery inside a
# live lease or before its delay, a 5xx other than 503, or a hang. See
# docs/RELIABILITY.md.
chaos: postgres-bin
	go test -tags chaos -count=1 -timeout 15m -v -run TestChaos ./internal/chaos/
	SKIPQ_TEST_LONGPOLLS=10000 go test -count=1 -v -run 'TestManyLongPolls|TestSlowAndOversizedRequests' ./cmd/skipq/

# failover: a PostgreSQL failover under load (docs/RELIABILITY.md#make-failover): a primary and a
# synchronous streaming standby (ports 22001-22002), three nodes on a
# multi-host URL (22011-22013); the primary's process group is SIGKILLed
# and the standby promoted. Fails on any lost, doubly acked or
# acked-then-redelivered message, a 5xx other than 503 with Retry-After, a
# node that does not send again within 5 s of the promotion, or a listener
# that did not follow. SKIPQ_FAILOVER_ASYNC=1 runs the control with
# asynchronous replication (printed, not asserted). Then a rolling upgrade
# (TestOnlineMigration, ports 22021 and 22031-22033): nodes built from the
# commit before the newest migration (git archive; needs the repository's
# history) serve under load while a node of this tree migrates; fails on a
# non-503 error, a loss, or a migration holding a lock that stops traffic.
# See docs/RELIABILITY.md and docs/DESIGN.md ("Online migrations").
failover: postgres-bin
	go test -tags failover -count=1 -timeout 10m -v -run 'TestFailover|TestOnlineMigration' ./internal/chaos/

# screenshots: the web console's pages, as its browser tests see them,
# written to docs/console/ (shown in the README), then the SHA-256 of the
# templates, the style sheet and the pictures in docs/console/SHA256SUMS:
# `make test` fails (TestScreenshotsAreCurrent) when a template or the CSS
# changed and the pictures were not taken again.
screenshots: postgres-bin browser-bin
	SKIPQ_SCREENSHOTS=$(CURDIR)/docs/console go test -count=1 -run 'TestAdminSendsBrowsesPurgesDeletes|TestMessageHistory|TestSearchPage|TestRedrive|TestOverviewAndRates' ./internal/console/
	SKIPQ_UPDATE_SCREENSHOT_SUMS=1 go test -count=1 -run TestScreenshotsAreCurrent ./internal/console/

# generate: rewrite internal/migrations/current/ (the schema every migration leaves,
# as pg_dump prints it, one file per function) and regenerate internal/db/ from
# internal/queries/ over it with sqlc, and the KubeMQ endpoint's Go code from its
# .proto (internal/kubemq/kubemqpb/generate: no protoc, the generators are Go tools
# pinned in go.mod). `make test` fails while any of them is stale.
generate: postgres-bin
	SKIPQ_UPDATE_CURRENT=1 go test -count=1 -run TestCurrentSchemaIsGenerated ./internal/migrations/
	go tool sqlc generate
	cd internal/kubemq/kubemqpb && go run ./generate

# clean: stop the test cluster and remove built binaries. The development
# cluster's data (.skipq/dev) stays.
clean:
	go run ./internal/devpg/stopcluster $(TEST_CLUSTER)
	rm -rf bin/
