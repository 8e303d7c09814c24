package core

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/internal/canonical"
)

// The whole input's key is Key of its canonical form, as FromGo and
// Append write it.
func TestDeriveWholeInput(t *testing.T) {
	for _, in := range []any{
		0, "x", []any{nil, 1}, map[string]any{"b": 1, "a": nil},
		json.RawMessage(`{"a":null,"a":1}`),
		struct {
			B string `json:"b"`
			A int    `json:"a"`
		}{"\u00e9", 1},
		json.RawMessage(`"` + strings.Repeat("x", 100000) + `"`),
	} {
		g, err := canonical.FromGo(in)
		if err != nil {
			t.Fatal(err)
		}
		form, err := canonical.Append(nil, g)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second with a buffer used before
			key, hash, err := Derive("p", nil, nil, in)
			if err != nil || key != Key("p", form) || hash != "" {
				t.Fatalf("Derive(%T) = %q, %q, %v; want %q", in, key, hash, err, Key("p", form))
			}
		}
	}
}

// A whole input that is null, "", or an array or object of nulls only
// is no key, as a key expression that selects one.
func TestDeriveWholeInputNoKey(t *testing.T) {
	for _, in := range []any{
		nil, "", []any{}, map[string]any{}, []any{nil, nil}, map[string]any{"a": nil},
		json.RawMessage(`{"a":1,"a":null}`), (*int)(nil),
	} {
		_, _, err := Derive("p", nil, nil, in)
		var de *DeriveError
		if !errors.As(err, &de) || de.Expression != "" || de.Err != nil {
			t.Errorf("Derive(%#v): %v, want a DeriveError without Err", in, err)
		}
	}
}

// An input that encoding/json does not encode, or nests deeper than it
// decodes, has no key.
func TestDeriveWholeInputErrors(t *testing.T) {
	deep := any(nil)
	for range 10001 {
		deep = []any{deep}
	}
	for _, in := range []any{make(chan int), deep} {
		_, _, err := Derive("p", nil, nil, in)
		var de *DeriveError
		if !errors.As(err, &de) || de.Err == nil {
			t.Errorf("Derive(%T): %v, want a DeriveError with Err", in, err)
		}
	}
}
