package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/code"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// Engine runs the calls of one server interceptor through its Guard.
type Engine struct {
	cfg   *Config
	guard *idempotency.Guard
	// statusOf returns the status an error of the adapter's framework
	// carries, if any.
	statusOf func(error) (*spb.Status, bool)
}

// New returns the engine of a server interceptor over store, configured
// by opts (see NewConfig). name is the interceptor's constructor, for
// errors ("grpcgo: NewServerInterceptor"); statusOf returns the status
// that an error of the adapter's framework carries.
func New[O ServerOption](name string, store persistence.Store, opts []O, statusOf func(error) (*spb.Status, bool)) (*Engine, error) {
	cfg, err := NewConfig(name, opts)
	if err != nil {
		return nil, err
	}
	if store == nil {
		return nil, fmt.Errorf("%s: nil persistence.Store", name)
	}
	guard, err := idempotency.NewGuard(store, cfg.GuardOptions...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Engine{cfg: cfg, guard: guard, statusOf: statusOf}, nil
}

// MetadataKey returns the metadata key that carries keys.
func (e *Engine) MetadataKey() string { return e.cfg.MetadataKey }

// Call is a call as the server interceptor sees it.
type Call struct {
	// Method is the full method name, "/package.Service/Method".
	Method string
	// Request is the request message.
	Request proto.Message
	// Metadata are the values of the key's metadata key in the request.
	Metadata []string
}

// Reply is an answer of the engine's: a stored result to replay, or the
// engine's own refusal (Status only).
type Reply struct {
	Response        proto.Message
	Status          *spb.Status
	Header, Trailer map[string][]string
}

// Verdict is the engine's answer to a call.
type Verdict struct {
	// Pass is set when the call runs unprotected: the adapter calls the
	// handler as it is.
	Pass bool
	// Own is set when the handler ran: its own response and error are the
	// answer.
	Own bool
	// Answer, when not nil, is the answer instead.
	Answer *Reply
}

// Serve answers call. run runs the handler, as the holder of the call's
// key, with the context it is given, and returns what it answered.
func (e *Engine) Serve(ctx context.Context, call *Call, run func(context.Context) *Result) Verdict {
	p := e.cfg.policy(call.Method)
	if p.Skip {
		return Verdict{Pass: true}
	}
	key, from, reason := e.cfg.keyOf(p, call)
	switch {
	case from == noSource && p.RequireKey:
		return e.refuse(e.missingKey(p))
	case from == noSource:
		return Verdict{Pass: true}
	case reason != "":
		return e.refuse(e.invalidKey(from, reason))
	}
	var scope *string
	if e.cfg.Scope != nil {
		s, err := e.cfg.Scope(ctx)
		if err == nil && s == "" {
			err = fmt.Errorf("%w: the scope function returned an empty scope", ErrNoScope)
		}
		switch st, ok := e.statusOf(err); {
		case err == nil:
			scope = &s
		case errors.Is(err, ErrNoScope):
			return e.refuse(missingScope(err))
		case ok:
			return Verdict{Answer: &Reply{Status: st}}
		default:
			return e.refuse(scopeFailed(err))
		}
	}
	payload, err := fingerprint(call.Method, call.Request)
	if err != nil {
		return e.refuse(newStatus(code.Code_INTERNAL, ReasonFingerprintFailed,
			"The request could not be encoded to compare it with the other requests with its idempotency key: "+err.Error(), nil))
	}

	res, err := e.guard.Do(ctx, material(scope, key), payload, func(ctx context.Context) ([]byte, error) {
		r := run(ctx)
		if !Stores(r.code(), e.cfg.StoreServerErrors) {
			// Released, as the handler's error: unless it is permanent
			// (idempotency.Permanent, WithPermanentErrors), which records
			// it.
			return nil, r.Cause
		}
		return encode(r)
	})
	return e.answer(res, err, from)
}

// answer translates how the Guard's call ended into the call's answer: the
// handler's own, a replay, or a refusal. from is where the call's key
// came from.
func (e *Engine) answer(res idempotency.Result, err error, from source) Verdict {
	switch res.Outcome {
	case idempotency.OutcomeNew, idempotency.OutcomeNotExecuted, idempotency.OutcomeHandlerError, idempotency.OutcomeFencedOut, idempotency.OutcomeCompletionFailed:
		// The handler ran: its own answer, stored or not.
		return Verdict{Own: true}
	case idempotency.OutcomeReplay:
		if err != nil { // *idempotency.ResponseTooLargeError
			return e.refuse(newStatus(code.Code_INTERNAL, ReasonResponseNotStored,
				"A call with the same idempotency key was processed, but its response was too large to keep, so it cannot be sent again. "+
					"Check the state of the resource instead of retrying, and use a new key for a new request.", nil))
		}
		reply, err := decode(res.Response)
		if err != nil {
			return e.refuse(newStatus(code.Code_INTERNAL, ReasonReplayFailed,
				"A call with the same idempotency key was processed, but its stored response cannot be read: "+err.Error(), nil))
		}
		if reply.Header == nil {
			reply.Header = map[string][]string{}
		}
		reply.Header[MetadataReplayed] = []string{"true"}
		return Verdict{Answer: reply}
	case idempotency.OutcomeRecordedError:
		// An error recorded as permanent, as idempotency.WithErrorDecoder
		// made it, if it did: its status when it has one.
		if st, ok := e.statusOf(err); ok {
			return Verdict{Answer: &Reply{Status: st}}
		}
		return e.refuse(newStatus(code.Code_INTERNAL, ReasonRecordedError,
			"A call with the same idempotency key failed, and its error was recorded: "+err.Error(), nil))
	case idempotency.OutcomeNotCommitted:
		if errors.Is(err, persistence.ErrNoTransactions) {
			return e.refuse(newStatus(code.Code_INTERNAL, ReasonNotCommitted,
				"The call's writes were not committed: the idempotency store cannot run transactions.", nil))
		}
		return e.refuse(newStatus(code.Code_UNAVAILABLE, ReasonNotCommitted,
			"The call's writes were not committed with its result. Retry with the same idempotency key.", retryInfo(storeRetryDelay)))
	case idempotency.OutcomePayloadMismatch:
		return e.refuse(e.keyReused(from))
	case idempotency.OutcomeStoreError:
		return e.refuse(newStatus(code.Code_UNAVAILABLE, ReasonStoreUnavailable,
			"The idempotency store could not be reached, so the call was not processed. Retry with the same idempotency key.",
			retryInfo(storeRetryDelay)))
	case idempotency.OutcomeHeld:
		return e.refuse(e.keyHeld(from, err))
	case idempotency.OutcomeCanceled:
		c := code.Code_CANCELLED
		if errors.Is(err, context.DeadlineExceeded) {
			c = code.Code_DEADLINE_EXCEEDED
		}
		return Verdict{Answer: &Reply{Status: &spb.Status{Code: int32(c), Message: err.Error()}}}
	}
	// In progress.
	var inProgress *idempotency.InProgressError
	errors.As(err, &inProgress)
	return e.refuse(newStatus(code.Code_ABORTED, ReasonKeyInUse,
		"A call with the same idempotency key is still being processed. Retry after the delay in its google.rpc.RetryInfo to get its response.",
		retryInfo(e.retryDelay(inProgress))))
}

func (e *Engine) refuse(st *spb.Status) Verdict { return Verdict{Answer: &Reply{Status: st}} }

// storeRetryDelay is the retry delay of a store failure: store failures
// are mostly throttling and brief outages, and the retry costs one
// conditional write.
const storeRetryDelay = time.Second

// minRetryDelay is the shortest retry delay of ABORTED, so that the
// duplicates of a fast handler do not spin.
const minRetryDelay = 10 * time.Millisecond

// retryDelay returns the retry delay of ABORTED: when a retry most likely
// gets the other call's result (the error's RetryAfter: how long the
// handler usually takes, at most until the reservation lapses; the cap
// before the handler has run here), at most the cap, at least
// minRetryDelay.
func (e *Engine) retryDelay(inProgress *idempotency.InProgressError) time.Duration {
	d := e.cfg.MaxRetryDelay
	if inProgress != nil && inProgress.RetryAfter > 0 {
		d = min(d, inProgress.RetryAfter)
	}
	return max(d, minRetryDelay)
}
