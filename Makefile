# Set-up on a fresh machine: `make demo` runs the local demo, `make test`
# runs every test. `.ci/run` installs what the tests need, then `make test`.

GO      ?= go
GOFLAGS ?=
BENCH_OUT ?= .bench/bench.txt

.PHONY: all test vet fmt-check deps-check bench fuzz node-deps build demo

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

## node-deps: the Node packages of the DynamoDB-compatible test server, from
## the lockfile, installed again whenever the lockfile changes.
node-deps: node_modules/.package-lock.json

node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

## build: every example as a Lambda bootstrap for provided.al2023, for
## linux/arm64 and linux/amd64, in dist/<example>/<arch>/bootstrap.
## Examples with a go.mod of their own (CDK apps) are not functions.
EXAMPLES := $(filter-out $(patsubst examples/%/go.mod,%,$(wildcard examples/*/go.mod)),$(patsubst examples/%/main.go,%,$(wildcard examples/*/main.go)))
ARCHS    := arm64 amd64

build:
	@for ex in $(EXAMPLES); do for arch in $(ARCHS); do \
		echo "dist/$$ex/$$arch/bootstrap"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -tags lambda.norpc -trimpath -ldflags="-s -w" \
			-o dist/$$ex/$$arch/bootstrap ./examples/$$ex || exit 1; \
	done; done

## demo: the payments example under the Lambda Runtime Interface Emulator,
## against dynalite, through a scripted scenario (needs only Go and Node).
demo: node-deps
	$(GO) run ./internal/cmd/demo
