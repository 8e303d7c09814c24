package chaos

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
)

// invocation is one run of the system under test for one request, in one
// execution environment, with a deadline.
type invocation struct {
	id       string
	h        *Harness
	k        *keyLog
	env      *Env
	plan     plan
	deadline time.Time
	rec      *invRecord // in k, under k.mu

	mu  sync.Mutex // guards rng
	rng *rand.Rand

	// faults is this invocation's view of its environment's store: it
	// injects the faults this invocation draws.
	faults *faultstore.Store
	killed atomic.Bool
	// ended is closed once the invocation's call has returned, late
	// finishers included.
	ended chan struct{}
}

type invocationKey struct{}

// invocationFrom returns the invocation ctx belongs to, or nil.
func invocationFrom(ctx context.Context) *invocation {
	inv, _ := ctx.Value(invocationKey{}).(*invocation)
	return inv
}

// lambdaContext is an invocation's context as an execution environment sees
// it on Lambda: Deadline reports the deadline the service set (true time),
// but the context expires when the environment's own clock reaches it, so
// an environment whose clock runs ahead stops early and one whose clock
// lags stops late. The library records Deadline as the in-progress expiry.
type lambdaContext struct {
	context.Context
	deadline time.Time
}

func (c *lambdaContext) Deadline() (time.Time, bool) { return c.deadline, true }

// newLambdaContext returns the context of inv, with deadline as the
// service's deadline, expiring when an environment whose clock is off by
// skew reads deadline.
func newLambdaContext(parent context.Context, inv *invocation, deadline time.Time, skew time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithDeadline(context.WithValue(parent, invocationKey{}, inv), deadline.Add(-skew))
	return &lambdaContext{Context: ctx, deadline: deadline}, cancel
}

// float draws from the invocation's generator.
func (inv *invocation) float() float64 {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.rng.Float64()
}

// storeFault chooses the fault of one store call (faultstore.Store.Fault).
func (inv *invocation) storeFault(op faultstore.Op, _ string, _ int) faultstore.Fault {
	if op != faultstore.OpGet && op != faultstore.OpBegin && inv.float() < inv.h.cfg.Rates.LateWrite {
		inv.h.count(faultStoreLate)
		return faultstore.ApplyLate
	}
	if inv.float() >= inv.h.cfg.Rates.StoreFault {
		return faultstore.None
	}
	kinds := []faultstore.Fault{faultstore.FailBefore, faultstore.LoseReply, faultstore.RetryAfterLostReply}
	names := []string{faultStoreFailBefore, faultStoreLostReply, faultStoreRetriedReply}
	if op == faultstore.OpPut {
		kinds = append(kinds, faultstore.DropExisting)
		names = append(names, faultStoreNoExisting)
	}
	i := int(inv.float() * float64(len(kinds)))
	inv.h.count(names[i])
	return kinds[i]
}

// handlerStarted records that the library let the handler run: this
// invocation holds the key.
func (inv *invocation) handlerStarted(ctx context.Context) {
	key, ok := idempotency.KeyFromContext(ctx)
	k := inv.k
	k.mu.Lock()
	defer k.mu.Unlock()
	inv.rec.HandlerStart = time.Now()
	if !ok {
		k.violate(checkContract, "invocation %s: the handler's context carries no idempotency key", inv.id)
	} else if key != k.storeKey {
		k.violate(checkContract, "invocation %s: the handler's context carries key %q, the store calls used %q", inv.id, key, k.storeKey)
	}
}

// sideEffect appends the invocation's side effect to the log.
func (inv *invocation) sideEffect(answer string) {
	k := inv.k
	k.mu.Lock()
	defer k.mu.Unlock()
	at := time.Now()
	k.effects = append(k.effects, effect{Inv: inv.id, At: at, Answer: answer, AfterDeadline: at.After(inv.deadline)})
}

// stagedEffect appends the invocation's staged side effect to the log: in
// transactional mode, a side effect that happens only if the invocation's
// completion commits.
func (inv *invocation) stagedEffect(answer string) {
	k := inv.k
	k.mu.Lock()
	defer k.mu.Unlock()
	at := time.Now()
	k.effects = append(k.effects, effect{Inv: inv.id, At: at, Answer: answer, AfterDeadline: at.After(inv.deadline), Staged: true})
}

