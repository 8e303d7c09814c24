package idempotency

import (
	"cmp"
	"context"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence"
)

// A Guard runs functions at most once per idempotency key, over a
// [persistence.Store]: it is the state machine of docs/protocol.md. [Wrap]
// is a typed layer over a Guard. Adapters that derive keys and encode
// results themselves (HTTP, batches, your own) use a Guard directly.
//
// A Guard is safe for concurrent use.
type Guard struct {
	store persistence.Store
	// local is store, when it can be read in the process without a
	// request.
	local persistence.LocalReader
	// notifier is store, when it wakes the calls that wait for a key.
	notifier persistence.Notifier
	cfg      *config
	prefix   string
	disabled bool
	// inTx is set when the function's writes run in a transaction of the
	// store (WithTransactions over a persistence.TxStore); with
	// WithTransactions otherwise, they are staged.
	inTx bool
	// flights are the calls of the Guard's keys in progress in the
	// process (flight.go).
	flights flights
	// took is a moving average of the function's durations, in
	// nanoseconds, for InProgressError.RetryAfter; 0 until it has run.
	took atomic.Int64
	// storeName and storeSystem name the store's type and system, for
	// observers (see Call).
	storeName, storeSystem string
}

// Result is what [Guard.Do] returns.
type Result struct {
	// Response is the encoded result: the function's own when it ran, the
	// stored one when Outcome is OutcomeReplay.
	Response []byte
	// Outcome is how the call ended.
	Outcome Outcome
	// Record is the stored record a replay came from; nil otherwise.
	Record *persistence.Record
}

// NewGuard returns a Guard over store. Without [WithKeyPrefix] the prefix
// is the function name from AWS_LAMBDA_FUNCTION_NAME, or "idempotency".
// When POWERTOOLS_IDEMPOTENCY_DISABLED is true, [Guard.Do] only calls its
// function.
func NewGuard(store persistence.Store, opts ...GuardOption) (*Guard, error) {
	cfg, err := newConfig("idempotency: NewGuard", opts)
	if err != nil {
		return nil, err
	}
	return newGuard(store, cfg, core.DefaultPrefix(nil))
}

// newGuard returns the Guard of cfg; defaultPrefix is the entry point's
// prefix when neither WithKeyPrefix nor the adapter names one.
func newGuard(store persistence.Store, cfg *config, defaultPrefix string) (*Guard, error) {
	if store == nil {
		return nil, errors.New(cfg.name + ": nil persistence.Store")
	}
	staged, inTx := persistence.Commits(store)
	if cfg.transactions && !staged && !inTx {
		return nil, fmt.Errorf("%s: idempotency.WithTransactions: the store, a %T, commits no writes with a completion (persistence.Committer, persistence.TxStore)", cfg.name, store)
	}
	local, _ := store.(persistence.LocalReader)
	g := &Guard{
		store:    store,
		local:    local,
		notifier: notifierOf(store),
		cfg:      cfg,
		inTx:     cfg.transactions && inTx,
		prefix:   cmp.Or(cfg.prefix, cfg.prefix0, defaultPrefix),
		disabled: core.Disabled(),
	}
	g.storeName = fmt.Sprintf("%T", store)
	g.storeSystem = storeSystem(store)
	return g, nil
}

// layers yields store and each store it decorates (a cache in front of
// Redis), outermost first. It stops after 8, so a cycle cannot loop.
func layers(store persistence.Store) iter.Seq[persistence.Store] {
	return func(yield func(persistence.Store) bool) {
		for range 8 {
			if !yield(store) {
				return
			}
			u, ok := store.(interface{ Unwrap() persistence.Store })
			if !ok || u.Unwrap() == nil {
				return
			}
			store = u.Unwrap()
		}
	}
}

// notifierOf returns the store that wakes waiting calls, store or one it
// decorates, or nil when there is none.
func notifierOf(store persistence.Store) persistence.Notifier {
	for s := range layers(store) {
		if n, ok := s.(persistence.Notifier); ok {
			return n
		}
	}
	return nil
}

