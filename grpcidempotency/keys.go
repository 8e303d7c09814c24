package grpcidempotency

import (
	"context"
	"net/textproto"

	"github.com/retrysafe/retrysafe/grpcidempotency/internal/engine"
	"github.com/retrysafe/retrysafe/internal/uuid"
)

// Where keys go, and how long they may be.
const (
	// DefaultKeyField is the request field that carries the key, as
	// AIP-155 names it.
	DefaultKeyField = "request_id"
	// DefaultMetadataKey is the metadata key (for Connect, the request
	// header) that carries the key when the request message has no key
	// field.
	DefaultMetadataKey = "idempotency-key"
	// MetadataReplayed is the response header that marks a replay: its
	// value is "true". In an error that Connect replays, it is in the
	// error's metadata.
	MetadataReplayed = "idempotent-replayed"
	// MaxKeyLength is the longest key accepted, in characters. AIP-155's
	// UUIDs have 36.
	MaxKeyLength = 255
)

// NewKey returns a new key: a random (version 4) UUID, from crypto/rand,
// as AIP-155 recommends.
func NewKey() string { return uuid.New() }

// ContextWithKey returns a context that makes the client interceptor send
// the call made with it with key, unless the call carries one. Keep the
// key with the operation, such as in the database row of the order that
// the call creates. The operation can then be sent again with the same key
// later, by a process that restarted.
//
// A key is 1 to [MaxKeyLength] characters. It must be printable ASCII when
// it goes in the metadata (a header). If it is not, the call fails with
// INVALID_ARGUMENT before it is sent.
func ContextWithKey(ctx context.Context, key string) context.Context {
	return engine.ContextWithKey(ctx, key)
}

// Replayed reports whether header, the response header of a call, marks
// a replay. A replay is the stored answer to an earlier call with the same
// key, not the answer of a run of this call. header is gRPC's metadata.MD
// (grpc.Header) or Connect's http.Header (a response's Header, an error's
// Meta).
func Replayed(header map[string][]string) bool {
	v, ok := header[MetadataReplayed]
	if !ok {
		v = header[textproto.CanonicalMIMEHeaderKey(MetadataReplayed)]
	}
	return len(v) > 0 && v[0] == "true"
}
