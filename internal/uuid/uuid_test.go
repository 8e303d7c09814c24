package uuid

import (
	"regexp"
	"testing"
)

var v4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// Every UUID has the version 4 and RFC 9562 variant bits, and no two of a
// thousand are the same.
func TestNew(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		u := New()
		if !v4.MatchString(u) {
			t.Fatalf("%q is not a version 4 UUID", u)
		}
		if seen[u] {
			t.Fatalf("%q came twice", u)
		}
		seen[u] = true
	}
}
