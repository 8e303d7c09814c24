package canonical_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/canonical"
	"github.com/retrysafe/retrysafe/internal/testing/testevents"
)

// checkAppendGo checks that AppendGo writes what the reference writes for
// v: json.Marshal, decoded by encoding/json into map[string]any, []any and
// json.Number, written by Append as it was. Both fail, or neither; and
// NoKeyForm agrees with NoKey.
func checkAppendGo(t testing.TB, v any) {
	t.Helper()
	want, wantErr := refFromGo(v)
	var wantForm []byte
	if wantErr == nil {
		wantForm, wantErr = refAppend(nil, want)
	}
	prefix := []byte("prefix")
	got, err := canonical.AppendGo(prefix[:len(prefix):len(prefix)], v)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s: AppendGo: error %v, encoding/json: error %v", describe(v), err, wantErr)
	}
	if err != nil {
		if string(got) != "prefix" {
			t.Fatalf("%s: AppendGo failed (%v) and changed dst to %q", describe(v), err, got)
		}
		return
	}
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("%s: AppendGo did not append to dst: %q", describe(v), got)
	}
	got = got[len(prefix):]
	if !bytes.Equal(got, wantForm) {
		t.Fatalf("%s:\nAppendGo:      %s\nencoding/json: %s", describe(v), got, wantForm)
	}
	if canonical.NoKeyForm(got) != refNoKey(want) {
		t.Fatalf("%s: NoKeyForm(%s) is %v, NoKey %v", describe(v), got, !refNoKey(want), refNoKey(want))
	}
}

// describe returns json.Marshal's output of v, shortened, for messages.
func describe(v any) string {
	doc, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	if len(doc) > 200 {
		return string(doc[:200]) + "..."
	}
	return string(doc)
}

// rawMarshaler writes its JSON text as it is, which encoding/json only
// checks and compacts.
type rawMarshaler string

func (m rawMarshaler) MarshalJSON() ([]byte, error) { return []byte(m), nil }

type failingMarshaler struct{}

func (failingMarshaler) MarshalJSON() ([]byte, error) { return nil, errors.New("no") }

type textKey struct{ a, b string }

func (k textKey) MarshalText() ([]byte, error) { return []byte(k.b + "/" + k.a), nil }

type Embedded struct {
	Z     int    `json:"z"`
	Shown string // promoted
	Clash string `json:"clash"`
}

type Inner struct{ Y, X int }

type tagged struct {
	Zeta     string            `json:"zeta"`
	Alpha    int               `json:"alpha,omitempty"`
	Skipped  int               `json:"-"`
	Dash     int               `json:"-,"`
	Quoted   int64             `json:"quoted,string"`
	Float    float64           `json:"float"`
	Raw      json.RawMessage   `json:"raw,omitempty"`
	Marsh    rawMarshaler      `json:"marsh,omitempty"`
	Ptr      *Inner            `json:"ptr"`
	Any      any               `json:"any"`
	Bytes    []byte            `json:"bytes"`
	Time     time.Time         `json:"time"`
	IntKeys  map[int]string    `json:"int_keys"`
	UintKeys map[uint8]bool    `json:"uint_keys"`
	TextKeys map[textKey]int   `json:"text_keys"`
	Maps     map[string]*Inner `json:"maps"`
	Clash    string            `json:"clash"`
	Embedded
	Inner `json:"inner"`
	Élan  string
	B     bool
	A     bool
}

// nest returns v inside n arrays.
func nest(n int, v any) any {
	for range n {
		v = []any{v}
	}
	return v
}

// nestObjects returns v inside n objects whose members are out of order.
func nestObjects(n int, v any) any {
	type obj struct {
		B  any `json:"b"`
		A  int `json:"a"`
		AB any `json:"a\u0000"`
	}
	for i := range n {
		v = obj{B: v, A: i, AB: nil}
	}
	return v
}

