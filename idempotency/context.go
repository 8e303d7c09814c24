package idempotency

import (
	"context"
)

type holderKey struct{}

// KeyFromContext returns the idempotency key of the call that ctx belongs
// to, inside a wrapped handler. Forward it to a downstream API as that API's
// own idempotency key (a payment provider's, say), so that the whole chain
// is idempotent. It returns the key of the server's record of the call.
// httpclient.WithKey, by contrast, sets the key that a client sends.
func KeyFromContext(ctx context.Context) (string, bool) {
	h, ok := ctx.Value(holderKey{}).(*holder)
	if !ok {
		return "", false
	}
	return h.rec.Key, true
}

// MarkNotExecuted marks the answer that the function running with ctx is
// about to return as that of a call that did nothing. The call returns the
// answer, does not store it, and releases the key. So a retry runs the
// function again. Call MarkNotExecuted when the function refuses a request
// before its side effect, on a validation error say. The client can then
// fix the request and retry with its key. MarkNotExecuted reports whether
// ctx is the context of a function run by this package (or by an
// adapter). Elsewhere it does nothing.
//
// The HTTP adapters and the gRPC interceptors themselves mark the answers
// that say the request did not execute (docs/problems.md, docs/grpc.md).
func MarkNotExecuted(ctx context.Context) bool {
	h, ok := ctx.Value(holderKey{}).(*holder)
	if ok {
		h.notExecuted.Store(true)
	}
	return ok
}
