package idempotency

import "context"

type keyContextKey struct{}

func withKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyContextKey{}, key)
}

// KeyFromContext returns the idempotency key of the call that ctx belongs
// to, inside a wrapped handler. Forward it to a downstream API as that API's
// own idempotency key (a payment provider's, say), so that the whole chain
// is idempotent.
func KeyFromContext(ctx context.Context) (string, bool) {
	key, ok := ctx.Value(keyContextKey{}).(string)
	return key, ok
}
