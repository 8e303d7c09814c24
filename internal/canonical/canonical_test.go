package canonical_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/canonical"
)

// key returns the canonical form of v, as encoding/json encodes it.
func key(t testing.TB, v any) string {
	t.Helper()
	g, err := canonical.FromGo(v)
	require.NoError(t, err)
	b, err := canonical.Append(nil, g)
	require.NoError(t, err)
	return string(b)
}

// The vectors of docs/keys.md: each document's canonical form and its
// SHA-256.
func TestVectors(t *testing.T) {
	for _, v := range readVectors(t) {
		g, err := canonical.Parse([]byte(v[0]))
		require.NoError(t, err, v[0])
		got, err := canonical.Append(nil, g)
		require.NoError(t, err, v[0])
		assert.Equal(t, v[1], string(got), "canonical form of %s", v[0])
		sum := sha256.Sum256(got)
		assert.Equal(t, v[2], hex.EncodeToString(sum[:]), "SHA-256 of %s", v[0])
	}
}

// readVectors returns the vectors of docs/keys.md: input, canonical form
// and SHA-256.
func readVectors(t *testing.T) [][3]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "docs", "keys.md"))
	require.NoError(t, err)
	defer f.Close()
	var vectors [][3]string
	in := false
	var cur [3]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "```vectors":
			in = true
		case in && line == "```":
			in = false
		case in && strings.HasPrefix(line, "input:"):
			cur[0] = strings.TrimSpace(strings.TrimPrefix(line, "input:"))
		case in && strings.HasPrefix(line, "canonical:"):
			cur[1] = strings.TrimPrefix(line, "canonical: ")
		case in && strings.HasPrefix(line, "sha256:"):
			cur[2] = strings.TrimSpace(strings.TrimPrefix(line, "sha256:"))
			vectors = append(vectors, cur)
		}
	}
	require.NoError(t, sc.Err())
	require.GreaterOrEqual(t, len(vectors), 25, "the vectors of docs/keys.md")
	return vectors
}

type valueMarshaler struct{ n int }

func (v valueMarshaler) MarshalJSON() ([]byte, error) {
	return []byte(`{"n":` + string(rune('0'+v.n)) + `}`), nil
}

type pointerMarshaler struct{ N int }

func (p *pointerMarshaler) MarshalJSON() ([]byte, error) { return []byte(`"custom"`), nil }

type pointerText struct{ S string }

func (p *pointerText) MarshalText() ([]byte, error) { return []byte("text"), nil }

type withMarshalers struct {
	V valueMarshaler    `json:"v"`
	P pointerMarshaler  `json:"p"`
	Q *pointerMarshaler `json:"q"`
}

// Two inputs get the same key exactly when encoding/json encodes them as
// the same JSON value: the same members whatever their order, the same
// numbers whatever their spelling, the same strings once invalid UTF-8 is
// replaced, and what their marshalers return, called as json.Marshal calls
// them.
func TestSameKeyExactlyForTheSameJSONValue(t *testing.T) {
	type pair struct {
		name string
		a, b any
	}
	pairs := []pair{
		{"member order", map[string]any{"a": 1, "b": 2}, json.RawMessage(`{"b":2,"a":1}`)},
		{"struct and map", struct {
			B int `json:"b"`
			A int `json:"a"`
		}{2, 1}, map[string]int{"a": 1, "b": 2}},
		{"number spelling", json.RawMessage(`[1.0,1e2,-0,0.50]`), []any{1, 100, 0, 0.5}},
		{"large integer", json.RawMessage(`12345678901234567890`), uint64(12345678901234567890)},
		{"large integers one apart", json.RawMessage(`12345678901234567890`), json.RawMessage(`12345678901234567891`)},
		{"float and integer", 1.5, json.RawMessage(`15e-1`)},
		{"different numbers", 1, 2},
		{"string and number", "1", 1},
		{"invalid UTF-8 in a string", "a\xffb", "a\uFFFDb"},
		{"invalid UTF-8 in a map key", map[string]int{"\xff": 1}, map[string]int{"\uFFFD": 1}},
		{"invalid UTF-8 sorts once replaced", map[string]int{"\xffa": 1, "\uFFFDb": 2, "z": 3}, json.RawMessage(`{"\ufffda":1,"\ufffdb":2,"z":3}`)},
		{"two invalid bytes are two replacements", "\xff\xfe", "\uFFFD\uFFFD"},
		{"one invalid byte is not two", "\xff", "\uFFFD\uFFFD"},
		{"HTML characters", "<&>", json.RawMessage(`"\u003c\u0026\u003e"`)},
		{"escapes", "a\"\\\n", json.RawMessage(`"a\u0022\u005c\u000a"`)},
		{"value receiver marshaler", valueMarshaler{1}, json.RawMessage(`{"n":1}`)},
		{"value receiver marshaler, by pointer", &valueMarshaler{1}, json.RawMessage(`{"n":1}`)},
		{"pointer receiver marshaler, by value", pointerMarshaler{1}, json.RawMessage(`{"N":1}`)},
		{"pointer receiver marshaler, by pointer", &pointerMarshaler{1}, json.RawMessage(`"custom"`)},
		{"pointer receiver marshaler: value and pointer differ", pointerMarshaler{1}, &pointerMarshaler{1}},
		{"pointer receiver text marshaler, by value", pointerText{"x"}, json.RawMessage(`{"S":"x"}`)},
		{"pointer receiver text marshaler, by pointer", &pointerText{"x"}, json.RawMessage(`"text"`)},
		{"marshalers in fields", withMarshalers{V: valueMarshaler{2}, P: pointerMarshaler{3}, Q: &pointerMarshaler{4}},
			json.RawMessage(`{"p":{"N":3},"q":"custom","v":{"n":2}}`)},
		{"null and empty", nil, ""},
		{"nil slice and empty slice", []int(nil), []int{}},
		{"omitempty", struct {
			A string `json:"a,omitempty"`
		}{}, map[string]any{}},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			ja, err := json.Marshal(p.a)
			require.NoError(t, err)
			jb, err := json.Marshal(p.b)
			require.NoError(t, err)
			same := sameJSONValue(t, ja, jb)
			assert.Equal(t, same, key(t, p.a) == key(t, p.b),
				"encoding/json: %s and %s (same value: %v); keys %s and %s", ja, jb, same, key(t, p.a), key(t, p.b))
		})
	}
}

