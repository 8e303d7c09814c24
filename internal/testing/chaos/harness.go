package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// A Backend provides the real store of a run.
type Backend interface {
	// Name names the store in reports.
	Name() string
	// NewStore returns the store client of a new execution environment, with
	// connections of its own. A store that talks HTTP sends its requests
	// through env.HTTPTransport.
	NewStore(env *Env) (persistence.Store, error)
	// Disruptions lists the store-wide faults the backend can inject.
	Disruptions() []Disruption
}

// A TransactionalBackend is a Backend whose stores commit the function's
// writes with the completion of its key: staged writes
// (persistence.Committer), or writes in the store's transaction
// (persistence.TxStore). When Transactional reports true, the run is in
// transactional mode: deployments use idempotency.WithTransactions, the
// handler stages its side effect with StageEffect instead of performing
// it, and the checker takes the side effects from CommittedEffects: the
// staged side effects that committed, with the completion of their key.
type TransactionalBackend interface {
	Backend
	Transactional() bool
	// StageEffect stages, in the transaction of ctx's call, the side
	// effect of invocation inv on the client's key, with its answer. A
	// write that failed (a lost connection, a timeout) returns a
	// *TransientError: the handler fails with it, and nothing of its
	// transaction commits. Any other error, such as a context that
	// carries no transaction, is a violation.
	StageEffect(ctx context.Context, key, inv, answer string) error
	// CommittedEffects returns the answers of the side effects of key that
	// committed, by invocation.
	CommittedEffects(ctx context.Context, key string) (map[string]string, error)
}

// transactional returns the backend as a TransactionalBackend in
// transactional mode, or nil.
func transactional(b Backend) TransactionalBackend {
	if t, ok := b.(TransactionalBackend); ok && t.Transactional() {
		return t
	}
	return nil
}

// A Disruption is a store-wide fault: a restart, a stall, a burst of
// throttling.
type Disruption struct {
	// Kind names it in reports.
	Kind string
	// DataLoss is set when the disruption loses stored records, which
	// suspends the guarantee for the keys whose records it loses (see the
	// package documentation).
	DataLoss bool
	// Do performs it, on the goroutine that called Run (it may call the
	// testing.TB of the backend). It returns when the store is back.
	Do func(rng *rand.Rand)
}

// Harness runs one chaos run. Create it with Run.
type Harness struct {
	cfg     Config
	ctx     context.Context
	backend Backend
	drivers []Driver
	envs    []*Env
	start   time.Time

	// running counts every goroutine but the clients: invocations,
	// duplicate deliveries, late finishers, key checks. Only the clients
	// and goroutines it counts add to it, so it never rises from zero
	// once Run waits on it.
	running sync.WaitGroup

	mu      sync.Mutex
	counts  map[string]int
	events  map[string]int
	losses  []time.Time // starts of disruptions that lost data
	report  Report
	nextInv int
}

// Run drives cfg.Clients clients through drivers over backend, injecting
// faults, and checks the invariant from the log of side effects. The error
// is for setup failures; violations are in the report.
func Run(ctx context.Context, cfg Config, backend Backend, drivers ...Driver) (*Report, error) {
	if len(drivers) == 0 {
		return nil, errors.New("chaos: no driver")
	}
	h := &Harness{
		cfg:     cfg.withDefaults(),
		ctx:     ctx,
		backend: backend,
		drivers: drivers,
		counts:  make(map[string]int),
		events:  make(map[string]int),
	}
	if err := h.setUp(); err != nil {
		return nil, err
	}
	h.start = time.Now()

	var clients sync.WaitGroup
	for c := range h.cfg.Clients {
		clients.Go(func() { h.client(c) })
	}
	done := make(chan struct{})
	go func() { clients.Wait(); close(done) }()
	h.disrupt(done)
	h.running.Wait()
	return h.finish(), nil
}

