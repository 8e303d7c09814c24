#!/usr/bin/env bash
# Runs the tests of the library and of the other modules several times
# over, on a machine made busy on purpose, to find the tests that pass
# only on an idle one: a real-clock margin, a bound on a wait, a server's
# start-up. Run it before and after touching timing-sensitive code.
#
#   scripts/test-stress.sh [module dir...]      (default: every module)
#
# STRESS_COUNT   runs of each test (go test -count), 3 by default
# STRESS_LOAD    busy loops beside the tests, one per core by default
# STRESS_PROCS   GOMAXPROCS of the test binaries, 1 by default
# STRESS_RUN     a go test -run pattern, to stress some tests only
# STRESS_PKGS    the packages of each module, ./... by default
#
# It reports every failed test at the end, and exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
count=${STRESS_COUNT:-3}
load=${STRESS_LOAD:-$(nproc)}
procs=${STRESS_PROCS:-1}
run=${STRESS_RUN:-}
pkgs=${STRESS_PKGS:-./...}
MODULES=${MODULES:-examples bench/compare otelidempotency cmd/retrysafe persistence/postgres grpcidempotency examples/grpcorders scripts/release}
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(. $MODULES)

burners=()
stop() { [ ${#burners[@]} -eq 0 ] || kill "${burners[@]}" 2>/dev/null; }
trap stop EXIT
for _ in $(seq "$load"); do
	( while :; do :; done ) &
	burners+=($!)
done
echo "load: $load busy loops; GOMAXPROCS=$procs; -count=$count"

log=$(mktemp)
failed=()
for d in "${dirs[@]}"; do
	echo "=== $d"
	args=(-race -shuffle=on -count="$count" -timeout 60m)
	[ -z "$run" ] || args+=(-run "$run")
	# shellcheck disable=SC2086 # pkgs are words
	if ! GOMAXPROCS=$procs $GO -C "$d" test "${args[@]}" $pkgs 2>&1 | tee -a "$log"; then
		failed+=("$d")
	fi
done

echo
if [ ${#failed[@]} -eq 0 ]; then
	echo "=== every test passed under load, $count times"
	exit 0
fi
echo "=== failed under load, in ${failed[*]}:"
grep -E '^\s*--- FAIL: ' "$log" | sed -E 's/ \([0-9.]+s\)$//' | sort | uniq -c | sort -rn
rm -f "$log"
exit 1
