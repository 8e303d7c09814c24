package jsonvalue

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func eventFiles(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("../../testdata/events/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	files := make(map[string][]byte)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		files[filepath.Base(p)] = b
	}
	return files
}

// stdDecode decodes with encoding/json and UseNumber, then gives numbers
// the types Decode gives them, as the reference for Decode.
func stdDecode(t testing.TB, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return retype(v)
}

func retype(v any) any {
	switch v := v.(type) {
	case json.Number:
		return numberValue([]byte(v))
	case []any:
		for i := range v {
			v[i] = retype(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = retype(v[k])
		}
	}
	return v
}

func TestDecodeMatchesEncodingJSON(t *testing.T) {
	for name, data := range eventFiles(t) {
		t.Run(name, func(t *testing.T) {
			got, err := Decode(data, nil)
			require.NoError(t, err)
			assert.Equal(t, stdDecode(t, data), got)
		})
	}
}

func TestDecodeNumbers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
	}{
		{`0`, 0.0},
		{`-0`, math.Copysign(0, -1)},
		{`42`, 42.0},
		{`-17`, -17.0},
		{`1.5`, 1.5},
		{`0.1`, 0.1},
		{`1e2`, 100.0},
		{`9007199254740993`, json.Number("9007199254740993")}, // 2^53+1 is not a float64
		{`12345678901234567890`, json.Number("12345678901234567890")},
		{`0.10000000000000000001`, json.Number("0.10000000000000000001")},
		{`1e400`, json.Number("1e400")},
	} {
		got, err := Decode([]byte(tc.in), nil)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestDecodeStrings(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"plain"`, "plain"},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t"},
		{`"\u00e9\u6771"`, "é東"},
		{`"\ud83d\ude80"`, "🚀"},
		{`"\ud83d"`, "\uFFFD"},
		{`"\ud83dx"`, "\uFFFDx"},
		{`"\ude80\ud83d\ude80"`, "\uFFFD🚀"},
		{"\"\xff\"", "\uFFFD"},
	} {
		got, err := Decode([]byte(tc.in), nil)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
		var std string
		require.NoError(t, json.Unmarshal([]byte(tc.in), &std))
		assert.Equal(t, std, got, "encoding/json disagrees on %s", tc.in)
	}
}

func TestDecodeRejectsInvalidJSON(t *testing.T) {
	for _, in := range []string{
		``, ` `, `{`, `[`, `]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{a:1}`,
		`01`, `1.`, `.5`, `1e`, `-`, `+1`, `tru`, `nul`, `"abc`, "\"a\x01\"", `"\x"`, `"\u12"`,
		`1 2`, `{"a":1}}`, strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	} {
		_, err := Decode([]byte(in), nil)
		var syntax *SyntaxError
		assert.ErrorAs(t, err, &syntax, "%q", in)
		assert.False(t, Valid([]byte(in)), "Valid(%q)", in)
		// A selection that skips everything must still see the error.
		_, err = Decode([]byte(`{"skip":`+in+`}`), NewSelection())
		assert.Error(t, err, "skipped %q", in)
	}
}

func TestDecodeSelection(t *testing.T) {
	data := []byte(`{"body":"{\"order\":1}","headers":{"A":"1","B":"2"},"list":[{"x":1,"y":2},{"x":3,"y":4}],"other":{"deep":[1,2,{"z":null}]}}`)
	sel := NewSelection()
	sel.Field("body").SelectAll()
	sel.Field("headers").Field("B").SelectAll()
	sel.Field("list").Field("y").SelectAll()
	got, err := Decode(data, sel)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"body":    `{"order":1}`,
		"headers": map[string]any{"B": "2"},
		"list":    []any{map[string]any{"y": 2.0}, map[string]any{"y": 4.0}},
	}, got)
	assert.Equal(t, `{"body" "headers":{"B"} "list":{"y"}}`, sel.String())
}

func TestSelectionMerge(t *testing.T) {
	a := NewSelection()
	a.Field("x").Field("y")
	b := NewSelection()
	b.Field("x").SelectAll()
	b.Field("z")
	a.Merge(b)
	assert.True(t, a.Field("x").All())
	_, ok := a.lookup("z")
	assert.True(t, ok)
	_, ok = a.lookup("w")
	assert.False(t, ok)
	all := NewSelection()
	all.SelectAll()
	a.Merge(all)
	assert.True(t, a.All())
}

