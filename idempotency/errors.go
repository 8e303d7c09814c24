package idempotency

import (
	"errors"
	"fmt"
	"reflect"
	"time"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/internal/core"
)

// Sentinel errors, matched with [errors.Is] by the typed errors of this
// package that callers retry or refuse on. The other typed errors are told
// apart by type, with [errors.As]. Lambda reports the dynamic type name of
// an error as its errorType ("InProgressError", ...). Step Functions retry
// rules can match it.
var (
	// ErrInProgress means that another invocation holds the key and has
	// not finished.
	ErrInProgress = errors.New("idempotency: another invocation with this key is in progress")
	// ErrPayloadMismatch means that the key was used before with a
	// different payload.
	ErrPayloadMismatch = errors.New("idempotency: key reused with a different payload")
	// ErrNoKey means that no idempotency key could be selected from the
	// input.
	ErrNoKey = errors.New("idempotency: no idempotency key in the input")
	// ErrStore means that the store failed. The handler did not run.
	ErrStore = errors.New("idempotency: store failure")
	// ErrHeld means that the key is held until an operator releases it.
	ErrHeld = errors.New("idempotency: the key is held until an operator releases it")
)

// CommitError is returned instead of the function's result when the
// function succeeded but the writes it staged ([WithTransactions]) could
// not be committed with its completion. Err says why:
//
//   - [errors.As] finds a [*persistence.CommitCanceledError] with the
//     store's reasons. A staged write's own condition failed (an
//     insufficient balance, say), or the writes exceed the store's limits.
//     Or the store refused the request outright (an invalid write, a table
//     that does not exist). [errors.Is] matches
//     [persistence.ErrNoTransactions] when the store cannot run
//     transactions at all. Nothing was written, and the key was released.
//     A retry runs the function again.
//   - [errors.Is] matches [persistence.ErrFenced]. Another call took the
//     key over after this one ran past its in-progress expiry. Nothing of
//     this call was written.
//   - Unknown is set. The commit failed in a way that leaves its outcome
//     unknown. Its reply was lost, it timed out, or the store answered
//     with a server error or throttled it. See docs/protocol.md for which
//     errors prove what. The key stays reserved until its in-progress
//     expiry. A retry with the same key then gets the result if the commit
//     happened. If it did not, the retry runs the function again.
//
// The commit is atomic in every case. The writes and the completion happen
// together or not at all.
type CommitError struct {
	Key     string
	Unknown bool
	Err     error
}

// Error implements error.
func (e *CommitError) Error() string {
	if e.Unknown {
		return fmt.Sprintf("idempotency: committing the writes of key %s failed, and may have happened: %v", e.Key, e.Err)
	}
	return fmt.Sprintf("idempotency: the writes of key %s were not committed: %v", e.Key, e.Err)
}

// Unwrap returns the store's error.
func (e *CommitError) Unwrap() error { return e.Err }

// InProgressError is returned when another invocation has reserved the key
// and has not finished. Retry later. The reservation lapses at Until, even
// if that invocation crashed.
type InProgressError struct {
	Key string
	// Until is when the other invocation's reservation lapses (its
	// deadline). Zero when unknown.
	Until time.Time
	// RetryAfter is when a retry most likely gets the other invocation's
	// result. It is how long the function usually takes, in the process
	// that answered, or the time until Until when that comes first. It is
	// zero when that is not known.
	RetryAfter time.Duration
}

