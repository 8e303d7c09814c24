#!/usr/bin/env bash
# Checks the protocol's model (idempotency.pml) with SPIN, exhaustively:
# the correct table in several configurations must hold every property;
# each documented exception must be reachable, and each known-broken table
# must fail, each with a counterexample on the property named below.
#
#   model/check.sh            every run
#   model/check.sh NAME...    the runs named (see the list below)
#
# Needs spin and a C compiler (CC, default gcc). Prints, for every run, the
# states stored, the transitions, the memory and the time, and for every
# counterexample its trace; exits non-zero when a run ends otherwise than
# expected.
set -euo pipefail
cd "$(dirname "$0")"
model=$PWD

CC=${CC:-gcc}
for tool in spin "$CC"; do
	command -v "$tool" >/dev/null || { echo "model/check.sh: $tool not found" >&2; exit 2; }
done

# The runs: name, expected outcome, spin settings, hash table size (pan -w),
# and the model (idempotency.pml unless named).
# "pass": exhaustive, no error. "fail:TAGS": a counterexample on an
# assertion tagged with one of TAGS (the comment after it in the model).
runs=(
	# The correct table. Three attempts, one each (two invocations and a
	# retry, in any order and overlap), and two invocations of two
	# attempts each (an invocation that crashes or gives up, and tries
	# again), with and without transactions; two renewals per attempt,
	# where a holder must also keep the key until the end of the lease it
	# was granted (P6: a renewal never shortens the lease); writes delayed
	# without bound; and two attempts over a longer time, with
	# transactions.
	"plain|pass|-DCOVER -DNPROC=3 -DNATT=1 -DTMAX=6|23"
	"tx|pass|-DCOVER -DTX -DNPROC=3 -DNATT=1 -DTMAX=6|23"
	"plain-retries|pass|-DCOVER -DNPROC=2 -DNATT=2 -DTMAX=5|24"
	"tx-retries|pass|-DCOVER -DTX -DNPROC=2 -DNATT=2 -DTMAX=5|24"
	"plain-renewals|pass|-DCOVER -DGRANTED -DNPROC=3 -DNATT=1 -DTMAX=5 -DDEADLINE=4|24"
	"plain-late-writes|pass|-DCOVER -DNPROC=2 -DNATT=1 -DTMAX=7 -DMAXDELAY=7|22"
	"tx-long|pass|-DCOVER -DTX -DNPROC=2 -DNATT=1 -DTMAX=7|20"
	# The documented exceptions: each repeats the side effect.
	"show-crash|fail:SHOW_CRASH|-DSHOW_CRASH|22"
	"show-lost|fail:SHOW_LOST|-DSHOW_LOST|22"
	"show-overrun|fail:SHOW_OVERRUN|-DSHOW_OVERRUN|22"
	# Known-broken tables: every property, then the repeated side effect
	# alone, then the repeated staged write.
	"broken-renew|fail:P1 P2 P3 P4 P5|-DBROKEN_RENEW|22"
	"broken-renew-repeat|fail:P1|-DBROKEN_RENEW -DONLY_REPEAT|22"
	"broken-renew-tx|fail:P2|-DBROKEN_RENEW -DONLY_REPEAT -DTX|22"
	"broken-complete|fail:P1 P2 P3 P4 P5|-DBROKEN_COMPLETE|22"
	"broken-complete-repeat|fail:P1|-DBROKEN_COMPLETE -DONLY_REPEAT|22"
	"broken-complete-tx|fail:P2|-DBROKEN_COMPLETE -DONLY_REPEAT -DTX|22"
	"broken-release|fail:P1 P2 P3 P4 P5|-DBROKEN_RELEASE|22"
	"broken-release-repeat|fail:P1|-DBROKEN_RELEASE -DONLY_REPEAT|22"
	"broken-release-tx|fail:P2|-DBROKEN_RELEASE -DONLY_REPEAT -DTX|22"
	# With transactions, exactly once needs writes to be applied within
	# the expiry of being sent: a commit applied twice, across its own
	# record's expiry, commits its staged write twice.
	"tx-late-writes|fail:P2|-DTX -DNPROC=2 -DNATT=1 -DTMAX=6 -DMAXDELAY=6|22"
	# A renewal that overwrote the in-progress expiry with an earlier one
	# (as renewals did before they took the later of the two) lets a call
	# take the key over before the end of the lease its holder was
	# granted.
	"broken-renew-back|fail:P6|-DGRANTED -DBROKEN_RENEW_BACK -DDEADLINE=4|22"
	# Held reservations (WithHoldUntilReleased): no exception for a crash,
	# a lost completion or an overrun; with the operator's release, a
	# repeat only after it. Each remaining repeat is reachable; taking a
	# held record over repeats the side effect.
	"held|pass|-DCOVER -DHOLD -DNPROC=3 -DNATT=1 -DTMAX=6 -DEXPIRY=4|23"
	"held-retries|pass|-DCOVER -DHOLD -DNPROC=2 -DNATT=2 -DTMAX=5 -DEXPIRY=4|24"
	"held-tx|pass|-DCOVER -DHOLD -DTX -DNPROC=3 -DNATT=1 -DTMAX=6 -DEXPIRY=4|23"
	"held-release|pass|-DCOVER -DHOLD -DOPREL -DNPROC=3 -DNATT=1 -DTMAX=5 -DEXPIRY=4|23"
	"show-held-expiry|fail:SHOW_HELD_EXPIRY|-DHOLD -DSHOW_HELD_EXPIRY|22"
	"show-held-release|fail:SHOW_HELD_RELEASE|-DHOLD -DOPREL -DSHOW_HELD_RELEASE|22"
	"broken-held|fail:P1 P2 P3 P4 P5|-DHOLD -DBROKEN_HELD|22"
	"broken-held-repeat|fail:P1|-DHOLD -DBROKEN_HELD -DONLY_REPEAT|22"
	# Steps (steps.pml): three attempts of one step, overlapping, with
	# writes delayed within the expiry and past it. A step write that
	# overwrites a live record breaks first-writer-wins.
	"steps|pass|-DCOVER -DNPROC=3 -DTMAX=5|22|steps.pml"
	"steps-late-writes|pass|-DCOVER -DNPROC=3 -DTMAX=6 -DMAXDELAY=4|22|steps.pml"
	"broken-step|fail:S1|-DBROKEN_STEP|22|steps.pml"
)

