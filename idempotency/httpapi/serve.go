package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// The engine is what the Lambda adapters (lambda.go) and the net/http
// middleware (middleware.go) share: it reads the key and the scope of a
// request, fingerprints it, runs the handler through the Guard, and
// decides what to answer, on the event-independent view of the request
// (Request) and the one response model that is stored and replayed
// (response). The adapters only translate their events to and from these.

// engine holds the options and the Guard.
type engine struct {
	cfg   *config
	guard *idempotency.Guard
}

// newEngine checks the options, as the entry point named name (for
// errors: "httpapi: WrapAPIGateway") gets them, and builds the Guard, with
// the entry point's defaults: prefix when idempotency.WithKeyPrefix is not
// given, and a day's expiry.
func newEngine[O any](name string, kind entryKind, store persistence.Store, prefix string, opts []O) (*engine, error) {
	if store == nil {
		return nil, fmt.Errorf("%s: nil persistence.Store", name)
	}
	guard, cfg, err := newGuard(name, kind, store, prefix, opts)
	if err != nil {
		return nil, err
	}
	return &engine{cfg: cfg, guard: guard}, nil
}

// A verdict is the engine's answer to one request.
type verdict struct {
	// pass is set when the request needs no protection: its method needs
	// no key, or it has none and keys are optional. The adapter runs the
	// handler as it is.
	pass bool
	// own is set when the handler ran and its own response is the answer;
	// err is then the handler's error, when WithReturnErrors returns it.
	own bool
	// answer, when not nil, is the answer instead of the handler's: a
	// replay or a problem.
	answer *response
	// err is the error to return instead of an answer (WithReturnErrors).
	err error
	// panicked is the handler's panic, recovered after the key was
	// released; answer is then the problem to send instead.
	panicked *recovered
}

// handle answers the request r. run runs the handler as the holder of the
// key, with the context it gets, and returns its response, or its error.
func (e *engine) handle(ctx context.Context, r *Request, run func(context.Context) (*response, error)) verdict {
	k := e.cfg.keyRequest(ctx, r)
	switch {
	case k.pass:
		return verdict{pass: true}
	case k.bodyErr != nil:
		return e.bodyProblem(ctx, r, k.bodyErr)
	case k.refusal != (problemKind{}):
		if k.err != nil {
			e.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "httpapi: request without a scope; answering 400", slog.Any("error", k.err))
		}
		return e.problem(r, k.refusal, k.detail, 0)
	case k.err != nil:
		if e.cfg.returnErrors {
			return verdict{err: k.err}
		}
		e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: "+k.failed+" failed; answering 500", slog.Any("error", k.err))
		return e.problem(r, handlerFailed, e.cfg.detail(handlerFailed), 0)
	}
	key, fingerprint := k.key, k.fingerprint

	var recordKey string // the record's key, when the handler ran
	res, panicked, err := e.do(ctx, string(key), string(fingerprint), func(ctx context.Context) ([]byte, error) {
		recordKey, _ = idempotency.KeyFromContext(ctx)
		resp, err := run(ctx)
		if err != nil {
			return nil, err
		}
		// A hijacked connection says nothing of its status: the handler
		// took the connection, and has executed.
		if resp.NotReplayable != notReplayableHijacked && !stores(resp.StatusCode, e.cfg.storeServerErrors) {
			idempotency.MarkNotExecuted(ctx)
			return nil, nil
		}
		return resp.encode()
	})
	if panicked != nil {
		if panicked.value != http.ErrAbortHandler { // a deliberate abort, not a bug
			e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: handler panicked; the idempotency key was released; answering 500",
				slog.Any("panic", panicked.value), slog.String("stack", string(panicked.stack)))
		}
		v := e.problem(r, handlerFailed, e.cfg.detail(handlerFailed), 0)
		v.panicked = panicked
		return v
	}
	return e.answer(ctx, r, key, recordKey, res, err)
}

// answer translates how the Guard's call of request r ended into the
// request's answer: the handler's own response, a replay, or a problem.
// key is the request's Idempotency-Key, and recordKey the record's key
// when the handler ran.
func (e *engine) answer(ctx context.Context, r *Request, key []byte, recordKey string, res idempotency.Result, err error) verdict {
	switch res.Outcome {
	case idempotency.OutcomeReplay:
		if err != nil { // *idempotency.ResponseTooLargeError
			return e.problem(r, responseNotStored, e.cfg.detail(responseNotStored), 0)
		}
		resp, err := decodeResponse(res.Response)
		if err != nil {
			e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: stored response cannot be decoded; answering 500",
				slog.String("key", res.Record.Key), slog.Any("error", err))
			return e.problem(r, replayFailed, e.cfg.detail(replayFailed), 0)
		}
		if resp.NotReplayable != "" {
			return e.problem(r, responseNotStored, e.notReplayableDetail(resp.NotReplayable), 0)
		}
		resp.setHeader(r, HeaderReplayed, "true")
		return verdict{answer: &resp}
	case idempotency.OutcomeNotCommitted, idempotency.OutcomeCompletionFailed, idempotency.OutcomeFencedOut:
		if commitErr := (*idempotency.CommitError)(nil); errors.As(err, &commitErr) {
			// The handler succeeded, and its writes did not commit: not an
			// error of the handler's, and not one to record.
			return e.notCommitted(ctx, r, commitErr)
		}
		fallthrough
	case idempotency.OutcomeNew, idempotency.OutcomeHandlerError, idempotency.OutcomeNotExecuted:
		// The handler ran: its own response, or its error.
		if err == nil {
			return verdict{own: true}
		}
		if e.cfg.returnErrors {
			return verdict{own: true, err: err}
		}
		e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: handler failed; answering 500", slog.String("key", recordKey), slog.Any("error", err))
		return e.problem(r, handlerFailed, e.cfg.detail(handlerFailed), 0)
	case idempotency.OutcomeRecordedError:
		// A recorded error, replayed as an *idempotency.RecordedError or as
		// whatever the Guard's error decoder (idempotency.WithErrorDecoder)
		// made of it: an error of the handler's, as far as the client is
		// concerned.
		if e.cfg.returnErrors {
			return verdict{err: err}
		}
		return e.problem(r, recordedError, e.cfg.detail(recordedError), 0)
	case idempotency.OutcomePayloadMismatch:
		return e.problem(r, keyReused, e.cfg.detail(keyReused), 0)
	case idempotency.OutcomeHeld:
		// No delay ends a hold: no Retry-After.
		return e.problem(r, keyHeld, e.cfg.detail(keyHeld), 0)
	case idempotency.OutcomeStoreError:
		e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: idempotency store failed; answering 503", slog.String("key", string(key)), slog.Any("error", err))
		return e.problem(r, storeUnavailable, e.cfg.detail(storeUnavailable), storeRetryAfter)
	}
	// In progress, or the request's context ended while it waited for the
	// call that holds the key.
	var inProgress *idempotency.InProgressError
	errors.As(err, &inProgress)
	return e.problem(r, keyInUse, e.cfg.detail(keyInUse), e.retryAfter(inProgress))
}