type inner struct {
	N int `json:"n"`
}

type textKey struct{ s string }

func (k textKey) MarshalText() ([]byte, error) { return []byte("key:" + k.s), nil }

type ptrMarshaler struct{ V int }

func (p *ptrMarshaler) MarshalJSON() ([]byte, error) { return []byte(`{"ptr":true}`), nil }

type zeroer struct{ V int }

func (z zeroer) IsZero() bool { return z.V == 7 }

type embedded struct {
	inner
	Name string `json:"name"`
}

type stringOpt struct {
	N int `json:"n,string"`
}

type sample struct {
	S       string            `json:"s"`
	Empty   string            `json:"empty,omitempty"`
	Zero    zeroer            `json:"zero,omitzero"`
	NotZero zeroer            `json:"notZero,omitzero"`
	Time    time.Time         `json:"time"`
	When    *time.Time        `json:"when,omitempty"`
	Bytes   []byte            `json:"bytes"`
	Array   [2]byte           `json:"array"`
	Nums    []float32         `json:"nums"`
	Big     int64             `json:"big"`
	Big2    uint64            `json:"big2"`
	Exact   int64             `json:"exact"`
	Map     map[int]string    `json:"map"`
	TMap    map[textKey]int   `json:"tmap"`
	NilMap  map[string]int    `json:"nilMap"`
	NilList []string          `json:"nilList"`
	Iface   any               `json:"iface"`
	Ptr     *inner            `json:"ptr"`
	Raw     json.RawMessage   `json:"raw"`
	Number  json.Number       `json:"number"`
	Inner   inner             `json:"inner"`
	PM      ptrMarshaler      `json:"pm"`
	Emb     embedded          `json:"emb"`
	Opt     stringOpt         `json:"opt"`
	Skip    string            `json:"-"`
	Dash    string            `json:"-,"`
	NoTag   string            //
	private string            //
	Headers map[string]string `json:"headers"`
}

func sampleValue() sample {
	when := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	return sample{
		S: "s", NotZero: zeroer{1}, Zero: zeroer{7}, Time: when, When: &when,
		Bytes: []byte("hello"), Array: [2]byte{1, 2}, Nums: []float32{0.1, 3.4028235e38},
		Big: math.MaxInt64, Big2: 1<<53 + 2, Exact: 1 << 53,
		Map: map[int]string{1: "a", -2: "b"}, TMap: map[textKey]int{{"x"}: 1},
		Iface: map[string]any{"k": []any{1, "two"}}, Ptr: &inner{N: 3},
		Raw: json.RawMessage(` {"b": 2, "a": [1, 2.50]} `), Number: "1.50",
		Inner: inner{N: 4}, PM: ptrMarshaler{1}, Emb: embedded{inner{5}, "e"}, Opt: stringOpt{6},
		Skip: "x", Dash: "d", NoTag: "nt", private: "p",
		Headers: map[string]string{"Content-Type": "application/json", "X-Id": "1"},
	}
}

func TestFromGoMatchesEncodingJSON(t *testing.T) {
	v := sampleValue()
	values := map[string]any{
		"struct":         v,
		"pointer":        &v, // addressable: the pointer marshaler applies
		"nil":            nil,
		"nil pointer":    (*sample)(nil),
		"string":         "x",
		"bytes":          []byte{0, 1, 2},
		"raw":            json.RawMessage(`[1,{"b":1,"a":2}]`),
		"float32":        float32(16777217),
		"negative int":   int64(-1 << 60),
		"map of structs": map[string]inner{"a": {1}},
	}
	for name, data := range eventFiles(t) {
		var sqs events.SQSEvent
		var api events.APIGatewayProxyRequest
		var apiV2 events.APIGatewayV2HTTPRequest
		var kinesis events.KinesisEvent
		var ddb events.DynamoDBEvent
		for _, target := range []any{&sqs, &api, &apiV2, &kinesis, &ddb} {
			if json.Unmarshal(data, target) == nil {
				values[name+" as "+reflect.TypeOf(target).Elem().Name()] = target
			}
		}
	}
	for name, value := range values {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(value)
			require.NoError(t, err)
			want, err := Decode(b, nil)
			require.NoError(t, err)
			got, err := FromGo(value, nil)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

func TestFromGoSelection(t *testing.T) {
	var api events.APIGatewayProxyRequest
	require.NoError(t, json.Unmarshal(eventFiles(t)["apigw-request.json"], &api))
	sel := NewSelection()
	sel.Field("body")
	sel.Field("headers").Field("Content-Type")
	sel.Field("requestContext").Field("identity").Field("sourceIp")
	got, err := FromGo(api, sel)
	require.NoError(t, err)

	full, err := FromGo(api, nil)
	require.NoError(t, err)
	assert.Equal(t, prune(full, sel), got)
	assert.Equal(t, map[string]any{
		"body":           api.Body,
		"headers":        map[string]any{"Content-Type": "application/json"},
		"requestContext": map[string]any{"identity": map[string]any{"sourceIp": api.RequestContext.Identity.SourceIP}},
	}, got)
}

// prune applies sel to a fully decoded value, as the reference for
// selections.
func prune(v any, sel *Selection) any {
	if sel.All() {
		return v
	}
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = prune(v[i], sel)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if child, ok := sel.lookup(k); ok {
				out[k] = prune(e, child)
			}
		}
		return out
	}
	return v
}

