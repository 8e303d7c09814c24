package engine

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/retrysafe/retrysafe/internal/uuid"
)

// Keyed is how a client sends a call with a key.
type Keyed struct {
	// Request is the message to send: the caller's, or a copy of it with
	// the key in its key field.
	Request proto.Message
	// Key is the call's key; Metadata says that it must be added to the
	// call's metadata.
	Key      string
	Metadata bool
}

type contextKey struct{}

// ContextWithKey returns a context whose calls the client interceptors
// send with key (grpcidempotency.ContextWithKey).
func ContextWithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, contextKey{}, key)
}

// Prepare gives the call of method with req a key, as the client
// interceptors do: the key already in its key field, or in its metadata
// (md, the values of the metadata key), or else chosen (the key of
// ContextWithKey in ctx, when the caller chose one, or a new UUID) and
// set in the key field of a copy of req, or in the metadata when req has
// no key field. Calls whose request has no key field, without a key in
// the metadata, a key chosen by the caller, or a method in c.Methods, get
// none: ok is false, and they are sent as they are, once.
func (c *ClientConfig) Prepare(ctx context.Context, method string, req proto.Message, md []string) (k Keyed, ok bool, err error) {
	ctxKey, _ := ctx.Value(contextKey{}).(string)
	var fd protoreflect.FieldDescriptor
	if req != nil {
		fd = KeyField(req.ProtoReflect().Descriptor(), c.KeyField)
	}
	if fd != nil {
		if key := req.ProtoReflect().Get(fd).String(); key != "" {
			return Keyed{Request: req, Key: key}, true, nil
		}
	}
	if len(md) > 0 {
		return Keyed{Request: req, Key: md[0]}, true, nil
	}
	if fd == nil && ctxKey == "" && !c.Methods[method] {
		return Keyed{}, false, nil
	}
	key := ctxKey
	if key == "" {
		key = uuid.New()
	} else if err := CheckClientKey(key, fd == nil); err != nil {
		return Keyed{}, false, fmt.Errorf("the key of ContextWithKey: %w", err)
	}
	if fd == nil {
		return Keyed{Request: req, Key: key, Metadata: true}, true, nil
	}
	// A copy: the caller may send its message again, and must not find
	// this call's key in it.
	clone := proto.Clone(req)
	clone.ProtoReflect().Set(fd, protoreflect.ValueOfString(key))
	return Keyed{Request: clone, Key: key}, true, nil
}