// setUp creates the execution environments.
func (h *Harness) setUp() error {
	rng := newRand(h.cfg.Seed, "envs")
	for i := range h.cfg.Envs {
		e := &Env{ID: i, h: h}
		if h.cfg.leased(i) {
			e.Lease = h.cfg.Lease
		}
		if s := h.cfg.SkewBound; s > 0 {
			e.Skew = time.Duration(rng.Int64N(int64(2*s)+1)) - s
			h.count(faultSkewedEnv)
		}
		backend, err := h.backend.NewStore(e)
		if err != nil {
			return fmt.Errorf("chaos: store of environment %d: %w", i, err)
		}
		e.backend = backend
		var s persistence.Store = dispatch{backend: backend}
		if i < h.cfg.CachedEnvs {
			s = memory.NewCache(s, 1024)
		}
		e.Store = &probe{h: h, inner: s, skew: e.Skew}
		for _, d := range h.drivers {
			inv, err := d.Deploy(e, h.handle)
			if err != nil {
				return fmt.Errorf("chaos: deploying %s in environment %d: %w", d.Name(), i, err)
			}
			e.invokers = append(e.invokers, inv)
		}
		h.envs = append(h.envs, e)
	}
	return nil
}

// disrupt injects the backend's disruptions until done is closed.
func (h *Harness) disrupt(done <-chan struct{}) {
	ds := h.backend.Disruptions()
	if len(ds) == 0 || h.cfg.DisruptEvery <= 0 {
		<-done
		return
	}
	rng := newRand(h.cfg.Seed, "disruptions")
	for {
		wait := time.Duration(rng.ExpFloat64() * float64(h.cfg.DisruptEvery))
		t := time.NewTimer(wait)
		select {
		case <-done:
			t.Stop()
			return
		case <-t.C:
		}
		d := ds[rng.IntN(len(ds))]
		h.mu.Lock()
		if d.DataLoss {
			h.losses = append(h.losses, time.Now())
		}
		h.counts[d.Kind]++
		h.mu.Unlock()
		d.Do(rng)
	}
}

// client drives its keys, one after another, each to a final answer.
func (h *Harness) client(c int) {
	rng := newRand(h.cfg.Seed, "client", c)
	for i := 0; ; i++ {
		if h.ctx.Err() != nil {
			return
		}
		if h.cfg.Keys > 0 && i >= h.cfg.Keys {
			return
		}
		if h.cfg.Keys <= 0 && time.Since(h.start) >= h.cfg.Duration {
			return
		}
		k := h.newKey(c, i, rng)
		h.drive(k, rng)
		h.running.Go(func() {
			k.running.Wait()
			h.check(k)
		})
	}
}

func (h *Harness) newKey(c, i int, rng *rand.Rand) *keyLog {
	r := h.cfg.Rates
	k := &keyLog{
		name:   "c" + strconv.Itoa(c) + "-k" + strconv.Itoa(i) + "-" + strconv.FormatUint(h.cfg.Seed, 36),
		driver: (c + i) % len(h.drivers),
	}
	k.req = Request{
		Key:     k.name,
		Payload: "amount=" + strconv.Itoa(1+rng.IntN(10000)),
		Decline: rng.Float64() < r.Decline,
		Large:   rng.Float64() < r.Large,
	}
	if k.req.Decline {
		h.count(faultDecline)
	}
	if k.req.Large {
		h.count(faultLarge)
	}
	h.mu.Lock()
	h.report.Keys++
	h.mu.Unlock()
	return k
}

// drive retries k until a final answer, then replays it a few times, half
// of them after a pause of up to an invocation timeout: a client that
// comes back later meets what happened to the key after its answer (a
// write applied late).
func (h *Harness) drive(k *keyLog, rng *rand.Rand) {
	attempt := 0
	calls := 1 + rng.IntN(h.cfg.Replays+1)
	for call := range calls {
		if call > 0 && rng.IntN(2) == 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(h.cfg.Timeout))))
		}
		for tries := 1; ; tries++ {
			if h.ctx.Err() != nil {
				return
			}
			if tries > h.cfg.MaxAttempts {
				k.mu.Lock()
				k.violate(checkLiveness, "no final answer after %d attempts (call %d)", h.cfg.MaxAttempts, call+1)
				k.mu.Unlock()
				return
			}
			attempt++
			if rng.Float64() < h.cfg.Rates.Duplicate {
				h.count(faultDuplicate)
				dup := attempt
				// Counted in h.running too, so that the goroutines it starts
				// never add to h.running from zero behind Run's Wait.
				k.running.Add(1)
				h.running.Go(func() {
					defer k.running.Done()
					h.invoke(k, dup, true)
				})
			}
			out := h.invoke(k, attempt, false)
			if out.Final {
				k.mu.Lock()
				k.final = true
				k.mu.Unlock()
				break
			}
			time.Sleep(h.backoff(out, tries, rng))
		}
	}
}

