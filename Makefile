# Set-up on a fresh machine: `make demo` runs the local demo, `make test`
# runs every test. `.ci/run` installs what the tests need, then `make test`.

GO      ?= go
GOFLAGS ?=
BENCH_OUT ?= .bench/bench.txt

.PHONY: all test vet fmt-check deps-check bench fuzz node-deps chaos

all: vet fmt-check deps-check test

## test: every test, with the race detector, in random order.
test: node-deps deps-check
	$(GO) test -race -shuffle=on -timeout 20m ./...

## vet: go vet over the module.
vet:
	$(GO) vet ./...

## fmt-check: fail if gofmt would change a file.
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## deps-check: the import rules between packages (see DESIGN notes in the README).
deps-check:
	./scripts/deps-check.sh

## bench: the benchmarks of every package, written for benchstat.
bench:
	@mkdir -p $(dir $(BENCH_OUT))
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./... | tee $(BENCH_OUT)

## fuzz: each fuzz target for a short while.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$target"; $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime 20s $$pkg || exit 1; \
		done; \
	done

## chaos: the long mode of the fault-injection harness (internal/chaos):
## each store in CHAOS_STORES driven for CHAOS_DURATION, with the race
## detector; reports in .chaos/. `make test` runs its short mode.
CHAOS_DURATION ?= 10m
CHAOS_STORES   ?= dynamodb,redis
CHAOS_FLAGS    ?=
chaos: node-deps
	@mkdir -p .chaos
	CHAOS_REPORT_DIR=$(CURDIR)/.chaos $(GO) test -race -count=1 -timeout 0 -v -run '^TestChaos$$' ./internal/chaos \
		-chaos.long -chaos.duration=$(CHAOS_DURATION) -chaos.stores=$(CHAOS_STORES) $(CHAOS_FLAGS)

## node-deps: the Node packages of the DynamoDB-compatible test server, from
## the lockfile, installed again whenever the lockfile changes.
node-deps: node_modules/.package-lock.json

node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund
	@touch $@
