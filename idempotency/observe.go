package idempotency

import (
	"context"
	"time"
)

// An Observer is told what happens to idempotent calls, synchronously, for
// metrics, traces and alarms: each step of the state machine as an
// [Event]. It must be fast and must not panic. [WithObserver] adds one;
// several may observe one function.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc is a function that observes events.
type ObserverFunc func(ctx context.Context, e Event)

// Observe implements [Observer].
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// A CallObserver is an [Observer] that also sees each call begin. BeginCall
// returns the context the call goes on with (the function runs with it,
// and the call's events come with it: a tracer starts the call's span
// there) and the [Observer] of the call's events, the last of which is
// [EventCallEnded]. That is often one made for the call, which then needs
// no look-up in the context; the CallObserver's own Observe sees none of
// the call. A nil Observer observes nothing of the call: the call then
// costs the CallObserver nothing more.
type CallObserver interface {
	Observer
	BeginCall(ctx context.Context, c Call) (context.Context, Observer)
}

// Call describes an idempotent call as it begins.
type Call struct {
	// Prefix is the prefix of the call's key (see [WithKeyPrefix]).
	Prefix string
	// Store names the store's type, such as "*dynamodb.Store".
	Store string
	// System names the system that holds the records, as OpenTelemetry's
	// db.system.name does: "dynamodb", "redis" or "memory" for the stores
	// of this module (also behind wrappers that Unwrap, such as
	// memory.Cache), the Go type for other stores.
	System string
}

// EventKind says what happened to a key; see [Event].
type EventKind int

// The kinds of [Event], in the order they can happen to a key.
const (
	// EventUnprotected: no key was found and WithRequireKey is off, so the
	// handler ran without idempotency.
	EventUnprotected EventKind = iota + 1
	// EventStoreRequest: the call made a store request, Op, which took
	// Duration from Start; Err is its error, a conflict included.
	EventStoreRequest
	// EventReserved: the key was reserved, in Duration from Start (every
	// attempt); the handler runs next.
	EventReserved
	// EventReplayed: a stored result (or recorded error) was returned
	// instead of running the handler.
	EventReplayed
	// EventInProgress: the call was refused with *InProgressError.
	EventInProgress
	// EventPayloadMismatch: the call was refused with *PayloadMismatchError.
	EventPayloadMismatch
	// EventWaited: a call that found its key in progress (WithWait) has
	// stopped waiting, after Duration: it got the outcome it waited for
	// (Err nil), or the wait ran out (Err is ErrInProgress), or its context
	// ended (Err is the context's error), or the store failed.
	EventWaited
	// EventRenewed: the reservation's lease was renewed (WithLease).
	EventRenewed
	// EventRenewalFailed: renewing the reservation's lease failed (Err):
	// the renewals stop, and the key lapses at the end of the current
	// lease while the function still runs. Err is persistence.ErrFenced
	// when another call has taken the key over.
	EventRenewalFailed
	// EventRan: the function returned, after Duration from Start, with
	// its error Err (nil on success).
	EventRan
	// EventCompleted: the result was stored, by a write of Duration from
	// Start, as are those of the next kinds.
	EventCompleted
	// EventErrorRecorded: a permanent handler error was stored.
	EventErrorRecorded
	// EventResponseOmitted: the key was completed without its response,
	// which was too large for the store.
	EventResponseOmitted
	// EventCommitCanceled: the writes the function staged were refused,
	// with the completion (WithTransactions): a write's own condition
	// failed, or they exceed the store's limits (Err). Nothing was
	// written; the key is released next.
	EventCommitCanceled
	// EventReleased: the key was released after a handler error or panic,
	// so a retry runs the handler again.
	EventReleased
	// EventCompletionFailed: the handler succeeded but storing its result
	// failed (Err). The result was returned anyway; the key stays reserved
	// until its in-progress expiry and then runs again on retry.
	EventCompletionFailed
	// EventReleaseFailed: releasing the key failed (Err); it stays reserved
	// until its in-progress expiry.
	EventReleaseFailed
	// EventFencedOut: completing or releasing the key was refused because
	// the record no longer carries this invocation's token: another
	// invocation took the key over after this one's in-progress expiry (this
	// one ran past its deadline), or the store lost the record (a Redis
	// restart or failover).
	EventFencedOut
	// EventHeld: the call was refused with *HeldError: the call that
	// reserved the key ended without an outcome, and the key is held
	// until an operator releases it (WithHoldUntilReleased).
	EventHeld
	// EventCallEnded: the call ended, Duration after it began, with
	// Outcome; Err is the error it returned. It is the last event of a
	// call.
	EventCallEnded
)

