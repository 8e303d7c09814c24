package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/canonical"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence"
)

// binding connects the shared engine to one pair of event types.
type binding[Req, Resp any] struct {
	// name is the adapter's name, for errors.
	name string
	// view returns the normalised request of an event.
	view func(*Req) Request
	// save returns what a replay needs of a response.
	save func(*Resp) response
	// load returns the response event for a stored or problem response.
	load func(*response) Resp
}

// engine holds what the adapters share: the options, the Guard, and the
// running estimate of how long the handler takes.
type engine struct {
	cfg   *config
	guard *idempotency.Guard
	// took is a moving average of the handler's durations, in
	// nanoseconds, the estimate behind Retry-After; 0 until the handler
	// has run.
	took atomic.Int64
}

// wrap checks the options, builds the Guard and returns the adapter for h.
func wrap[Req, Resp any](b *binding[Req, Resp], h func(context.Context, Req) (Resp, error), store persistence.Store, opts []idempotency.Option) (func(context.Context, Req) (Resp, error), error) {
	name := "httpapi: " + b.name
	if h == nil {
		return nil, fmt.Errorf("%s: nil handler", name)
	}
	if store == nil {
		return nil, fmt.Errorf("%s: nil persistence.Store", name)
	}
	cfg, err := newConfig(name, opts)
	if err != nil {
		return nil, err
	}
	// The Guard takes the same options, checked for an HTTP adapter, with
	// the adapter's defaults: the prefix of h, and a day's expiry.
	guardOpts := append(slices.Clip(opts), idempotency.Option(core.As(core.HTTP, name, core.Defaults{
		Prefix: core.DefaultPrefix(h),
		Expiry: DefaultExpiry,
	})))
	guard, err := idempotency.NewGuard(store, guardOpts...)
	if err != nil {
		return nil, err
	}
	if core.Disabled() {
		return h, nil
	}
	e := &engine{cfg: cfg, guard: guard}
	return func(ctx context.Context, event Req) (Resp, error) {
		return serve(ctx, e, b, h, event)
	}, nil
}

// released is the error that fn passes to Guard.Do for a response whose
// status code releases the key (see stores): Do deletes the reservation
// and returns it, and serve answers with the response it carries.
type released struct{ status int }

func (e *released) Error() string {
	return "httpapi: response status " + strconv.Itoa(e.status) + " releases the idempotency key"
}

