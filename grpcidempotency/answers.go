package grpcidempotency

import "github.com/retrysafe/retrysafe/grpcidempotency/internal/engine"

// ErrorDomain is the domain of the google.rpc.ErrorInfo in the
// interceptors' own answers.
const ErrorDomain = "github.com/retrysafe/retrysafe"

// The reasons of the google.rpc.ErrorInfo in the interceptors' own
// answers. They are stable: clients may match on them.
const (
	// ReasonMissingKey (INVALID_ARGUMENT): the method requires a key and
	// the call has none.
	ReasonMissingKey = "MISSING_KEY"
	// ReasonInvalidKey (INVALID_ARGUMENT): the key is empty in the
	// metadata, longer than [MaxKeyLength], not UTF-8, has control
	// characters, or the metadata carries several different keys.
	ReasonInvalidKey = "INVALID_KEY"
	// ReasonMissingScope (UNAUTHENTICATED): the scope function found no
	// caller ([ErrNoScope]).
	ReasonMissingScope = "MISSING_SCOPE"
	// ReasonScopeFailed (INTERNAL): the scope function failed.
	ReasonScopeFailed = "SCOPE_FAILED"
	// ReasonKeyInUse (ABORTED, with a google.rpc.RetryInfo): a call with
	// the key is still running.
	ReasonKeyInUse = "KEY_IN_USE"
	// ReasonKeyHeld (FAILED_PRECONDITION): the call that reserved the key
	// ended without an outcome, and the key is held until an operator
	// releases it (idempotency.WithHoldUntilReleased). Not stored; no
	// retry helps until the release.
	ReasonKeyHeld = "KEY_HELD"
	// ReasonKeyReused (INVALID_ARGUMENT): the key was used before for
	// another request.
	ReasonKeyReused = "KEY_REUSED"
	// ReasonStoreUnavailable (UNAVAILABLE, with a google.rpc.RetryInfo):
	// the store failed before the handler ran. Nothing happened.
	ReasonStoreUnavailable = "STORE_UNAVAILABLE"
	// ReasonNotCommitted (UNAVAILABLE with a google.rpc.RetryInfo, or
	// INTERNAL when the store has no transactions): the handler's writes
	// were not committed with its result (idempotency.WithTransactions).
	ReasonNotCommitted = "NOT_COMMITTED"
	// ReasonRecordedError (INTERNAL): an earlier call with the key failed
	// with an error recorded as permanent, without a status.
	ReasonRecordedError = "RECORDED_ERROR"
	// ReasonResponseNotStored (INTERNAL): an earlier call with the key
	// completed, but its response was too large for the store.
	ReasonResponseNotStored = "RESPONSE_NOT_STORED"
	// ReasonReplayFailed (INTERNAL): the stored response cannot be read.
	ReasonReplayFailed = "REPLAY_FAILED"
	// ReasonFingerprintFailed (INTERNAL): the request could not be
	// encoded.
	ReasonFingerprintFailed = "FINGERPRINT_FAILED"
)

// ErrNoScope is matched (with errors.Is) by the errors of scope functions
// that find nothing identifying the caller. The interceptors answer such
// calls UNAUTHENTICATED and do not run the handler. Custom scope
// functions should wrap it for the same answer. An error with a status
// (of gRPC or Connect) is answered with it; any other error is INTERNAL.
var ErrNoScope = engine.ErrNoScope
