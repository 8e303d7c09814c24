package idempotency

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"
	"unsafe"

	"github.com/retrysafe/retrysafe/persistence"
)

// A Guard runs functions at most once per idempotency key, over a
// persistence.Store. Wrap is a typed layer over a Guard; adapters that
// derive keys and encode results themselves (HTTP, batches) use a Guard
// directly.
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
}

// Result is what Guard.Do returns.
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

// maxReserveAttempts bounds how often Do retries a reservation whose
// conflicting record vanished or expired before it could be read.
const maxReserveAttempts = 3

// NewGuard returns a Guard over store. The options are those of Wrap;
// WithKey, WithPayloadValidation, WithRequireKey and WithResponseHook
// concern key selection and typed results, which the caller of Do handles
// itself, and are rejected here. Without WithKeyPrefix the prefix is the
// function name from AWS_LAMBDA_FUNCTION_NAME, or "idempotency".
//
// When POWERTOOLS_IDEMPOTENCY_DISABLED is set to a true value (1, true,
// yes, on, y, t), Do simply calls its function.
func NewGuard(store persistence.Store, opts ...Option) (*Guard, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.keyExpr != nil || cfg.validationExpr != nil || cfg.requireKey || cfg.responseHook != nil {
		return nil, errors.New("idempotency: NewGuard: WithKey, WithPayloadValidation, WithRequireKey and WithResponseHook apply to Wrap only")
	}
	return newGuard(store, cfg, "")
}

func newGuard(store persistence.Store, cfg *config, handlerName string) (*Guard, error) {
	if store == nil {
		return nil, errors.New("idempotency: nil persistence.Store")
	}
	prefix := cfg.prefix
	if prefix == "" {
		prefix = defaultPrefix(handlerName)
	}
	local, _ := store.(persistence.LocalReader)
	return &Guard{store: store, local: local, cfg: cfg, prefix: prefix, disabled: Disabled()}, nil
}

// Prefix returns the prefix of the keys the Guard builds with Key.
func (g *Guard) Prefix() string { return g.prefix }

// Now returns the current time on the Guard's clock (see WithClock), the
// clock that decides whether a record is live. Adapters that turn an
// InProgressError's Until into a relative delay (an HTTP Retry-After)
// measure it against this clock, so that the delay agrees with when the
// Guard will let the key go.
func (g *Guard) Now() time.Time {
	if g.cfg.now != nil {
		return g.cfg.now()
	}
	return time.Now()
}

// Key returns the idempotency key for key material: the prefix, "#", and
// the hex SHA-256 of material. Callers pass canonical bytes (equal inputs,
// equal bytes).
func (g *Guard) Key(material []byte) string {
	return hashKey(g.prefix, material)
}