// notCommitted answers a request whose handler succeeded but whose staged
// writes were not committed with its result.
func (e *engine) notCommitted(ctx context.Context, r *Request, commitErr *idempotency.CommitError) verdict {
	if e.cfg.returnErrors {
		return verdict{own: true, err: commitErr}
	}
	if errors.Is(commitErr, persistence.ErrNoTransactions) {
		// No retry can commit: not a 503 to retry, but the API's
		// configuration to fix.
		e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: the store cannot run transactions; answering 500 (turn idempotency.WithTransactions off, or use a store that runs them)",
			slog.String("key", commitErr.Key), slog.Any("error", commitErr))
		return e.problem(r, notCommittable, e.cfg.detail(notCommittable), 0)
	}
	e.cfg.logger.LogAttrs(ctx, slog.LevelError, "httpapi: the handler's writes were not committed; answering 503",
		slog.String("key", commitErr.Key), slog.Bool("outcome_unknown", commitErr.Unknown), slog.Any("error", commitErr))
	return e.problem(r, notCommitted, e.cfg.detail(notCommitted), storeRetryAfter)
}

// problem returns the verdict that answers r with a problem of kind k.
func (e *engine) problem(r *Request, k problemKind, detail string, retryAfter int) verdict {
	resp := problem(r, k, detail, retryAfter)
	return verdict{answer: &resp}
}

// notReplayableDetail is the detail of ProblemResponseNotStored for a
// response that was recorded as not replayable, for the reason why.
func (e *engine) notReplayableDetail(why string) string {
	what := "was streamed as it was produced"
	if why == notReplayableHijacked {
		what = "was written on a connection that the API took over"
	}
	return "A request with the same " + e.cfg.header + " was processed, but its response " + what + ", so it was not kept and cannot be sent again. " +
		"Check the state of the resource instead of retrying, and use a new key for a new request."
}

// bodyProblem answers a request whose body could not be read whole.
func (e *engine) bodyProblem(ctx context.Context, r *Request, err error) verdict {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return e.problem(r, bodyTooLarge, "The request body is larger than the "+strconv.FormatInt(tooLarge.Limit, 10)+
			" bytes this API accepts in a request with the "+e.cfg.header+" header. The request was not processed.", 0)
	}
	e.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "httpapi: the request body could not be read; answering 400", slog.Any("error", err))
	return e.problem(r, bodyUnreadable, "The request body could not be read whole, so the request was not processed. Send it again with the same "+
		e.cfg.header+".", 0)
}

// recovered is a panic of the handler, recovered after Guard.Do released
// the key.
type recovered struct {
	value any
	stack []byte
}

// do calls Guard.Do and, unless panics go on (WithReturnErrors), recovers
// a panic that Do lets go on after releasing the key.
func (e *engine) do(ctx context.Context, key, fingerprint string, fn func(context.Context) ([]byte, error)) (res idempotency.Result, p *recovered, err error) {
	if !e.cfg.returnErrors && !e.cfg.panicsGoOn {
		defer func() {
			if v := recover(); v != nil {
				p = &recovered{value: v, stack: debug.Stack()}
			}
		}()
	}
	res, err = e.guard.Do(ctx, key, fingerprint, fn)
	return res, nil, err
}

// retryAfter returns the Retry-After of ProblemKeyInUse, in whole seconds:
// when a retry most likely gets the other request's response (how long
// the handler usually takes, at most until the reservation lapses: the
// error's RetryAfter, or the cap before the handler has run here), at
// most the cap of WithMaxRetryAfter, rounded up, and at least 1. If the
// other request has not completed by then, the retry gets another 409,
// and once the reservation lapses it runs.
func (e *engine) retryAfter(inProgress *idempotency.InProgressError) int {
	d := e.cfg.maxRetryAfter
	if inProgress != nil && inProgress.RetryAfter > 0 {
		d = min(d, inProgress.RetryAfter)
	}
	if d <= time.Second {
		return 1
	}
	return int(min((d+time.Second-1)/time.Second, math.MaxInt32))
}