// serve answers one request.
func serve[Req, Resp any](ctx context.Context, e *engine, b *binding[Req, Resp], h func(context.Context, Req) (Resp, error), event Req) (Resp, error) {
	r := b.view(&event)
	if !e.cfg.keyed(r.Method) {
		return h(ctx, event)
	}
	idemKey, present, reason := parseKey(r.Values(e.cfg.header))
	switch {
	case !present && e.cfg.optionalKey:
		return h(ctx, event)
	case !present:
		return b.answer(&r, missingKey, "A "+r.Method+" request to this API needs the "+e.cfg.header+
			" header. Generate a unique key (a UUID) for each operation and send it with every retry of that operation.", 0), nil
	case reason != "":
		return b.answer(&r, invalidKey, "The "+e.cfg.header+" header "+reason+".", 0), nil
	}

	var scope any // null without a scope function, so no scope equals none
	if e.cfg.scope != nil {
		s, err := e.cfg.scope(ctx, &r)
		if err == nil && s == "" {
			err = fmt.Errorf("%w: the scope function returned an empty scope", ErrNoScope)
		}
		switch {
		case errors.Is(err, ErrNoScope):
			e.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "httpapi: request without a scope; answering 400", slog.Any("error", err))
			return b.answer(&r, missingScope, e.detail(missingScope), 0), nil
		case err != nil:
			var zero Resp
			if e.cfg.returnErrors {
				return zero, err
			}
			e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: scope function failed; answering 500", slog.Any("error", err))
			return b.answer(&r, handlerFailed, e.detail(handlerFailed), 0), nil
		}
		scope = s
	}
	key, err := canonical.Append(nil, []any{scope, idemKey})
	if err != nil {
		return b.internalError(ctx, e, &r, err)
	}
	fingerprint, err := e.fingerprint(&r)
	if err != nil {
		return b.internalError(ctx, e, &r, err)
	}

	var (
		out       Resp   // what h returned, when it ran
		failed    error  // h's own error, when it returned one
		recordKey string // the record's key, when h ran
	)
	res, panicked, err := e.do(ctx, string(key), string(fingerprint), func(ctx context.Context) ([]byte, error) {
		var err error
		recordKey, _ = idempotency.KeyFromContext(ctx)
		mark := new(atomic.Bool)
		start := time.Now()
		out, err = h(context.WithValue(ctx, notExecutedKey{}, mark), event)
		e.ran(time.Since(start))
		if err != nil {
			failed = err
			return nil, err
		}
		resp := b.save(&out)
		if mark.Load() || !stores(resp.StatusCode, e.cfg.storeServerErrors) {
			return nil, &released{resp.StatusCode}
		}
		return resp.encode()
	})
	if panicked != nil {
		e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: handler panicked; the idempotency key was released; answering 500",
			slog.Any("panic", panicked.value), slog.String("stack", string(panicked.stack)))
		return b.answer(&r, handlerFailed, e.detail(handlerFailed), 0), nil
	}

	var (
		rel        *released
		inProgress *idempotency.InProgressError
		mismatch   *idempotency.PayloadMismatchError
		storeErr   *idempotency.StoreError
		tooLarge   *idempotency.ResponseTooLargeError
		commitErr  *idempotency.CommitError
	)
	switch {
	case err == nil && res.Replayed:
		resp, err := decodeResponse(res.Response)
		if err != nil {
			e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: stored response cannot be decoded; answering 500",
				slog.String("key", res.Record.Key), slog.Any("error", err))
			return b.answer(&r, replayFailed, e.detail(replayFailed), 0), nil
		}
		resp.setHeader(&r, HeaderReplayed, "true")
		return b.load(&resp), nil
	case err == nil, errors.As(err, &rel):
		return out, nil
	case errors.As(err, &commitErr):
		// The handler succeeded, and its writes did not commit: not an
		// error of the handler's, and not one to record.
		if e.cfg.returnErrors {
			return out, err
		}
		e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: the handler's writes were not committed; answering 503",
			slog.String("key", commitErr.Key), slog.Bool("outcome_unknown", commitErr.Unknown), slog.Any("error", err))
		return b.answer(&r, notCommitted, e.detail(notCommitted), storeRetryAfter), nil
	case failed != nil:
		// Do returns h's errors unchanged, and nothing else once h has run.
		if e.cfg.returnErrors {
			return out, err
		}
		e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: handler failed; answering 500", slog.String("key", recordKey), slog.Any("error", err))
		return b.answer(&r, handlerFailed, e.detail(handlerFailed), 0), nil
	case errors.As(err, &inProgress):
		return b.answer(&r, keyInUse, e.detail(keyInUse), e.retryAfter(inProgress.Until)), nil
	case errors.As(err, &mismatch):
		return b.answer(&r, keyReused, e.detail(keyReused), 0), nil
	case errors.As(err, &storeErr):
		e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: idempotency store failed; answering 503", slog.String("key", storeErr.Key), slog.Any("error", err))
		return b.answer(&r, storeUnavailable, e.detail(storeUnavailable), storeRetryAfter), nil
	case errors.As(err, &tooLarge):
		return b.answer(&r, responseNotStored, e.detail(responseNotStored), 0), nil
	default:
		// A recorded error, replayed as an *idempotency.StoredError or as
		// whatever the Guard's error decoder (idempotency.WithErrorDecoder)
		// made of it: a Go error of the handler's, as far as the client is
		// concerned.
		if e.cfg.returnErrors {
			var zero Resp
			return zero, err
		}
		return b.answer(&r, recordedError, e.detail(recordedError), 0), nil
	}
}

// detail returns the detail of the problems whose detail does not depend
// on the request.
func (e *engine) detail(k problemKind) string {
	h := e.cfg.header
	switch k {
	case missingScope:
		return "The request does not identify its caller, which this API requires for requests with the " + h + " header."
	case keyInUse:
		return "A request with the same " + h + " is still being processed. Retry after the delay in Retry-After to get its response."
	case keyReused:
		parts := "method, path, query or body"
		if len(e.cfg.fingerprintHeaders) > 0 {
			parts = "method, path, query, body or headers " + strings.Join(e.cfg.fingerprintHeaders, ", ")
		}
		return "The " + h + " was already used for a request that differs from this one (" + parts + "). Use a new key for a new request."
	case notCommitted:
		return "The request's writes could not be committed with its result, so nothing of it was written (or, rarely, whether it was is not known yet). Retry it with the same " + h +
			": it runs again, or gets the result if it was committed."
	case storeUnavailable:
		return "The request was not processed: its " + h + " could not be checked. Retry it with the same key."
	case handlerFailed:
		return "The request failed. Retry it with the same " + h +
			": it runs again, unless the API recorded the failure as final, in which case the retry reports it."
	case recordedError:
		return "A request with the same " + h + " failed in a way that must not be retried, and the failure was recorded. " +
			"Check the state of the resource, and use a new key for a new request."
	case responseNotStored:
		return "A request with the same " + h + " was processed, but its response was too large to keep and cannot be sent again. " +
			"Check the state of the resource instead of retrying, and use a new key for a new request."
	case replayFailed:
		return "A request with the same " + h + " was processed, but its stored response cannot be read. " +
			"Check the state of the resource instead of retrying, and use a new key for a new request."
	}
	return ""
}

