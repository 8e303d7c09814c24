package httpclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/retrysafe/retrysafe/internal/httpkey"
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
func NewKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])  // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	hex.Encode(s[9:13], b[4:6])
	hex.Encode(s[14:18], b[6:8])
	hex.Encode(s[19:23], b[8:10])
	hex.Encode(s[24:], b[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}

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
