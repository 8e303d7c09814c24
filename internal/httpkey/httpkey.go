// Package httpkey holds what the server and the client of the
// Idempotency-Key header agree on: the header names, the length of a key,
// and the quoted form in which a key is sent.
package httpkey

import (
	"fmt"
	"strings"
	"time"
)

const (
	// Header is the request header that carries the idempotency key, as
	// named by the IETF draft and Stripe.
	Header = "Idempotency-Key"
	// HeaderReplayed is the response header that marks a replayed
	// response, with the value "true", as Stripe does.
	HeaderReplayed = "Idempotent-Replayed"
	// MaxLength is the longest key, in characters, as Stripe allows.
	MaxLength = 255
	// Expiry is how long a server remembers a key: Stripe's 24 hours,
	// what clients of an Idempotency-Key API expect.
	Expiry = 24 * time.Hour
	// ProblemKeyHeld is the problem type of a 409 that no retry ends: the
	// key is held until an operator releases it.
	ProblemKeyHeld = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#key-held"
)

// IsToken reports whether s is an RFC 9110 token, the syntax of field
// names and methods.
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// Quote returns key as an RFC 8941 sf-string, the draft's form of a key.
// The key must have 1 to MaxLength printable ASCII characters, which is
// what an sf-string can hold.
func Quote(key string) (string, error) {
	if key == "" || len(key) > MaxLength {
		return "", fmt.Errorf("a key has 1 to %d characters, not %d", MaxLength, len(key))
	}
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("a key is printable ASCII, and this one has %q at byte %d", key[i:i+1], i)
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}
