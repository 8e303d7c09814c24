package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is the outcome of a run.
type Report struct {
	Store   string
	Drivers []string
	Seed    uint64
	Elapsed time.Duration

	// Keys is the number of keys the clients drove; Invocations the number
	// of invocations (attempts, replays and duplicates).
	Keys, Invocations int
	// FinalKeys is the number of keys that got a final answer.
	FinalKeys int

	// Counts counts the injected faults, the store calls by operation and
	// result ("call_put_ok", "call_renew_held"), the writes applied late
	// ("applied_late_renew_ok", "applied_late_http_renew_ok"), the replies
	// by outcome ("reply_final_ok") and the outcomes of abandoned
	// invocations ("late_...").
	Counts map[string]int
	// Events counts the library's events, as its observer reported them.
	Events map[string]int
	// Skews are the clock offsets of the execution environments.
	Skews []time.Duration

	// SideEffects is the number of side effects; Repeated the number beyond
	// the first of each key, each explained by a documented limit (Explained,
	// by limit) or a violation.
	SideEffects, Repeated int
	Explained             map[string]int
	// Exposed counts the side effects whose result was not stored, by cause:
	// each allows one repetition after its in-progress expiry.
	Exposed map[string]int
	// AnswersChanged counts the keys whose client saw two different final
	// answers (each explained by an exposed side effect or a data loss).
	AnswersChanged int
	// PastExpiry is the longest a client was told a key is in progress after
	// the reservation's in-progress expiry.
	PastExpiry time.Duration
	// BlockedByUnused counts the in-progress answers caused by a
	// reservation whose invocation never ran the handler (a write applied
	// with its reply lost, left until its in-progress expiry).
	BlockedByUnused int

	// Errors holds the first error of each retry reason, as an example.
	Errors map[string]string

	Violations []Violation
	// Timelines are the logs of the first keys with violations.
	Timelines []string
}

// maxTimelines bounds Report.Timelines.
const maxTimelines = 5

func (r *Report) add(v verdict) {
	if r.Explained == nil {
		r.Explained, r.Exposed = map[string]int{}, map[string]int{}
	}
	r.SideEffects += v.effects
	if v.effects > 1 {
		r.Repeated += v.effects - 1
	}
	for k, n := range v.explained {
		r.Explained[k] += n
	}
	for k, n := range v.exposed {
		r.Exposed[k] += n
	}
	if v.answersChanged {
		r.AnswersChanged++
	}
	if v.final {
		r.FinalKeys++
	}
	r.PastExpiry = max(r.PastExpiry, v.pastExpiry)
	r.BlockedByUnused += v.blockedByUnused
	r.Violations = append(r.Violations, v.violations...)
}

// Faults returns the injected faults by kind.
func (r *Report) Faults() map[string]int {
	f := map[string]int{}
	for k, n := range r.Counts {
		if !strings.HasPrefix(k, "call_") && !strings.HasPrefix(k, "reply_") && !strings.HasPrefix(k, "late_") &&
			!strings.HasPrefix(k, countAppliedLate) && k != countCutOff && k != countEffectFailed {
			f[k] = n
		}
	}
	return f
}

// ViolationsByCheck counts the violations by the check that found them.
func (r *Report) ViolationsByCheck() map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Check]++
	}
	return m
}

// countCutOff counts the store calls of killed invocations that the harness
// kept from the store.
const countCutOff = "cut_off_after_kill"

// countEffectFailed counts, in transactional mode, the writes of the side
// effect that failed (a *TransientError of StageEffect): the handler
// failed, and its transaction was rolled back.
const countEffectFailed = "side_effect_write_failed"

// countAppliedLate prefixes the counts of the writes applied late, by
// operation and result, "http_" first for HTTP attempts
// ("applied_late_renew_ok", "applied_late_http_renew_ok").
const countAppliedLate = "applied_late_"

// String formats the report for a test log.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store %s, drivers %s, seed %d, %v\n", r.Store, strings.Join(r.Drivers, "+"), r.Seed, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "keys %d (final %d), invocations %d, side effects %d, repeated %d, keys whose answer changed %d, in progress past expiry at most %v\n",
		r.Keys, r.FinalKeys, r.Invocations, r.SideEffects, r.Repeated, r.AnswersChanged, r.PastExpiry)
	section := func(title string, m map[string]int) {
		fmt.Fprintf(&b, "%s:", title)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(&b, " %s=%d", k, m[k])
		}
		b.WriteByte('\n')
	}
	section("faults", r.Faults())
	pick := func(prefix string) map[string]int {
		m := map[string]int{}
		for k, n := range r.Counts {
			if s, ok := strings.CutPrefix(k, prefix); ok {
				m[s] = n
			}
		}
		return m
	}
	section("replies", pick("reply_"))
	section("late outcomes", pick("late_"))
	section("store calls", pick("call_"))
	section("writes applied late", pick(countAppliedLate))
	fmt.Fprintf(&b, "store calls of killed invocations kept from the store: %d\n", r.Counts[countCutOff])
	if n := r.Counts[countEffectFailed]; n > 0 {
		fmt.Fprintf(&b, "writes of the side effect that failed, rolled back: %d\n", n)
	}
	fmt.Fprintf(&b, "in-progress answers caused by a reservation whose handler never ran: %d\n", r.BlockedByUnused)
	section("library events", r.Events)
	section("side effects whose result was not stored", r.Exposed)
	section("repetitions explained by", r.Explained)
	skews := make([]string, len(r.Skews))
	for i, s := range r.Skews {
		skews[i] = s.String()
	}
	fmt.Fprintf(&b, "clock skews: %s\n", strings.Join(skews, " "))
	for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
		fmt.Fprintf(&b, "first %s error: %s\n", k, r.Errors[k])
	}
	fmt.Fprintf(&b, "violations: %d\n", len(r.Violations))
	if len(r.Violations) > 0 {
		section("violations by check", r.ViolationsByCheck())
	}
	for i, v := range r.Violations {
		if i == 20 {
			fmt.Fprintf(&b, "  ... and %d more\n", len(r.Violations)-i)
			break
		}
		fmt.Fprintf(&b, "  %s\n", v)
	}
	for _, tl := range r.Timelines {
		b.WriteString(tl)
	}
	return b.String()
}
