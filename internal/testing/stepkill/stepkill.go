// Package stepkill kills idempotent calls between and inside their
// steps, at random points, and counts what the retries run again.
//
// A function of three steps (charge, ledger, email) runs under
// idempotency.Wrap over a real store. Each step calls a downstream
// service with its step key (idempotency.StepKey). The service answers
// every call with the answer of its first call with that key, and counts
// the calls: they are the step's raw runs. An order is retried, unchanged,
// until an attempt completes it. Attempts are killed by plan:
//
//   - before a step, or after it (between two steps, or before the
//     completion);
//   - inside a step, after its side effect and before its result is
//     stored;
//   - inside a step's record write, after it applied and before its reply
//     came back.
//
// A kill cuts the attempt off. From then on, none of its store requests
// reaches the store, and its context is cancelled. Its reservation stays
// until its lease lapses (idempotency.WithLease), and the retry takes it
// over. Each attempt is a process of its own, with a Wrap of its own. A
// kill planned inside a step whose result was already stored happens
// after the step, since its function does not run.
//
// The checks are counts from a log written right under the library (the
// step records' reads and writes) and by the downstream service:
//
//   - downstream, each step of a completed order took effect once, under
//     one step key for every attempt;
//   - no step ran after a record of it had been stored, and at most one
//     record of a step was stored;
//   - every raw run beyond a step's first is explained by a distinct
//     earlier run whose record was not stored when the later run read the
//     step: killed between its side effect and its record write, or
//     taken over (its lease lapsed) before its record write landed;
//   - the order's result holds each step's stored result, and a replay of
//     the completed order runs nothing.
//
// The seed reproduces the plan (which attempt of which order is killed
// where), not the scheduling. Retries wait until the reservation they were
// refused by lapses. That wait only spaces them: one that comes too early
// is refused again. No check depends on timing, so a slow machine changes
// the counts of the explanations, never the verdict.
package stepkill

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
	"github.com/retrysafe/retrysafe/persistence"
)

// Steps are the names of the function's steps, in the order it runs them.
var Steps = [3]string{"charge", "ledger", "email"}

// Config is the size of a run. Zero fields take their defaults.
type Config struct {
	// Kills is how many attempts are killed, over all orders (50).
	Kills int
	// Orders is how many orders run at once (10).
	Orders int
	// Lease is the reservations' lease (300ms). A killed attempt blocks
	// its order for up to a lease, so it sets the run's length. A live
	// attempt renews it every 100ms, which leaves a renewal 200ms to
	// land. On a machine slow enough to miss that, a retry takes a live
	// attempt over. The checks explain its extra runs by the log
	// ("taken over before its record write landed"), so the verdict
	// holds at any load, and only the counts move.
	Lease time.Duration
}

// SeedEnv is the environment variable that replays a run's plan.
const SeedEnv = "STEPKILL_SEED"

// KillsEnv is the environment variable that sets the number of kills of
// a longer run. The orders grow with it, five kills an order.
const KillsEnv = "STEPKILL_KILLS"

// Report is what a run counted.
type Report struct {
	Orders   int
	Attempts int // calls, including those refused while a key was in progress
	Refused  int // calls refused with *idempotency.InProgressError
	Kills    int
	// KilledAt counts the kills by where they happened.
	KilledAt map[string]int
	// StepsRun counts the runs of steps' functions: downstream calls.
	StepsRun int
	// StepsReplayed counts the steps that returned a stored result.
	StepsReplayed int
	// Effects counts the downstream calls that took effect: one per step
	// key.
	Effects int
	// Deduplicated counts the downstream calls answered with an earlier
	// call's answer, which took no effect.
	Deduplicated int
	// Extra counts the raw runs beyond each step's first, by what
	// explains each.
	Extra map[string]int
	// Errors counts the other errors of attempts, by type, which the
	// client retried.
	Errors map[string]int
}

// String formats r on one line.
func (r Report) String() string {
	return fmt.Sprintf("orders %d, attempts %d (refused in progress %d), kills %d %v, steps run %d, replayed %d, downstream effects %d and deduplications %d, extra raw runs %v, retried errors %v",
		r.Orders, r.Attempts, r.Refused, r.Kills, sortedMap(r.KilledAt), r.StepsRun, r.StepsReplayed, r.Effects, r.Deduplicated, sortedMap(r.Extra), sortedMap(r.Errors))
}

