# Set-up on a fresh machine (Go, Node.js, Java): `make demo` runs the local
# demo, `make test` runs every test. `.ci/run` installs what the tests need, then `make test`.

GO      ?= go
GOFLAGS ?=

.PHONY: all doccheck test test-stress test-go1.25 test-modules test-cdk model vet fmt-check deps-check bench bench-wait benchstat compare fuzz node-deps compare-deps build demo demo-postgres chaos dynamodb-local local-versions release-check tidy apicheck require release release-plan

# MODULES are the modules of the repository besides the library's own (the
# root): the examples, the comparison, the OpenTelemetry observer, the
# operator's command, the PostgreSQL store, the gRPC and Connect
# interceptors with their example, and the release's tool, each with a
# go.mod of its own so that the library's go.mod requires only what the
# library needs. The CDK app (examples/cdk) is a module too, tested apart
# (test-cdk).
#
# Each go.mod requires a version of the others, never a replace: go.work
# makes them one workspace, so that every go command in the repository
# builds against the work tree (RELEASING.md says how the versions move).
# The CDK app is outside it, with a go.work of its own: its go line (that
# of the CDK's dependencies) is above the workspace's, the oldest Go the
# library supports, and it requires none of the repository's modules.
MODULES := examples bench/compare bench/wait otelidempotency cmd/retrysafe persistence/postgres grpcidempotency examples/grpcorders scripts/release

# RELEASE runs the release's tool (scripts/release, RELEASING.md) on its own
# module, outside the workspace, whose versions it makes.
RELEASE := GOWORK=off $(GO) -C scripts/release run .

# GO_MIN is the oldest Go the library supports, the go directive of go.mod.
# test-go1.25 runs the library's tests with it, fetched through the module
# proxy (GOTOOLCHAIN).
GO_MIN := go1.25.5

all: vet fmt-check deps-check test

## test: every test, with the race detector, in random order: the
## checks of the import rules, of the modules' requirements and of the
## API; the library's tests; those of the other modules (the release's
## proof among them); the library's again with the oldest Go it supports;
## the CDK app's; and the protocol's model. scripts/test.sh runs these
## stages two at a time (TEST_JOBS), each to its end even when another
## one failed, and reports each stage's time and every failure at the
## end (scripts/test.sh STAGE... runs some again; -l lists them).
test: node-deps dynamodb-local compare-deps local-versions
	@GO=$(GO) GO_MIN=$(GO_MIN) MODULES="$(MODULES)" ./scripts/test.sh

## test-stress: the tests of the library and of the other modules, three
## times over, with GOMAXPROCS=1 beside a busy loop on every core, to
## find the tests that pass only on an idle machine. Run it before and
## after touching timing-sensitive code (scripts/test-stress.sh says how
## to narrow it: STRESS_RUN, STRESS_COUNT, module directories).
test-stress: node-deps dynamodb-local compare-deps local-versions
	@GO=$(GO) MODULES="$(MODULES)" ./scripts/test-stress.sh $(STRESS_MODULES)

## test-modules: the tests of the other modules (MODULES).
test-modules: node-deps compare-deps local-versions
	@GO=$(GO) MODULES="$(MODULES)" ./scripts/test.sh $(addprefix module:,$(MODULES))

## test-go1.25: the library's tests with $(GO_MIN), the go directive of
## go.mod (without -race, which the run above covers).
test-go1.25: node-deps dynamodb-local local-versions
	@GO=$(GO) GO_MIN=$(GO_MIN) ./scripts/test.sh go1.25

## test-cdk: the tests of the CDK app in examples/cdk, a module of its own
## (the CDK for Go is too large for go.mod). They synthesize the stack through
## the jsii runtime, on Node.js; the first build takes minutes and about 1 GB.
## Without -race: the app has no concurrency of its own, and instrumenting
## the CDK's generated bindings doubles a build that is already the longest.
test-cdk: local-versions
	@GO=$(GO) ./scripts/test.sh cdk

## model: the protocol's model (model/idempotency.pml) checked with SPIN
## over every interleaving, in several configurations, with its documented
## exceptions and known-broken tables, which must fail (model/check.sh;
## needs spin and gcc; model/README.md).
model:
	./model/check.sh