var eventKindNames = map[EventKind]string{
	EventUnprotected:      "unprotected",
	EventStoreRequest:     "store_request",
	EventReserved:         "reserved",
	EventReplayed:         "replayed",
	EventInProgress:       "in_progress",
	EventPayloadMismatch:  "payload_mismatch",
	EventWaited:           "waited",
	EventRenewed:          "renewed",
	EventRenewalFailed:    "renewal_failed",
	EventRan:              "ran",
	EventCompleted:        "completed",
	EventErrorRecorded:    "error_recorded",
	EventResponseOmitted:  "response_omitted",
	EventCommitCanceled:   "commit_canceled",
	EventReleased:         "released",
	EventCompletionFailed: "completion_failed",
	EventReleaseFailed:    "release_failed",
	EventFencedOut:        "fenced_out",
	EventHeld:             "held",
	EventCallEnded:        "call_ended",
}

// String returns a short snake_case name, suitable as a metric dimension.
func (k EventKind) String() string {
	if name, ok := eventKindNames[k]; ok {
		return name
	}
	return "unknown"
}

// Event reports a step of the idempotency state machine to the observers
// set with [WithObserver].
type Event struct {
	Kind EventKind
	Key  string // the full idempotency key; empty for EventUnprotected
	Err  error  // the cause, for the failure kinds
	// Start and Duration time the step, for the kinds that say so.
	Start    time.Time
	Duration time.Duration
	// Op is the store request of EventStoreRequest: "put", "get",
	// "update", "delete" or "commit".
	Op string
	// Outcome is the call's, for EventCallEnded.
	Outcome Outcome
}

// Outcome is how an idempotent call ended, as [EventCallEnded] reports it.
type Outcome string

// The outcomes of a call.
const (
	// OutcomeNew: the function ran, and its result (or a permanent error)
	// was stored.
	OutcomeNew Outcome = "new"
	// OutcomeReplay: a stored result was returned instead of running the
	// function (also when it could not be replayed: Err says why).
	OutcomeReplay Outcome = "replay"
	// OutcomeRecordedError: a recorded error was returned instead of
	// running the function.
	OutcomeRecordedError Outcome = "recorded_error"
	// OutcomeInProgress: another call holds the key (*InProgressError).
	OutcomeInProgress Outcome = "in_progress"
	// OutcomePayloadMismatch: the key was used with another payload.
	OutcomePayloadMismatch Outcome = "payload_mismatch"
	// OutcomeNoKey: no key could be selected from the input: the call
	// failed with *KeyError, or ran unprotected.
	OutcomeNoKey Outcome = "no_key"
	// OutcomeStoreError: the store failed before the function ran.
	OutcomeStoreError Outcome = "store_error"
	// OutcomeHandlerError: the function failed (or panicked) and the key
	// was released.
	OutcomeHandlerError Outcome = "handler_error"
	// OutcomeFencedOut: the function ran, but its completion or release
	// was refused: another call had taken the key over.
	OutcomeFencedOut Outcome = "fenced_out"
	// OutcomeCompletionFailed: the function ran, but storing its result
	// (or releasing the key) failed.
	OutcomeCompletionFailed Outcome = "completion_failed"
	// OutcomeNotCommitted: the function ran, but the writes it staged
	// were refused with its completion (WithTransactions): nothing was
	// written, and the key was released.
	OutcomeNotCommitted Outcome = "not_committed"
	// OutcomeCanceled: the call's context ended while it waited.
	OutcomeCanceled Outcome = "canceled"
	// OutcomeHeld: the key is held after a call that ended without an
	// outcome, until an operator releases it (*HeldError).
	OutcomeHeld Outcome = "held"
)