// sortedMap formats m with its keys in order.
func sortedMap(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// The places of a kill in an attempt, relative to step i.
const (
	atBefore = iota // before step i runs or replays
	atEffect        // inside step i, after its side effect, before its record write
	atRecord        // inside step i's record write, after it applied
	atAfter         // after step i returned: between two steps, or before the completion
	places
)

var placeNames = [places]string{"before", "after_side_effect", "after_record_write", "after"}

// point is where a plan kills an attempt.
type point struct{ step, at int }

func (p point) String() string { return placeNames[p.at] + "_" + Steps[p.step] }

// Order is the function's input. Its ID is the idempotency key.
type Order struct {
	ID string `json:"id"`
}

// Result is a step's result.
type Result struct {
	// Effect is the downstream service's answer: the attempt whose call
	// with the step key came first.
	Effect string `json:"effect"`
	// Ran is the attempt whose function returned this result.
	Ran string `json:"ran"`
}

// Receipt is the function's result: its steps' results.
type Receipt struct {
	Steps [3]Result `json:"steps"`
}

// errKilled is what a killed attempt's function and store requests return.
var errKilled = errors.New("stepkill: the attempt was killed")

// Run runs cfg's plan against store, checks what happened, and returns
// the counts. The seed comes from testenv.Seed (SeedEnv replays it).
func Run(t *testing.T, store persistence.Store, cfg Config) Report {
	t.Helper()
	if cfg.Kills == 0 {
		cfg.Kills = 50
	}
	if cfg.Orders == 0 {
		cfg.Orders = 10
	}
	if cfg.Lease == 0 {
		cfg.Lease = 300 * time.Millisecond
	}
	if v := os.Getenv(KillsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("%s=%s: want a number of kills", KillsEnv, v)
		}
		cfg.Kills, cfg.Orders = n, max(cfg.Orders, n/5)
	}
	if _, err := idempotency.Wrap(func(context.Context, Order) (Receipt, error) { return Receipt{}, nil }, store, options(cfg)...); err != nil {
		t.Fatal(err)
	}
	seed := testenv.Seed(t, SeedEnv)
	rng := mrand.New(mrand.NewPCG(seed, 0))
	plans := make([][]point, cfg.Orders)
	for range cfg.Kills {
		o := rng.IntN(cfg.Orders)
		plans[o] = append(plans[o], point{step: rng.IntN(len(Steps)), at: rng.IntN(places)})
	}

	r := &run{
		store:      store,
		cfg:        cfg,
		downstream: map[string][]string{},
		steps:      map[stepOf]*stepLog{},
		report:     Report{Orders: cfg.Orders, KilledAt: map[string]int{}, Extra: map[string]int{}, Errors: map[string]int{}},
	}
	prefix := "stepkill-" + rand.Text()[:8]
	var wg sync.WaitGroup
	orders := make([]*orderRun, cfg.Orders)
	for i := range orders {
		orders[i] = &orderRun{id: fmt.Sprintf("%s-o%02d", prefix, i), index: i, plan: plans[i]}
		wg.Go(func() { r.drive(t, orders[i]) })
	}
	wg.Wait()
	for _, o := range orders {
		r.check(t, o)
	}
	return r.report
}

// run is the state of one Run.
type run struct {
	store persistence.Store
	cfg   Config

	mu         sync.Mutex
	downstream map[string][]string // step key -> attempts that called, in order
	steps      map[stepOf]*stepLog
	report     Report
}

// stepOf names a step of an order.
type stepOf struct {
	order string
	step  int
}

// stepLog is the log of one step of one order.
type stepLog struct {
	keys []string // the step keys its runs passed downstream
	runs []*stepRun
	// reads are the reads of the step's record, by attempt, the start of
	// the latest.
	reads map[string]time.Time
	// stored are the writes of its record that applied.
	stored []write
}

// stepRun is one run of a step's function.
type stepRun struct {
	attempt string
	read    time.Time // when the attempt's read of the step's record began
	write   *write    // the attempt's record write, if it reached the store
}

