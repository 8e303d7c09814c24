package core

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			key, hash, err := Derive("p", "", nil, nil, in)
			if err != nil || key != Key("p", "", form) || hash != "" {
				t.Fatalf("Derive(%T) = %q, %q, %v; want %q", in, key, hash, err, Key("p", "", form))
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
		_, _, err := Derive("p", "", nil, nil, in)
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
		_, _, err := Derive("p", "", nil, nil, in)
		var de *DeriveError
		if !errors.As(err, &de) || de.Err == nil {
			t.Errorf("Derive(%T): %v, want a DeriveError with Err", in, err)
		}
	}
}

// The tenant's part of a key: the escaped tenant ID after the mark, before
// the hash; SplitKey reads it back, and reads keys without a tenant as
// before.
func TestTenantKeys(t *testing.T) {
	material := []byte(`"1001"`)
	const hash = "a0064c86a582fa64f14c66f6b43708d60e1bdb791ac2acfa332d059895c265f9"
	for _, tc := range []struct{ prefix, tenant, key string }{
		{"orders", "", "orders#" + hash},
		{"orders", "blue", "orders#tenant=blue#" + hash},
		{"orders", "Tenant-1.eu_west~2", "orders#tenant=Tenant-1.eu_west~2#" + hash},
		{"orders", "tenant 42/eu#1", "orders#tenant=tenant%2042%2Feu%231#" + hash},
		{"orders", "%41", "orders#tenant=%2541#" + hash},
		{"orders", "é", "orders#tenant=%C3%A9#" + hash},
		{"a#b", "c", "a#b#tenant=c#" + hash},
	} {
		key := Key(tc.prefix, tc.tenant, material)
		assert.Equal(t, tc.key, key)
		prefix, tenant, h, ok := SplitKey(key)
		assert.True(t, ok, key)
		assert.Equal(t, []string{tc.prefix, tc.tenant, hash}, []string{prefix, tenant, h}, key)
	}
	for _, key := range []string{"orders", "orders#abc", "orders#" + hash[1:], "orders#tenant=%zz#" + hash, "orders#tenant=%41#" + hash, "orders#" + strings.ToUpper(hash) + "x"} {
		_, _, _, ok := SplitKey(key)
		assert.False(t, ok, key)
	}
	assert.Error(t, CheckPrefix("orders#tenant=blue"))
	assert.NoError(t, CheckPrefix("orders#tenant"))
}

// docVectors returns the vectors of the block name of docs/keys.md: the
// values of each vector's lines, "label: value", in order.
func docVectors(t *testing.T, name string, labels ...string) [][]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "keys.md"))
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(doc), "```"+name+"\n")
	require.True(t, ok, "docs/keys.md has no %s block", name)
	block, _, _ = strings.Cut(block, "```")
	var vectors [][]string
	for _, v := range strings.Split(strings.TrimSpace(block), "\n\n") {
		lines := strings.Split(v, "\n")
		require.Len(t, lines, len(labels), v)
		values := make([]string, len(labels))
		for i, label := range labels {
			value, ok := strings.CutPrefix(lines[i], label+":")
			require.True(t, ok, "%s: want %q", lines[i], label)
			values[i] = strings.TrimSpace(value)
		}
		vectors = append(vectors, values)
	}
	return vectors
}

// The tenant vectors of docs/keys.md.
func TestTenantVectorsOfTheDocs(t *testing.T) {
	vectors := docVectors(t, "tenant-vectors", "tenant", "key")
	for _, v := range vectors {
		assert.Equal(t, v[1], Key("orders", v[0], []byte(`"1001"`)), "tenant %q", v[0])
	}
	assert.Len(t, vectors, 3)
}

// The step vectors of docs/keys.md.
func TestStepVectorsOfTheDocs(t *testing.T) {
	vectors := docVectors(t, "step-vectors", "tenant", "step", "key")
	for _, v := range vectors {
		tenant, name, want := v[0], v[1], v[2]
		require.NoError(t, CheckStepName(name))
		assert.Equal(t, want, StepKey(Key("orders", tenant, []byte(`"1001"`)), name), "step %q", name)
		_, _, _, isCallKey := SplitKey(want)
		assert.False(t, isCallKey, "a step key is not a call's key: %s", want)
	}
	assert.Len(t, vectors, 4)
}

func TestStepNames(t *testing.T) {
	assert.Error(t, CheckStepName(""))
	assert.NoError(t, CheckStepName(strings.Repeat("x", MaxStepName)))
	assert.Error(t, CheckStepName(strings.Repeat("x", MaxStepName+1)))
	key := Key("orders", "", []byte(`"1001"`))
	assert.NotEqual(t, StepKey(key, "a#b"), StepKey(key, "a%23b"), "escaping is injective")
}
