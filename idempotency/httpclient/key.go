package httpclient

import (
	"context"
	"fmt"

	"github.com/retrysafe/retrysafe/internal/httpkey"
	"github.com/retrysafe/retrysafe/internal/uuid"
)

type clientKey struct{}

// WithKey returns a context in which [Transport] sends key as the
// idempotency key of requests without one. Keep the key with the
// operation to send it again with the same key after a restart. A key has
// 1 to 255 printable ASCII characters, or the request fails before it is
// sent. WithKey sets the key that a client sends, unlike
// [idempotency.KeyFromContext], which returns the key of a server's record.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, clientKey{}, key)
}

// NewKey returns a new idempotency key, a random (version 4) UUID from
// crypto/rand.
func NewKey() string { return uuid.New() }

// keyFor returns the key of a request without one, in the header's form:
// the one WithKey put in ctx, or a new one.
func keyFor(ctx context.Context) (string, error) {
	key, ok := ctx.Value(clientKey{}).(string)
	if !ok {
		return `"` + NewKey() + `"`, nil
	}
	quoted, err := httpkey.Quote(key)
	if err != nil {
		return "", fmt.Errorf("httpclient: Transport: the key from WithKey: %w", err)
	}
	return quoted, nil
}
