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
// [persistence.Store]: it is the state machine. [Wrap] is a typed layer
// over a Guard; adapters that derive keys and encode results themselves
// (HTTP, batches, your own) use a Guard directly.
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
	// flightID is what the flights of the Guard's keys are kept under.
	flightID any
	// storeName and storeSystem name the store's type and system, for
	// observers (see Call).
	storeName, storeSystem string
}

// Result is what [Guard.Do] returns.
type Result struct {
	// Response is the encoded result: the function's own when it ran, the
	// stored one when Replayed.
	Response []byte
	// Replayed is set when the function did not run because the key had
	// already completed.
	Replayed bool
	// Record is the stored record a replay came from; nil otherwise.
	Record *persistence.Record
}

// maxReserveAttempts bounds how often a reservation is tried again when
// the conflicting record vanished or expired before it could be read.
const maxReserveAttempts = 3

// NewGuard returns a Guard over store. The options are those of [Wrap],
// except the ones that select keys from typed inputs and shape typed
// results ([WithKey], [WithPayloadValidation], [WithRequireKey],
// [WithResponseHook]): the caller of [Guard.Do] derives keys itself.
// Without [WithKeyPrefix] the prefix is the function name from
// AWS_LAMBDA_FUNCTION_NAME, or "idempotency".
//
// When POWERTOOLS_IDEMPOTENCY_DISABLED is set to a true value (1, true,
// yes, on, y, t), Do simply calls its function.
func NewGuard(store persistence.Store, opts ...Option) (*Guard, error) {
	cfg, err := newConfig(core.Guard, "idempotency: NewGuard", opts)
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
	if cfg.transactions && !persistence.Commits(store) {
		return nil, fmt.Errorf("%s: idempotency.WithTransactions: the store, a %T, does not commit staged writes (persistence.Committer)", cfg.name, store)
	}
	local, _ := store.(persistence.LocalReader)
	g := &Guard{
		store:    store,
		local:    local,
		cfg:      cfg,
		prefix:   cmp.Or(cfg.prefix, cfg.prefix0, defaultPrefix),
		disabled: core.Disabled(),
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
// stored result of an earlier call with the same key.
//
// The record's key is the Guard's prefix, "#", and the hex SHA-256 of key,
// whatever key holds: an order ID, or the canonical JSON of a value. When
// payload is not empty, its SHA-256 is the record's payload hash: a call
// with the same key and another payload fails with [*PayloadMismatchError].
//
//   - The key is reserved first, with a conditional write that fails if a
//     live record exists, so fn never runs twice concurrently for one key.
//     A store that implements [persistence.LocalReader] is read before
//     that: a completed key with the same payload hash is answered without
//     the write. Calls with one key in one process share one reservation:
//     while one holds it, the others do not ask the store.
//   - If the key has completed, fn does not run and the stored result is
//     returned with Replayed set (or the recorded error, as a
//     [*StoredError], or [*ResponseTooLargeError]).
//   - If another call holds the key, the call fails with
//     [*InProgressError], unless [WithWait] lets it wait for that call's
//     outcome: its result, or its release, after which this call reserves
//     the key and runs fn.
//   - If the store fails before fn runs, the call fails with [*StoreError]
//     and fn does not run.
//   - If fn returns an error, the key is released (deleted) so a retry can
//     run, and the error is returned unchanged; errors marked with
//     [Permanent] or classified by [WithPermanentErrors] are recorded and
//     replayed instead. If fn panics, the key is released and the panic
//     goes on.
//   - If fn succeeds, its result is stored and returned. If storing it
//     fails, the result is still returned, the failure is logged and
//     reported as [EventCompletionFailed], and the key stays reserved until
//     its in-progress expiry, after which a retry runs fn again. Returning
//     an error instead would make the caller retry at once into
//     *InProgressError; releasing the key would let a retry repeat the side
//     effect immediately. Keeping the reservation bounds that window by the
//     in-progress expiry.
//
// The reservation holds the key until ctx's deadline (on Lambda, the
// invocation's). Without a deadline, or with [WithLease], it holds it for
// a lease that is renewed while fn runs, so that the key of a process that
// dies lapses within one lease.
//
// fn receives a context that carries the record's key (see
// [KeyFromContext]). The completion and release writes run on a context
// detached from ctx's cancellation, with their own timeout
// ([WithFinalWriteTimeout]).
func (g *Guard) Do(ctx context.Context, key, payload string, fn func(context.Context) ([]byte, error)) (Result, error) {
	if g.disabled {
		resp, err := fn(ctx)
		return Result{Response: resp}, unwrapPermanent(err)
	}
	var c call
	ctx = g.beginCall(ctx, &c)
	var payloadHash string
	if payload != "" {
		payloadHash = core.Hash([]byte(payload))
	}
	c.key = core.Key(g.prefix, []byte(key))
	h, res, err := g.acquire(ctx, &c, payloadHash)
	if h != nil {
		res, err = g.run(ctx, &c, h, fn)
	}
	c.end(ctx, err)
	return res, err
}

// A holder is a call that owns its key: it reserved it in the store, and
// leads the key's flight in the process.
type holder struct {
	rec    *persistence.Record
	flight *flight
}

// acquire makes the call the holder of key, or returns the answer it gets
// instead: the result of an earlier call to replay, or why it cannot go
// on.
func (g *Guard) acquire(ctx context.Context, c *call, payloadHash string) (h *holder, res Result, err error) {
	key := c.key
	w := g.newWaiter(ctx)
	defer func() { c.reportWait(ctx, w, key, err) }()
	for {
		if g.local != nil {
			// A store in the process answers a completed key without the
			// write. A payload that differs goes on to the write, so that the
			// stored record, not a cached copy, decides the mismatch.
			if existing := g.local.ReadLocal(key, time.Now()); existing != nil && (payloadHash == "" || existing.PayloadHash == payloadHash) {
				replay, err := g.answer(ctx, c, payloadHash, existing)
				return nil, replay, err
			}
		}
		f, leader := g.join(key, payloadHash)
		if !leader {
			if w == nil {
				return nil, Result{}, g.inProgress(ctx, c, f.lapses())
			}
			outcome, ok, err := w.follow(ctx, f)
			switch {
			case err != nil:
				return nil, Result{}, err
			case !ok:
				return nil, Result{}, g.inProgress(ctx, c, f.lapses())
			case outcome != nil:
				replay, err := g.answer(ctx, c, payloadHash, outcome)
				return nil, replay, err
			}
			continue // the leader released the key, or could not reserve it
		}
		rec, outcome, res, err := g.reserve(ctx, c, payloadHash, f, w)
		if rec != nil {
			return &holder{rec: rec, flight: f}, Result{}, nil
		}
		g.land(key, f, outcome)
		return nil, res, err
	}
}

// reserve writes the in-progress record for key, as the leader of its
// flight f. It returns the record when the caller now owns the key;
// otherwise the answer of the live record that holds it, with that record
// as the outcome for the flight's followers when it has completed, or why
// the call cannot go on. With a waiter w, a record in progress elsewhere
// is polled until it completes or is released, or the wait runs out.
func (g *Guard) reserve(ctx context.Context, c *call, payloadHash string, f *flight, w *waiter) (rec, outcome *persistence.Record, res Result, err error) {
	for {
		rec, existing, err := g.put(ctx, c, payloadHash)
		switch {
		case err != nil:
			return nil, nil, Result{}, err
		case rec != nil:
			f.setUntil(rec.InProgressExpiresAt)
			return rec, nil, Result{}, nil
		}
		mismatch := payloadHash != "" && existing.PayloadHash != payloadHash
		if existing.Status != persistence.StatusCompleted && !mismatch && w != nil {
			f.setUntil(existing.InProgressExpiresAt)
			ok, err := w.pause(ctx)
			if err != nil {
				return nil, nil, Result{}, err
			}
			if ok {
				continue
			}
		}
		if existing.Status == persistence.StatusCompleted && !mismatch {
			outcome = existing
		}
		res, err = g.answer(ctx, c, payloadHash, existing)
		return nil, outcome, res, err
	}
}

// put makes one reservation attempt: it returns the in-progress record the
// call now owns, or the live record that holds the key, or a *StoreError.
func (g *Guard) put(ctx context.Context, c *call, payloadHash string) (rec, existing *persistence.Record, err error) {
	key := c.key
	now := time.Now()
	start := now
	rec = &persistence.Record{
		Key:         key,
		Status:      persistence.StatusInProgress,
		PayloadHash: payloadHash,
		Token:       newToken(),
	}
	for attempt := 1; ; attempt++ {
		g.setExpiries(ctx, rec, now)
		err := c.storePut(ctx, rec, now)
		if err == nil {
			c.report(ctx, Event{Kind: EventReserved, Key: key, Start: start, Duration: time.Since(start)})
			return rec, nil, nil
		}
		var conflict *persistence.ConflictError
		if !errors.As(err, &conflict) {
			// The write may have landed with its reply lost: release it
			// (fenced by our token, so it cannot touch anyone else's record)
			// rather than leave the key blocked until the deadline.
			c.releaseQuietly(ctx, rec)
			c.settle(OutcomeStoreError)
			return nil, nil, &StoreError{Op: "put", Key: key, Err: err}
		}
		existing := conflict.Existing
		if existing == nil {
			existing, err = c.storeGet(ctx, key)
			if errors.Is(err, persistence.ErrNotFound) {
				existing = nil
			} else if err != nil {
				// The conflicting record may be our own: a write whose
				// reply was lost, retried by the store's client into a
				// conflict with itself. Release it as above.
				c.releaseQuietly(ctx, rec)
				c.settle(OutcomeStoreError)
				return nil, nil, &StoreError{Op: "get", Key: key, Err: err}
			}
		}
		if existing != nil && existing.Token == rec.Token {
			// Our own reservation: a retried write whose first reply was
			// lost found it.
			c.report(ctx, Event{Kind: EventReserved, Key: key, Start: start, Duration: time.Since(start)})
			return rec, nil, nil
		}
		if existing != nil && existing.Live(now) {
			return nil, existing, nil
		}
		// The record vanished or expired between the write and the read.
		if attempt == maxReserveAttempts {
			c.releaseQuietly(ctx, rec)
			c.settle(OutcomeStoreError)
			return nil, nil, &StoreError{Op: "put", Key: key, Err: errors.New("the conflicting record kept changing; giving up")}
		}
		now = time.Now()
	}
}

// setExpiries sets the expiry times of an in-progress record written at
// now. The in-progress expiry is the end of the reservation's first lease
// (see leaseFor); the record's own expiry never comes before it, so that a
// short expiry cannot let a second invocation in while the first still
// runs.
func (g *Guard) setExpiries(ctx context.Context, rec *persistence.Record, now time.Time) {
	rec.InProgressExpiresAt = g.leaseEnd(ctx, now)
	rec.ExpiresAt = ceilSecond(later(now.Add(g.cfg.expiry), rec.InProgressExpiresAt))
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

// answer turns the live record that holds the call's key into the
// caller's answer.
func (g *Guard) answer(ctx context.Context, c *call, payloadHash string, existing *persistence.Record) (Result, error) {
	key := c.key
	if payloadHash != "" && existing.PayloadHash != payloadHash {
		c.observe(ctx, EventPayloadMismatch, key, nil)
		c.settle(OutcomePayloadMismatch)
		return Result{}, &PayloadMismatchError{Key: key}
	}
	if existing.Status != persistence.StatusCompleted {
		return Result{}, g.inProgress(ctx, c, existing.InProgressExpiresAt)
	}
	c.observe(ctx, EventReplayed, key, nil)
	switch {
	case existing.ErrorType != "":
		c.settle(OutcomeStoredError)
		stored := &StoredError{Key: key, Type: existing.ErrorType, Message: existing.ErrorMessage}
		if g.cfg.decodeError != nil {
			return Result{}, g.cfg.decodeError(stored)
		}
		return Result{}, stored
	case existing.ResponseOmitted:
		c.settle(OutcomeReplay)
		return Result{}, &ResponseTooLargeError{Key: key}
	}
	c.settle(OutcomeReplay)
	return Result{Response: existing.Response, Replayed: true, Record: existing}, nil
}

// inProgress refuses the call: the key is held until until.
func (g *Guard) inProgress(ctx context.Context, c *call, until time.Time) error {
	c.observe(ctx, EventInProgress, c.key, nil)
	c.settle(OutcomeInProgress)
	return &InProgressError{Key: c.key, Until: until}
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
