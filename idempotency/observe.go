package idempotency

import "time"

// EventKind says what happened to a key; see Event.
type EventKind int

// The kinds of Event, in the order they can happen to a key.
const (
	// EventUnprotected: no key was found and WithRequireKey is off, so the
	// handler ran without idempotency.
	EventUnprotected EventKind = iota + 1
	// EventReserved: the key was reserved; the handler runs next.
	EventReserved
	// EventReplayed: a stored result (or recorded error) was returned
	// instead of running the handler.
	EventReplayed
	// EventInProgress: the call was refused with *InProgressError.
	EventInProgress
	// EventPayloadMismatch: the call was refused with *PayloadMismatchError.
	EventPayloadMismatch
	// EventCompleted: the result was stored.
	EventCompleted
	// EventErrorRecorded: a permanent handler error was stored.
	EventErrorRecorded
	// EventResponseOmitted: the key was completed without its response,
	// which was too large for the store.
	EventResponseOmitted
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
	// EventFencedOut: completing or releasing the key was refused because
	// the record no longer carries this invocation's token: another
	// invocation took the key over after this one's in-progress expiry (this
	// one ran past its deadline), or the store lost the record (a Redis
	// restart or failover).
	EventFencedOut
)

var eventKindNames = map[EventKind]string{
	EventUnprotected:      "unprotected",
	EventReserved:         "reserved",
	EventReplayed:         "replayed",
	EventInProgress:       "in_progress",
	EventPayloadMismatch:  "payload_mismatch",
	EventCompleted:        "completed",
	EventErrorRecorded:    "error_recorded",
	EventResponseOmitted:  "response_omitted",
	EventReleased:         "released",
	EventCompletionFailed: "completion_failed",
	EventReleaseFailed:    "release_failed",
	EventFencedOut:        "fenced_out",
	EventWaited:           "waited",
	EventRenewed:          "renewed",
	EventRenewalFailed:    "renewal_failed",
}

// String returns a short snake_case name, suitable as a metric dimension.
func (k EventKind) String() string {
	if name, ok := eventKindNames[k]; ok {
		return name
	}
	return "unknown"
}

// Event reports a step of the idempotency state machine to the observer set
// with WithObserver, for metrics and alarms.
type Event struct {
	Kind EventKind
	Key  string // the full idempotency key; empty for EventUnprotected
	Err  error  // the cause, for the failure kinds
	// Duration is how long the step took, for EventWaited.
	Duration time.Duration
}
