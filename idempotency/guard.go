package idempotency

import (
	"cmp"
	"context"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
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
	// storeName names the store's type, for observers.
	storeName string
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
	return g, nil
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
	ctx, c := g.beginCall(ctx)
	var payloadHash string
	if payload != "" {
		payloadHash = core.Hash([]byte(payload))
	}
	c.key = core.Key(g.prefix, []byte(key))
	h, res, err := g.acquire(ctx, c, payloadHash)
	if h != nil {
		res, err = g.run(ctx, c, h, fn)
	}
	c.end(ctx, err)
	return res, err
}

// A call is the state of one call of Do or of a wrapped function: its
// key, and what its observers learn of it.
type call struct {
	g   *Guard
	key string
	// start is when the call began, and outcome how it ended, for
	// EventCallEnded; both are kept only when the Guard has observers.
	start   time.Time
	outcome Outcome
	ended   bool
}

// beginCall starts a call, and returns the context it goes on with.
func (g *Guard) beginCall(ctx context.Context) (context.Context, *call) {
	c := &call{g: g}
	if len(g.cfg.observers) > 0 {
		ctx = g.cfg.observers.beginCall(ctx, Call{Prefix: g.prefix, Store: g.storeName})
		c.start = time.Now()
	}
	return ctx, c
}

// settle records the call's outcome.
func (c *call) settle(o Outcome) { c.outcome = o }

// end reports the end of the call, which returns err.
func (c *call) end(ctx context.Context, err error) {
	g := c.g
	if len(g.cfg.observers) == 0 || c.ended {
		return
	}
	c.ended = true
	outcome := c.outcome
	if outcome == "" && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		outcome = OutcomeCanceled
	}
	g.cfg.observers.observe(ctx, Event{Kind: EventCallEnded, Key: c.key, Err: err, Start: c.start, Duration: time.Since(c.start), Outcome: outcome})
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
	defer func() { g.reportWait(ctx, w, key, err) }()
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
		err := g.storePut(ctx, rec, now)
		if err == nil {
			g.observeFor(ctx, Event{Kind: EventReserved, Key: key, Start: start, Duration: time.Since(start)})
			return rec, nil, nil
		}
		var conflict *persistence.ConflictError
		if !errors.As(err, &conflict) {
			// The write may have landed with its reply lost: release it
			// (fenced by our token, so it cannot touch anyone else's record)
			// rather than leave the key blocked until the deadline.
			g.releaseQuietly(ctx, rec)
			c.settle(OutcomeStoreError)
			return nil, nil, &StoreError{Op: "put", Key: key, Err: err}
		}
		existing := conflict.Existing
		if existing == nil {
			existing, err = g.storeGet(ctx, key)
			if errors.Is(err, persistence.ErrNotFound) {
				existing = nil
			} else if err != nil {
				// The conflicting record may be our own: a write whose
				// reply was lost, retried by the store's client into a
				// conflict with itself. Release it as above.
				g.releaseQuietly(ctx, rec)
				c.settle(OutcomeStoreError)
				return nil, nil, &StoreError{Op: "get", Key: key, Err: err}
			}
		}
		if existing != nil && existing.Token == rec.Token {
			// Our own reservation: a retried write whose first reply was
			// lost found it.
			g.observeFor(ctx, Event{Kind: EventReserved, Key: key, Start: start, Duration: time.Since(start)})
			return rec, nil, nil
		}
		if existing != nil && existing.Live(now) {
			return nil, existing, nil
		}
		// The record vanished or expired between the write and the read.
		if attempt == maxReserveAttempts {
			g.releaseQuietly(ctx, rec)
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
		g.observe(ctx, EventPayloadMismatch, key, nil)
		c.settle(OutcomePayloadMismatch)
		return Result{}, &PayloadMismatchError{Key: key}
	}
	if existing.Status != persistence.StatusCompleted {
		return Result{}, g.inProgress(ctx, c, existing.InProgressExpiresAt)
	}
	g.observe(ctx, EventReplayed, key, nil)
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
	g.observe(ctx, EventInProgress, c.key, nil)
	c.settle(OutcomeInProgress)
	return &InProgressError{Key: c.key, Until: until}
}