func hashKey(prefix string, material []byte) string {
	sum := sha256.Sum256(material)
	// One allocation, written once and never changed, becomes the string.
	b := make([]byte, len(prefix)+1+2*sha256.Size)
	n := copy(b, prefix)
	b[n] = '#'
	encodeHex(b[n+1:], &sum)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Fingerprint returns the hex SHA-256 of material, the payload hash that
// Do compares between calls with one key.
func Fingerprint(material []byte) string {
	sum := sha256.Sum256(material)
	b := make([]byte, 2*sha256.Size)
	encodeHex(b, &sum)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// hexPairs holds the two lower-case hex digits of every byte value.
const hexPairs = "" +
	"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f" +
	"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f" +
	"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f" +
	"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f" +
	"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f" +
	"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf" +
	"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf" +
	"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"

// encodeHex writes sum in lower-case hex to dst, as hex.Encode does, with
// one look-up per byte rather than two: keys are derived on every call.
func encodeHex(dst []byte, sum *[sha256.Size]byte) {
	_ = dst[2*sha256.Size-1]
	for i, c := range sum {
		dst[2*i] = hexPairs[2*int(c)]
		dst[2*i+1] = hexPairs[2*int(c)+1]
	}
}

// Do runs fn at most once for key, and returns its encoded result, or the
// stored result of an earlier call with the same key.
//
//   - The key is reserved first, with a conditional write that fails if a
//     live record exists, so fn never runs twice concurrently for one key.
//     A store that implements persistence.LocalReader is read before that:
//     a completed key with the same payload hash is answered without the
//     write.
//   - If the key has completed, fn does not run and the stored result is
//     returned with Replayed set (or the recorded error, or
//     *ResponseTooLargeError). If payloadHash is not empty and differs from
//     the stored one, the call fails with *PayloadMismatchError.
//   - If another invocation holds the key, the call fails with
//     *InProgressError.
//   - If the store fails before fn runs, the call fails with *StoreError
//     and fn does not run.
//   - If fn returns an error, the key is released (deleted) so a retry can
//     run, and the error is returned unchanged; errors marked with Permanent
//     or classified by WithPermanentErrors are recorded and replayed
//     instead. If fn panics, the key is released and the panic goes on.
//   - If fn succeeds, its result is stored and returned. If storing it
//     fails, the result is still returned, the failure is logged and
//     reported as EventCompletionFailed, and the key stays reserved until
//     its in-progress expiry, after which a retry runs fn again. Returning
//     an error instead would make the caller retry at once into
//     *InProgressError; releasing the key would let a retry repeat the side
//     effect immediately. Keeping the reservation bounds that window by the
//     invocation's deadline.
//
// fn receives a context that carries the key (see KeyFromContext). The
// completion and release writes run on a context detached from ctx's
// cancellation, with their own timeout (WithFinalWriteTimeout).
func (g *Guard) Do(ctx context.Context, key, payloadHash string, fn func(context.Context) ([]byte, error)) (Result, error) {
	if g.disabled {
		resp, err := fn(ctx)
		return Result{Response: resp}, unwrapPermanent(err)
	}
	rec, replay, err := g.reserve(ctx, key, payloadHash)
	if rec == nil {
		return replay, err
	}
	return g.run(ctx, rec, fn)
}

// reserve writes the in-progress record for key. It returns the record when
// the caller now owns the key; otherwise the result of an earlier call to
// replay, or why the call cannot go on.
func (g *Guard) reserve(ctx context.Context, key, payloadHash string) (*persistence.Record, Result, error) {
	now := g.Now()
	if g.local != nil {
		// A store in the process answers a completed key without the
		// write. A payload that differs goes on to the write, so that the
		// stored record, not a cached copy, decides the mismatch.
		if existing := g.local.ReadLocal(key, now); existing != nil && (payloadHash == "" || existing.PayloadHash == payloadHash) {
			replay, err := g.answer(ctx, key, payloadHash, existing)
			return nil, replay, err
		}
	}
	rec := &persistence.Record{
		Key:         key,
		Status:      persistence.StatusInProgress,
		PayloadHash: payloadHash,
		Token:       newToken(),
	}
	for attempt := 1; ; attempt++ {
		g.setExpiries(ctx, rec, now)
		err := g.store.Put(ctx, rec, now)
		if err == nil {
			g.observe(ctx, EventReserved, key, nil)
			return rec, Result{}, nil
		}
		conflict := asConflict(err)
		if conflict == nil {
			// The write may have landed with its reply lost: release it
			// (fenced by our token, so it cannot touch anyone else's record)
			// rather than leave the key blocked until the deadline.
			g.releaseQuietly(ctx, rec)
			return nil, Result{}, &StoreError{Op: "put", Key: key, Err: err}
		}
		existing := conflict.Existing
		if existing == nil {
			existing, err = g.store.Get(ctx, key)
			if errors.Is(err, persistence.ErrNotFound) {
				existing = nil
			} else if err != nil {
				// The conflicting record may be our own: a write whose
				// reply was lost, retried by the store's client into a
				// conflict with itself. Release it as above.
				g.releaseQuietly(ctx, rec)
				return nil, Result{}, &StoreError{Op: "get", Key: key, Err: err}
			}
		}
		if existing != nil && existing.Token == rec.Token {
			// Our own reservation: a retried write whose first reply was
			// lost found it.
			g.observe(ctx, EventReserved, key, nil)
			return rec, Result{}, nil
		}
		if existing != nil && existing.Live(now) {
			replay, err := g.answer(ctx, key, payloadHash, existing)
			return nil, replay, err
		}
		// The record vanished or expired between the write and the read.
		if attempt == maxReserveAttempts {
			g.releaseQuietly(ctx, rec)
			return nil, Result{}, &StoreError{Op: "put", Key: key, Err: errors.New("the conflicting record kept changing; giving up")}
		}
		now = g.Now()
	}
}

// asConflict returns the *persistence.ConflictError in err's chain, or
// nil. (errors.As would make its target escape on every call.)
func asConflict(err error) *persistence.ConflictError {
	for err != nil {
		if c, ok := err.(*persistence.ConflictError); ok {
			return c
		}
		err = errors.Unwrap(err)
	}
	return nil
}

// setExpiries sets the expiry times of an in-progress record written at
// now. The in-progress expiry is the context's deadline; the record's own
// expiry never comes before it, so that a short expiry cannot let a second
// invocation in while the first still runs.
func (g *Guard) setExpiries(ctx context.Context, rec *persistence.Record, now time.Time) {
	until, ok := ctx.Deadline()
	if !ok {
		until = now.Add(g.cfg.inProgressTimeout)
	}
	rec.InProgressExpiresAt = until
	rec.ExpiresAt = ceilSecond(later(now.Add(g.cfg.expiry), until))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ceilSecond rounds t up to a whole second: stores keep ExpiresAt in epoch
// seconds, and rounding up never shortens the promised expiry. The result
// is t.Truncate(time.Second).Add(time.Second) when t is not on a whole
// second (Round(0) drops the monotonic reading, as Truncate does), computed
// without Truncate's general division.
func ceilSecond(t time.Time) time.Time {
	if ns := t.Nanosecond(); ns != 0 {
		return t.Add(time.Second - time.Duration(ns)).Round(0)
	}
	return t
}

// answer turns the live record that holds key into the caller's answer.
func (g *Guard) answer(ctx context.Context, key, payloadHash string, existing *persistence.Record) (Result, error) {
	if payloadHash != "" && existing.PayloadHash != payloadHash {
		g.observe(ctx, EventPayloadMismatch, key, nil)
		return Result{}, &PayloadMismatchError{Key: key}
	}
	if existing.Status != persistence.StatusCompleted {
		g.observe(ctx, EventInProgress, key, nil)
		return Result{}, &InProgressError{Key: key, Until: existing.InProgressExpiresAt}
	}
	g.observe(ctx, EventReplayed, key, nil)
	switch {
	case existing.ErrorType != "":
		stored := &StoredError{Key: key, Type: existing.ErrorType, Message: existing.ErrorMessage}
		if g.cfg.decodeError != nil {
			return Result{}, g.cfg.decodeError(stored)
		}
		return Result{}, stored
	case existing.ResponseOmitted:
		return Result{}, &ResponseTooLargeError{Key: key}
	}
	return Result{Response: existing.Response, Replayed: true, Record: existing}, nil
}

// run calls fn as the owner of rec's key and completes or releases the key.
func (g *Guard) run(ctx context.Context, rec *persistence.Record, fn func(context.Context) ([]byte, error)) (Result, error) {
	returned := false
	defer func() {
		if !returned {
			// fn panicked (or called runtime.Goexit): release the key and
			// let the panic go on with its own stack.
			g.release(ctx, rec)
		}
	}()
	resp, err := fn(withRecord(ctx, rec))
	returned = true

	if err != nil {
		if isPermanent(err) || g.cfg.isPermanent != nil && g.cfg.isPermanent(err) {
			err = unwrapPermanent(err)
			g.complete(ctx, rec, nil, err)
		} else {
			g.release(ctx, rec)
		}
		return Result{}, err
	}
	g.complete(ctx, rec, resp, nil)
	return Result{Response: resp}, nil
}

// isPermanent reports whether err's chain holds an error marked with
// Permanent.
func isPermanent(err error) bool {
	for err != nil {
		if _, ok := err.(*permanentError); ok {
			return true
		}
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				if isPermanent(e) {
					return true
				}
			}
			return false
		}
		err = errors.Unwrap(err)
	}
	return false
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
// keeps ctx's values but not its cancellation, and has its own timeout,
// counted from start, a reading of time.Now. Cancel it when the write
// returns.
func (g *Guard) finalContext(ctx context.Context, start time.Time) *writeContext {
	return newWriteContext(ctx, start.Add(g.cfg.finalWriteTimeout))
}

// complete stores the result (or recorded error) of the invocation that
// owns rec.
//
// rec becomes the completed record: the invocation has no further use for
// the in-progress one.
func (g *Guard) complete(ctx context.Context, rec *persistence.Record, resp []byte, handlerErr error) {
	// On the default clock, one reading serves for the expiry and the
	// write's deadline.
	start := time.Now()
	now := start
	if g.cfg.now != nil {
		now = g.cfg.now()
	}
	rec.Status = persistence.StatusCompleted
	rec.ExpiresAt = ceilSecond(now.Add(g.cfg.expiry))
	rec.Response = resp
	kind := EventCompleted
	if handlerErr != nil {
		rec.ErrorType = errorTypeName(handlerErr)
		rec.ErrorMessage = recordedMessage(handlerErr.Error())
		kind = EventErrorRecorded
	}
	wctx := g.finalContext(ctx, start)
	defer wctx.cancel()
	err := g.store.Update(wctx, rec)
	switch {
	case err == nil:
		g.observe(ctx, kind, rec.Key, nil)
	case errors.Is(err, persistence.ErrResponseOmitted):
		g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: response too large to store; retries will get ResponseTooLargeError",
			slog.String("key", rec.Key), slog.Int("response_bytes", len(resp)))
		g.observe(ctx, EventResponseOmitted, rec.Key, err)
	case errors.Is(err, persistence.ErrFenced):
		g.fencedOut(ctx, rec, "completing")
	default:
		g.cfg.logger.LogAttrs(ctx, slog.LevelError, "idempotency: storing the result failed; returning it anyway, the key stays reserved until its in-progress expiry",
			slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
		g.observe(ctx, EventCompletionFailed, rec.Key, err)
	}
}

// release deletes the record of the invocation that owns rec, so that a
// retry can run.
func (g *Guard) release(ctx context.Context, rec *persistence.Record) {
	wctx := g.finalContext(ctx, time.Now())
	defer wctx.cancel()
	err := g.store.Delete(wctx, rec.Key, rec.Token)
	switch {
	case err == nil:
		g.observe(ctx, EventReleased, rec.Key, nil)
	case errors.Is(err, persistence.ErrFenced):
		g.fencedOut(ctx, rec, "releasing")
	default:
		g.cfg.logger.LogAttrs(ctx, slog.LevelError, "idempotency: releasing the key failed; it stays reserved until its in-progress expiry",
			slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
		g.observe(ctx, EventReleaseFailed, rec.Key, err)
	}
}

// releaseQuietly undoes a reservation whose write failed, in case it landed
// anyway. Nothing is reported: the write failure itself is.
func (g *Guard) releaseQuietly(ctx context.Context, rec *persistence.Record) {
	wctx := g.finalContext(ctx, time.Now())
	defer wctx.cancel()
	_ = g.store.Delete(wctx, rec.Key, rec.Token)
}

func (g *Guard) fencedOut(ctx context.Context, rec *persistence.Record, what string) {
	g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: the record no longer carries this invocation's token (another invocation took the key over after this one's in-progress expiry, or the store lost the record); not "+what+" it",
		slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt))
	g.observe(ctx, EventFencedOut, rec.Key, persistence.ErrFenced)
}

func (g *Guard) observe(ctx context.Context, kind EventKind, key string, err error) {
	if g.cfg.observer != nil {
		g.cfg.observer(ctx, Event{Kind: kind, Key: key, Err: err})
	}
}

// newToken returns a random owner token of 26 base32 characters (128
// bits). Tokens only need to be unique, not secret: they come from the
// runtime's ChaCha8 generator, which the operating system seeds in every
// process, and cost a fraction of a crypto/rand read on every call,
// replays included.
func newToken() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b := make([]byte, 26)
	hi, lo := rand.Uint64(), rand.Uint64()
	for i := range b {
		b[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}