// goValues are Go values of many kinds: those that encoding/json encodes
// in ways a canonical form must undo (structs out of order, escapes,
// invalid UTF-8, numbers in any spelling, members with one name), and
// values it refuses.
func goValues() []any {
	deepRaw := func(n int) json.RawMessage {
		return json.RawMessage(strings.Repeat(`{"a":[`, n/2) + "1" + strings.Repeat(`]}`, n/2))
	}
	return []any{
		nil, true, false, 0, -1, 1.5, "", "x", []any{}, map[string]any{},
		[]any{nil}, []any{nil, nil}, []any{nil, 0}, []any{[]any{}},
		map[string]any{"a": nil}, map[string]any{"a": nil, "b": nil}, map[string]any{"a": ""},
		json.RawMessage(`{"a":1,"a":null}`), json.RawMessage(`{"a":null,"a":1}`),
		json.RawMessage(`{"\"":null}`), json.RawMessage(`{"\\":null,"z":null}`),
		json.RawMessage(`""`), json.RawMessage(`"\u0000"`), json.RawMessage(`[ null , null ]`),
		testevents.APIGatewayOrder("ord_1"),
		tagged{},
		tagged{
			Zeta: "z", Alpha: 1, Skipped: 2, Dash: 3, Quoted: -4, Float: 1e21,
			Raw:   json.RawMessage(` { "b" : [ 1.0e+2 , -0 , -0.0E-0 ] , "a" : "\u00e9\u2028\/" } `),
			Marsh: `{"k":1,"k":2,"j":{"y":1,"x":2}}`,
			Ptr:   &Inner{Y: 1, X: 2}, Any: map[string]any{"\xff": 1, "\xfe": 2},
			Bytes: []byte("\x00\xff"), Time: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
			IntKeys: map[int]string{10: "ten", 9: "nine", -1: "minus"}, UintKeys: map[uint8]bool{2: true, 10: false},
			TextKeys: map[textKey]int{{"a", "b"}: 1, {"b", "a"}: 2},
			Maps:     map[string]*Inner{"n": nil, "v": {}},
			Clash:    "outer", Embedded: Embedded{Z: 5, Shown: "s", Clash: "inner"}, Inner: Inner{Y: 7, X: 8},
			Élan: "é", B: true,
		},

		// Numbers, in every spelling.
		math.MaxInt64, uint64(math.MaxUint64), math.MinInt64, math.MaxFloat64, math.SmallestNonzeroFloat64,
		-math.MaxFloat64, 1e20, 1e21, 1e-6, 1e-7, 123456789012345680000.0, float32(0.1), float32(1e21), -0.0,
		json.Number("1"), json.Number("-0"), json.Number("1.50e-3"), json.Number("123456789012345678901234567890"),
		json.RawMessage(`[0,-0,0.0,-0.0,0e0,0E-5,1,10,100,1e2,1E2,1e+2,100e0,1000e-1,0.1,0.10,1.0,1e0,100e-2]`),
		json.RawMessage(`[1e21,1e20,123456789012345678901,1234567890123456789012,-1234567890123456789012,1e-6,1e-7,0.000001,0.0000001]`),
		json.RawMessage(`[1.5e300,-1.5e-300,1e999999999,1e1000000000,1e-1000000000,123.456e-789,0.00001230,9007199254740993]`),
		json.RawMessage(`[-100000000000000000000,-1000000000000000000000,100000000000000000000,-12345678901234567890]`),

		// Strings: escapes, HTML characters, invalid UTF-8, surrogates.
		"a\"b\\c/d<e>f&g\u2028h\u2029i\u007fj\x00\x01\x1f\b\f\n\r\t",
		"\xff", "a\xffb", "\xff\xfe", "\xe2\x82", "\xed\xa0\x80", "\uFFFD", "é東京🚀",
		json.RawMessage(`"\u00e9\u6771\u4EAC\ud83d\ude80\ud83D\uDE80"`),
		json.RawMessage(`["\ud800","\udc00","\udc00\ud800","\ud800\u0041","\ud800\ud800\udc00","\ud800x","\ud800\\","\ud800\n"]`),
		json.RawMessage(`"\u0000\u0001\u001f\u001F\u0020\u007f\u0080\u2028\"\\\/\b\f\n\r\t"`),
		json.RawMessage("\"\xff\xfe\xe2\x82\xed\xa0\x80\xef\xbf\xbd\xc0\xaf\""),
		json.RawMessage("\"a\xff\\n\xe2\\u0041\""),

		// Names: order by the strings they are, not by their escapes,
		// and members with one name.
		map[string]int{"\xff": 1, "\xfe": 2, "\uFFFD": 3, "\xffa": 4, "\uFFFDb": 5, "z": 6},
		map[string]int{"\n": 1, "!": 2, "\\": 3, "\"": 4, "\x00": 5, "\x1f": 6, " ": 7, "a": 8, "~": 9, "\x7f": 10, "é": 11},
		json.RawMessage(`{"\n":1,"!":2,"\\":3,"\"":4,"\u0000":5,"\u001f":6," ":7,"a":8,"a!":9,"a\u0000":10,"a\n":11}`),
		json.RawMessage(`{"a":1,"\u0061":2,"b":3,"a":4}`),
		json.RawMessage(`{"b":1,"a":2,"b":3,"a":4,"b":{"y":1,"x":2,"y":3}}`),
		json.RawMessage("{\"\xff\":1,\"\xfe\":2,\"\\ufffd\":3}"),
		json.RawMessage(`{"\ud800":1,"\udc00":2,"\ufffd":3}`),
		json.RawMessage(`{"a\\":1,"a\"":2,"a":3,"a\n":4,"a\u0001":5,"a\u0002":6,"a\b":7}`),
		json.RawMessage(`{"b":{"d":{"f":1,"e":2},"c":[{"h":1,"g":2},{"j":{"l":1,"k":2}}]},"a":[]}`),
		json.RawMessage(`[{"b":1,"a":2},{"d":1,"c":2},{},[{"f":1,"e":2}]]`),
		map[string]any{"m": json.RawMessage(`{"z":1,"y":2}`), "l": []json.RawMessage{[]byte(`{"x":1,"w":2}`)}},

		// Depth: encoding/json decodes 10000 levels and no more.
		nest(9999, nil), nest(10000, nil), nest(10001, nil), nest(10000, map[string]any{}),
		nest(9999, map[string]any{"a": 1}), nest(10000, map[string]any{"a": 1}),
		deepRaw(10000), deepRaw(9998), []any{deepRaw(9998)}, []any{[]any{deepRaw(9998)}},
		nestObjects(9999, nil), nestObjects(10000, nil), nestObjects(10001, nil),
		nestObjects(5000, strings.Repeat("x", 1<<20)),

		// Values that json.Marshal refuses.
		math.NaN(), math.Inf(1), make(chan int), func() {}, failingMarshaler{}, rawMarshaler(`{"a":`),
		rawMarshaler(`1 2`), json.RawMessage(`{"a":1,}`), json.Number("1x"), map[string]any{"a": math.Inf(-1)},
	}
}

