package httpkey_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/httpkey"
)

func TestIsToken(t *testing.T) {
	for _, s := range []string{"POST", "patch", "Idempotency-Key", "X-Amzn-Oidc-Identity", "!#$%&'*+-.^_`|~09az"} {
		assert.True(t, httpkey.IsToken(s), "%q", s)
	}
	for _, s := range []string{"", "P ST", "Idempotency Key", "a:b", "a\"b", "ключ", "a\x00", "(a)", "a,b"} {
		assert.False(t, httpkey.IsToken(s), "%q", s)
	}
}

func TestQuote(t *testing.T) {
	for key, want := range map[string]string{
		"order-1":                              `"order-1"`,
		`ord_1 "a\b"`:                          `"ord_1 \"a\\b\""`,
		"a,b; c=d":                             `"a,b; c=d"`,
		"~":                                    `"~"`,
		strings.Repeat("k", httpkey.MaxLength): `"` + strings.Repeat("k", httpkey.MaxLength) + `"`,
	} {
		got, err := httpkey.Quote(key)
		require.NoError(t, err, "%q", key)
		assert.Equal(t, want, got)
	}
	for key, want := range map[string]string{
		"":                                       "a key has 1 to 255 characters, not 0",
		strings.Repeat("k", httpkey.MaxLength+1): "a key has 1 to 255 characters, not 256",
		"ключ":                                   `a key is printable ASCII, and this one has "\xd0" at byte 0`,
		"a\nb":                                   `a key is printable ASCII, and this one has "\n" at byte 1`,
		"a\x7f":                                  `a key is printable ASCII, and this one has "\x7f" at byte 1`,
	} {
		_, err := httpkey.Quote(key)
		assert.EqualError(t, err, want, "%q", key)
	}
}