// storeSystem returns [Call.System] for store: the package of this
// module's store under the wrappers, which the core cannot import.
func storeSystem(store persistence.Store) string {
	var inner persistence.Store
	for inner = range layers(store) {
	}
	t := reflect.TypeOf(inner)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if pkg, ok := strings.CutPrefix(t.PkgPath(), "github.com/retrysafe/retrysafe/persistence/"); ok && !strings.Contains(pkg, "/") {
		return pkg
	}
	return fmt.Sprintf("%T", store)
}

// Do runs fn at most once for key, and returns its encoded result, or the
// stored result of an earlier call with the same key. The record's key is
// the Guard's prefix, "#", and the hex SHA-256 of key. It is scoped to the
// tenant of a Lambda invocation in tenant isolation mode (see
// [WithoutTenantIsolation]). When payload is not empty, its SHA-256 is the
// record's payload hash: a call with the same key and another payload
// fails with [*PayloadMismatchError].
//
// fn's errors are returned unchanged, and release the key unless they are
// permanent ([Permanent], [WithPermanentErrors]). The package documentation
// says what Do does at each step, and which errors it returns.
func (g *Guard) Do(ctx context.Context, key, payload string, fn func(context.Context) ([]byte, error)) (Result, error) {
	if g.disabled {
		resp, err := fn(core.WithoutSteps(ctx))
		return Result{Response: resp, Outcome: OutcomeNew}, core.Unmark(err)
	}
	var c call
	ctx = c.begin(ctx, g)
	var payloadHash string
	if payload != "" {
		payloadHash = core.Hash([]byte(payload))
	}
	c.key = core.Key(g.prefix, g.tenant(ctx), []byte(key))
	// The path of every call, Do's and Wrap's, as docs/protocol.md has
	// it: acquire the key, or the answer of the call that holds it; run fn
	// as its holder, and settle the key with fn's outcome (run.go).
	h, res, err := g.acquire(ctx, &c, payloadHash)
	if h != nil {
		res, err = g.run(ctx, &c, h, fn)
	}
	res.Outcome = c.end(ctx, res.Outcome, err)
	return res, err
}

// tenant returns the tenant ID that scopes the keys of ctx's calls: the
// Lambda invocation's, unless [WithoutTenantIsolation].
func (g *Guard) tenant(ctx context.Context) string {
	if g.cfg.acrossTenants {
		return ""
	}
	return core.TenantOf(ctx)
}

// A holder is a call that owns its key: it reserved it in the store, and
// leads the key's flight in the process. The function's context carries it
// (KeyFromContext, MarkNotExecuted).
type holder struct {
	rec    *persistence.Record
	flight *flight
	// mu guards rec's expiries while the function runs: its lease
	// renews them, and its steps read them.
	mu sync.Mutex
	// g and c are the Guard and the call that hold the key, for the
	// function's steps (step.go). c is a copy, so that a call that does
	// not run its function stays on the stack.
	g *Guard
	c call
	// notExecuted is set by MarkNotExecuted.
	notExecuted atomic.Bool
}

// acquire makes the call the holder of its key, or returns the answer it
// gets instead: the result of an earlier call to replay, or why it cannot
// go on. Calls with one key in one process share one reservation
// (flight.go).
func (g *Guard) acquire(ctx context.Context, c *call, payloadHash string) (h *holder, res Result, err error) {
	var w *waiter
	if g.cfg.wait > 0 {
		w = g.newWaiter(ctx)
		defer func() {
			w.close()
			c.reportWait(ctx, w, err)
		}()
	}
	for {
		if g.local != nil {
			// A store in the process answers a completed key without the
			// write. A payload that differs goes on to the write, so that
			// the stored record, not a cached copy, decides the mismatch.
			if existing := g.local.ReadLocal(c.key, time.Now()); existing != nil && (payloadHash == "" || existing.PayloadHash == payloadHash) {
				res, err := g.answer(c, payloadHash, existing)
				return nil, res, err
			}
		}
		f, leader := g.flights.join(c.key, payloadHash)
		if !leader {
			outcome, reserved, err := g.follow(ctx, f, w)
			heldSince := f.operatorHeld()
			switch {
			case err != nil:
				return nil, Result{}, err
			case !heldSince.IsZero():
				return nil, Result{Outcome: OutcomeHeld}, &HeldError{Key: c.key, Since: heldSince}
			case reserved:
				return nil, Result{Outcome: OutcomeInProgress}, g.inProgress(c.key, f.lapses())
			case outcome != nil:
				res, err := g.answer(c, payloadHash, outcome)
				return nil, res, err
			}
			continue // the leader released the key, could not reserve it, or lapsed
		}
		rec, res, err := g.lead(ctx, c, payloadHash, f, w)
		if rec != nil {
			return &holder{rec: rec, flight: f}, Result{}, nil
		}
		return nil, res, err
	}
}

