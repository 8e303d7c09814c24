package idempotency

import (
	"cmp"
	"context"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
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
	local    persistence.LocalReader
	cfg      *config
	prefix   string
	disabled bool
	// inTx is set when the function's writes run in a transaction of the
	// store (WithTransactions over a persistence.TxStore); with
	// WithTransactions otherwise, they are staged.
	inTx bool
	// flightID is what the flights of the Guard's keys are kept under.
	flightID uintptr
	// storeName and storeSystem name the store's type and system, for
	// observers (see Call).
	storeName, storeSystem string
	// writeDeadlines are the deadlines of the settling writes.
	writeDeadlines *writeDeadlines
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
		store:          store,
		local:          local,
		cfg:            cfg,
		inTx:           cfg.transactions && inTx,
		prefix:         cmp.Or(cfg.prefix, cfg.prefix0, defaultPrefix),
		disabled:       core.Disabled(),
		writeDeadlines: &writeDeadlines{timeout: cfg.finalWriteTimeout},
	}
	g.flightID = flightIdentity(g)
	g.storeName = fmt.Sprintf("%T", store)
	g.storeSystem = storeSystem(store)
	return g, nil
}

// storeSystem returns [Call.System] for store: the package of this
// module's store under the wrappers, which the core cannot import.
func storeSystem(store persistence.Store) string {
	inner := store
	for range 8 { // wrappers of wrappers, but never a cycle
		u, ok := inner.(interface{ Unwrap() persistence.Store })
		if !ok || u.Unwrap() == nil {
			break
		}
		inner = u.Unwrap()
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
// the Guard's prefix, "#", and the hex SHA-256 of key, scoped to the
// tenant of a Lambda invocation in tenant isolation mode (see
// [WithoutTenantIsolation]). When payload is not
// empty, its SHA-256 is the record's payload hash: a call with the same
// key and another payload fails with [*PayloadMismatchError].
//
// fn's errors are returned unchanged, and release the key unless they
// are permanent ([Permanent], [WithPermanentErrors]). The package
// documentation says what Do does at each step, and which errors it
// returns.
func (g *Guard) Do(ctx context.Context, key, payload string, fn func(context.Context) ([]byte, error)) (Result, error) {
	if g.disabled {
		resp, err := fn(ctx)
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
	res.Outcome = c.finish(err)
	c.end(ctx, err)
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
// leads the key's flight in the process.
type holder struct {
	rec    *persistence.Record
	flight *flight
}

// acquire makes the call the holder of its key, or returns the answer it
// gets instead: the result of an earlier call to replay, or why it cannot
// go on. Calls with one key in one process share one reservation
// (flight.go).
func (g *Guard) acquire(ctx context.Context, c *call, payloadHash string) (h *holder, res Result, err error) {
	w := g.newWaiter(ctx)
	defer func() { c.reportWait(ctx, w, err) }()
	for {
		if g.local != nil {
			// A store in the process answers a completed key without the
			// write. A payload that differs goes on to the write, so that the
			// stored record, not a cached copy, decides the mismatch.
			if existing := g.local.ReadLocal(c.key, time.Now()); existing != nil && (payloadHash == "" || existing.PayloadHash == payloadHash) {
				res, err := g.answer(ctx, c, payloadHash, existing)
				return nil, res, err
			}
		}
		f, leader := g.join(c.key, payloadHash)
		if !leader {
			outcome, reserved, err := g.follow(ctx, f, w)
			heldSince := f.operatorHeld()
			switch {
			case err != nil:
				return nil, Result{}, err
			case !heldSince.IsZero():
				return nil, Result{}, g.held(ctx, c, heldSince)
			case reserved:
				return nil, Result{}, g.inProgress(ctx, c, f.lapses())
			case outcome != nil:
				res, err := g.answer(ctx, c, payloadHash, outcome)
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
			g.land(c.key, f, outcome, reservedUntil)
		}
	}()
	for {
		var existing *persistence.Record
		rec, existing, err = g.reserve(ctx, c, payloadHash)
		switch {
		case err != nil:
			return nil, Result{}, err
		case rec != nil:
			f.reserved(rec.InProgressExpiresAt)
			holds = true
			return rec, Result{}, nil
		}
		mismatch := payloadHash != "" && existing.PayloadHash != payloadHash
		if existing.Held && existing.Lapsed(time.Now()) && !mismatch {
			// Held until an operator releases it: no wait ends that.
			f.landHeld(existing.InProgressExpiresAt)
			res, err = g.answer(ctx, c, payloadHash, existing)
			return nil, res, err
		}
		if existing.Status != persistence.StatusCompleted && !mismatch {
			// Held by another process: followers without WithWait are
			// answered so at once, and a waiter polls the store.
			f.reserved(existing.InProgressExpiresAt)
			reservedUntil = existing.InProgressExpiresAt
			if w != nil {
				again, err := w.pause(ctx)
				if err != nil {
					return nil, Result{}, err
				}
				if again {
					continue
				}
			}
		}
		if existing.Status == persistence.StatusCompleted && !mismatch {
			outcome = existing
		}
		res, err = g.answer(ctx, c, payloadHash, existing)
		return nil, res, err
	}
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
	reserved := func() (*persistence.Record, *persistence.Record, error) {
		if !time.Now().Before(rec.InProgressExpiresAt) {
			// The reply came after the reservation had lapsed: another
			// call may hold the key by now, and the function must not
			// run beside it.
			g.releaseQuietly(ctx, c, rec)
			c.setOutcome(OutcomeStoreError)
			return nil, nil, &StoreError{Op: "put", Key: c.key, Err: errLapsedOnArrival}
		}
		c.report(ctx, Event{Kind: EventReserved, Key: c.key, Start: start, Duration: time.Since(start)})
		return rec, nil, nil
	}
	for attempt := 1; ; attempt++ {
		g.setExpiries(ctx, rec, now)
		err := c.storePut(ctx, rec, now)
		if err == nil {
			return reserved()
		}
		var conflict *persistence.ConflictError
		if !errors.As(err, &conflict) {
			// The write may have landed with its reply lost: release it
			// (fenced on the call's token and status, so it cannot touch
			// any other record) rather than leave the key blocked.
			g.releaseQuietly(ctx, c, rec)
			c.setOutcome(OutcomeStoreError)
			return nil, nil, &StoreError{Op: "put", Key: c.key, Err: err}
		}
		existing := conflict.Existing
		if existing == nil {
			existing, err = c.storeGet(ctx)
			if errors.Is(err, persistence.ErrNotFound) {
				existing = nil
			} else if err != nil {
				// The conflicting record may be the call's own: a write
				// whose reply was lost, retried by the store's client into
				// a conflict with itself. Release it as above.
				g.releaseQuietly(ctx, c, rec)
				c.setOutcome(OutcomeStoreError)
				return nil, nil, &StoreError{Op: "get", Key: c.key, Err: err}
			}
		}
		if existing != nil && existing.Token == rec.Token {
			// The call's own reservation: an attempt whose reply was lost
			// wrote it (docs/protocol.md, reserve on own in progress).
			return reserved()
		}
		if existing != nil && existing.Live(now) {
			return nil, existing, nil
		}
		// The record vanished or expired between the write and the read.
		if attempt == maxReserveAttempts {
			g.releaseQuietly(ctx, c, rec)
			c.setOutcome(OutcomeStoreError)
			return nil, nil, &StoreError{Op: "put", Key: c.key, Err: errors.New("the conflicting record kept changing; giving up")}
		}
		now = time.Now()
	}
}

// errLapsedOnArrival is why a reservation whose reply came after its
// in-progress expiry does not run its function.
var errLapsedOnArrival = errors.New("the reservation's reply came after its lease had ended; the function did not run")

// setExpiries sets the expiry times of an in-progress record written at
// now. The in-progress expiry is the end of the reservation's first lease
// (see leaseEnd); the record's own expiry never comes before it, so that a
// short expiry cannot let a second call in while the first still runs.
func (g *Guard) setExpiries(ctx context.Context, rec *persistence.Record, now time.Time) {
	rec.InProgressExpiresAt = g.leaseEnd(ctx, now)
	rec.ExpiresAt = ceilSecond(later(now.Add(g.cfg.expiry), rec.InProgressExpiresAt))
}

// answer turns the live record that holds the call's key into the call's
// answer: a replay of its result, or why there is none.
func (g *Guard) answer(ctx context.Context, c *call, payloadHash string, existing *persistence.Record) (Result, error) {
	if payloadHash != "" && existing.PayloadHash != payloadHash {
		c.observe(ctx, EventPayloadMismatch, nil)
		c.setOutcome(OutcomePayloadMismatch)
		return Result{}, &PayloadMismatchError{Key: c.key}
	}
	if existing.Status != persistence.StatusCompleted {
		if existing.Held && existing.Lapsed(time.Now()) {
			return Result{}, g.held(ctx, c, existing.InProgressExpiresAt)
		}
		return Result{}, g.inProgress(ctx, c, existing.InProgressExpiresAt)
	}
	c.observe(ctx, EventReplayed, nil)
	switch {
	case existing.ErrorType != "":
		c.setOutcome(OutcomeRecordedError)
		stored := &RecordedError{Key: c.key, Type: existing.ErrorType, Message: existing.ErrorMessage}
		if g.cfg.decodeError != nil {
			return Result{Record: existing}, g.cfg.decodeError(stored)
		}
		return Result{Record: existing}, stored
	case existing.ResponseOmitted:
		c.setOutcome(OutcomeReplay)
		return Result{Record: existing}, &ResponseTooLargeError{Key: c.key}
	}
	c.setOutcome(OutcomeReplay)
	return Result{Response: existing.Response, Record: existing}, nil
}

// held refuses the call: the key is held, since the reservation lapsed,
// until an operator releases it.
func (g *Guard) held(ctx context.Context, c *call, since time.Time) error {
	c.observe(ctx, EventHeld, nil)
	c.setOutcome(OutcomeHeld)
	return &HeldError{Key: c.key, Since: since}
}

// inProgress refuses the call: the key is reserved until until.
func (g *Guard) inProgress(ctx context.Context, c *call, until time.Time) error {
	c.observe(ctx, EventInProgress, nil)
	c.setOutcome(OutcomeInProgress)
	return &InProgressError{Key: c.key, Until: until}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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
