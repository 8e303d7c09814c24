package idempotency

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/internal/canonical"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// respell writes a generic value as JSON with object members in reverse
// order, extra spaces, and numbers spelled differently, but the same value.
func respell(b *strings.Builder, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Reverse(keys)
		b.WriteString("{ ")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(" , ")
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteString(" : ")
			respell(b, v[k])
		}
		b.WriteString(" }")
	case []any:
		b.WriteString("[ ")
		for i, e := range v {
			if i > 0 {
				b.WriteString(" ,")
			}
			respell(b, e)
		}
		b.WriteString("]")
	case float64:
		b.WriteString(strconv.FormatFloat(v, 'e', -1, 64))
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			s += ".000"
		} else {
			s += "0"
			if strings.ContainsAny(s, "eE") {
				s = string(v) // a trailing zero would change the exponent
			}
		}
		b.WriteString(s)
	default:
		vb, _ := json.Marshal(v)
		b.Write(vb)
	}
}

func FuzzKeyDerivation(f *testing.F) {
	for _, s := range []string{
		`{"order_id": 12345678901234567890, "lines": [{"sku": "a", "qty": 1.0}], "customer": "Zoë"}`,
		`[1, 2.50, -0, 1e3, "x"]`, `"just a string"`, `{"a": {"b": {"c": [null, true, false]}}}`,
		`{"b": 1, "a": 2}`, `0.000001`, `{"": ""}`,
	} {
		f.Add([]byte(s))
	}
	w := newTestWrapped[json.RawMessage](f)
	f.Fuzz(func(t *testing.T, data []byte) {
		key, _, err := w.derive("", json.RawMessage(data))
		if err != nil {
			if _, ok := err.(*KeyError); !ok {
				t.Fatalf("derive returned %T, want *KeyError: %v", err, err)
			}
			if v, perr := canonical.Parse(data); perr == nil && !canonical.NoKey(v) {
				t.Fatalf("valid input %q has no key: %v", data, err)
			}
			return
		}
		again, _, err := w.derive("", json.RawMessage(data))
		if err != nil || again != key {
			t.Fatalf("derive is not deterministic: %q then %q (%v)", key, again, err)
		}
		v, err := canonical.Parse(data)
		if err != nil {
			t.Fatalf("derive accepted invalid JSON %q", data)
		}
		var b strings.Builder
		respell(&b, v)
		other, _, err := w.derive("", json.RawMessage(b.String()))
		if err != nil {
			t.Fatalf("respelled input %q: %v", b.String(), err)
		}
		if other != key {
			t.Fatalf("%q and %q are the same value but have keys %s and %s", data, b.String(), key, other)
		}
	})
}

func TestMissingKeyRules(t *testing.T) {
	direct := newTestWrapped[json.RawMessage](t, WithKey("k"))
	inBody := newTestWrapped[struct{ Body string }](t, WithKey("powertools_json(Body).k"))
	for v, missing := range map[string]bool{
		`null`: true, `""`: true, `[]`: true, `[null]`: true, `{}`: true, `{"a":null}`: true,
		`0`: false, `false`: false, `"x"`: false, `[null,0]`: false, `{"a":""}`: false, `"\u0041"`: false,
	} {
		doc := `{"k":` + v + `}`
		_, _, errDirect := direct.derive("", json.RawMessage(doc))
		_, _, errInBody := inBody.derive("", struct{ Body string }{doc})
		for name, err := range map[string]error{"input": errDirect, "powertools_json": errInBody} {
			var ke *KeyError
			switch {
			case missing && (!errors.As(err, &ke) || ke.Err != nil):
				t.Errorf("%s: key %s: got %v, want a KeyError for a missing key", name, v, err)
			case !missing && err != nil:
				t.Errorf("%s: key %s: %v", name, v, err)
			}
		}
	}
}

func TestRecordedMessage(t *testing.T) {
	short := "card declined"
	if got := recordedMessage(short); got != short {
		t.Errorf("a short message changed: %q", got)
	}
	exact := strings.Repeat("x", maxRecordedMessage)
	if got := recordedMessage(exact); got != exact {
		t.Error("a message of exactly the limit was cut")
	}
	for _, unit := range []string{"x", "é", "€", "😀"} {
		long := strings.Repeat(unit, 2*maxRecordedMessage)
		got := recordedMessage(long)
		if len(got) > maxRecordedMessage || !strings.HasSuffix(got, truncatedSuffix) || !utf8.ValidString(got) {
			t.Errorf("%q repeated: cut to %d bytes, suffix %v, valid UTF-8 %v", unit, len(got), strings.HasSuffix(got, truncatedSuffix), utf8.ValidString(got))
		}
		if body := strings.TrimSuffix(got, truncatedSuffix); strings.Trim(body, unit) != "" || len(body) < maxRecordedMessage-len(truncatedSuffix)-utf8.UTFMax {
			t.Errorf("%q repeated: kept %d bytes of whole characters", unit, len(body))
		}
	}
}

// derive returns the record key of in for tenant, and its payload hash, as
// a wrapped function's call derives them.
func (w *wrapped[In, Out]) derive(tenant string, in In) (key, payloadHash string, err error) {
	key, payloadHash, err = core.Derive(w.g.prefix, tenant, w.g.cfg.key, w.g.cfg.validation, in)
	if de, ok := err.(*core.DeriveError); ok {
		return "", "", &KeyError{Expression: de.Expression, Err: de.Err}
	}
	return key, payloadHash, err
}

// newTestWrapped returns the typed layer of Wrap for inputs of type In,
// with opts, to call derive on.
func newTestWrapped[In any](tb testing.TB, opts ...WrapOption) *wrapped[In, int] {
	tb.Helper()
	cfg, err := newConfig("test", opts)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := newGuard(memory.New(), cfg, "test")
	if err != nil {
		tb.Fatal(err)
	}
	return &wrapped[In, int]{g: g}
}