// follow waits for the answer of the flight f's leader: its outcome (nil:
// try again), or reserved true when the key is reserved and the call
// cannot wait for it. A call without WithWait waits only for the leader's
// store answer; with WithWait, for the leader's outcome, until the wait
// runs out.
func (g *Guard) follow(ctx context.Context, f *flight, w *waiter) (outcome *persistence.Record, reserved bool, err error) {
	if w == nil {
		return f.await(ctx)
	}
	outcome, ok, err := w.follow(ctx, f)
	return outcome, !ok && err == nil, err
}

// lead reserves the key as the leader of its flight f, and lands the
// flight unless the call now holds the key: with the completed record the
// call answers from, or the time until which another process holds the
// key. A store that panics lands the flight too, so that the key's entry
// never outlives the call.
func (g *Guard) lead(ctx context.Context, c *call, payloadHash string, f *flight, w *waiter) (rec *persistence.Record, res Result, err error) {
	var (
		outcome       *persistence.Record
		reservedUntil time.Time
		holds         bool
	)
	defer func() {
		if !holds {
			g.flights.land(c.key, f, outcome, reservedUntil)
		}
	}()
	if core.LikelyRetry(ctx) {
		if existing := g.readFirst(ctx, c); existing != nil {
			if payloadHash == "" || existing.PayloadHash == payloadHash {
				outcome = existing
			}
			res, err = g.answer(c, payloadHash, existing)
			return nil, res, err
		}
	}
	// told is the record a wake-up carried, when it completes the
	// reservation the call waits for: it stands for the next poll's read.
	var told *persistence.Record
	for {
		var existing *persistence.Record
		if told != nil && told.Live(time.Now()) {
			rec, existing, err = nil, told, nil
		} else {
			rec, existing, err = g.reserve(ctx, c, payloadHash)
		}
		told = nil
		switch {
		case err != nil && w != nil && w.waited && ctx.Err() == nil:
			// A poll failed: a dropped connection, a restarting server. The
			// record's state is unknown, so the wait goes on, within its
			// budget, and ends with the error only when the budget does.
			_, again, perr := w.pause(ctx, c.key)
			if perr != nil {
				return nil, Result{}, perr
			}
			if again {
				continue
			}
			return nil, Result{Outcome: OutcomeStoreError}, err
		case err != nil:
			return nil, Result{Outcome: OutcomeStoreError}, err
		case rec != nil:
			f.reserved(rec.InProgressExpiresAt)
			holds = true
			return rec, Result{}, nil
		}
		mismatch := payloadHash != "" && existing.PayloadHash != payloadHash
		if existing.Held && existing.Lapsed(time.Now()) && !mismatch {
			// Held until an operator releases it: no wait ends that.
			f.landHeld(existing.InProgressExpiresAt)
			res, err = g.answer(c, payloadHash, existing)
			return nil, res, err
		}
		if existing.Status != persistence.StatusCompleted && !mismatch {
			// Held by another process: followers without WithWait are
			// answered so at once, and a waiter polls the store.
			f.reserved(existing.InProgressExpiresAt)
			reservedUntil = existing.InProgressExpiresAt
			if w != nil {
				woken, again, err := w.pause(ctx, c.key)
				if err != nil {
					return nil, Result{}, err
				}
				if again {
					if completes(woken, existing) {
						told = woken
					}
					continue
				}
			}
		}
		if existing.Status == persistence.StatusCompleted && !mismatch {
			outcome = existing
		}
		res, err = g.answer(c, payloadHash, existing)
		return nil, res, err
	}
}