// run calls fn as the holder of the key, and completes or releases the
// key; its flight then lands with the completed record, or with nothing.
func (g *Guard) run(ctx context.Context, c *call, h *holder, fn func(context.Context) ([]byte, error)) (Result, error) {
	rec := h.rec
	l := g.startLease(ctx, h)
	var outcome *persistence.Record
	returned := false
	start := time.Now()
	defer func() {
		if !returned {
			// fn panicked (or called runtime.Goexit): release the key and
			// let the panic go on with its own stack.
			l.stop()
			g.observeFor(ctx, Event{Kind: EventRan, Key: rec.Key, Err: errPanicked, Start: start, Duration: time.Since(start)})
			g.release(ctx, c, rec)
			c.end(ctx, errPanicked)
		}
		g.land(rec.Key, h.flight, outcome)
	}()
	fnCtx := withRecord(ctx, rec)
	var staging *persistence.Staging
	if g.cfg.transactions {
		fnCtx, staging = persistence.NewStagingContext(fnCtx)
	}
	resp, err := fn(fnCtx)
	returned = true
	l.stop()
	g.observeFor(ctx, Event{Kind: EventRan, Key: rec.Key, Err: err, Start: start, Duration: time.Since(start)})
	var writes []any
	if staging != nil {
		writes = staging.Close() // nothing staged from now on is written
	}

	if err != nil {
		if isPermanent(err) || g.cfg.isPermanent != nil && g.cfg.isPermanent(err) {
			err = unwrapPermanent(err)
			outcome = g.complete(ctx, c, rec, nil, err)
		} else {
			g.release(ctx, c, rec)
		}
		return Result{}, err
	}
	if len(writes) > 0 {
		if outcome, err = g.commit(ctx, c, rec, resp, writes); err != nil {
			return Result{}, err
		}
		return Result{Response: resp}, nil
	}
	outcome = g.complete(ctx, c, rec, resp, nil)
	return Result{Response: resp}, nil
}

// commit completes rec with the result resp and the writes the function
// staged, in one atomic step (WithTransactions). It returns the completed
// record, or a *CommitError: then nothing was written, and the key is
// released when a write's own condition failed; or the outcome is unknown,
// and the key stays reserved until its in-progress expiry.
func (g *Guard) commit(ctx context.Context, c *call, rec *persistence.Record, resp []byte, writes []any) (*persistence.Record, error) {
	rec.Status = persistence.StatusCompleted
	rec.ExpiresAt = ceilSecond(time.Now().Add(g.cfg.expiry))
	rec.Response = resp
	wctx, cancel := g.finalContext(ctx)
	defer cancel()
	start := time.Now()
	err := g.store.(persistence.Committer).Commit(wctx, rec, writes)
	g.request(ctx, "commit", rec.Key, g.clockSince(start), err)
	done := Event{Key: rec.Key, Start: start, Duration: time.Since(start)}
	completed := *rec
	switch {
	case err == nil:
		done.Kind = EventCompleted
		c.settle(OutcomeNew)
	case errors.Is(err, persistence.ErrResponseOmitted):
		g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: response too large to store; the writes committed, and retries will get ResponseTooLargeError",
			slog.String("key", rec.Key), slog.Int("response_bytes", len(resp)))
		done.Kind, done.Err = EventResponseOmitted, err
		c.settle(OutcomeNew)
		completed.Response, completed.ResponseOmitted = nil, true
	case errors.Is(err, persistence.ErrFenced):
		g.fencedOut(ctx, c, rec, "committing", done)
		return nil, &CommitError{Key: rec.Key, Err: err}
	case errors.Is(err, persistence.ErrCommitCanceled):
		g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: the staged writes were refused; nothing was written, and the key is released",
			slog.String("key", rec.Key), slog.Any("error", err))
		done.Kind, done.Err = EventCommitCanceled, err
		g.observeFor(ctx, done)
		g.release(ctx, c, rec)
		c.settle(OutcomeNotCommitted)
		return nil, &CommitError{Key: rec.Key, Err: err}
	default:
		g.cfg.logger.LogAttrs(ctx, slog.LevelError, "idempotency: the commit failed and may or may not have happened; the key stays reserved until its in-progress expiry",
			slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
		done.Kind, done.Err = EventCompletionFailed, err
		g.observeFor(ctx, done)
		c.settle(OutcomeCompletionFailed)
		return nil, &CommitError{Key: rec.Key, Unknown: true, Err: err}
	}
	g.observeFor(ctx, done)
	return &completed, nil
}

// clockSince returns start when someone observes (see clock).
func (g *Guard) clockSince(start time.Time) time.Time {
	if len(g.cfg.observers) == 0 {
		return time.Time{}
	}
	return start
}

// errPanicked is the error observers see for a function that panicked.
var errPanicked = errors.New("idempotency: the function panicked")

// isPermanent reports whether err's chain holds an error marked with
// Permanent.
func isPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// unwrapPermanent removes the marker that Permanent adds, so that callers
// see the handler's own error.
func unwrapPermanent(err error) error {
	if p, ok := err.(*permanentError); ok {
		return p.err
	}
	return err
}

// finalContext returns the context for a completion or release write: it
// keeps ctx's values but not its cancellation, and has a timeout of its
// own, so that a deadline that has just passed does not lose the write.
func (g *Guard) finalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), g.cfg.finalWriteTimeout)
}

