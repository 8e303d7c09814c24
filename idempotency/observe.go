package idempotency

import (
	"context"
	"time"
)

// An Observer is told what happens inside idempotent calls, synchronously,
// for metrics, traces and alarms. It must be fast and must not panic.
// [WithObserver] adds one; several may observe one function.
//
// An Observer that also has the method
//
//	BeginCall(ctx context.Context, c Call) (context.Context, Observer)
//
// sees each call begin. BeginCall returns the context the call goes on
// with, where a tracer starts the call's span. It also returns the
// Observer of the call's events, often one made for the call. A nil Observer observes
// nothing of the call, which then costs nothing more.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc is a function that observes events.
type ObserverFunc func(ctx context.Context, e Event)

// Observe implements [Observer].
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// callObserver is an Observer that sees each call begin.
type callObserver interface {
	BeginCall(ctx context.Context, c Call) (context.Context, Observer)
}

// Call describes an idempotent call as it begins.
type Call struct {
	// Prefix is the prefix of the call's key (see [WithKeyPrefix]).
	Prefix string
	// Store names the store's type, such as "*dynamodb.Store".
	Store string
	// System names the system that holds the records, as OpenTelemetry's
	// db.system.name does. It is "dynamodb", "redis" or "memory" for the
	// stores of this module, also behind wrappers that Unwrap. For other
	// stores it is the Go type.
	System string
}

// EventKind says what happened inside a call; see [Event]. How the call
// ended is its [Outcome], on the last event.
type EventKind int

// The kinds of [Event], in the order they happen in a call.
const (
	// EventStoreRequest: a store request Op took Duration from Start. Err
	// is its error, a conflict included.
	EventStoreRequest EventKind = iota + 1
	// EventReserved: the call reserved its key, in Duration from Start
	// (every attempt). The function runs next.
	EventReserved
	// EventWaited: a call that found its key in progress ([WithWait])
	// stopped waiting after Duration. Err is nil when it got an answer,
	// ErrInProgress when the wait ran out, or why it stopped.
	EventWaited
	// EventRenewed: the call renewed its lease ([WithLease]). Err is why a
	// renewal failed: the renewals stop, and the key lapses at the end of
	// the lease while the function still runs. Err matches
	// persistence.ErrFenced when another call took the key over.
	EventRenewed
	// EventRan: the function returned, after Duration from Start, with
	// the error Err.
	EventRan
	// EventSettled: the write that settles the key took Duration from
	// Start. Op names it: "complete", "record" (an error), "commit"
	// (WithTransactions) or "release". Err is one of these:
	//   - nil, when the write applied;
	//   - persistence.ErrFenced, when another call holds the key now;
	//   - persistence.ErrResponseOmitted, when the key completed without
	//     its response;
	//   - persistence.ErrCommitCanceled, when the commit was refused;
	//   - the store's failure.
	EventSettled
	// EventCallEnded: the call ended with Outcome, Duration after it
	// began. Err is the error it returned. It is the last event of a call.
	EventCallEnded
	// EventStep: a step ([Step]) ended, while the function runs. Key is
	// the step's key and Op its name. Outcome is OutcomeNew when it ran,
	// OutcomeReplay when it replayed a stored result, or OutcomeFencedOut
	// when another attempt stored its result first.
	EventStep
)

var eventKindNames = [...]string{
	EventStoreRequest: "store_request",
	EventReserved:     "reserved",
	EventWaited:       "waited",
	EventRenewed:      "renewed",
	EventRan:          "ran",
	EventSettled:      "settled",
	EventCallEnded:    "call_ended",
	EventStep:         "step",
}

// String returns a short snake_case name, suitable as a metric dimension.
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return "unknown"
}

// Event is a step inside an idempotent call, as an [Observer] sees it.
type Event struct {
	Kind EventKind
	Key  string // the record's key; empty when the call has none
	Err  error
	// Start and Duration time the step.
	Start    time.Time
	Duration time.Duration
	// Op is the store request of EventStoreRequest ("put", "get",
	// "update", "delete", "begin" or "commit"), or the write of
	// EventSettled.
	Op string
	// Outcome is the call's, on EventCallEnded.
	Outcome Outcome
}

// Outcome is how an idempotent call ended. [Guard.Do] returns it in its
// [Result], and observers see it on [EventCallEnded].
type Outcome string

// The outcomes of a call.
const (
	// OutcomeNew: the function ran, and its result (or a permanent error)
	// was stored.
	OutcomeNew Outcome = "new"
	// OutcomeReplay: a stored result was returned instead of running the
	// function. It is also the outcome when the result could not be given
	// back, and the error says why.
	OutcomeReplay Outcome = "replay"
	// OutcomeRecordedError: a recorded error was returned instead of
	// running the function.
	OutcomeRecordedError Outcome = "recorded_error"
	// OutcomeNotExecuted: the function ran and said it did nothing
	// ([MarkNotExecuted]). Its answer was returned, not stored, and the key
	// was released.
	OutcomeNotExecuted Outcome = "not_executed"
	// OutcomeInProgress: another call holds the key ([*InProgressError]).
	OutcomeInProgress Outcome = "in_progress"
	// OutcomeHeld: the key is held after a call that ended without an
	// outcome, until an operator releases it ([*HeldError]).
	OutcomeHeld Outcome = "held"
	// OutcomePayloadMismatch: the key was used with another payload.
	OutcomePayloadMismatch Outcome = "payload_mismatch"
	// OutcomeNoKey: the input has no key. The call failed with
	// [*KeyError], or ran unprotected.
	OutcomeNoKey Outcome = "no_key"
	// OutcomeStoreError: the store failed before the function ran.
	OutcomeStoreError Outcome = "store_error"
	// OutcomeHandlerError: the function failed (or panicked) and the key
	// was released.
	OutcomeHandlerError Outcome = "handler_error"
	// OutcomeFencedOut: the function ran, but another call had taken the
	// key over, and its completion or release was refused.
	OutcomeFencedOut Outcome = "fenced_out"
	// OutcomeCompletionFailed: the function ran, but storing its result
	// (or releasing the key) failed.
	OutcomeCompletionFailed Outcome = "completion_failed"
	// OutcomeNotCommitted: the function ran, but its writes were refused
	// with its completion ([WithTransactions]). Nothing was written, and
	// the key was released.
	OutcomeNotCommitted Outcome = "not_committed"
	// OutcomeCanceled: the call's context ended while it waited.
	OutcomeCanceled Outcome = "canceled"
)
