# Set-up on a fresh machine: `make demo` runs the local demo, `make test`
# runs every test. `.ci/run` installs what the tests need, then `make test`.

GO      ?= go
GOFLAGS ?=
BENCH_OUT ?= .bench/bench.txt

.PHONY: all test test-cdk vet fmt-check deps-check bench fuzz node-deps

all: vet fmt-check deps-check test

## test: every test, with the race detector, in random order.
test: node-deps deps-check
	$(GO) test -race -shuffle=on -timeout 20m ./...
	@$(MAKE) --no-print-directory test-cdk

## test-cdk: the tests of the CDK app in examples/cdk, a module of its own
## (the CDK for Go is too large for go.mod). They synthesize the stack through
## the jsii runtime, on Node.js; the first build takes minutes and about 1 GB.
test-cdk:
	JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 $(GO) -C examples/cdk test -race -shuffle=on -timeout 20m ./...

## vet: go vet over the module, and over the CDK app's module.
vet:
	$(GO) vet ./...
	$(GO) -C examples/cdk vet ./...

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

## node-deps: the Node packages of the DynamoDB-compatible test server, from
## the lockfile, installed again whenever the lockfile changes.
node-deps: node_modules/.package-lock.json

node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund
	@touch $@