// completes reports whether woken, a record a wake-up carried, is the
// completion of the reservation seen. Only then does it stand for a read.
// A wake-up can be late: sent before the call watched, or undone by an
// operator's release since. A completion of seen comes after the read
// that saw it, within the call, so answering from it is as a read then.
// Any other record is read again. A forged wake-up needs seen's token.
func completes(woken, seen *persistence.Record) bool {
	return woken != nil && woken.Status == persistence.StatusCompleted && woken.Token == seen.Token
}

// readFirst reads the record of a call that is likely a retry
// (core.WithLikelyRetry). It returns the record when it is completed and
// live, the answer the reservation would have failed with. Otherwise, or
// when the read fails, it returns nil and the reservation decides. A read
// writes nothing, so the protocol is unchanged. Behind a local cache that
// missed, the read reaches the store.
func (g *Guard) readFirst(ctx context.Context, c *call) *persistence.Record {
	t := c.now()
	existing, err := g.store.Get(ctx, c.key)
	c.stored(ctx, "get", t, err)
	if err != nil || existing.Status != persistence.StatusCompleted || !existing.Live(time.Now()) {
		return nil
	}
	return existing
}

// maxReserveAttempts bounds how often a reservation is tried again when
// the conflicting record vanished or expired before it could be read.
const maxReserveAttempts = 3

// reserve writes the call's in-progress record (docs/protocol.md,
// reserve; over a record that is not live, a takeover). It returns the
// record when the call now owns the key, or the live record that holds
// it, or a *StoreError.
func (g *Guard) reserve(ctx context.Context, c *call, payloadHash string) (rec, existing *persistence.Record, err error) {
	now := time.Now()
	start := now
	rec = &persistence.Record{
		Key:         c.key,
		Status:      persistence.StatusInProgress,
		PayloadHash: payloadHash,
		Token:       newToken(),
		Held:        g.cfg.hold,
	}
	for attempt := 1; ; attempt++ {
		// The in-progress expiry is the end of the reservation's first
		// lease; the record's own expiry never comes before it, so that
		// a short expiry cannot let a second call in while the first
		// still runs.
		rec.InProgressExpiresAt = g.leaseEnd(ctx, now)
		rec.ExpiresAt = ceilSecond(now.Add(g.cfg.expiry))
		if rec.ExpiresAt.Before(rec.InProgressExpiresAt) {
			rec.ExpiresAt = ceilSecond(rec.InProgressExpiresAt)
		}
		t := c.now()
		err := g.store.Put(ctx, rec, now)
		c.stored(ctx, "put", t, err)
		var conflict *persistence.ConflictError
		switch {
		case err == nil:
			existing = rec
		case !errors.As(err, &conflict):
			// The write may have landed with its reply lost: release it
			// (fenced on the call's token and status, so it cannot touch
			// any other record) rather than leave the key blocked.
			g.releaseQuietly(ctx, c, rec)
			return nil, nil, &StoreError{Op: "put", Key: c.key, Err: err}
		case conflict.Existing != nil:
			existing = conflict.Existing
		default:
			t := c.now()
			existing, err = g.store.Get(ctx, c.key)
			c.stored(ctx, "get", t, err)
			if errors.Is(err, persistence.ErrNotFound) {
				existing = nil
			} else if err != nil {
				// The conflicting record may be the call's own: a write
				// whose reply was lost, retried by the store's client into
				// a conflict with itself. Release it as above.
				g.releaseQuietly(ctx, c, rec)
				return nil, nil, &StoreError{Op: "get", Key: c.key, Err: err}
			}
		}
		switch {
		case existing != nil && existing.Token == rec.Token:
			// The call's own reservation (also an attempt whose reply was
			// lost: docs/protocol.md, reserve on own in progress).
			if !time.Now().Before(rec.InProgressExpiresAt) {
				// The reply came after the reservation had lapsed: another
				// call may hold the key by now, and the function must not
				// run beside it.
				g.releaseQuietly(ctx, c, rec)
				return nil, nil, &StoreError{Op: "put", Key: c.key, Err: errLapsedOnArrival}
			}
			c.report(ctx, Event{Kind: EventReserved, Key: c.key, Start: start, Duration: time.Since(start)})
			return rec, nil, nil
		case existing != nil && existing.Live(now):
			return nil, existing, nil
		case attempt == maxReserveAttempts:
			// The record vanished or expired between the write and the
			// read, again and again.
			g.releaseQuietly(ctx, c, rec)
			return nil, nil, &StoreError{Op: "put", Key: c.key, Err: errors.New("the conflicting record kept changing; giving up")}
		}
		now = time.Now()
	}
}