// AppendGo writes what encoding/json decoding json.Marshal's output and
// Append writing it would: for structs, maps, marshalers, raw JSON,
// numbers in every spelling, escapes, invalid UTF-8, members with one
// name, and nesting up to and past encoding/json's limit.
func TestAppendGoMatchesEncodingJSON(t *testing.T) {
	for _, v := range goValues() {
		checkAppendGo(t, v)
	}
}

// checkAppend checks that Append writes the generic value v as the
// reference does.
func checkAppend(t testing.TB, v any) {
	t.Helper()
	want, wantErr := refAppend(nil, v)
	got, err := canonical.Append(nil, v)
	if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
		t.Fatalf("%s: Append: %s (error %v), reference: %s (error %v)", describe(v), got, err, want, wantErr)
	}
}

// Append writes what it wrote before AppendGo shared its helpers.
func TestAppendMatchesReference(t *testing.T) {
	for _, v := range goValues() {
		if g, err := refFromGo(v); err == nil {
			checkAppend(t, g)
		}
	}
	for _, v := range []any{1.5, 1e21, 1e-7, -0.0, math.MaxFloat64, math.SmallestNonzeroFloat64, 100, int64(-3),
		[]any{1.0, 2.5e-8, 123456789.0}, map[string]any{"\xff": 1, "\xfe": 2}, json.Number("1x"), math.NaN()} {
		checkAppend(t, v)
	}
}

// The vectors of docs/keys.md, each document given as raw JSON.
func TestAppendGoVectors(t *testing.T) {
	vectors := readVectors(t)
	for _, v := range vectors {
		got, err := canonical.AppendGo(nil, json.RawMessage(v[0]))
		require.NoError(t, err, v[0])
		assert.Equal(t, v[1], string(got), "canonical form of %s", v[0])
	}
}

func TestNoKeyForm(t *testing.T) {
	for _, doc := range []string{`null`, `""`, `[]`, `{}`, `[null,null]`, `{"a":null}`, `{"\"":null,"\\":null}`} {
		assert.True(t, canonical.NoKeyForm([]byte(doc)), doc)
	}
	for _, doc := range []string{`0`, `1`, `false`, `true`, `" "`, `"null"`, `[null,0]`, `{"a":""}`, `[[]]`, `{"null":0}`, `[{}]`, `{"a":null,"b":[]}`} {
		assert.False(t, canonical.NoKeyForm([]byte(doc)), doc)
	}
}