// write is a write of a step's record that reached the store.
type write struct {
	attempt string
	end     time.Time
	err     error
}

// orderRun is one order and its plan.
type orderRun struct {
	id      string
	index   int
	plan    []point // the kills of its first attempts, in order
	receipt *Receipt
	failed  bool
}

// attempt is one call, in a process of its own.
type attempt struct {
	id     string
	order  *orderRun
	kill   *point
	cut    atomic.Bool
	cancel context.CancelFunc
	ran    [3]bool // the step's function ran in this attempt
}

// die kills a at p: its store requests stop reaching the store, and its
// context is cancelled.
func (r *run) die(a *attempt, p point) {
	if a.cut.Swap(true) {
		return
	}
	a.cancel()
	r.mu.Lock()
	r.report.Kills++
	r.report.KilledAt[p.String()]++
	r.mu.Unlock()
}

// drive retries o until an attempt completes it, then replays it once.
func (r *run) drive(t *testing.T, o *orderRun) {
	const maxAttempts = 500
	next := 0 // the next kill of the plan
	for n := 0; n < maxAttempts; n++ {
		a := &attempt{id: fmt.Sprintf("o%02d/a%d", o.index, n), order: o}
		if next < len(o.plan) {
			a.kill = &o.plan[next]
		}
		out, err := r.call(t, a)
		var inProgress *idempotency.InProgressError
		switch {
		case a.cut.Load():
			next++ // the kill happened; its client gets no answer
		case err == nil:
			if next < len(o.plan) {
				t.Errorf("order %s completed in attempt %s, which the plan kills at %s", o.id, a.id, o.plan[next])
			}
			o.receipt = &out
			r.replay(t, o)
			return
		case errors.As(err, &inProgress):
			// A client's backoff, not a synchronisation: a retry that
			// comes before the reservation lapses is refused again.
			r.count(func(rep *Report) { rep.Refused++ })
			wait := time.Until(inProgress.Until) + 2*time.Millisecond
			if inProgress.Until.IsZero() {
				wait = r.cfg.Lease / 10
			}
			time.Sleep(wait)
		case errors.Is(err, idempotency.ErrPayloadMismatch), errors.As(err, new(*idempotency.ReplayError)):
			t.Errorf("order %s, attempt %s: %v", o.id, a.id, err)
			o.failed = true
			return
		default:
			kind := fmt.Sprintf("%T", err)
			if se := (*idempotency.StoreError)(nil); errors.As(err, &se) {
				kind += " on " + se.Op
			}
			r.count(func(rep *Report) {
				if rep.Errors[kind]++; rep.Errors[kind] == 1 {
					t.Logf("order %s, attempt %s: %v (retried; the first of its kind)", o.id, a.id, err)
				}
			})
			time.Sleep(r.cfg.Lease / 10)
		}
	}
	t.Errorf("order %s: no attempt completed it in %d", o.id, maxAttempts)
	o.failed = true
}

// replay calls the completed order o once more: it must run nothing.
func (r *run) replay(t *testing.T, o *orderRun) {
	a := &attempt{id: fmt.Sprintf("o%02d/replay", o.index), order: o}
	out, err := r.call(t, a)
	switch {
	case err != nil:
		t.Errorf("order %s: the replay of the completed order failed: %v", o.id, err)
		o.failed = true
	case out != *o.receipt:
		t.Errorf("order %s: the replay answered %+v, the completion %+v", o.id, out, *o.receipt)
	}
	if a.ran != [3]bool{} {
		t.Errorf("order %s: the replay of the completed order ran steps %v", o.id, a.ran)
	}
}

func (r *run) count(f func(*Report)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.report)
}

// call runs attempt a: a Wrap of its own over a's view of the store.
func (r *run) call(t *testing.T, a *attempt) (Receipt, error) {
	r.count(func(rep *Report) { rep.Attempts++ })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a.cancel = cancel
	h, err := idempotency.Wrap(func(ctx context.Context, o Order) (Receipt, error) { return r.handle(ctx, a, o) },
		&attemptStore{next: r.store, r: r, a: a}, options(r.cfg)...)
	if err != nil {
		panic(err) // Run wrapped with these options before
	}
	return h(ctx, Order{ID: a.order.id})
}

