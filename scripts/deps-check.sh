#!/usr/bin/env bash
# Checks the import rules between the library's packages:
#   - persistence imports only the standard library;
#   - the core (idempotency) imports no concrete store, and its root package
#     needs nothing of aws-lambda-go but lambdacontext (the standard
#     library alone), for the tenant ID of an invocation;
#   - the HTTP client (idempotency/httpclient) needs neither aws-lambda-go
#     nor the server side (idempotency/httpapi);
#   - concrete stores never import the core;
#   - no package of the library links the testing package (the conformance
#     suite, persistence/storetest, excepted), nor imports unsafe;
#   - the library's go.mod requires no OpenTelemetry, no pgx, no gRPC and no
#     Connect: the otelidempotency, persistence/postgres and grpcidempotency
#     modules, which follow the rules above too, do; in grpcidempotency,
#     each framework's package links only its own framework, and the
#     package they share links neither.
# The library is every package of the root module but the test harness in
# internal/testing.
set -euo pipefail
cd "$(dirname "$0")/.."
# The root module's path (in the workspace, go list -m lists every module).
module=$(GOWORK=off go list -m)
fail=0

deps() { go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$@"; }

if bad=$(deps ./persistence | grep -vx "$module/persistence"); then
	echo "persistence must import only the standard library, but imports:"; echo "$bad"; fail=1
fi
if bad=$(deps ./idempotency/... | grep -E "^$module/persistence/(memory|dynamodb|redis)"); then
	echo "idempotency must not import a concrete store, but imports:"; echo "$bad"; fail=1
fi
if bad=$(deps ./idempotency | grep -E "^github.com/aws/aws-lambda-go" | grep -vx "github.com/aws/aws-lambda-go/lambdacontext"); then
	echo "the idempotency package must need nothing of aws-lambda-go but lambdacontext, but imports:"; echo "$bad"; fail=1
fi
if bad=$(deps ./idempotency/httpclient | grep -E "^(github.com/aws/aws-lambda-go|$module/idempotency/httpapi)(/|$)"); then
	echo "idempotency/httpclient must import neither aws-lambda-go nor httpapi, but imports:"; echo "$bad"; fail=1
fi
for store in $(go list ./persistence/... | grep -vx "$module/persistence"); do
	if bad=$(deps "$store" | grep -E "^$module/idempotency"); then
		echo "$store must not import the core, but imports:"; echo "$bad"; fail=1
	fi
done
library=$(go list ./... | grep -v "^$module/internal/testing/")
for pkg in $library; do
	if [ "$pkg" != "$module/persistence/storetest" ] && go list -deps "$pkg" | grep -qx testing; then
		echo "$pkg must not link the testing package, but does through:"
		go list -deps -f '{{.ImportPath}} {{join .Imports " "}}' "$pkg" | awk '/ testing( |$)/ {print "  " $1}'
		fail=1
	fi
	if go list -f '{{join .Imports "\n"}}' "$pkg" | grep -qx unsafe; then
		echo "$pkg must not import unsafe"; fail=1
	fi
done
if grep -q "go.opentelemetry.io" go.mod; then
	echo "the library's go.mod must not require OpenTelemetry (the otelidempotency module does)"; fail=1
fi
if go -C otelidempotency list -deps ./ | grep -qx testing; then
	echo "the otelidempotency module must not link the testing package"; fail=1
fi
if go -C otelidempotency list -f '{{join .Imports "\n"}}' ./ | grep -qx unsafe; then
	echo "the otelidempotency module must not import unsafe"; fail=1
fi
# The PostgreSQL store, a module of its own, follows the stores' rules.
pg=persistence/postgres
if bad=$(go -C $pg list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./ | grep -E "^$module/idempotency"); then
	echo "$pg must not import the core, but imports:"; echo "$bad"; fail=1
fi
if go -C $pg list -deps ./ | grep -qx testing; then
	echo "$pg must not link the testing package"; fail=1
fi
if go -C $pg list -f '{{join .Imports "\n"}}' ./ | grep -qx unsafe; then
	echo "$pg must not import unsafe"; fail=1
fi
if grep -q "jackc/pgx" go.mod; then
	echo "the library's go.mod must not require pgx (the $pg module does)"; fail=1
fi
# The gRPC and Connect interceptors, a module of their own: the library's
# go.mod requires neither framework; the module's root package, whose
# options, reasons and keys both frameworks' interceptors share, links
# neither; grpcgo links no Connect and connectgo no gRPC package; and no
# package of the module but its test harness (internal/testing) links
# testing or imports unsafe.
grpcmod=grpcidempotency
grpcgo="^google.golang.org/grpc(/|$)"
connectgo="^connectrpc.com/connect(/|$)"
if grep -qE "google.golang.org/grpc|connectrpc.com/connect" go.mod; then
	echo "the library's go.mod must not require gRPC or Connect (the $grpcmod module does)"; fail=1
fi
if bad=$(go -C $grpcmod list -deps ./ | grep -E "$grpcgo|$connectgo"); then
	echo "$grpcmod must link neither gRPC nor Connect, but links:"; echo "$bad"; fail=1
fi
if bad=$(go -C $grpcmod list -deps ./grpcgo | grep -E "$connectgo"); then
	echo "$grpcmod/grpcgo must not link Connect, but links:"; echo "$bad"; fail=1
fi
if bad=$(go -C $grpcmod list -deps ./connectgo | grep -E "$grpcgo"); then
	echo "$grpcmod/connectgo must not link gRPC, but links:"; echo "$bad"; fail=1
fi
for pkg in $(go -C $grpcmod list ./... | grep -v "/internal/testing/"); do
	if go -C $grpcmod list -deps "$pkg" | grep -qx testing; then
		echo "$pkg must not link the testing package"; fail=1
	fi
	if go -C $grpcmod list -f '{{join .Imports "\n"}}' "$pkg" | grep -qx unsafe; then
		echo "$pkg must not import unsafe"; fail=1
	fi
done
[ "$fail" = 0 ] && echo "deps-check: import rules hold"
exit "$fail"