// AppendGo writes what encoding/json decoding json.Marshal's output and
// Append writing it would, for the JSON a fuzzer writes, given as raw
// JSON, as a string in names and values, and decoded into Go values.
func FuzzAppendGo(f *testing.F) {
	for _, v := range goValues() {
		doc, err := json.Marshal(v)
		if err != nil || len(doc) > 4096 {
			continue
		}
		f.Add(doc, "")
	}
	for _, s := range []string{"\xff", "a\"\\\n\u2028<", "\uFFFD", "\xed\xa0\x80"} {
		f.Add([]byte(`{"b":1,"a":2}`), s)
	}
	f.Add([]byte(`{"a":1,"\u0061":2}`), "a")
	f.Add([]byte(`["\ud800\udc00","\ud800","\u00E9"]`), "")
	f.Fuzz(func(t *testing.T, doc []byte, s string) {
		if hugeExponent(doc) {
			return // big.Rat cannot compare them in reasonable time
		}
		raw := json.RawMessage(doc)
		checkAppendGo(t, raw)
		checkAppendGo(t, map[string]any{s: raw, "k": s, s + "\x00": []any{s, raw}})
		checkAppendGo(t, struct {
			Z json.RawMessage `json:"z"`
			S string          `json:"s"`
			A any             `json:"a"`
		}{raw, s, map[string]json.RawMessage{s: raw}})
		var generic any
		if json.Unmarshal(doc, &generic) == nil {
			checkAppendGo(t, generic)
			checkAppend(t, generic)
		}
		var numbers any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		if dec.Decode(&numbers) == nil {
			checkAppendGo(t, numbers)
			checkAppend(t, numbers)
		}
		// Two documents have one form exactly when they are one value.
		if v, err := refParse(doc); err == nil {
			other := exactly(v)
			a, errA := canonical.AppendGo(nil, raw)
			b, errB := canonical.AppendGo(nil, other)
			if errA == nil && errB == nil && !bytes.Equal(a, b) {
				t.Fatalf("%s and %s, one value, have the forms %s and %s", doc, describe(other), a, b)
			}
		}
	})
}

// exactly returns the generic value v with each number of an integer
// value spelled as a plain integer: the same value, spelled another way.
func exactly(v any) any {
	switch v := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(string(v))
		if !ok || !r.IsInt() {
			return v
		}
		return json.Number(r.Num().String())
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = exactly(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = exactly(e)
		}
		return out
	}
	return v
}

// AppendGo allocates nothing of its own: for a value that encoding/json
// encodes without allocating (no maps), nothing at all.
func TestAppendGoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	type line struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	}
	var in any = struct {
		OrderID string                               `json:"order_id"`
		Amount  int64                                `json:"amount"`
		Price   float64                              `json:"price"`
		Lines   []line                               `json:"lines"`
		Raw     json.RawMessage                      `json:"raw"`
		Context events.APIGatewayProxyRequestContext `json:"context"`
	}{"ord_1", 4200, 0.1, []line{{"b", 2}, {"a", 1}}, json.RawMessage(`{"z":"\u00e9","a":1.50}`), testevents.APIGatewayOrder("ord_1").RequestContext}
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(1000, func() {
		var err error
		if buf, err = canonical.AppendGo(buf[:0], in); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("AppendGo allocates %.1f times, want 0", allocs)
	}
}

// BenchmarkAppendGo compares AppendGo with the reference, json.Marshal
// decoded by encoding/json and written by Append, on the 1 KB API Gateway
// event of the idempotency benchmarks.
func BenchmarkAppendGo(b *testing.B) {
	in := testevents.APIGatewayOrder("ord_1")
	b.Run("AppendGo", func(b *testing.B) {
		buf := make([]byte, 0, 4096)
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = canonical.AppendGo(buf[:0], in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("FromGo+Append", func(b *testing.B) {
		buf := make([]byte, 0, 4096)
		b.ReportAllocs()
		for b.Loop() {
			v, err := canonical.FromGo(in)
			if err != nil {
				b.Fatal(err)
			}
			if buf, err = canonical.Append(buf[:0], v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