func TestFromGoErrors(t *testing.T) {
	for name, v := range map[string]any{
		"NaN":        math.NaN(),
		"Inf":        math.Inf(1),
		"chan":       make(chan int),
		"func":       func() {},
		"bad key":    map[[2]int]int{{1, 2}: 3},
		"bad json":   json.RawMessage(`{`),
		"bad number": json.Number("1x"),
	} {
		_, err := FromGo(v, nil)
		assert.Error(t, err, name)
		_, stdErr := json.Marshal(v)
		assert.Error(t, stdErr, "encoding/json accepts %s", name)
	}
	type cyclic struct{ Next *cyclic }
	c := &cyclic{}
	c.Next = c
	_, err := FromGo(c, nil)
	assert.Error(t, err)
}

func TestCanonicalNumbers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0", "0"}, {"-0", "0"}, {"0.0", "0"}, {"0e10", "0"},
		{"1", "1"}, {"1.0", "1"}, {"1.000", "1"}, {"1e0", "1"}, {"10e-1", "1"}, {"0.1e1", "1"},
		{"100", "100"}, {"1e2", "100"}, {"1E+2", "100"},
		{"-1.50", "-1.5"}, {"0.001", "0.001"}, {"1e-6", "0.000001"}, {"1e-7", "1e-7"},
		{"123.456", "123.456"}, {"1e20", "100000000000000000000"}, {"1e21", "1e21"},
		{"12345678901234567890", "12345678901234567890"},
		{"12345678901234567890.5", "12345678901234567890.5"},
		{"1.5e300", "1.5e300"}, {"-2.5E-300", "-2.5e-300"},
		{"0.00012300", "0.000123"},
	} {
		got, ok := appendNumber(nil, []byte(tc.in))
		require.True(t, ok, tc.in)
		assert.Equal(t, tc.want, string(got), tc.in)
	}
	for _, bad := range []string{"", "-", "e5", "1e", "1x", "."} {
		_, ok := appendNumber(nil, []byte(bad))
		assert.False(t, ok, bad)
	}
}

func TestCanonicalIgnoresKeyOrderAndSpelling(t *testing.T) {
	a, err := Decode([]byte(`{"b": [1.0, {"y": 2, "x": "é"}], "a": 1e2, "c": "\u00e9"}`), nil)
	require.NoError(t, err)
	b, err := Decode([]byte(`{"c":"é","a":100,"b":[1,{"x":"\u00e9","y":2.00}]}`), nil)
	require.NoError(t, err)
	ca, err := AppendCanonical(nil, a)
	require.NoError(t, err)
	cb, err := AppendCanonical(nil, b)
	require.NoError(t, err)
	assert.Equal(t, `{"a":100,"b":[1,{"x":"é","y":2}],"c":"é"}`, string(ca))
	assert.Equal(t, string(ca), string(cb))
}

func TestCanonicalStrings(t *testing.T) {
	got, err := AppendCanonical(nil, "q\"b\\s/\n\r\t\b\f\x01\x7f<>&\u2028é\xff")
	require.NoError(t, err)
	assert.Equal(t, `"q\"b\\s/\n\r\t\b\f\u0001`+"\x7f<>&\u2028é\uFFFD"+`"`, string(got))
}

func TestCanonicalErrors(t *testing.T) {
	for _, v := range []any{math.NaN(), math.Inf(-1), json.Number("x"), struct{}{}, []any{func() {}}} {
		_, err := AppendCanonical(nil, v)
		assert.Error(t, err, "%#v", v)
	}
}

