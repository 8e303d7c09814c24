package engine

import (
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/retrysafe/retrysafe/idempotency"
)

// The reasons of the google.rpc.ErrorInfo of the interceptors' own
// answers, in ErrorDomain; package grpcidempotency exports them, and
// docs/grpc.md says when each happens.
const (
	ReasonMissingKey        = "MISSING_KEY"
	ReasonInvalidKey        = "INVALID_KEY"
	ReasonMissingScope      = "MISSING_SCOPE"
	ReasonScopeFailed       = "SCOPE_FAILED"
	ReasonKeyInUse          = "KEY_IN_USE"
	ReasonKeyHeld           = "KEY_HELD"
	ReasonKeyReused         = "KEY_REUSED"
	ReasonStoreUnavailable  = "STORE_UNAVAILABLE"
	ReasonNotCommitted      = "NOT_COMMITTED"
	ReasonRecordedError     = "RECORDED_ERROR"
	ReasonResponseNotStored = "RESPONSE_NOT_STORED"
	ReasonReplayFailed      = "REPLAY_FAILED"
	ReasonFingerprintFailed = "FINGERPRINT_FAILED"
)

// newStatus returns a status with code c and message msg, whose details
// are an ErrorInfo with reason, then extra.
func newStatus(c code.Code, reason, msg string, extra []proto.Message, metadata ...string) *spb.Status {
	info := &errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}
	if len(metadata) > 0 {
		info.Metadata = make(map[string]string, len(metadata)/2)
		for i := 0; i+1 < len(metadata); i += 2 {
			info.Metadata[metadata[i]] = metadata[i+1]
		}
	}
	st := &spb.Status{Code: int32(c), Message: msg}
	for _, d := range append([]proto.Message{info}, extra...) {
		a, err := anypb.New(d)
		if err == nil { // generated messages: cannot fail
			st.Details = append(st.Details, a)
		}
	}
	return st
}

// retryInfo returns the details that ask for a retry after d.
func retryInfo(d time.Duration) []proto.Message {
	return []proto.Message{&errdetails.RetryInfo{RetryDelay: durationpb.New(d)}}
}

// where says where a key is carried, for messages and details: the
// field, or the metadata key.
func (c *Config) where(from source) (what string, metadata []string) {
	if from == fromMetadata {
		return "the " + c.MetadataKey + " metadata", []string{"metadata_key", c.MetadataKey}
	}
	return "the " + string(c.KeyField) + " field", []string{"field", string(c.KeyField)}
}

// violation returns a BadRequest naming the key field, for keys from the
// field.
func (c *Config) violation(from source, reason, description string) []proto.Message {
	if from != fromField || c.KeyFunc != nil {
		return nil
	}
	return []proto.Message{&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
		{Field: string(c.KeyField), Description: description, Reason: reason},
	}}}
}

func (e *Engine) missingKey(p Policy) *spb.Status {
	var what string
	switch p.Keys {
	case FieldOnly:
		what, _ = e.cfg.where(fromField)
	case MetadataOnly:
		what, _ = e.cfg.where(fromMetadata)
	default:
		field, _ := e.cfg.where(fromField)
		md, _ := e.cfg.where(fromMetadata)
		what = field + " or " + md
	}
	from := fromField
	if p.Keys == MetadataOnly {
		from = fromMetadata
	}
	_, md := e.cfg.where(from)
	return newStatus(code.Code_INVALID_ARGUMENT, ReasonMissingKey,
		"This method needs an idempotency key in "+what+". Generate a unique key (a UUID) for each operation and send it with every retry of that operation.",
		e.cfg.violation(from, ReasonMissingKey, "required: a unique key for the operation"), md...)
}

func (e *Engine) invalidKey(from source, reason string) *spb.Status {
	what, md := e.cfg.where(from)
	return newStatus(code.Code_INVALID_ARGUMENT, ReasonInvalidKey,
		"The idempotency key in "+what+" "+reason+". Keys are 1 to 255 characters of UTF-8 without control characters; a UUID is recommended.",
		e.cfg.violation(from, ReasonInvalidKey, reason), md...)
}

func (e *Engine) keyReused(from source) *spb.Status {
	what, md := e.cfg.where(from)
	return newStatus(code.Code_INVALID_ARGUMENT, ReasonKeyReused,
		"The idempotency key in "+what+" was used before for a different request (another method, or other fields). "+
			"Use a new key for a new request; send the same request with a key to retry it.",
		e.cfg.violation(from, ReasonKeyReused, "used before for a different request"), md...)
}

// keyHeld is the answer to a call whose key is held
// (idempotency.WithHoldUntilReleased): the call that reserved it ended
// without an outcome, and only an operator's release frees it. No retry
// helps before that, so there is no RetryInfo.
func (e *Engine) keyHeld(from source, err error) *spb.Status {
	what, md := e.cfg.where(from)
	if held := (*idempotency.HeldError)(nil); errors.As(err, &held) && !held.Since.IsZero() {
		md = append(md, "held_since", held.Since.UTC().Format(time.RFC3339Nano))
	}
	return newStatus(code.Code_FAILED_PRECONDITION, ReasonKeyHeld,
		"The call that reserved the idempotency key in "+what+" ended without an outcome, so its effect may or may not have happened, "+
			"and the key is held until an operator checks it and releases the key. Do not retry until then: "+
			"every call with the key gets this answer, and none runs.", nil, md...)
}

func missingScope(err error) *spb.Status {
	return newStatus(code.Code_UNAUTHENTICATED, ReasonMissingScope,
		"The call does not say who is calling, which an idempotency key needs: "+err.Error(), nil)
}

func scopeFailed(err error) *spb.Status {
	return newStatus(code.Code_INTERNAL, ReasonScopeFailed, "The caller's scope could not be determined: "+err.Error(), nil)
}
