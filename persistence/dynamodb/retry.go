package dynamodb

import (
	"context"
	"reflect"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// replicatedWriteConflict is the error code of DynamoDB's
// ReplicatedWriteConflictException: a write to an item of a global table of
// strong consistency that a request in another Region is modifying.
// DynamoDB rejected the write, and the SDK for Go does not retry it.
const replicatedWriteConflict = "ReplicatedWriteConflictException"

// writeOptions are the options of each write the store sends. The first
// makes the client's retryer retry ReplicatedWriteConflictException as well, with
// its own bounds: its attempts (4 by default for DynamoDB), its backoff with
// jitter, its retry quota, and the request's context. A client that is not
// the SDK's may ignore them.
//
// The client's retryer, rather than a loop of the store's: one policy then
// decides every retry of a request, so that the retries of a conflict and
// those of throttling do not multiply; the retry quota, which holds retries
// back when many requests fail, counts them; and the application's own
// settings (RetryMaxAttempts, a Retryer of its own) apply. The store does
// not build the client, but each operation takes options, which the SDK
// applies to a copy of the client's for that request only.
//
// DynamoDB rejected the write, so a retry is the same write sent again,
// which docs/protocol.md allows for every write: a reservation finds its
// own earlier attempt (whose reply was lost) and holds the key, a
// completion or a release finds its own effect (done).
//
// The second decodes the error a failed condition answers with, a
// replay's answer, in one pass (see decodeErrorsOnce).
var writeOptions = []func(*dynamodb.Options){retryReplicatedWriteConflicts, decodeErrorsOnce}

func retryReplicatedWriteConflicts(o *dynamodb.Options) {
	if o.Retryer == nil {
		return
	}
	if w := conflictRetryer.Load(); w != nil && w.base == o.Retryer {
		o.Retryer = w
		return
	}
	w := &storeRetryer{RetryerV2: asRetryerV2(o.Retryer), base: o.Retryer}
	if t := reflect.TypeOf(o.Retryer); t.Comparable() {
		conflictRetryer.Store(w)
	}
	o.Retryer = w
}

// storeRetryer is a client's retryer, base, that answers two errors
// itself: it retries ReplicatedWriteConflictException, and never a failed
// condition (ConditionalCheckFailedException), which is the answer a
// conditional write asks for, not a failure. Every other error is base's
// to decide.
//
// Answering the failed condition here is also what keeps a replay cheap:
// a replay is a reservation whose condition fails, and the SDK's standard
// retryer asks each of its classifiers about that error, a walk of the
// error's chain with reflection each (several percent of the request's
// CPU), to find that none retries it.
type storeRetryer struct {
	aws.RetryerV2
	base aws.Retryer
}

func (r *storeRetryer) IsErrorRetryable(err error) bool {
	switch errorCode(err) {
	case conditionalCheckFailed:
		return false
	case replicatedWriteConflict:
		return true
	}
	return r.RetryerV2.IsErrorRetryable(err)
}

// conditionalCheckFailed is the error code of a write whose condition
// failed.
const conditionalCheckFailed = "ConditionalCheckFailedException"

// errorCode returns the code of the first error in err's tree that has
// one, in errors.As's order and without its reflection, or "". Unlike
// errors.As it asks no error's own As method; the SDK's errors have none.
func errorCode(err error) string {
	for err != nil {
		switch e := err.(type) {
		case interface{ ErrorCode() string }:
			return e.ErrorCode()
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, err := range e.Unwrap() {
				if code := errorCode(err); code != "" {
					return code
				}
			}
			return ""
		default:
			return ""
		}
	}
	return ""
}

// asRetryerV2 returns r as an aws.RetryerV2: itself, or r with the
// attempt token of its initial token, as the SDK's own wrappers do.
func asRetryerV2(r aws.Retryer) aws.RetryerV2 {
	if v2, ok := r.(aws.RetryerV2); ok {
		return v2
	}
	return retryerV2{r}
}

type retryerV2 struct{ aws.Retryer }

func (r retryerV2) GetAttemptToken(context.Context) (func(error) error, error) {
	return r.GetInitialToken(), nil
}

// conflictRetryer is the last retryer that retryReplicatedWriteConflicts
// wrapped, kept so that the writes of a client (whose options hand every
// request the same retryer) share one wrapper instead of building one
// per request: a wrapper is stateless, the retryer it wraps holds the
// state. One entry, since a process has few clients; with several, a
// wrapper is built again when the client changes. Only retryers of a
// comparable type are kept: comparing base with another retryer of that
// type must not panic. (Two interface values of different dynamic types
// compare unequal without comparing the values.)
var conflictRetryer atomic.Pointer[storeRetryer]
