package httpapi

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/retrysafe/retrysafe/internal/httpkey"
)

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		values  []string
		key     string
		present bool
		reason  string
	}{
		{values: nil},
		{values: []string{}},
		{values: []string{"abc"}, key: "abc", present: true},
		{values: []string{`"abc"`}, key: "abc", present: true},
		{values: []string{` "abc"	`}, key: "abc", present: true},
		{values: []string{`"a\"b"`}, key: `a"b`, present: true},
		{values: []string{`"\\"`}, key: `\`, present: true},
		{values: []string{`"\""`}, key: `"`, present: true},
		{values: []string{`a"b`}, key: `a"b`, present: true},
		{values: []string{`"a\"b\\c"`, `a"b\c`}, key: `a"b\c`, present: true},
		{values: []string{"k", "k", "k"}, key: "k", present: true},
		{values: []string{"ключ"}, key: "ключ", present: true},
		{values: []string{"k1", "k2"}, present: true, reason: "carries several different keys; send one"},
		{values: []string{"k1,k1"}, key: "k1", present: true},
		{values: []string{`"k1", k1`}, key: "k1", present: true},
		{values: []string{`"a,b"`}, key: "a,b", present: true},
		{values: []string{`"a,b","a,b"`, `"a,b"`}, key: "a,b", present: true},
		{values: []string{`"a\",b"`}, key: `a",b`, present: true},
		{values: []string{"a,b"}, present: true, reason: "carries several different keys; send one"},
		{values: []string{`"a,b",a`}, present: true, reason: "carries several different keys; send one"},
		{values: []string{"k1,"}, present: true, reason: "is empty"},
		{values: []string{`a"b,c"d`}, present: true, reason: "carries several different keys; send one"},
		{values: []string{"k1", ""}, present: true, reason: "is empty"},
		{values: []string{""}, present: true, reason: "is empty"},
		{values: []string{`"`}, present: true, reason: "is a quoted string without its closing quote"},
		{values: []string{`"abc\"`}, present: true, reason: "is a quoted string without its closing quote"},
		{values: []string{`"abc\`}, present: true, reason: `is a quoted string with an invalid escape; only \" and \\ are allowed`},
		{values: []string{`"a" b`}, present: true, reason: "has text after its closing quote; send one quoted string without parameters"},
		{values: []string{"\xff"}, present: true, reason: "is not valid UTF-8"},
		{values: []string{"a\x00"}, present: true, reason: "contains control characters"},
		{values: []string{"a\u2028b"}, key: "a\u2028b", present: true},
		{values: []string{strings.Repeat("é", MaxKeyLength)}, key: strings.Repeat("é", MaxKeyLength), present: true},
		{values: []string{strings.Repeat("é", MaxKeyLength+1)}, present: true, reason: "is longer than 255 characters"},
	} {
		key, present, reason := parseKey(tc.values)
		assert.Equal(t, tc.key, key, "%q", tc.values)
		assert.Equal(t, tc.present, present, "%q", tc.values)
		assert.Equal(t, tc.reason, reason, "%q", tc.values)
	}
}

func FuzzParseKey(f *testing.F) {
	for _, seed := range []string{
		"abc", `"abc"`, `"a\"b\\c"`, `"abc`, `"a\nb"`, `"a";p=1`, "a,b", `"a,b"`, "  k  ", "",
		"8e03978e-40d5-43e8-bc93-6894a57f9324", "k1\nk1", "k1\nk2", `"k"` + "\n" + "k", "\xff", "a\x01", "ключ",
		strings.Repeat("k", 256),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		// Each line is one header line.
		values := strings.Split(header, "\n")
		key, present, reason := parseKey(values)
		if !present {
			t.Fatalf("%q: values present but reported missing", values)
		}
		if reason != "" {
			if key != "" {
				t.Fatalf("%q: rejected (%s) but returned key %q", values, reason, key)
			}
			return
		}
		if key == "" || !utf8.ValidString(key) || utf8.RuneCountInString(key) > MaxKeyLength {
			t.Fatalf("%q: accepted invalid key %q", values, key)
		}
		if strings.IndexFunc(key, unicode.IsControl) >= 0 {
			t.Fatalf("%q: accepted key with control characters %q", values, key)
		}
		for _, v := range values {
			for _, m := range splitMembers(v) {
				if m := strings.Trim(m, " \t"); !strings.HasPrefix(m, `"`) && m != key {
					t.Fatalf("%q: bare member %q gave key %q", values, m, key)
				}
			}
		}
		// Lines joined with commas, as HTTP APIs and Function URLs join
		// them, carry the same key.
		if again, _, reason := parseKey([]string{strings.Join(values, ",")}); again != key {
			t.Fatalf("%q: joined with commas, parses as %q (%s), not %q", values, again, reason, key)
		}
		// The other form of the key, as a client quotes it, gives the same
		// key.
		if quoted, err := httpkey.Quote(key); err == nil {
			if again, _, reason := parseKey([]string{quoted}); again != key {
				t.Fatalf("%q: key %q quoted as %s parses as %q (%s)", values, key, quoted, again, reason)
			}
		}
		if !strings.ContainsAny(key, `,`) && key[0] != '"' && strings.Trim(key, " \t") == key {
			if again, _, reason := parseKey([]string{key}); again != key {
				t.Fatalf("%q: bare key %q parses as %q (%s)", values, key, again, reason)
			}
		}
	})
}