// options are the options of every attempt's Wrap.
func options(cfg Config) []idempotency.WrapOption {
	return []idempotency.WrapOption{
		idempotency.WithKey("id"),
		idempotency.WithKeyPrefix("stepkill"),
		idempotency.WithLease(cfg.Lease),
		idempotency.WithLogger(slog.New(slog.DiscardHandler)),
	}
}

// handle is the function: three steps, each a downstream call with its
// step key, and the kills of a's plan between and inside them.
func (r *run) handle(ctx context.Context, a *attempt, o Order) (Receipt, error) {
	var rec Receipt
	for i, name := range Steps {
		if a.kill != nil && *a.kill == (point{i, atBefore}) {
			r.die(a, *a.kill)
			return Receipt{}, errKilled
		}
		res, err := idempotency.Step(ctx, name, func(ctx context.Context) (Result, error) {
			key, err := idempotency.StepKey(ctx, name)
			if err != nil {
				return Result{}, err
			}
			a.ran[i] = true
			res := Result{Effect: r.downstreamCall(a, i, key), Ran: a.id}
			if a.kill != nil && *a.kill == (point{i, atEffect}) {
				r.die(a, *a.kill)
			}
			return res, nil
		})
		if a.cut.Load() {
			return Receipt{}, errKilled
		}
		if err != nil {
			return Receipt{}, err
		}
		if !a.ran[i] {
			r.count(func(rep *Report) { rep.StepsReplayed++ })
		}
		rec.Steps[i] = res
		// A kill planned inside a step that replayed happens after it.
		if a.kill != nil && a.kill.step == i && a.kill.at != atBefore {
			r.die(a, point{i, atAfter})
			return Receipt{}, errKilled
		}
	}
	return rec, nil
}

// downstreamCall is a's call of step i to the downstream service, which
// deduplicates by step key: it answers with the first caller's attempt.
// The call is the step's raw run, and is logged as one.
func (r *run) downstreamCall(a *attempt, i int, key string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report.StepsRun++
	callers := r.downstream[key]
	if len(callers) > 0 {
		r.report.Deduplicated++
	} else {
		r.report.Effects++
	}
	r.downstream[key] = append(callers, a.id)
	l := r.step(a.order.id, i)
	l.keys = append(l.keys, key)
	l.runs = append(l.runs, &stepRun{attempt: a.id, read: l.reads[a.id]})
	return r.downstream[key][0]
}

// step returns the log of step i of order, r.mu held.
func (r *run) step(order string, i int) *stepLog {
	k := stepOf{order, i}
	l := r.steps[k]
	if l == nil {
		l = &stepLog{reads: map[string]time.Time{}}
		r.steps[k] = l
	}
	return l
}

// stepIndex returns the index of the step whose record key is key, or -1.
func stepIndex(key string) int {
	_, name, ok := strings.Cut(key, "#step=")
	if !ok {
		return -1
	}
	for i, s := range Steps {
		if s == name {
			return i
		}
	}
	return -1
}

// attemptStore is an attempt's view of the store. It logs the reads and
// writes of step records, refuses every request once the attempt is
// killed, and kills it inside a record write when its plan says so.
type attemptStore struct {
	next persistence.Store
	r    *run
	a    *attempt
}

func (s *attemptStore) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	if s.a.cut.Load() {
		return errKilled
	}
	i := stepIndex(rec.Key)
	err := s.next.Put(ctx, rec, now)
	if i < 0 {
		return err
	}
	w := &write{attempt: s.a.id, end: time.Now(), err: err}
	s.r.mu.Lock()
	l := s.r.step(s.a.order.id, i)
	if err == nil {
		l.stored = append(l.stored, *w)
	}
	for _, run := range l.runs {
		if run.attempt == s.a.id && run.write == nil {
			run.write = w
		}
	}
	s.r.mu.Unlock()
	if s.a.kill != nil && *s.a.kill == (point{i, atRecord}) {
		s.r.die(s.a, *s.a.kill)
		return errKilled // the reply is lost with the attempt
	}
	return err
}