// backoff is how long a client waits before retrying after out: until the
// blocking reservation lapses for in-progress keys, otherwise exponential
// backoff from 5 ms to 80 ms, with jitter.
func (h *Harness) backoff(out Outcome, tries int, rng *rand.Rand) time.Duration {
	d := 5 * time.Millisecond << min(tries-1, 4)
	d = d/2 + time.Duration(rng.Int64N(int64(d)))
	jitter := time.Duration(rng.Int64N(int64(10 * time.Millisecond)))
	switch {
	case out.Retry == RetryInProgress && !out.Until.IsZero():
		d = max(d/4, time.Until(out.Until)+jitter)
	case out.RetryAfter > 0:
		d = out.RetryAfter + jitter
	}
	return d
}

// invoke makes one invocation of k and records what the client got. A
// client gives up on an invocation at its deadline; the invocation may go
// on running, and its late outcome is recorded but reaches no client.
func (h *Harness) invoke(k *keyLog, attempt int, dup bool) Outcome {
	h.mu.Lock()
	h.nextInv++
	id := "i" + strconv.Itoa(h.nextInv)
	h.report.Invocations++
	h.mu.Unlock()

	rng := newRand(h.cfg.Seed, "invocation", k.name, attempt, strconv.FormatBool(dup))
	inv := &invocation{id: id, h: h, k: k, rng: rng, ended: make(chan struct{})}
	inv.plan = h.cfg.newPlan(rng)
	inv.env = h.envs[inv.plan.env]
	inv.faults = &faultstore.Store{Inner: inv.env.backend, Fault: inv.storeFault, OnHold: inv.heldByStore}

	start := time.Now()
	inv.deadline = start.Add(h.cfg.Timeout)
	inv.rec = &invRecord{ID: id, Env: inv.env.ID, Skew: inv.env.Skew, Lease: inv.env.Lease, Dup: dup, Start: start, Deadline: inv.deadline}
	k.mu.Lock()
	k.invs = append(k.invs, inv.rec)
	k.mu.Unlock()

	ctx, cancel := newLambdaContext(h.ctx, inv, inv.deadline, inv.env.Skew)
	results := make(chan Outcome, 1)
	k.running.Add(1)
	h.running.Go(func() {
		defer k.running.Done()
		defer cancel()
		results <- h.call(ctx, inv, k.req)
		close(inv.ended)
	})

	var out Outcome
	select {
	case out = <-results:
	case <-ctx.Done():
		select {
		case out = <-results:
		default:
			out = Outcome{Retry: RetryTimeout, Err: ctx.Err()}
			k.mu.Lock()
			inv.rec.Abandoned = true
			k.mu.Unlock()
			k.running.Add(1)
			h.running.Go(func() {
				defer k.running.Done()
				late := <-results
				k.mu.Lock()
				inv.rec.Late = describe(late)
				k.mu.Unlock()
				h.count("late_" + outcomeKind(late))
			})
		}
	}
	if inv.killed.Load() {
		out = Outcome{Retry: RetryKilled, Err: errKilled}
	}
	r := reply{Inv: id, Dup: dup, Start: start, End: time.Now(), Final: out.Final, Answer: out.Answer, Reason: out.Retry, Until: out.Until}
	k.mu.Lock()
	k.replies = append(k.replies, r)
	if out.Retry == RetryUnexpected {
		k.violate(checkUnexpected, "invocation %s: unexpected outcome: %v", id, out.Err)
	}
	if out.Breach != "" {
		k.violate(checkContract, "invocation %s: %s", id, out.Breach)
	}
	k.mu.Unlock()
	h.count("reply_" + outcomeKind(out))
	if out.Err != nil && !out.Final {
		h.mu.Lock()
		if h.report.Errors == nil {
			h.report.Errors = map[string]string{}
		}
		if _, ok := h.report.Errors[out.Retry]; !ok {
			h.report.Errors[out.Retry] = out.Err.Error()
		}
		h.mu.Unlock()
	}
	return out
}

