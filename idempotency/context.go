package idempotency

import (
	"context"
)

type holderKey struct{}

// KeyFromContext returns the idempotency key of the call that ctx belongs
// to, inside a wrapped handler. Forward it to a downstream API as that API's
// own idempotency key (a payment provider's, say), so that the whole chain
// is idempotent. It returns the key of the server's record of the call,
// unlike httpclient.WithKey, which sets the key that a client sends.
func KeyFromContext(ctx context.Context) (string, bool) {
	h, ok := ctx.Value(holderKey{}).(*holder)
	if !ok {
		return "", false
	}
	return h.rec.Key, true
}

// MarkNotExecuted marks the answer that the function running with ctx is
// about to return as that of a call that did nothing: the call returns it,
// does not store it, and releases the key, so that a retry runs the
// function again. Call it when the function refuses a request before its
// side effect, a validation error say, so that the client can fix the
// request and retry with its key. It reports whether ctx is a function's
// of this package (or of an adapter's); elsewhere it does nothing.
//
// The HTTP adapters and the gRPC interceptors mark the answers that say
// the request did not execute themselves (docs/problems.md, docs/grpc.md).
func MarkNotExecuted(ctx context.Context) bool {
	h, ok := ctx.Value(holderKey{}).(*holder)
	if ok {
		h.notExecuted.Store(true)
	}
	return ok
}