func (s *attemptStore) Get(ctx context.Context, key string) (*persistence.Record, error) {
	if s.a.cut.Load() {
		return nil, errKilled
	}
	if i := stepIndex(key); i >= 0 {
		s.r.mu.Lock()
		s.r.step(s.a.order.id, i).reads[s.a.id] = time.Now()
		s.r.mu.Unlock()
	}
	return s.next.Get(ctx, key)
}

func (s *attemptStore) Update(ctx context.Context, rec *persistence.Record) error {
	if s.a.cut.Load() {
		return errKilled
	}
	return s.next.Update(ctx, rec)
}

func (s *attemptStore) Delete(ctx context.Context, key, token string) error {
	if s.a.cut.Load() {
		return errKilled
	}
	return s.next.Delete(ctx, key, token)
}

// check checks the log of order o's steps, and counts their extra runs.
func (r *run) check(t *testing.T, o *orderRun) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, name := range Steps {
		l := r.steps[stepOf{o.id, i}]
		if l == nil {
			if o.receipt != nil {
				t.Errorf("order %s, step %s: the order completed, and the step never ran", o.id, name)
			}
			continue
		}
		// Downstream: one step key, one effect.
		for _, k := range l.keys[1:] {
			if k != l.keys[0] {
				t.Errorf("order %s, step %s: runs passed two step keys downstream, %q and %q", o.id, name, l.keys[0], k)
			}
		}
		first := r.downstream[l.keys[0]][0]
		if k := l.keys[0]; !strings.HasSuffix(k, "#step="+name) {
			t.Errorf("order %s, step %s: the step key %q does not name the step", o.id, name, k)
		}
		// Stored: at most one record, and no run after it.
		if len(l.stored) > 1 {
			t.Errorf("order %s, step %s: %d writes of the step's record applied (of attempts %s and %s); a step is written only if absent",
				o.id, name, len(l.stored), l.stored[0].attempt, l.stored[1].attempt)
		}
		for _, run := range l.runs {
			if run.read.IsZero() {
				t.Errorf("order %s, step %s: attempt %s ran the step without reading its record", o.id, name, run.attempt)
			}
			for _, w := range l.stored {
				if w.end.Before(run.read) {
					t.Errorf("order %s, step %s: attempt %s ran the step, although attempt %s had stored its result before it read the step",
						o.id, name, run.attempt, w.attempt)
				}
			}
		}
		// Every run beyond the first is explained by a distinct earlier
		// one whose record was not stored when the later one read the step.
		used := make([]bool, len(l.runs))
		for j := 1; j < len(l.runs); j++ {
			b := l.runs[j]
			why := ""
			for i, a := range l.runs[:j] {
				if used[i] {
					continue
				}
				switch {
				case a.write == nil:
					why = "killed between the side effect and the record write"
				case !a.write.end.Before(b.read):
					why = "taken over before its record write landed"
				case a.write.err != nil:
					why = "record write failed: " + errorKind(a.write.err)
				default:
					continue
				}
				used[i] = true
				break
			}
			if why == "" {
				t.Errorf("order %s, step %s: attempt %s ran the step again, and no earlier run without a stored record explains it", o.id, name, b.attempt)
				continue
			}
			r.report.Extra[why]++
		}
		if o.receipt == nil {
			continue
		}
		// The result: the stored one, the first downstream answer.
		got := o.receipt.Steps[i]
		if got.Effect != first {
			t.Errorf("order %s, step %s: the result holds the downstream answer of %s, the service's first call was %s's", o.id, name, got.Effect, first)
		}
		if len(l.stored) > 0 && got.Ran != l.stored[0].attempt {
			t.Errorf("order %s, step %s: the result is attempt %s's, the stored one attempt %s's", o.id, name, got.Ran, l.stored[0].attempt)
		}
		if len(l.stored) == 0 {
			t.Errorf("order %s, step %s: the order completed, and no record of the step was stored", o.id, name)
		}
	}
	if o.receipt == nil && !o.failed {
		t.Errorf("order %s never completed", o.id)
	}
}

// errorKind names a failed write's error for the counts.
func errorKind(err error) string {
	var conflict *persistence.ConflictError
	if errors.As(err, &conflict) {
		return "conflict"
	}
	return fmt.Sprintf("%T", err)
}