// sameNumber reports whether two number literals have the same value, when
// math/big can tell (it refuses exponents beyond a million).
func sameNumber(a, b string) (same, known bool) {
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	if !ok1 || !ok2 {
		return false, false
	}
	return x.Cmp(y) == 0, true
}

func FuzzCanonicalNumber(f *testing.F) {
	for _, s := range []string{"0", "-0.0", "1e2", "123.4500", "0.000001", "12345678901234567890e-30", "9e21", "-1.5E-7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		d := decoder{data: []byte(lit)}
		if len(lit) == 0 || lit[0] != '-' && (lit[0] < '0' || lit[0] > '9') {
			return
		}
		if _, err := d.number(); err != nil || d.pos != len(lit) || len(lit) > 200 {
			return
		}
		got, ok := appendNumber(nil, []byte(lit))
		if !ok {
			t.Fatalf("appendNumber(%q) rejected a valid number", lit)
		}
		again, ok := appendNumber(nil, got)
		if !ok || string(again) != string(got) {
			t.Fatalf("normal form of %q is %q, but normalising it again gives %q", lit, got, again)
		}
		if !json.Valid(got) {
			t.Fatalf("normal form %q of %q is not valid JSON", got, lit)
		}
		if same, known := sameNumber(lit, string(got)); known && !same {
			t.Fatalf("normal form %q of %q has another value", got, lit)
		}
	})
}

func FuzzDecode(f *testing.F) {
	for _, data := range eventFiles(f) {
		f.Add(data)
	}
	for _, s := range []string{`{"a":[1,2,{"b":null}],"c":"\u00e9"}`, `[1e400, -0, 0.1]`, `"\ud800"`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Decode(data, nil)
		if (err == nil) != json.Valid(data) {
			t.Fatalf("Decode error %v, but json.Valid = %v", err, json.Valid(data))
		}
		if err != nil {
			return
		}
		c1, err := AppendCanonical(nil, v)
		if err != nil {
			t.Fatalf("AppendCanonical: %v", err)
		}
		v2, err := Decode(c1, nil)
		if err != nil {
			t.Fatalf("canonical form %q does not decode: %v", c1, err)
		}
		c2, err := AppendCanonical(nil, v2)
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("canonical form is not stable: %q then %q (%v)", c1, c2, err)
		}
	})
}

func TestAppendCanonicalGoMatchesFromGo(t *testing.T) {
	v := sampleValue()
	values := []any{v, &v, nil, (*sample)(nil), "x", []byte{1, 2}, json.RawMessage(`{"b":1,"a":[1.50]}`),
		float32(0.1), int64(math.MaxInt64), uint64(math.MaxUint64), map[string]inner{"b": {1}, "a": {2}},
		[]any{nil, map[string]any{"z": 1, "y": []int{}}}, json.Number("1.50"), map[int]string{2: "b", 10: "a"}}
	for _, data := range eventFiles(t) {
		var api events.APIGatewayProxyRequest
		var sqs events.SQSEvent
		require.NoError(t, json.Unmarshal(data, &api))
		require.NoError(t, json.Unmarshal(data, &sqs))
		values = append(values, api, &sqs)
	}
	for _, value := range values {
		g, err := FromGo(value, nil)
		require.NoError(t, err)
		want, err := AppendCanonical(nil, g)
		require.NoError(t, err)
		got, err := AppendCanonicalGo(nil, value)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "%T", value)
	}
	for _, bad := range []any{math.NaN(), make(chan int), map[[2]int]int{{1, 2}: 3}} {
		_, err := AppendCanonicalGo(nil, bad)
		assert.Error(t, err, "%T", bad)
	}
}

func TestNullOrEmpty(t *testing.T) {
	for s, want := range map[string]bool{
		`null`: true, `""`: true, `[]`: true, `{}`: true, `[null]`: true, `[null,null]`: true,
		`{"a":null}`: true, `{"a":null,"b\"":null}`: true,
		`0`: false, `"x"`: false, `[0]`: false, `[null,0]`: false, `[nullx]`: false, `{"a":0}`: false,
		`{"a":null,"b":1}`: false, `{"a":"null"}`: false, `[`: false, `{`: false, `{"a"`: false, `false`: false,
	} {
		assert.Equal(t, want, NullOrEmpty([]byte(s)), s)
	}
}