## vet: go vet over every module.
vet: local-versions
	$(GO) vet ./...
	@for m in $(MODULES) examples/cdk; do echo "$(GO) -C $$m vet ./..."; $(GO) -C $$m vet ./... || exit 1; done

## fmt-check: fail if gofmt would change a file.
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## doccheck: the doc comments of the library's packages in the register
## of log/slog's: no sentence over 25 words, none chaining clauses with
## more than one colon or semicolon (internal/tools/doccheck).
doccheck:
	$(GO) run ./internal/tools/doccheck

## deps-check: the import rules between packages (scripts/deps-check.sh
## says which).
deps-check: local-versions
	./scripts/deps-check.sh

## local-versions: the versions of the repository's own modules that the
## go.mod files require (a pseudo-version of a commit on main, or a tag),
## made from the repository's history into the module cache. The go command
## reads the go.mod of a required version even when the workspace holds
## the module, and no proxy serves a commit or a tag before it is pushed.
## Every target that runs the go command in the workspace needs it; run it
## once after a clone, and after a pull that changes a requirement, before
## a go command of your own.
local-versions:
	@$(RELEASE) seed

## release-check: each go.mod requires tagged versions of the repository's
## modules, or pseudo-versions of commits in HEAD's history, and replaces
## none; and each go.mod and go.sum is tidy on its own (GOWORK=off).
release-check:
	$(RELEASE) check -dev
	$(RELEASE) tidy -check

## tidy: go mod tidy of every module on its own (GOWORK=off: go mod tidy
## ignores the workspace), with the versions of the repository's modules
## they require served from its history.
tidy:
	$(RELEASE) tidy

## apicheck: the API of the library's modules (the root, otelidempotency,
## persistence/postgres, grpcidempotency) against their last release, with
## apidiff; it fails on an incompatible change that
## scripts/release/accepted-breaks.txt does not list. Before the first
## release there is nothing to compare.
apicheck:
	$(RELEASE) apicheck

## require: make every module that requires another of the repository's
## require the pseudo-version of commit REV (a commit on main) instead, and
## tidy them: when a module comes to need a change of another between
## releases (make require REV=main).
require:
	@test -n "$(REV)" || { echo "usage: make require REV=<commit>"; exit 2; }
	$(RELEASE) require $(REV)

## release: tag VERSION (vX.Y.Z) of every published module, the root first,
## then the modules that require it (RELEASING.md); pushes nothing.
## release-plan prints the steps.
release:
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=vX.Y.Z"; exit 2; }
	$(RELEASE) tag $(VERSION)

release-plan:
	@test -n "$(VERSION)" || { echo "usage: make release-plan VERSION=vX.Y.Z"; exit 2; }
	$(RELEASE) tag -n $(VERSION)

## bench: the benchmarks of every package (the latency ones against dynalite
## and redis-server included), six runs each, in .bench/<commit>.txt, the
## format benchstat reads. Compare two commits with `make benchstat`.
BENCH_REV   := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
BENCH_OUT   ?= .bench/$(BENCH_REV).txt
BENCH_COUNT ?= 6
BENCH       ?= .
bench: node-deps local-versions
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

## bench-wait: how soon a call that waits for a key (WithWait) in one
## process is answered after the key's holder, in another, completes: woken
## by the store or polling it, on redis-server and PostgreSQL (bench/wait).
## BENCH_WAIT_ITERATIONS holds of each length, three waiting callers each.
BENCH_WAIT_ITERATIONS ?= 20
bench-wait: local-versions
	$(GO) -C bench/wait test -run '^$$' -bench . -benchtime $(BENCH_WAIT_ITERATIONS)x -timeout 30m .