# The cells of the table that no passing run reaches, and why (see
# model/README.md). A change to this list is a change to the model's
# coverage, to be explained there.
unreached_expected=(
	"reserve/own lapsed"          # a reservation is judged at its own time, before its own record lapses
	"reserve/own expired"         # likewise: its own record cannot have expired at that time
	"reserve/own held"            # likewise: its own record cannot be past its in-progress expiry
	"release/own completed"       # an attempt that completes never releases
	"release/own expired"
	"record an error/own expired" # with transactions, no write is applied past the expiry it set
	"commit/own expired"
	"write a step/own in progress" # a step's key holds no reservation
	"write a step/own lapsed"
	"write a step/other in progress"
	"write a step/other lapsed"
	"write a step/own held"
	"write a step/other held"
)

selected=("$@")
want() {
	[ ${#selected[@]} -eq 0 ] && return 0
	local s
	for s in "${selected[@]}"; do [ "$s" = "$1" ] && return 0; done
	return 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Names of writes and states, from the generated table.
declare -A wname sname
while read -r _ ident value; do
	case $ident in
	W_*) wname[$value]=$(tr '[:upper:]_' '[:lower:] ' <<<"${ident#W_}") ;;
	S_*) sname[$value]=$(tr '[:upper:]_' '[:lower:] ' <<<"${ident#S_}") ;;
	esac
done < <(grep -E '^#define (W|S)_[A-Z_]+ [0-9]+$' table.pml)
nwrites=$(awk '/^#define NWRITES /{print $3}' table.pml)
nstates=$(awk '/^#define NSTATES /{print $3}' table.pml)
cover=()

# check runs one entry of runs in $work/NAME: it writes its table row,
# and its trace and verdict where there are any, to report, the cells it
# reached to cover, and "failed" to failed when it did not end as
# expected.
check() {
	local name=$1 expect=$2 flags=$3 width=$4 pml=${5:-idempotency.pml}
	local dir=$work/$name
	mkdir -p "$dir"
	cp "$model/$pml" "$model/table.pml" "$dir/"
	exec >"$dir/report"
	# -O1: the searches run as fast as with -O2, which takes twice as long
	# to compile.
	local ccflags=(-O1 -w -DSAFETY -DNOCLAIM)
	# A counterexample is easiest to read when it is the shortest: a
	# breadth-first search, without hidden variables. These searches are
	# short: -O0 compiles fastest.
	[ "$expect" = pass ] || { ccflags=(-O0 -w -DSAFETY -DNOCLAIM -DBFS); flags="$flags -DNOHIDDEN"; }
	# shellcheck disable=SC2086 # flags are words
	(cd "$dir" && spin -a $flags "$pml" >spin.out 2>&1) || { echo "$name: spin -a failed:"; head -20 "$dir/spin.out"; echo failed >"$dir/failed"; return; }
	(cd "$dir" && "$CC" "${ccflags[@]}" -o pan pan.c >cc.out 2>&1) || { echo "$name: $CC failed:"; head -20 "$dir/cc.out"; echo failed >"$dir/failed"; return; }
	TIMEFORMAT='%R %U %S'
	{ time (cd "$dir" && ./pan -m100000 -w"$width" >pan.out 2>&1 || true); } 2>"$dir/time.out"
	local out=$dir/pan.out errors states trans mem real user sys secs result detail c line tag ok
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | head -1)
	states=$(awk '/states, stored/{print $1; exit}' "$out")
	trans=$(awk '/transitions \(= stored\+matched\)/{print $1; exit}' "$out")
	mem=$(awk '/total actual memory usage/{print $1; exit}' "$out")
	read -r real user sys <"$dir/time.out"
	secs=$(awk -v r="$real" -v u="$user" -v s="$sys" 'BEGIN{printf "%.1f %.1f", r, u+s}')
	result=error
	detail=""
	if [ -z "$errors" ]; then
		detail="pan did not finish: $(tail -5 "$out")"
	elif grep -q 'max search depth too small' "$out"; then
		detail="the search was cut at its depth limit"
	elif [ "$errors" = 0 ]; then
		result=pass
		grep -q 'Search not completed' "$out" && { result=error; detail="the search did not complete"; }
		c=$(sed -n 's/^cover: //p' "$out")
		[ -n "$c" ] && echo "$c" >"$dir/cover"
	else
		# Replay the counterexample: the assertion it breaks, by its tag.
		# shellcheck disable=SC2086
		(cd "$dir" && spin -T $flags -t "$pml" >trace.out 2>&1) || true
		line=$(sed -n "s/.*spin: ${pml//./\\.}:\\([0-9]*\\), Error: assertion violated.*/\\1/p" "$dir/trace.out" | head -1)
		tag=""
		[ -n "$line" ] && tag=$(sed -n "${line}p" "$dir/$pml" | sed -n 's|.*/\* \([A-Z0-9_]*\) \*/.*|\1|p')
		result="fail:${tag:-?}"
	fi
	ok=0
	case $expect in
	pass) [ "$result" = pass ] && ok=1 ;;
	fail:*)
		for t in ${expect#fail:}; do [ "$result" = "fail:$t" ] && ok=1; done ;;
	esac
	# shellcheck disable=SC2086 # secs is two words
	printf '%-24s %-9s %-16s %10s %12s %10s %7s %7s\n' "$name" "${expect%%:*}" "${result}" "${states:-?}" "${trans:-?}" "${mem:-?}" $secs
	if [ "$result" != pass ] && [ -f "$dir/trace.out" ]; then
		# The trace, without the clock's ticks and the table's filling.
		sed "s/spin: ${pml%.pml}/\\n&/" "$dir/trace.out" | grep -E '^t=|assertion violated' | grep -v '  clock$' | sed 's/^/    /'
	fi
	if [ $ok = 0 ]; then
		echo "$name: expected $expect, got $result${detail:+: $detail}"
		echo failed >"$dir/failed"
	fi
}

