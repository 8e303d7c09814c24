#!/usr/bin/env bash
# Runs the stages of `make test`, each to its end even when another one
# failed, and reports each stage's time and every failure at the end. The
# exit status is 0 only when every stage passed.
#
#   scripts/test.sh [stage...]
#
# With no argument it runs every stage; `scripts/test.sh -l` lists them.
# TEST_JOBS stages run at a time (2 by default; 1 runs them one after
# another): the tests wait on servers and timers for much of their time,
# which another stage fills. A stage's output is printed whole when it
# ends. GO names the go command (go by default).
set -uo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
GO_MIN=${GO_MIN:-go1.25.5}
# The modules of the repository besides the library's own (the Makefile's
# MODULES). The CDK app is a stage of its own.
MODULES=${MODULES:-examples bench/compare otelidempotency cmd/retrysafe persistence/postgres grpcidempotency examples/grpcorders scripts/release}
RACE="-race -shuffle=on -timeout 20m"
jobs=${TEST_JOBS:-2}

# stage NAME runs the stage's command.
stage() {
	case $1 in
	checks) ${MAKE:-make} --no-print-directory deps-check doccheck release-check apicheck ;;
	library) $GO test $RACE ./... ;;
	module:*) $GO -C "${1#module:}" test $RACE ./... ;;
	go1.25) GOTOOLCHAIN=$GO_MIN $GO test -shuffle=on -timeout 20m ./... ;;
	cdk) JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 $GO -C examples/cdk test -shuffle=on -timeout 20m ./... ;;
	model) ./model/check.sh ;;
	*) echo "unknown stage $1 (scripts/test.sh -l lists them)" >&2; return 2 ;;
	esac
}

# The stages, the longest first, so that the last to start are short.
all=(library go1.25 module:scripts/release model module:examples module:cmd/retrysafe module:persistence/postgres module:grpcidempotency)
for m in $MODULES; do
	case " ${all[*]} " in *" module:$m "*) ;; *) all+=("module:$m") ;; esac
done
all+=(cdk checks)

if [ "${1:-}" = -l ]; then printf '%s\n' "${all[@]}"; exit 0; fi
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=("${all[@]}")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run runs stage $1 with its output in $work, and prints the output, under
# a lock, when the stage ends.
run() {
	local s=$1 f t0=$SECONDS result=ok
	f=$work/$(tr '/:' '__' <<<"$s")
	stage "$s" >"$f.out" 2>&1 || result=FAIL
	printf '%-28s %-4s %5ds\n' "$s" "$result" $((SECONDS - t0)) >"$f.sum"
	{
		flock 9
		echo "=== $s ($result, $((SECONDS - t0))s)"
		cat "$f.out"
	} 9>"$work/lock"
}

start_all=$SECONDS
for s in "${stages[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
	run "$s" &
done
wait

echo
echo "=== summary"
failed=()
for s in "${stages[@]}"; do
	f=$work/$(tr '/:' '__' <<<"$s")
	cat "$f.sum"
	grep -q ' FAIL ' "$f.sum" && failed+=("$s")
done
printf '%-28s %-4s %5ds\n' "total ($jobs at a time)" "" $((SECONDS - start_all))
if [ ${#failed[@]} -gt 0 ]; then
	echo "failed: ${failed[*]} (scripts/test.sh ${failed[*]} runs them again)" >&2
	exit 1
fi
