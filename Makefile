# Set-up on a fresh machine (Go, Node.js, Java): `make demo` runs the local
# demo, `make test` runs every test. `.ci/run` installs what the tests need, then `make test`.

GO      ?= go
GOFLAGS ?=

.PHONY: all test test-go1.25 test-modules test-cdk vet fmt-check deps-check bench benchstat compare fuzz node-deps compare-deps build demo chaos dynamodb-local

# MODULES are the modules of the repository besides the library's own (the
# root): the examples, the comparison, the OpenTelemetry observer, the
# operator's command, the PostgreSQL store, and the gRPC and Connect
# interceptors with their example (which need Go 1.26, as gRPC and Connect
# do), each with a go.mod of its own so that the library's go.mod requires
# only what the library needs. The CDK app (examples/cdk) is a module too,
# tested apart (test-cdk).
MODULES := examples bench/compare otelidempotency cmd/retrysafe persistence/postgres grpcidempotency examples/grpcorders

# GO_MIN is the oldest Go the library supports, the go directive of go.mod.
# test-go1.25 runs the library's tests with it, fetched through the module
# proxy (GOTOOLCHAIN).
GO_MIN := go1.25.5

all: vet fmt-check deps-check test

## test: every test, with the race detector, in random order: the
## library's, those of the other modules, the CDK app's, and the library's
## again with the oldest Go it supports.
test: node-deps dynamodb-local compare-deps deps-check
	$(GO) test -race -shuffle=on -timeout 20m ./...
	@$(MAKE) --no-print-directory test-modules test-go1.25 test-cdk

## test-modules: the tests of the other modules (MODULES).
test-modules: node-deps compare-deps
	@for m in $(MODULES); do echo "$(GO) -C $$m test -race -shuffle=on -timeout 20m ./..."; \
		$(GO) -C $$m test -race -shuffle=on -timeout 20m ./... || exit 1; done

## test-go1.25: the library's tests with $(GO_MIN), the go directive of
## go.mod (without -race, which the run above covers).
test-go1.25: node-deps dynamodb-local
	GOTOOLCHAIN=$(GO_MIN) $(GO) test -shuffle=on -timeout 20m ./...

## test-cdk: the tests of the CDK app in examples/cdk, a module of its own
## (the CDK for Go is too large for go.mod). They synthesize the stack through
## the jsii runtime, on Node.js; the first build takes minutes and about 1 GB.
## Without -race: the app has no concurrency of its own, and instrumenting
## the CDK's generated bindings doubles a build that is already the longest.
test-cdk:
	JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 $(GO) -C examples/cdk test -shuffle=on -timeout 20m ./...

## vet: go vet over every module.
vet:
	$(GO) vet ./...
	@for m in $(MODULES) examples/cdk; do echo "$(GO) -C $$m vet ./..."; $(GO) -C $$m vet ./... || exit 1; done

## fmt-check: fail if gofmt would change a file.
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## deps-check: the import rules between packages (scripts/deps-check.sh
## says which).
deps-check:
	./scripts/deps-check.sh

## bench: the benchmarks of every package (the latency ones against dynalite
## and redis-server included), six runs each, in .bench/<commit>.txt, the
## format benchstat reads. Compare two commits with `make benchstat`.
BENCH_REV   := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
BENCH_OUT   ?= .bench/$(BENCH_REV).txt
BENCH_COUNT ?= 6
BENCH       ?= .
bench: node-deps
	@mkdir -p $(dir $(BENCH_OUT))
	@rc=$$(mktemp); \
	{ $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(BENCH_COUNT) -timeout 60m ./...; echo $$? >$$rc; } | tee $(BENCH_OUT); \
	status=$$(cat $$rc); rm -f $$rc; echo "written to $(BENCH_OUT)"; exit $$status

## benchstat: compare the benchmarks of two commits, as written by `make bench`
## on each: make benchstat OLD=.bench/abc1234.txt NEW=.bench/def5678.txt
## (NEW defaults to this commit's, OLD to main's).
BENCHSTAT ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
OLD ?= .bench/$(shell git rev-parse --short main 2>/dev/null).txt
NEW ?= $(BENCH_OUT)
benchstat:
	$(BENCHSTAT) $(OLD) $(NEW)