// sameJSONValue reports whether two JSON documents are the same value, as
// encoding/json decodes them: numbers compared by their exact value.
func sameJSONValue(t testing.TB, a, b []byte) bool {
	t.Helper()
	decode := func(doc []byte) any {
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		var v any
		require.NoError(t, dec.Decode(&v))
		return v
	}
	return equal(decode(a), decode(b))
}

func equal(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		x, okx := new(big.Rat).SetString(string(a))
		y, oky := new(big.Rat).SetString(string(b))
		return okx && oky && x.Cmp(y) == 0
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equal(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}

// Nesting as deep as encoding/json accepts is a key; deeper is not.
func TestDepth(t *testing.T) {
	deep := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	for _, n := range []int{5000, 10000} {
		var v any
		require.NoError(t, json.Unmarshal(deep(n), &v), "encoding/json accepts %d", n)
		g, err := canonical.Parse(deep(n))
		require.NoError(t, err, n)
		b, err := canonical.Append(nil, g)
		require.NoError(t, err)
		assert.Equal(t, string(deep(n)), string(b))
	}
	_, err := canonical.Parse(deep(10001))
	assert.Error(t, err)
}

func TestParseErrors(t *testing.T) {
	for _, doc := range []string{``, `{`, `[1,]`, `1 2`, `{"a":1}x`, `nul`} {
		_, err := canonical.Parse([]byte(doc))
		assert.Error(t, err, "%q", doc)
	}
	for _, doc := range []string{`1 `, "\t{}\n"} {
		_, err := canonical.Parse([]byte(doc))
		assert.NoError(t, err, "%q", doc)
	}
}

func TestAppendRefuses(t *testing.T) {
	for _, v := range []any{struct{}{}, json.Number("1x"), map[string]any{"a\xff": 1, "a\xfe": 2}, []any{func() {}}} {
		_, err := canonical.Append(nil, v)
		assert.Error(t, err, "%#v", v)
	}
}

func TestNoKey(t *testing.T) {
	for _, doc := range []string{`null`, `""`, `[]`, `{}`, `[null,null]`, `{"a":null}`} {
		g, err := canonical.Parse([]byte(doc))
		require.NoError(t, err)
		assert.True(t, canonical.NoKey(g), doc)
	}
	for _, doc := range []string{`0`, `false`, `" "`, `[null,0]`, `{"a":""}`, `[[]]`} {
		g, err := canonical.Parse([]byte(doc))
		require.NoError(t, err)
		assert.False(t, canonical.NoKey(g), doc)
	}
}

// Canonical forms parse back to themselves, and two documents have the
// same canonical form exactly when they are the same JSON value.
func FuzzCanonical(f *testing.F) {
	for _, s := range [][2]string{
		{`{"a":[1,2.5e3,"x\u0000y"],"b":{"c":null}}`, `{"b":{"c":null},"a":[1,2500,"x\u0000y"]}`},
		{`"\xff\xfe"`, `"\ufffd\ufffd"`}, {`{"\xff":1,"\xfe":2}`, `{"\ufffd":2}`}, {`-0.0e-0`, `0`},
		{`{"z":"é","a":true}`, `{"a":true,"z":"\u00e9"}`}, {`[1e400]`, `[1E+400]`}, {`1.00000000000000000001`, `1`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ga, errA := canonical.Parse(a)
		gb, errB := canonical.Parse(b)
		if errA != nil || errB != nil {
			return
		}
		ca, err := canonical.Append(nil, ga)
		if err != nil {
			t.Fatalf("%q: %v", a, err)
		}
		cb, err := canonical.Append(nil, gb)
		if err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		again, err := canonical.Parse(ca)
		if err != nil {
			t.Fatalf("canonical form %s of %q does not parse: %v", ca, a, err)
		}
		if c2, _ := canonical.Append(nil, again); !bytes.Equal(c2, ca) {
			t.Fatalf("canonical form %s of %q is not its own: %s", ca, a, c2)
		}
		if hugeExponent(a) || hugeExponent(b) {
			return // big.Rat cannot compare them in reasonable time
		}
		if same := sameJSONValue(t, a, b); same != bytes.Equal(ca, cb) {
			t.Fatalf("%q and %q: same value %v, canonical forms %s and %s", a, b, same, ca, cb)
		}
	})
}

func hugeExponent(doc []byte) bool {
	i := bytes.IndexAny(doc, "eE")
	for i >= 0 {
		j := i + 1
		for j < len(doc) && (doc[j] == '+' || doc[j] == '-' || doc[j] == '0') {
			j++
		}
		k := j
		for k < len(doc) && '0' <= doc[k] && doc[k] <= '9' {
			k++
		}
		if k-j > 3 {
			return true
		}
		next := bytes.IndexAny(doc[k:], "eE")
		if next < 0 {
			return false
		}
		i = k + next
	}
	return false
}