# The runs go JOBS at a time (one per core by default), each a process
# of its own; their reports are printed in the order of runs. The largest
# search takes about 650 MB.
jobs=${JOBS:-$(nproc 2>/dev/null || echo 1)}
names=()
for entry in "${runs[@]}"; do
	IFS='|' read -r name expect flags width pml <<<"$entry"
	want "$name" || continue
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
	check "$name" "$expect" "$flags" "$width" "$pml" &
	names+=("$name")
done
wait

failed=0
printf '%-24s %-9s %-16s %10s %12s %10s %7s %7s\n' run expected result states transitions "memory MB" "wall s" "cpu s"
for name in "${names[@]}"; do
	cat "$work/$name/report"
	[ -f "$work/$name/failed" ] && failed=1
	[ -f "$work/$name/cover" ] && cover+=("$(cat "$work/$name/cover")")
done

# The cells of the table that the passing runs reached.
if [ ${#cover[@]} -gt 0 ] && [ ${#selected[@]} -eq 0 ]; then
	read -ra union <<<"${cover[0]}"
	for c in "${cover[@]:1}"; do
		read -ra v <<<"$c"
		for i in "${!v[@]}"; do [ "${v[$i]}" = 1 ] && union[i]=1; done
	done
	unreached=()
	for ((i = 0; i < nwrites * nstates; i++)); do
		[ "${union[$i]}" = 1 ] || unreached+=("${wname[$((i / nstates))]}/${sname[$((i % nstates))]}")
	done
	echo "cells of the table reached: $((nwrites * nstates - ${#unreached[@]})) of $((nwrites * nstates)); not reached: $(IFS=,; echo "${unreached[*]:-none}" | sed 's/,/, /g')"
	if [ "$(printf '%s\n' "${unreached[@]}" | sort)" != "$(printf '%s\n' "${unreached_expected[@]}" | sort)" ]; then
		echo "the cells not reached are not the ones model/check.sh expects: $(IFS=,; echo "${unreached_expected[*]}" | sed 's/,/, /g')"
		failed=1
	fi
fi

echo "model/check.sh: $SECONDS s in all"
exit $failed
