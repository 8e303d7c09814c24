package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// A Driver deploys the handler under test into an execution environment,
// behind the layer being tested (Wrap, a Guard, an HTTP adapter), and
// invokes it as a client would.
type Driver interface {
	// Name names the driver in reports.
	Name() string
	// Deploy returns the entry point of h in env: a function that makes one
	// invocation with req and reports what the client learns. It must pass
	// ctx, with its values and deadline, to h and to every store call (the
	// harness finds the invocation there), and must let h's panics through
	// or report them as a retryable outcome.
	Deploy(env *Env, h Handler) (Invoke, error)
}

// Handler is the handler under test, which the harness provides.
type Handler = func(ctx context.Context, req Request) (Response, error)

// Invoke makes one invocation.
type Invoke func(ctx context.Context, req Request) Outcome

// Outcome is what a client learns from one invocation.
type Outcome struct {
	// Final is set when the answer is final: a response, or an error that a
	// retry would only repeat.
	Final bool
	// Answer is the normalised final answer (Response.Answer,
	// AnswerTooLarge, or "err <type> <message>").
	Answer string
	// Retry says why the client must retry, when not Final: one of the
	// Retry* constants.
	Retry string
	// Until is when the reservation that blocks the key lapses, for
	// RetryInProgress, when the client learns it (the library's
	// *InProgressError); zero otherwise.
	Until time.Time
	// RetryAfter is how long the answer asks the client to wait (an HTTP
	// Retry-After); zero when it does not say.
	RetryAfter time.Duration
	// Err is the error, if any, for reports.
	Err error
	// Breach, when set, is a breach of the layer's own contract that the
	// driver noticed (a replay not marked as one); it is a violation.
	Breach string
}

// Reasons to retry.
const (
	RetryInProgress   = "in_progress"
	RetryStoreError   = "store_error"
	RetryHandlerError = "handler_error"
	RetryTimeout      = "timeout"
	RetryPanic        = "panic"
	RetryKilled       = "killed"
	// RetryUnexpected is an error the harness did not expect, which is a
	// violation.
	RetryUnexpected = "unexpected"
)