## compare: this library against Powertools for AWS Lambda (TypeScript), side
## by side on one DynamoDB server: COMPARE_SERVER=dynalite (the default) or
## dynamodb-local (DynamoDB Local, which returns ALL_OLD itself); writes
## bench/compare/results/ (results/dynamodb-local/ with DynamoDB Local; see
## bench/compare/README.md). COMPARE_FLAGS passes options, such as -rounds 3.
COMPARE_SERVER ?= dynalite
COMPARE_FLAGS  ?=
compare: node-deps compare-deps $(if $(filter dynamodb-local,$(COMPARE_SERVER)),dynamodb-local)
	$(GO) -C bench/compare run . -server $(COMPARE_SERVER) $(COMPARE_FLAGS)

## fuzz: each fuzz target for a short while.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$target"; $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime 20s $$pkg || exit 1; \
		done; \
	done

## chaos: the long mode of the fault-injection harness (internal/testing/chaos):
## each store in CHAOS_STORES driven for CHAOS_DURATION, with the race
## detector; reports in .chaos/. `make test` runs its short mode.
CHAOS_DURATION ?= 10m
CHAOS_STORES   ?= dynamodb,dynamodb-local,dynamodb-local-tx,redis
CHAOS_FLAGS    ?=
chaos: node-deps dynamodb-local
	@mkdir -p .chaos
	CHAOS_REPORT_DIR=$(CURDIR)/.chaos $(GO) test -race -count=1 -timeout 0 -v -run '^TestChaos$$' ./internal/testing/chaos \
		-chaos.long -chaos.duration=$(CHAOS_DURATION) -chaos.stores=$(CHAOS_STORES) $(CHAOS_FLAGS)

## node-deps: the Node packages of the DynamoDB-compatible test server, from
## the lockfile, installed again whenever the lockfile changes.
node-deps: node_modules/.package-lock.json

node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

## dynamodb-local: DynamoDB Local, AWS's own DynamoDB emulator (it runs on
## Java), in .dynamodb-local/: fetched, pinned and verified by
## scripts/install-dynamodb-local.sh, again whenever the script or the list
## of its files' hashes changes.
dynamodb-local: .dynamodb-local/DynamoDBLocal.jar

.dynamodb-local/DynamoDBLocal.jar: scripts/install-dynamodb-local.sh scripts/dynamodb-local.sha256
	./scripts/install-dynamodb-local.sh
	@touch $@

## compare-deps: the pinned Powertools packages that bench/compare runs.
compare-deps: bench/compare/node/node_modules/.package-lock.json

bench/compare/node/node_modules/.package-lock.json: bench/compare/node/package-lock.json
	cd bench/compare/node && npm ci --no-audit --no-fund
	@touch $@

## build: every example as a Lambda bootstrap for provided.al2023, for
## linux/arm64 and linux/amd64, in dist/<example>/<arch>/bootstrap: the
## functions, and the httpserver example, which runs under Lambda Web
## Adapter (and anywhere else) as it is. Examples with a go.mod of their
## own (CDK apps) are not functions.
## Reproducible (-trimpath, no VCS stamp), with the flags of the CDK app's
## build (examples/cdk/binaries.go): an unchanged program gives the same
## binary at every commit, so deployments see nothing new to upload.
EXAMPLES := $(filter-out $(patsubst examples/%/go.mod,%,$(wildcard examples/*/go.mod)),$(patsubst examples/%/main.go,%,$(wildcard examples/*/main.go)))
ARCHS    := arm64 amd64

build:
	@for ex in $(EXAMPLES); do for arch in $(ARCHS); do \
		echo "dist/$$ex/$$arch/bootstrap"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) -C examples build -trimpath -buildvcs=false -tags lambda.norpc -ldflags="-s -w" \
			-o $(CURDIR)/dist/$$ex/$$arch/bootstrap ./$$ex || exit 1; \
	done; done

## demo: the payments example under the Lambda Runtime Interface Emulator,
## against dynalite, through a scripted scenario; its transactions step runs
## on DynamoDB Local (needs Go, Node and Java; without Java, that step is
## skipped, and the demo says what to install).
demo: node-deps dynamodb-local
	$(GO) -C examples run ./payments/demo