// kill ends the invocation as a crash would: from now on none of its store
// calls reaches the store, and its client gets no answer.
func (inv *invocation) kill(afterEffect bool) {
	inv.killed.Store(true)
	k := inv.k
	k.mu.Lock()
	defer k.mu.Unlock()
	inv.rec.Killed = true
	inv.rec.KilledAfterEffect = afterEffect
}

// keyLog is everything that happened to one key: the side effects, the
// store calls (as the library saw them, below it), the answers the clients
// saw. The checker reads it once every invocation of the key has ended.
type keyLog struct {
	mu sync.Mutex

	name     string // the client's key material
	driver   int
	req      Request
	storeKey string // the key the library used, from the first store call

	invs    []*invRecord
	effects []effect
	calls   []storeCall
	replies []reply

	// final is set when the client got a final answer.
	final bool
	// violations found while the key ran (contract breaches).
	violations []Violation

	running sync.WaitGroup // invocations of the key still running
}

func (k *keyLog) violate(check, format string, args ...any) {
	k.violations = append(k.violations, violation(k.name, check, format, args...))
}

// invRecord is what the checker knows of an invocation.
type invRecord struct {
	ID       string
	Env      int
	Skew     time.Duration
	Lease    time.Duration // the environment's lease, or zero
	Dup      bool
	Start    time.Time
	Deadline time.Time
	// HandlerStart is when the library let the handler run; zero if it did
	// not.
	HandlerStart      time.Time
	Killed            bool
	KilledAfterEffect bool
	// Abandoned is set when the client gave up on the invocation at its
	// deadline while it went on running.
	Abandoned bool
	// Late is the outcome of an abandoned invocation, which no client saw.
	Late string
}

// effect is one side effect, as the handler logged it.
type effect struct {
	Inv string
	At  time.Time
	// Answer is what the invocation answers if nothing goes wrong after the
	// side effect.
	Answer string
	// AfterDeadline is set when the side effect happened after the
	// invocation's deadline.
	AfterDeadline bool
	// Staged is set, in transactional mode, for a side effect that was
	// staged in the completion; Committed when the store holds it.
	// Error answers (a declined request, a failure after the side effect)
	// are decisions, never staged: nothing of them commits.
	Staged, Committed bool
}

// result classifies the error of a store call.
type result string

const (
	resultOK       result = "ok"
	resultConflict result = "conflict"
	resultFenced   result = "fenced"
	resultOmitted  result = "omitted"
	resultNotFound result = "not_found"
	resultCanceled result = "canceled" // a commit whose transaction was canceled
	resultFailed   result = "failed"
	// resultHeld: the fault injection held the call back; it failed at
	// once without reaching the store, and reached it later (a call of
	// its own in the log, with Late set).
	resultHeld result = "held"
)

// storeCall is one call of the library to its store, as seen just below
// the library, or a write of such a call that reached the store late.
type storeCall struct {
	Inv   string
	Op    faultstore.Op
	Token string
	// Renewal is set for an Update of an in-progress record: a lease
	// renewal.
	Renewal bool
	// Late is set for a write that was held back and reached the store
	// after its sender had its answer (see late.go): Start and End are
	// when it was applied, Result what the store said to it; the other
	// fields are those of the call it belongs to. HTTP is set when it was
	// an HTTP attempt held back while the SDK retried it, rather than the
	// call itself.
	Late, HTTP bool
	// Now is the time Put was given (the writer's clock).
	Now time.Time
	// InProgressUntil and ExpiresAt are those of the record written.
	InProgressUntil time.Time
	ExpiresAt       time.Time
	Start, End      time.Time
	Result          result
	// OtherToken is the token of the record a conflict or a Get returned.
	OtherToken string
}

// heldWhere says where a late write was held back, for reports.
func (c *storeCall) heldWhere() string {
	if c.HTTP {
		return "as an HTTP attempt"
	}
	return "at the store interface"
}

// opName names the call's operation in reports: "renew" for a renewal.
func (c *storeCall) opName() string {
	if c.Renewal {
		return "renew"
	}
	return string(c.Op)
}

// reply is what a client got from one invocation.
type reply struct {
	Inv        string
	Dup        bool
	Start, End time.Time
	Final      bool
	Answer     string
	Reason     string    // why the call is to be retried, when not Final
	Until      time.Time // for in-progress replies
}
