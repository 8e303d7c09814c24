package idempotency

import (
	"context"

	"github.com/retrysafe/retrysafe/persistence"
)

type recordContextKey struct{}

// withRecord makes the invocation's record, and so its key, available to
// the function it runs. (A pointer, unlike a string, is stored in the
// context without an allocation of its own.)
func withRecord(ctx context.Context, rec *persistence.Record) context.Context {
	return context.WithValue(ctx, recordContextKey{}, rec)
}

// KeyFromContext returns the idempotency key of the call that ctx belongs
// to, inside a wrapped handler. Forward it to a downstream API as that API's
// own idempotency key (a payment provider's, say), so that the whole chain
// is idempotent. It returns the key of the server's record of the call,
// unlike httpclient.WithKey, which sets the key that a client sends.
func KeyFromContext(ctx context.Context) (string, bool) {
	rec, ok := ctx.Value(recordContextKey{}).(*persistence.Record)
	if !ok {
		return "", false
	}
	return rec.Key, true
}
