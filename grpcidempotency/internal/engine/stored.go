package engine

import (
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/code"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// Stores reports whether a result with code c is stored and replayed.
// Codes that say the call did not execute, or may be retried as it is,
// are never stored; the server errors only with storeServerErrors.
// docs/grpc.md has the table, with the reasons.
func Stores(c code.Code, storeServerErrors bool) bool {
	switch c {
	case code.Code_CANCELLED, code.Code_DEADLINE_EXCEEDED, code.Code_UNAUTHENTICATED, code.Code_PERMISSION_DENIED,
		code.Code_RESOURCE_EXHAUSTED, code.Code_ABORTED, code.Code_UNAVAILABLE, code.Code_UNIMPLEMENTED:
		return false
	case code.Code_INTERNAL, code.Code_UNKNOWN, code.Code_DATA_LOSS:
		return storeServerErrors
	}
	return true
}

// Result is what a handler answered, as the adapters record it.
type Result struct {
	// Response is the response message; nil when Status is set.
	Response proto.Message
	// Status is the handler's error as a status; nil when it succeeded.
	Status *spb.Status
	// Cause is the handler's error as it returned it.
	Cause error
	// Header and Trailer are the response metadata that the handler set,
	// with lower-case keys, and the values of binary ("-bin") keys in
	// base64.
	Header, Trailer map[string][]string
}

// code returns the result's code.
func (r *Result) code() code.Code {
	if r.Status == nil {
		return code.Code_OK
	}
	return code.Code(r.Status.GetCode())
}

// stored is the stored form of a Result, as JSON. Messages are in the
// protobuf binary encoding (base64 in the JSON): exact, whatever the
// fields, unknown ones included.
type stored struct {
	// Type is the full name of the response message's type.
	Type     string              `json:"type,omitempty"`
	Response []byte              `json:"response,omitempty"`
	Status   *storedStatus       `json:"status,omitempty"`
	Header   map[string][]string `json:"header,omitempty"`
	Trailer  map[string][]string `json:"trailer,omitempty"`
}

// storedStatus is a google.rpc.Status, its code and message readable.
type storedStatus struct {
	Code    int32  `json:"code"`
	Message string `json:"message,omitempty"`
	// Details are google.protobuf.Any messages, binary.
	Details [][]byte `json:"details,omitempty"`
}

// encode returns the stored form of r.
func encode(r *Result) ([]byte, error) {
	s := stored{Header: r.Header, Trailer: r.Trailer}
	if r.Status != nil {
		s.Status = &storedStatus{Code: r.Status.GetCode(), Message: r.Status.GetMessage()}
		for _, d := range r.Status.GetDetails() {
			b, err := proto.Marshal(d)
			if err != nil {
				return nil, err
			}
			s.Status.Details = append(s.Status.Details, b)
		}
	} else {
		if r.Response == nil {
			return nil, errors.New("idempotency: the handler returned neither a response message nor an error")
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r.Response)
		if err != nil {
			return nil, err
		}
		s.Type, s.Response = string(r.Response.ProtoReflect().Descriptor().FullName()), b
	}
	return json.Marshal(s)
}

// decode returns the Reply that b, a stored Result, replays.
func decode(b []byte) (*Reply, error) {
	var s stored
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	r := &Reply{Header: s.Header, Trailer: s.Trailer}
	if s.Status != nil {
		r.Status = &spb.Status{Code: s.Status.Code, Message: s.Status.Message}
		for _, d := range s.Status.Details {
			a := new(anypb.Any)
			if err := proto.Unmarshal(d, a); err != nil {
				return nil, err
			}
			r.Status.Details = append(r.Status.Details, a)
		}
		return r, nil
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(s.Type))
	if err != nil {
		return nil, fmt.Errorf("response type %q: %w", s.Type, err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(s.Response, m); err != nil {
		return nil, err
	}
	r.Response = m
	return r, nil
}
