package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
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
	k := e.cfg.keyRequest(ctx, &r)
	switch {
	case k.pass:
		return h(ctx, event)
	case k.refusal != (problemKind{}):
		if k.err != nil {
			e.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "httpapi: request without a scope; answering 400", slog.Any("error", k.err))
		}
		return b.answer(&r, k.refusal, k.detail, 0), nil
	case k.err != nil:
		if e.cfg.returnErrors {
			var zero Resp
			return zero, k.err
		}
		e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: "+k.failed+" failed; answering 500", slog.Any("error", k.err))
		return b.answer(&r, handlerFailed, e.cfg.detail(handlerFailed), 0), nil
	}
	key, fingerprint := k.key, k.fingerprint

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
		return b.answer(&r, handlerFailed, e.cfg.detail(handlerFailed), 0), nil
	}

	var (
		rel        *released
		inProgress *idempotency.InProgressError
		mismatch   *idempotency.PayloadMismatchError
		storeErr   *idempotency.StoreError
		tooLarge   *idempotency.ResponseTooLargeError
	)
	switch {
	case err == nil && res.Replayed:
		resp, err := decodeResponse(res.Response)
		if err != nil {
			e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: stored response cannot be decoded; answering 500",
				slog.String("key", res.Record.Key), slog.Any("error", err))
			return b.answer(&r, replayFailed, e.cfg.detail(replayFailed), 0), nil
		}
		resp.setHeader(&r, HeaderReplayed, "true")
		return b.load(&resp), nil
	case err == nil, errors.As(err, &rel):
		return out, nil
	case failed != nil:
		// Do returns h's errors unchanged, and nothing else once h has run.
		if e.cfg.returnErrors {
			return out, err
		}
		e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: handler failed; answering 500", slog.String("key", recordKey), slog.Any("error", err))
		return b.answer(&r, handlerFailed, e.cfg.detail(handlerFailed), 0), nil
	case errors.As(err, &inProgress):
		return b.answer(&r, keyInUse, e.cfg.detail(keyInUse), e.retryAfter(inProgress.Until)), nil
	case errors.As(err, &mismatch):
		return b.answer(&r, keyReused, e.cfg.detail(keyReused), 0), nil
	case errors.As(err, &storeErr):
		e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: idempotency store failed; answering 503", slog.String("key", storeErr.Key), slog.Any("error", err))
		return b.answer(&r, storeUnavailable, e.cfg.detail(storeUnavailable), storeRetryAfter), nil
	case errors.As(err, &tooLarge):
		return b.answer(&r, responseNotStored, e.cfg.detail(responseNotStored), 0), nil
	default:
		// A recorded error, replayed as an *idempotency.StoredError or as
		// whatever the Guard's error decoder (idempotency.WithErrorDecoder)
		// made of it: a Go error of the handler's, as far as the client is
		// concerned.
		if e.cfg.returnErrors {
			var zero Resp
			return zero, err
		}
		return b.answer(&r, recordedError, e.cfg.detail(recordedError), 0), nil
	}
}

// answer returns the problem response of kind k as a response event.
func (b *binding[Req, Resp]) answer(r *Request, k problemKind, detail string, retryAfter int) Resp {
	resp := problem(r, k, detail, retryAfter)
	return b.load(&resp)
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