// complete stores the result (or recorded error) of the invocation that
// owns rec. It returns the completed record that other calls with the key
// in this process may answer from: the one it stored, or, when storing it
// failed, the result in hand, which answers concurrent duplicates of the
// call as well as the store would have; nil when another invocation took
// the key over.
//
// rec becomes the completed record: the invocation has no further use for
// the in-progress one.
func (g *Guard) complete(ctx context.Context, c *call, rec *persistence.Record, resp []byte, handlerErr error) *persistence.Record {
	rec.Status = persistence.StatusCompleted
	rec.ExpiresAt = ceilSecond(time.Now().Add(g.cfg.expiry))
	rec.Response = resp
	kind := EventCompleted
	if handlerErr != nil {
		rec.ErrorType = errorTypeName(handlerErr)
		rec.ErrorMessage = recordedMessage(handlerErr.Error())
		kind = EventErrorRecorded
	}
	wctx, cancel := g.finalContext(ctx)
	defer cancel()
	start := time.Now()
	err := g.storeUpdate(wctx, rec)
	done := Event{Key: rec.Key, Start: start, Duration: time.Since(start)}
	completed := *rec
	switch {
	case err == nil:
		done.Kind = kind
		c.settle(OutcomeNew)
	case errors.Is(err, persistence.ErrResponseOmitted):
		g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: response too large to store; retries will get ResponseTooLargeError",
			slog.String("key", rec.Key), slog.Int("response_bytes", len(resp)))
		done.Kind, done.Err = EventResponseOmitted, err
		c.settle(OutcomeNew)
		completed.Response, completed.ResponseOmitted = nil, true
	case errors.Is(err, persistence.ErrFenced):
		g.fencedOut(ctx, c, rec, "completing", done)
		return nil
	default:
		g.cfg.logger.LogAttrs(ctx, slog.LevelError, "idempotency: storing the result failed; returning it anyway, the key stays reserved until its in-progress expiry",
			slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
		done.Kind, done.Err = EventCompletionFailed, err
		c.settle(OutcomeCompletionFailed)
	}
	g.observeFor(ctx, done)
	return &completed
}

// release deletes the record of the invocation that owns rec, so that a
// retry can run.
func (g *Guard) release(ctx context.Context, c *call, rec *persistence.Record) {
	wctx, cancel := g.finalContext(ctx)
	defer cancel()
	start := time.Now()
	err := g.storeDelete(wctx, rec.Key, rec.Token)
	done := Event{Key: rec.Key, Start: start, Duration: time.Since(start)}
	switch {
	case err == nil:
		done.Kind = EventReleased
		c.settle(OutcomeHandlerError)
	case errors.Is(err, persistence.ErrFenced):
		g.fencedOut(ctx, c, rec, "releasing", done)
		return
	default:
		g.cfg.logger.LogAttrs(ctx, slog.LevelError, "idempotency: releasing the key failed; it stays reserved until its in-progress expiry",
			slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
		done.Kind, done.Err = EventReleaseFailed, err
		c.settle(OutcomeCompletionFailed)
	}
	g.observeFor(ctx, done)
}

// releaseQuietly undoes a reservation whose write failed, in case it landed
// anyway. Nothing is reported: the write failure itself is.
func (g *Guard) releaseQuietly(ctx context.Context, rec *persistence.Record) {
	wctx, cancel := g.finalContext(ctx)
	defer cancel()
	_ = g.storeDelete(wctx, rec.Key, rec.Token)
}

// fencedOut reports a completion or release write, done, that the store
// refused.
func (g *Guard) fencedOut(ctx context.Context, c *call, rec *persistence.Record, what string, done Event) {
	g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: the record no longer carries this invocation's token (another invocation took the key over after this one's in-progress expiry, or the store lost the record); not "+what+" it",
		slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt))
	done.Kind, done.Err = EventFencedOut, persistence.ErrFenced
	c.settle(OutcomeFencedOut)
	g.observeFor(ctx, done)
}

func (g *Guard) observe(ctx context.Context, kind EventKind, key string, err error) {
	if len(g.cfg.observers) > 0 {
		g.cfg.observers.observe(ctx, Event{Kind: kind, Key: key, Err: err})
	}
}

func (g *Guard) observeFor(ctx context.Context, e Event) {
	if len(g.cfg.observers) > 0 {
		g.cfg.observers.observe(ctx, e)
	}
}

// The store's requests, timed for the observers (EventStoreRequest).

func (g *Guard) storePut(ctx context.Context, rec *persistence.Record, now time.Time) error {
	start := g.clock()
	err := g.store.Put(ctx, rec, now)
	g.request(ctx, "put", rec.Key, start, err)
	return err
}

func (g *Guard) storeGet(ctx context.Context, key string) (*persistence.Record, error) {
	start := g.clock()
	rec, err := g.store.Get(ctx, key)
	g.request(ctx, "get", key, start, err)
	return rec, err
}

func (g *Guard) storeUpdate(ctx context.Context, rec *persistence.Record) error {
	start := g.clock()
	err := g.store.Update(ctx, rec)
	g.request(ctx, "update", rec.Key, start, err)
	return err
}

func (g *Guard) storeDelete(ctx context.Context, key, token string) error {
	start := g.clock()
	err := g.store.Delete(ctx, key, token)
	g.request(ctx, "delete", key, start, err)
	return err
}

// clock reads the time for a store request's event, when someone observes.
func (g *Guard) clock() time.Time {
	if len(g.cfg.observers) == 0 {
		return time.Time{}
	}
	return time.Now()
}

func (g *Guard) request(ctx context.Context, op, key string, start time.Time, err error) {
	if len(g.cfg.observers) > 0 {
		g.cfg.observers.observe(ctx, Event{Kind: EventStoreRequest, Key: key, Op: op, Err: err, Start: start, Duration: time.Since(start)})
	}
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