// answer returns the problem response of kind k as a response event.
func (b *binding[Req, Resp]) answer(r *Request, k problemKind, detail string, retryAfter int) Resp {
	resp := problem(r, k, detail, retryAfter)
	return b.load(&resp)
}

// internalError answers a failure of the adapter's own, which cannot
// happen with the values it encodes, as it answers a failed handler.
func (b *binding[Req, Resp]) internalError(ctx context.Context, e *engine, r *Request, err error) (Resp, error) {
	if e.cfg.returnErrors {
		var zero Resp
		return zero, err
	}
	e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: deriving the idempotency key failed; answering 500", slog.Any("error", err))
	return b.answer(r, handlerFailed, e.detail(handlerFailed), 0), nil
}

// recovered is a panic of the handler, recovered after Guard.Do released
// the key.
type recovered struct {
	value any
	stack []byte
}

// do calls Guard.Do and, unless WithReturnErrors is set, recovers a panic
// that Do lets go on after releasing the key.
func (e *engine) do(ctx context.Context, key, fingerprint string, fn func(context.Context) ([]byte, error)) (res idempotency.Result, p *recovered, err error) {
	if !e.cfg.returnErrors {
		defer func() {
			if v := recover(); v != nil {
				p = &recovered{value: v, stack: debug.Stack()}
			}
		}()
	}
	res, err = e.guard.Do(ctx, key, fingerprint, fn)
	return res, nil, err
}

// fingerprint returns the fingerprint material of r, which the Guard
// hashes into the payload hash: the canonical JSON of [method, path, hex
// SHA-256 of the body, {header: [values]}], followed by {parameter:
// [values]} when the request has a query string. The
// body is hashed as the client sent it, after base64 decoding when the
// event says it is encoded (a body that does not decode is hashed as it
// is), so that a retry's body compares equal whether or not API Gateway
// chose to encode it. Query parameters are compared as the event carries
// them, in any order. The scope is in the key, not here.
func (e *engine) fingerprint(r *Request) ([]byte, error) {
	body := []byte(r.body)
	if r.base64 {
		if decoded, err := base64.StdEncoding.DecodeString(r.body); err == nil {
			body = decoded
		}
	}
	sum := sha256.Sum256(body)
	headers := make(map[string]any, len(e.cfg.fingerprintHeaders))
	for _, name := range e.cfg.fingerprintHeaders {
		if values := r.Values(name); len(values) > 0 {
			headers[name] = anyList(values)
		}
	}
	parts := []any{r.Method, r.Path, hex.EncodeToString(sum[:]), headers}
	// Without a query string the material is what it was before queries
	// counted, so that such requests keep their fingerprints.
	if query := r.queryValues(); len(query) > 0 {
		parts = append(parts, query)
	}
	return canonical.Append(nil, parts)
}

// ran adds a duration of the handler to the estimate behind Retry-After:
// an exponentially weighted moving average that gives the latest run a
// weight of 1/8, so that a few slow runs do not dominate it.
func (e *engine) ran(d time.Duration) {
	for {
		old := e.took.Load()
		avg := int64(d)
		if old != 0 {
			avg = old + (int64(d)-old)/8
		}
		if e.took.CompareAndSwap(old, max(avg, 1)) {
			return
		}
	}
}

// retryAfter returns the Retry-After of ProblemKeyInUse, in whole seconds:
// how long the handler usually takes (the estimate of ran, or the cap until
// it has run), at most the cap of WithMaxRetryAfter and the time until the
// reservation lapses at until, rounded up, and at least 1. By then the
// other request has most likely completed (a retry gets its response); if
// it has not, the retry gets another 409, and once the reservation lapses
// it runs.
func (e *engine) retryAfter(until time.Time) int {
	d := e.cfg.maxRetryAfter
	if took := time.Duration(e.took.Load()); took > 0 {
		d = min(d, took)
	}
	if !until.IsZero() {
		d = min(d, time.Until(until))
	}
	if d <= time.Second {
		return 1
	}
	secs := (d + time.Second - 1) / time.Second
	return int(min(secs, math.MaxInt32))
}

type notExecutedKey struct{}

// MarkNotExecuted marks the response that the handler is about to return
// as one of a request that did not execute: the adapter returns it but
// does not store it, and releases the key, so that a retry with the same
// key runs the handler again. Call it, with the context the adapter gave
// the handler, when the handler refuses a request before it has done
// anything, for example a 400 from validation that runs before the side
// effect: the client can then fix the request and retry with its key.
//
// Responses with the statuses that say so (401, 403, 408, 409, 425, 429,
// and 5xx unless WithStoreServerErrors) are released without it. It
// reports whether ctx is the context of a request that the adapter
// handles; elsewhere it does nothing.
func MarkNotExecuted(ctx context.Context) bool {
	mark, ok := ctx.Value(notExecutedKey{}).(*atomic.Bool)
	if ok {
		mark.Store(true)
	}
	return ok
}