// call invokes the deployed driver, turning the handler's injected panics
// into an outcome, as the Lambda runtime reports a panic.
func (h *Harness) call(ctx context.Context, inv *invocation, req Request) (out Outcome) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(injectedPanic); ok {
				out = Outcome{Retry: RetryPanic}
				return
			}
			out = Outcome{Retry: RetryUnexpected, Err: fmt.Errorf("panic: %v", v)}
		}
	}()
	return inv.env.invokers[inv.k.driver](ctx, req)
}

func outcomeKind(o Outcome) string {
	if o.Final {
		switch {
		case o.Answer == AnswerTooLarge:
			return "final_too_large"
		case len(o.Answer) > 3 && o.Answer[:3] == "err":
			return "final_error"
		}
		return "final_ok"
	}
	return o.Retry
}

func describe(o Outcome) string {
	if o.Final {
		return "final: " + o.Answer
	}
	if o.Err != nil {
		return o.Retry + ": " + o.Err.Error()
	}
	return o.Retry
}

func (h *Harness) count(kind string) {
	h.mu.Lock()
	h.counts[kind]++
	h.mu.Unlock()
}

// observe counts the library's events, for the report only: the checker
// does not rely on them.
func (h *Harness) observe(_ context.Context, e idempotency.Event) {
	h.mu.Lock()
	h.events[e.Kind.String()]++
	h.mu.Unlock()
}

// strayCall records a store call or handler call outside an invocation:
// the library lost the context's values on the way.
func (h *Harness) strayCall(what, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.report.Violations = append(h.report.Violations, violation(key, checkContract,
		"%s called with a context that does not carry the invocation's values", what))
}

// check checks k once all its invocations have ended, adds the verdict to
// the report and drops the key's log.
func (h *Harness) check(k *keyLog) {
	h.mu.Lock()
	losses := append([]time.Time(nil), h.losses...)
	h.mu.Unlock()
	tx := transactional(h.backend)
	if tx != nil {
		h.readCommitted(tx, k)
	}
	v := checkKey(k, losses, h.cfg.SkewBound, tx != nil)
	var tl string
	if len(v.violations) > 0 {
		tl = timeline(k, losses)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.report.add(v)
	if tl != "" && len(h.report.Timelines) < maxTimelines {
		h.report.Timelines = append(h.report.Timelines, "key "+k.name+":\n"+tl)
	}
}

// readCommitted marks the staged side effects of k that committed, from
// what the store holds, and flags side effects in the store that no
// invocation of k staged.
func (h *Harness) readCommitted(tx TransactionalBackend, k *keyLog) {
	// The run's context may have ended; the key is still checked.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), time.Minute)
	defer cancel()
	committed, err := tx.CommittedEffects(ctx, k.name)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.violate(checkContract, "reading the committed side effects: %v", err)
		return
	}
	for i := range k.effects {
		e := &k.effects[i]
		answer, ok := committed[e.Inv]
		if !e.Staged || !ok {
			continue
		}
		e.Committed = true
		delete(committed, e.Inv)
		if answer != e.Answer {
			k.violate(checkExactlyOnce, "the side effect of invocation %s committed with answer %q, staged with %q", e.Inv, answer, e.Answer)
		}
	}
	for inv := range committed {
		k.violate(checkExactlyOnce, "a side effect of invocation %s committed, which it never staged", inv)
	}
}

// finish completes the report.
func (h *Harness) finish() *Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := &h.report
	r.Store = h.backend.Name()
	for _, d := range h.drivers {
		r.Drivers = append(r.Drivers, d.Name())
	}
	r.Seed = h.cfg.Seed
	r.Elapsed = time.Since(h.start)
	r.Counts = h.counts
	r.Events = h.events
	for _, e := range h.envs {
		r.Skews = append(r.Skews, e.Skew)
	}
	sort.Slice(r.Violations, func(i, j int) bool { return r.Violations[i].Key < r.Violations[j].Key })
	return r
}