## compare: this library against Powertools for AWS Lambda (TypeScript), side
## by side on one DynamoDB server: COMPARE_SERVER=dynalite (the default) or
## dynamodb-local (DynamoDB Local, which returns ALL_OLD itself); writes
## bench/compare/results/ (results/dynamodb-local/ with DynamoDB Local; see
## bench/compare/README.md). COMPARE_FLAGS passes options, such as -rounds 3.
COMPARE_SERVER ?= dynalite
COMPARE_FLAGS  ?=
compare: node-deps compare-deps local-versions $(if $(filter dynamodb-local,$(COMPARE_SERVER)),dynamodb-local)
	$(GO) -C bench/compare run . -server $(COMPARE_SERVER) $(COMPARE_FLAGS)

## fuzz: each fuzz target for a short while.
fuzz: local-versions
	@for pkg in $$($(GO) list ./...); do \
		for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$target"; $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime 20s $$pkg || exit 1; \
		done; \
	done

## chaos: the long mode of the fault-injection harness (internal/testing/chaos):
## each store in CHAOS_STORES driven for CHAOS_DURATION, with the race
## detector; reports in .chaos/. The PostgreSQL stores (postgres,
## postgres-tx) run in the store's module, persistence/postgres, the others
## in the library's. `make test` runs its short mode, in both. Then it
## checks the stores' histories for linearizability, in their long runs
## (internal/testing/linearize, docs/protocol.md#histories).
CHAOS_DURATION ?= 10m
CHAOS_STORES   ?= dynamodb,dynamodb-local,dynamodb-local-tx,redis,postgres,postgres-tx
CHAOS_FLAGS    ?=
comma := ,
empty :=
space := $(empty) $(empty)
CHAOS_PG_STORES   = $(filter postgres postgres-%,$(subst $(comma),$(space),$(CHAOS_STORES)))
CHAOS_ROOT_STORES = $(filter-out $(CHAOS_PG_STORES),$(subst $(comma),$(space),$(CHAOS_STORES)))
CHAOS_TEST = test -race -count=1 -timeout 0 -v -run '^TestChaos$$'
CHAOS_ARGS = -chaos.long -chaos.duration=$(CHAOS_DURATION) -chaos.stores=$(subst $(space),$(comma),$(strip $(1))) $(CHAOS_FLAGS)
chaos: node-deps dynamodb-local local-versions
	@mkdir -p .chaos
	$(if $(CHAOS_ROOT_STORES),CHAOS_REPORT_DIR=$(CURDIR)/.chaos $(GO) $(CHAOS_TEST) ./internal/testing/chaos $(call CHAOS_ARGS,$(CHAOS_ROOT_STORES)))
	$(if $(CHAOS_PG_STORES),CHAOS_REPORT_DIR=$(CURDIR)/.chaos $(GO) -C persistence/postgres $(CHAOS_TEST) . $(call CHAOS_ARGS,$(CHAOS_PG_STORES)))
	LINEARIZE_LONG=1 LINEARIZE_DIR=$(CURDIR)/.chaos $(GO) test -race -count=1 -timeout 0 -v -run '^TestStoresAreLinearizable$$' ./internal/testing/linearize
	LINEARIZE_LONG=1 LINEARIZE_DIR=$(CURDIR)/.chaos $(GO) -C persistence/postgres test -race -count=1 -timeout 0 -v -run '^TestLinearizable$$' .

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

build: local-versions
	@for ex in $(EXAMPLES); do for arch in $(ARCHS); do \
		echo "dist/$$ex/$$arch/bootstrap"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) -C examples build -trimpath -buildvcs=false -tags lambda.norpc -ldflags="-s -w" \
			-o $(CURDIR)/dist/$$ex/$$arch/bootstrap ./$$ex || exit 1; \
	done; done

## demo: the payments example under the Lambda Runtime Interface Emulator,
## against dynalite, through a scripted scenario; its transactions step runs
## on DynamoDB Local (needs Go, Node and Java; without Java, that step is
## skipped, and the demo says what to install).
demo: node-deps dynamodb-local local-versions
	$(GO) -C examples run ./payments/demo

## demo-postgres: the PostgreSQL variant of the httpserver example (its
## records and ledger in one database, each ledger row committed with the
## completion of its key) through a scripted scenario, on a throwaway
## PostgreSQL server (Debian's postgresql package), or on DATABASE_URL.
demo-postgres: local-versions
	$(GO) -C examples run ./httpserver/pgdemo