// Classify turns what a call of the wrapped handler returned into an
// Outcome: the library's typed errors and the handler's own.
func Classify(resp Response, err error) Outcome {
	if err == nil {
		return Outcome{Final: true, Answer: resp.Answer()}
	}
	var (
		inProgress *idempotency.InProgressError
		storeErr   *idempotency.StoreError
		tooLarge   *idempotency.ResponseTooLargeError
		stored     *idempotency.RecordedError
		commitErr  *idempotency.CommitError
		declined   *DeclinedError
		after      *AfterEffectError
		transient  *TransientError
	)
	switch {
	case errors.As(err, &inProgress):
		return Outcome{Retry: RetryInProgress, Until: inProgress.Until, Err: err}
	case errors.As(err, &storeErr), errors.As(err, &commitErr):
		// A commit that failed wrote nothing, or its outcome is unknown and
		// a retry finds out: both are retried, as a store failure is.
		return Outcome{Retry: RetryStoreError, Err: err}
	case errors.As(err, &tooLarge):
		return Outcome{Final: true, Answer: AnswerTooLarge, Err: err}
	case errors.As(err, &stored):
		return Outcome{Final: true, Answer: errorAnswer(stored.Type, stored.Message), Err: err}
	case errors.As(err, &declined), errors.As(err, &after):
		return Outcome{Final: true, Answer: errorAnswer(typeName(err), err.Error()), Err: err}
	case errors.As(err, &transient):
		return Outcome{Retry: RetryHandlerError, Err: err}
	case errors.Is(err, errKilled):
		return Outcome{Retry: RetryKilled, Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return Outcome{Retry: RetryTimeout, Err: err}
	}
	return Outcome{Retry: RetryUnexpected, Err: err}
}

// Env is a simulated execution environment: its own store client (with its
// own fault injection), its own clock, its own deployment of each driver.
type Env struct {
	// ID numbers the environment from 0.
	ID int
	// Skew is the offset of the environment's clock from true time.
	Skew time.Duration
	// Lease is the lease of its deployments (idempotency.WithLease), or
	// zero: their reservations then hold the key until the deadline.
	Lease time.Duration
	// Store is the environment's store, as the library must use it. It is
	// set before the drivers are deployed.
	Store persistence.Store

	h        *Harness
	backend  persistence.Store // the backend's store client, under the fault injection
	invokers []Invoke
}

// Now is the environment's clock.
func (e *Env) Now() time.Time { return time.Now().Add(e.Skew) }

// Options returns the options every deployment in the environment uses:
// the run's expiry, a final-write timeout of one invocation timeout, the
// harness's observer (for the report), and a logger that discards (the
// library logs every injected fault); the environment's lease, if any; in
// transactional mode, idempotency.WithTransactions. The environment's
// clock is its store's (see probe).
func (e *Env) Options() []idempotency.TransactionOption {
	opts := []idempotency.TransactionOption{
		idempotency.WithExpiry(e.h.cfg.Expiry),
		idempotency.WithFinalWriteTimeout(e.h.cfg.Timeout),
		idempotency.WithObserver(idempotency.ObserverFunc(e.h.observe)),
		idempotency.WithLogger(slog.New(slog.DiscardHandler)),
	}
	if e.Lease > 0 {
		opts = append(opts, idempotency.WithLease(e.Lease))
	}
	if transactional(e.h.backend) != nil {
		opts = append(opts, idempotency.WithTransactions())
	}
	return opts
}

// optionsAs returns opts, and more, as options of kind O: every option of
// Options is one of every entry point's kinds but Middleware's.
func optionsAs[O any](opts []idempotency.TransactionOption, more ...O) []O {
	out := make([]O, 0, len(opts)+len(more))
	for _, o := range opts {
		out = append(out, any(o).(O))
	}
	return append(out, more...)
}

// HTTPTransport returns a transport over base that injects the faults of
// the invocation each request belongs to (refused, lost reply, throttled).
// Backends that talk HTTP (DynamoDB) send their requests through it.
func (e *Env) HTTPTransport(base http.RoundTripper) http.RoundTripper {
	return &httpFaults{h: e.h, base: base}
}

// WrapDriver tests idempotency.Wrap: the key is the request's "key" field
// and the payload is validated as a whole.
type WrapDriver struct{}

// Name implements Driver.
func (WrapDriver) Name() string { return "wrap" }

// Deploy implements Driver.
func (WrapDriver) Deploy(env *Env, h Handler) (Invoke, error) {
	opts := optionsAs[idempotency.WrapOption](env.Options(),
		idempotency.WithKey("key"),
		idempotency.WithPayloadValidation("@"),
		idempotency.WithRequireKey(),
		idempotency.WithKeyPrefix("chaos.wrap"))
	wrapped, err := idempotency.Wrap(h, env.Store, opts...)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req Request) Outcome {
		resp, err := wrapped(ctx, req)
		return Classify(resp, err)
	}, nil
}

// GuardDriver tests idempotency.Guard directly, as adapters use it: the key
// material is the request's key, the payload hash its JSON encoding.
type GuardDriver struct{}

// Name implements Driver.
func (GuardDriver) Name() string { return "guard" }

// Deploy implements Driver.
func (GuardDriver) Deploy(env *Env, h Handler) (Invoke, error) {
	g, err := idempotency.NewGuard(env.Store, optionsAs[idempotency.GuardOption](env.Options(), idempotency.WithKeyPrefix("chaos.guard"))...)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req Request) Outcome {
		body, err := json.Marshal(req)
		if err != nil {
			return Outcome{Retry: RetryUnexpected, Err: err}
		}
		res, err := g.Do(ctx, req.Key, string(body), func(ctx context.Context) ([]byte, error) {
			resp, err := h(ctx, req)
			if err != nil {
				return nil, err
			}
			return json.Marshal(resp)
		})
		if err != nil {
			return Classify(Response{}, err)
		}
		var resp Response
		if err := json.Unmarshal(res.Response, &resp); err != nil {
			return Outcome{Retry: RetryUnexpected, Err: err}
		}
		return Classify(resp, nil)
	}, nil
}