// Error implements error.
func (e *InProgressError) Error() string {
	if e.Until.IsZero() {
		return fmt.Sprintf("idempotency: key %s is in progress in another invocation", e.Key)
	}
	return fmt.Sprintf("idempotency: key %s is in progress in another invocation (reserved until %s)",
		e.Key, e.Until.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrInProgress) true.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// HeldError is returned when the call that reserved the key ended without
// an outcome, and the key is held until an operator releases it
// ([WithHoldUntilReleased]). The call timed out, crashed, or its result
// could not be stored. Its side effect may have happened, and a person
// must decide. Retrying does not help until then.
type HeldError struct {
	Key string
	// Since is when the reservation that holds the key lapsed.
	Since time.Time
}

// Error implements error.
func (e *HeldError) Error() string {
	return fmt.Sprintf("idempotency: key %s is held: the call that reserved it ended without an outcome at %s; an operator must check its effect and release the key (retrysafe release)",
		e.Key, e.Since.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// PayloadMismatchError is returned when the key was first used with a
// different payload (see [WithPayloadValidation]). The stored result
// belongs to another request and is not returned.
type PayloadMismatchError struct {
	Key string
}

// Error implements error.
func (e *PayloadMismatchError) Error() string {
	return fmt.Sprintf("idempotency: key %s was already used with a different payload", e.Key)
}

// Is makes errors.Is(err, ErrPayloadMismatch) true.
func (e *PayloadMismatchError) Is(target error) bool { return target == ErrPayloadMismatch }

// KeyError is returned when no idempotency key can be selected from the
// input. When the key expression selected nothing, Err is nil (see
// [WithRequireKey]). When the expression failed on the input, Err says
// why, for example a body that is not JSON.
type KeyError struct {
	Expression string // the key expression, or "" for the whole input
	Err        error
}

// Error implements error.
func (e *KeyError) Error() string {
	return "idempotency: " + (&core.DeriveError{Expression: e.Expression, Err: e.Err}).Error()
}

// Unwrap returns the underlying error.
func (e *KeyError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNoKey) true.
func (e *KeyError) Is(target error) bool { return target == ErrNoKey }

// StoreError is returned when a store request failed while the key was
// being reserved or read. The handler did not run. The call may have
// written a reservation (a write whose reply was lost). That reservation
// is deleted, fenced on the call's token, so that a retry can run at
// once. Only if that delete fails too does the reservation hold the key
// until its in-progress expiry. Err is the store's error.
type StoreError struct {
	Op  string // "put", "get", or "begin" (a transaction, WithTransactions)
	Key string
	Err error
}

// Error implements error.
func (e *StoreError) Error() string {
	return fmt.Sprintf("idempotency: store %s of key %s failed: %v", e.Op, e.Key, e.Err)
}

// Unwrap returns the underlying error.
func (e *StoreError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrStore) true.
func (e *StoreError) Is(target error) bool { return target == ErrStore }

// ResponseTooLargeError is returned to retries of a key whose invocation
// completed, but whose response was too large for the store. The side effect
// happened and is not run again; its result cannot be replayed.
type ResponseTooLargeError struct {
	Key string
}

// Error implements error.
func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("idempotency: key %s completed, but its response was too large to store and cannot be replayed", e.Key)
}

// ReplayError is returned when a stored response does not decode into the
// handler's result type, for example after the type changed in a deployment.
type ReplayError struct {
	Key string
	Err error
}

// Error implements error.
func (e *ReplayError) Error() string {
	return fmt.Sprintf("idempotency: cannot replay the stored response of key %s: %v", e.Key, e.Err)
}

// Unwrap returns the underlying error.
func (e *ReplayError) Unwrap() error { return e.Err }

// RecordedError is a handler error that was recorded instead of releasing
// the key (see [Permanent] and [WithPermanentErrors]). It is replayed to
// every retry. Message is the original error's message, cut to 8 KiB.
// Type is the original error's type name, as Lambda reports it. Use
// [WithErrorDecoder] to turn it back into an error of your own.
type RecordedError struct {
	Key     string
	Type    string
	Message string
}

// Error implements error.
func (e *RecordedError) Error() string { return e.Message }

// Permanent marks err as a failure that must not be retried. Instead of
// releasing the key, the library records the error and replays it to
// every retry. So a failure after the side effect started is never taken
// to mean that the key is unused. The caller of the wrapped function
// receives err itself, not the wrapper. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &core.PermanentError{Err: err}
}

// maxRecordedMessage is the longest error message recorded, in bytes.
// A longer one is cut at a character boundary and ends with
// truncatedSuffix, so that a recorded error always fits in a store's item,
// whose size is limited (400 KB in DynamoDB): a completion that failed for
// its size would leave the key to a retry that runs the handler again.
const maxRecordedMessage = 8 << 10

// truncatedSuffix ends a recorded error message that was cut.
const truncatedSuffix = " … (truncated)"

// recordedMessage returns msg as it is recorded: cut to
// maxRecordedMessage bytes if longer, on a UTF-8 boundary.
func recordedMessage(msg string) string {
	if len(msg) <= maxRecordedMessage {
		return msg
	}
	cut := maxRecordedMessage - len(truncatedSuffix)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + truncatedSuffix
}

// errorTypeName names err's dynamic type the way Lambda names an error's
// errorType: the type name, without the pointer.
func errorTypeName(err error) string {
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "" {
		return t.String()
	}
	return t.Name()
}
