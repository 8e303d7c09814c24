#!/usr/bin/env bash
# Checks the import rules between the library's packages:
#   - persistence imports only the standard library;
#   - the core (idempotency) imports no concrete store, and its root package
#     does not need aws-lambda-go;
#   - concrete stores never import the core.
set -euo pipefail
cd "$(dirname "$0")/.."
module=$(go list -m)
fail=0

deps() { go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$@"; }

if bad=$(deps ./persistence | grep -vx "$module/persistence"); then
	echo "persistence must import only the standard library, but imports:"; echo "$bad"; fail=1
fi
if bad=$(deps ./idempotency/... | grep -E "^$module/persistence/(memory|dynamodb|redis)"); then
	echo "idempotency must not import a concrete store, but imports:"; echo "$bad"; fail=1
fi
if bad=$(deps ./idempotency | grep -E "^github.com/aws/aws-lambda-go"); then
	echo "the idempotency package must not need aws-lambda-go, but imports:"; echo "$bad"; fail=1
fi
for store in $(go list ./persistence/... | grep -vx "$module/persistence"); do
	if bad=$(deps "$store" | grep -E "^$module/idempotency"); then
		echo "$store must not import the core, but imports:"; echo "$bad"; fail=1
	fi
done
[ "$fail" = 0 ] && echo "deps-check: import rules hold"
exit "$fail"