// errLapsedOnArrival is why a reservation whose reply came after its
// in-progress expiry does not run its function.
var errLapsedOnArrival = errors.New("the reservation's reply came after its lease had ended; the function did not run")

// answer turns the live record that holds the call's key into the call's
// answer: a replay of its result, or why there is none.
func (g *Guard) answer(c *call, payloadHash string, existing *persistence.Record) (Result, error) {
	switch {
	case payloadHash != "" && existing.PayloadHash != payloadHash:
		return refused(OutcomePayloadMismatch, &PayloadMismatchError{Key: c.key})
	case existing.Status != persistence.StatusCompleted && existing.Held && existing.Lapsed(time.Now()):
		return refused(OutcomeHeld, &HeldError{Key: c.key, Since: existing.InProgressExpiresAt})
	case existing.Status != persistence.StatusCompleted:
		return refused(OutcomeInProgress, g.inProgress(c.key, existing.InProgressExpiresAt))
	case existing.ErrorType != "":
		return Result{Outcome: OutcomeRecordedError, Record: existing}, g.recordedError(c.key, existing)
	case existing.ResponseOmitted:
		return Result{Outcome: OutcomeReplay, Record: existing}, &ResponseTooLargeError{Key: c.key}
	}
	return Result{Response: existing.Response, Outcome: OutcomeReplay, Record: existing}, nil
}

// recordedError returns the error that rec, the record of key, recorded,
// as WithErrorDecoder decodes it.
func (g *Guard) recordedError(key string, rec *persistence.Record) error {
	re := &RecordedError{Key: key, Type: rec.ErrorType, Message: rec.ErrorMessage}
	if g.cfg.decodeError != nil {
		return g.cfg.decodeError(re)
	}
	return re
}

// refused returns the answer of a call refused with err.
func refused(o Outcome, err error) (Result, error) { return Result{Outcome: o}, err }

// inProgress returns the error of a call whose key is reserved until
// until: retry after the function's usual duration, or when the
// reservation lapses if that comes first.
func (g *Guard) inProgress(key string, until time.Time) *InProgressError {
	e := &InProgressError{Key: key, Until: until, RetryAfter: time.Duration(g.took.Load())}
	if left := time.Until(until); !until.IsZero() && (e.RetryAfter == 0 || left < e.RetryAfter) {
		e.RetryAfter = max(left, 0)
	}
	return e
}

// ran adds a duration of the function to the estimate behind
// InProgressError.RetryAfter: a moving average that gives the latest run a
// weight of 1/8, so that a few slow runs do not dominate it.
func (g *Guard) ran(d time.Duration) {
	for {
		old := g.took.Load()
		avg := int64(d)
		if old != 0 {
			avg = old + (int64(d)-old)/8
		}
		if g.took.CompareAndSwap(old, max(avg, 1)) {
			return
		}
	}
}

// ceilSecond rounds t up to a whole second: stores keep ExpiresAt in epoch
// seconds, and rounding up never shortens the promised expiry.
func ceilSecond(t time.Time) time.Time {
	whole := t.Truncate(time.Second)
	if whole.Equal(t) {
		return whole
	}
	return whole.Add(time.Second)
}

// tokens writes owner tokens: 26 characters of base32, as crypto/rand.Text
// writes them.
var tokens = base32.StdEncoding.WithPadding(base32.NoPadding)

// newToken returns a random owner token of 128 bits. Tokens need to be
// unique, not secret: they come from math/rand/v2's generator (ChaCha8,
// seeded by the operating system in every process), which costs less than
// a crypto/rand read on a path every call takes.
func newToken() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return tokens.EncodeToString(b[:])
}
