package jsonvalue

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// codecAll has a field of every kind the compiled functions handle, with
// every option they follow.
type codecAll struct {
	B        bool                       `json:"b"`
	I        int                        `json:"i"`
	I8       int8                       `json:"i8"`
	I16      int16                      `json:"i16"`
	I32      int32                      `json:"i32"`
	I64      int64                      `json:"i64"`
	U        uint                       `json:"u"`
	U8       uint8                      `json:"u8"`
	U16      uint16                     `json:"u16"`
	U32      uint32                     `json:"u32"`
	U64      uint64                     `json:"u64"`
	UP       uintptr                    `json:"up"`
	F32      float32                    `json:"f32"`
	F64      float64                    `json:"f64"`
	S        string                     `json:"s"`
	Esc      string                     `json:"a<b&c"`
	BadTag   string                     `json:"bad\"name"`
	P        *int                       `json:"p"`
	PP       **string                   `json:"pp"`
	PNil     *codecAll                  `json:"pnil"`
	L        []string                   `json:"l"`
	LNil     []int                      `json:"lnil"`
	LEmpty   []int                      `json:"lempty"`
	Bytes    []byte                     `json:"bytes"`
	BytesNil []byte                     `json:"bytesnil"`
	MyBytes  myBytes                    `json:"mybytes"`
	A        [3]int8                    `json:"a"`
	A0       [0]int                     `json:"a0"`
	M        map[string]string          `json:"m"`
	MNil     map[string]string          `json:"mnil"`
	MS       map[myString]*codecInner   `json:"ms"`
	MI       map[string][]int           `json:"mi"`
	MM       map[string]map[string]bool `json:"mm"`
	Inner    codecInner                 `json:"inner"`
	PInner   *codecInner                `json:"pinner"`
	Any      any                        `json:"any"`
	AnyNil   any                        `json:"anynil"`
	Named    myInt                      `json:"named"`
	Skip     string                     `json:"-"`
	Dash     string                     `json:"-,"`
	NoTag    string
	OS       string            `json:"os,omitempty"`
	OI       int               `json:"oi,omitempty"`
	OF       float64           `json:"of,omitempty"`
	OB       bool              `json:"ob,omitempty"`
	OP       *int              `json:"op,omitempty"`
	OL       []int             `json:"ol,omitempty"`
	OM       map[string]int    `json:"om,omitempty"`
	OA       [0]int            `json:"oa,omitempty"`
	OSt      codecInner        `json:"ost,omitempty"`
	OAny     any               `json:"oany,omitempty"`
	O8       int8              `json:"o8,omitempty"`
	O16      uint16            `json:"o16,omitempty"`
	O32      float32           `json:"o32,omitempty"`
	OU32     uint32            `json:"ou32,omitempty"`
	OPtr     uintptr           `json:"optr,omitempty"`
	ZSt      codecInner        `json:"zst,omitzero"`
	ZF       float64           `json:"zf,omitzero"`
	ZL       []int             `json:"zl,omitzero"`
	ZE       map[string]string `json:"ze,omitempty,omitzero"`
	hidden   int
}

// codecInner is recursive, as linked structures are.
type codecInner struct {
	N    int         `json:"n"`
	Next *codecInner `json:"next,omitempty"`
}

type myBytes []byte

func codecValues() []codecAll {
	one, s := 1, "s"
	ps := &s
	full := codecAll{
		B: true, I: -1 << 40, I8: -128, I16: 32767, I32: -1 << 31, I64: math.MinInt64,
		U: 1 << 50, U8: 255, U16: 65535, U32: 1<<32 - 1, U64: math.MaxUint64, UP: 42,
		F32: 3.4028235e38, F64: 1e21, S: "<p>&amp;\u2028\u2029 \x00\x1f\x7f \xff\xfe é 😀 \\ \" \b\f\n\r\t",
		Esc: "x", BadTag: "y", P: &one, PP: &ps, L: []string{"a", ""}, LEmpty: []int{},
		Bytes: []byte("hi\x00\xff"), MyBytes: myBytes("mine"), A: [3]int8{1, -2, 3},
		M:  map[string]string{"b": "2", "a": "1", "<": ">", "é": "e", "A": "a"},
		MS: map[myString]*codecInner{"x": {N: 1}, "nil": nil}, MI: map[string][]int{"k": {1, 2}, "e": {}, "n": nil},
		MM: map[string]map[string]bool{"o": {"t": true}}, Inner: codecInner{N: 2, Next: &codecInner{N: 3}},
		PInner: &codecInner{N: 4}, Any: map[string]any{"n": 1.5, "l": []any{"x", nil, true}}, Named: 7,
		Skip: "skipped", Dash: "dash", NoTag: "notag", OS: "os", OI: 1, OF: math.Copysign(0, -1), OB: true,
		OP: &one, OL: []int{1}, OM: map[string]int{"m": 1}, OSt: codecInner{}, OAny: 0,
		O8: -1, O16: 1 << 15, O32: float32(math.Copysign(0, -1)), OPtr: 1 << 40,
		ZSt: codecInner{N: 1}, ZF: math.Copysign(0, -1), ZL: []int{}, ZE: map[string]string{}, hidden: 9,
	}
	floats := codecAll{F32: 1e-7, F64: 1e-7}
	small := codecAll{F32: 0.1, F64: 123456789.123, I: 0}
	big := codecAll{F32: 1e21, F64: 1e20, OF: 5e-324, M: map[string]string{}}
	for i := range 3 * smallMap {
		big.M[string(rune('z'-i))+"<"] = strings.Repeat("v", i)
	}
	return []codecAll{{}, full, floats, small, big}
}

func TestCodecMarshalMatchesEncodingJSON(t *testing.T) {
	for _, v := range codecValues() {
		checkCodecMarshal(t, v)
	}
}

func TestCodecOfResponses(t *testing.T) {
	checkCodecMarshal(t, events.APIGatewayProxyResponse{StatusCode: 201,
		Headers:           map[string]string{"Content-Type": "application/json", "X-A": "<b>"},
		MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1", "b=2"}}, Body: `{"id":"p_1"}`})
	checkCodecMarshal(t, events.APIGatewayV2HTTPResponse{StatusCode: 200, Cookies: []string{"c=1"}, Body: "x", IsBase64Encoded: true})
	checkCodecMarshal(t, events.ALBTargetGroupResponse{StatusCode: 404, StatusDescription: "404 Not Found"})
	checkCodecMarshal(t, events.LambdaFunctionURLResponse{StatusCode: 200, Body: "ok"})
}

// checkCodecMarshal checks that T compiles, that v encodes as encoding/json
// encodes it, and that the Codecs decode the encoding as encoding/json
// does.
func checkCodecMarshal[T any](t *testing.T, v T) {
	t.Helper()
	c := CodecFor[T]()
	assert.True(t, c.Compiled(), "%T compiles", v)
	want, err := json.Marshal(v)
	require.NoError(t, err)
	got, err := c.Marshal(&v)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
	checkCodecsAsEncodingJSON(t, want)
}

// TestCodecLeavesSpecialTypesToEncodingJSON covers types with marshalers,
// embedded fields, the string option and other keys than strings: they
// are not compiled, and still encode and decode as encoding/json does.
func TestCodecLeavesSpecialTypesToEncodingJSON(t *testing.T) {
	assert.False(t, CodecFor[sample]().Compiled())
	assert.False(t, CodecFor[plain]().Compiled())
	assert.False(t, CodecFor[embedded]().Compiled())
	assert.False(t, CodecFor[stringOpt]().Compiled())
	assert.False(t, CodecFor[map[int]string]().Compiled())
	assert.False(t, CodecFor[time.Time]().Compiled())
	assert.False(t, CodecFor[struct{ C chan int }]().Compiled())
	assert.False(t, CodecFor[struct {
		Z zeroer `json:",omitzero"`
	}]().Compiled())
	assert.True(t, CodecFor[map[myString][]*codecInner]().Compiled())

	s := sampleValue()
	want, err := json.Marshal(s)
	require.NoError(t, err)
	got, err := CodecFor[sample]().Marshal(&s)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
	checkCodecsAsEncodingJSON(t, want)
}

// TestCodecErrorsAreEncodingJSONs: values encoding/json refuses are
// refused with its errors, including cycles, which the compiled encoder
// hands over once deep enough.
func TestCodecErrorsAreEncodingJSONs(t *testing.T) {
	c := CodecFor[codecAll]()
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		v := codecAll{F64: f}
		_, want := json.Marshal(v)
		_, got := c.Marshal(&v)
		require.Error(t, got)
		assert.Equal(t, want.Error(), got.Error())
	}

	cycle := &codecInner{N: 1}
	cycle.Next = cycle
	_, want := json.Marshal(cycle)
	_, got := CodecFor[*codecInner]().Marshal(&cycle)
	require.Error(t, got)
	assert.Equal(t, want.Error(), got.Error())

	// Deep but finite: encoded, by encoding/json past the compiled depth.
	deep := &codecInner{}
	for i := range 3 * maxEncodeDepth {
		deep = &codecInner{N: i, Next: deep}
	}
	wantBytes, err := json.Marshal(deep)
	require.NoError(t, err)
	gotBytes, err := CodecFor[*codecInner]().Marshal(&deep)
	require.NoError(t, err)
	assert.Equal(t, string(wantBytes), string(gotBytes))
	checkCodecsAsEncodingJSON(t, wantBytes)
}

func TestCodecUnmarshalMatchesEncodingJSON(t *testing.T) {
	for _, doc := range []string{
		`null`, `{}`, `[]`, `"s"`, `1`, ` {"b": true, "i": -5, "s": "x"} `, `{"b": null, "i": null, "s": null}`,
		`{"i8": 128}`, `{"u8": -1}`, `{"u16": 65536}`, `{"i": 1.5}`, `{"i": 1e2}`, `{"f32": 1e39}`, `{"f64": 1e400}`,
		`{"s": 1}`, `{"b": "true"}`, `{"S": "folded"}`, `{"I": 1}`, `{"unknown": [1, {"x": null}], "n": 2}`,
		`{"p": 1, "pp": "x", "pnil": {"s": "deep"}}`, `{"p": null}`, `{"l": ["a", null, "b"]}`, `{"l": "x"}`,
		`{"bytes": "aGk="}`, `{"bytes": "!!"}`, `{"bytes": [1, 2]}`, `{"bytes": "aGk\u003d"}`, `{"mybytes": "bWluZQ=="}`,
		`{"a": [1, 2, 3, 4]}`, `{"a": [1]}`, `{"a": null}`, `{"a0": [1]}`, `{"m": {"a": "1", "a": "2"}}`, `{"m": {"a": 1}}`,
		`{"ms": {"x": {"n": 1}, "y": null}}`, `{"mi": {"k": [1, 2], "e": []}}`, `{"mm": {"o": {"t": true}}}`,
		`{"inner": {"n": 1, "next": {"n": 2, "next": null}}}`, `{"inner": [1]}`, `{"any": {"k": 1}}`, `{"any": null}`,
		`{"anynil": 1}`, `{"named": 3}`, `{"Skip": "x", "-": "dash", "NoTag": "n", "hidden": 1}`, `{"BadTag": "b"}`,
		`{"a<b&c": "esc"}`, `{"a\u003cb\u0026c": "escaped name"}`, `{"s": "\ud83d\ude00 \u00e9 \n"}`, `{"s": "\ud800"}`,
		`{"s": "x"} trailing`, `{"s": "x",}`, `{"s" "x"}`, `{"s": `, `{"s": "x"`, `[1, 2]`, `{"i": -}`, `{"i": 01}`,
		`{"b": tru}`, `{"b": nul}`, `{"s":"a","i":1,"s":"b"}`, `{"headers": {"a": "b"}, "statusCode": 200}`,
		`{"statusCode": 201, "headers": null, "multiValueHeaders": {"a": ["b", "c"]}, "body": "x", "isBase64Encoded": true}`,
		`{"cookies": ["a", "b"], "StatusCode": 1}`,
	} {
		checkCodecsAsEncodingJSON(t, []byte(doc))
	}
}

// codecCheckers decode a document with the Codecs of several types, those
// that compile and those that do not, and compare the results with
// encoding/json's; FuzzCodec runs them on its inputs.
var codecCheckers = []func(t testing.TB, data []byte){
	checkCodec[codecAll], checkCodec[*codecInner], checkCodec[map[string]string], checkCodec[[]codecInner],
	checkCodec[[2]string], checkCodec[any], checkCodec[map[myString][]int], checkCodec[myBytes],
	checkCodec[events.APIGatewayProxyResponse], checkCodec[events.APIGatewayV2HTTPResponse],
	checkCodec[events.LambdaFunctionURLResponse], checkCodec[events.ALBTargetGroupResponse],
	checkCodec[sample], checkCodec[plain], checkCodec[inner], checkCodec[embedded], checkCodec[stringOpt],
	checkCodec[map[string]int], checkCodec[map[string]any], checkCodec[[]string], checkCodec[[3]int],
	checkCodec[*int], checkCodec[string], checkCodec[int], checkCodec[float64], checkCodec[bool], checkCodec[[]byte],
}

func checkCodecsAsEncodingJSON(t testing.TB, data []byte) {
	for _, check := range codecCheckers {
		check(t, data)
	}
}

func checkCodec[T any](t testing.TB, data []byte) {
	var want, got T
	wantErr := json.Unmarshal(data, &want)
	gotErr := CodecFor[T]().Unmarshal(data, &got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("into %T from %q: encoding/json error %v, Codec error %v", got, data, wantErr, gotErr)
	}
	if wantErr != nil {
		return
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("into %T from %q:\n encoding/json %#v\n Codec         %#v", got, data, want, got)
	}
	// What was decoded encodes as encoding/json encodes it, and in the
	// canonical form as AppendCanonicalGo writes it.
	checkCanonical(t, &got)
	wantBytes, wantErr := json.Marshal(want)
	gotBytes, gotErr := CodecFor[T]().Marshal(&got)
	if (wantErr == nil) != (gotErr == nil) || string(wantBytes) != string(gotBytes) {
		t.Fatalf("encoding %T decoded from %q:\n encoding/json %s %v\n Codec         %s %v", got, data, wantBytes, wantErr, gotBytes, gotErr)
	}
}

func FuzzAppendStringHTML(f *testing.F) {
	for _, s := range []string{"", "plain", "<a href=\"x\">&</a>", "\u2028\u2029", "\x00\x1f\x7f", "\xff\xfe\xed\xa0\x80", "é😀\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		if got := appendStringHTML(nil, s); string(got) != string(want) {
			t.Fatalf("%q: encoding/json %s, appendStringHTML %s", s, want, got)
		}
	})
}

// TestCodecAllocations holds a stored API Gateway response to one
// allocation to encode (the returned bytes) and three to decode (the
// header map, its storage, and one buffer for the strings).
func TestCodecAllocations(t *testing.T) {
	c := CodecFor[events.APIGatewayProxyResponse]()
	resp := events.APIGatewayProxyResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
		Body: `{"payment_id":"pay_123","status":"created"}`}
	var data []byte
	encode := testing.AllocsPerRun(200, func() {
		var err error
		if data, err = c.Marshal(&resp); err != nil {
			t.Fatal(err)
		}
	})
	var out events.APIGatewayProxyResponse
	decode := testing.AllocsPerRun(200, func() {
		out = events.APIGatewayProxyResponse{}
		if err := c.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
	})
	if encode > 1 || decode > 3 {
		t.Errorf("allocations: encode %.1f (want 1), decode %.1f (want 3)", encode, decode)
	}
}

func BenchmarkCodec(b *testing.B) {
	c := CodecFor[events.APIGatewayProxyResponse]()
	resp := events.APIGatewayProxyResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
		Body: `{"payment_id":"pay_123","status":"created"}`}
	data, err := c.Marshal(&resp)
	require.NoError(b, err)
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Marshal(&resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out events.APIGatewayProxyResponse
			if err := c.Unmarshal(data, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json_marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestCodecStringsNotShared(t *testing.T) {
	// Decoded strings must not view the document, which the caller may
	// reuse.
	c := CodecFor[codecAll]()
	data := []byte(`{"s":"` + strings.Repeat("x", 300) + `","m":{"k":"v"}}`)
	var v codecAll
	require.NoError(t, c.Unmarshal(data, &v))
	for i := range data {
		data[i] = 'z'
	}
	assert.Equal(t, strings.Repeat("x", 300), v.S)
	assert.Equal(t, map[string]string{"k": "v"}, v.M)
}

// TestCodecConcurrentUse shares one Codec between goroutines, as a wrapped
// handler shares its own between concurrent invocations.
func TestCodecConcurrentUse(t *testing.T) {
	c := CodecFor[codecAll]()
	values := codecValues()
	encoded := make([][]byte, len(values))
	decoded := make([]codecAll, len(values))
	for i := range values {
		var err error
		encoded[i], err = json.Marshal(values[i])
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(encoded[i], &decoded[i]))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := range 200 {
				i := (g + n) % len(values)
				data, err := c.Marshal(&values[i])
				if err != nil || string(data) != string(encoded[i]) {
					t.Errorf("Marshal: %s (%v), want %s", data, err, encoded[i])
					return
				}
				var got codecAll
				if err := c.Unmarshal(data, &got); err != nil || !reflect.DeepEqual(got, decoded[i]) {
					t.Errorf("Unmarshal: %+v (%v), want %+v", got, err, decoded[i])
					return
				}
			}
		})
	}
	wg.Wait()
}

// checkCanonical checks that the CanonicalEncoder of T writes *v as
// AppendCanonicalGo does, errors included.
func checkCanonical[T any](t testing.TB, v *T) {
	t.Helper()
	want, wantErr := AppendCanonicalGo([]byte("prefix"), v)
	got, gotErr := CanonicalEncoderFor[T]().Append([]byte("prefix"), v)
	if (wantErr == nil) != (gotErr == nil) || string(want) != string(got) {
		t.Fatalf("canonical %T:\n AppendCanonicalGo %s %v\n CanonicalEncoder  %s %v", v, want, wantErr, got, gotErr)
	}
	if wantErr != nil && wantErr.Error() != gotErr.Error() {
		t.Fatalf("canonical %T: AppendCanonicalGo error %v, CanonicalEncoder error %v", v, wantErr, gotErr)
	}
}

func TestCanonicalEncoderMatchesAppendCanonicalGo(t *testing.T) {
	assert.True(t, CanonicalEncoderFor[codecAll]().Compiled())
	assert.True(t, CanonicalEncoderFor[events.APIGatewayProxyRequest]().Compiled(), "the usual input compiles")
	assert.True(t, CanonicalEncoderFor[events.SQSEvent]().Compiled())
	assert.False(t, CanonicalEncoderFor[sample]().Compiled())
	for _, v := range codecValues() {
		checkCanonical(t, &v)
	}
	for _, v := range []codecAll{{F64: math.NaN()}, {F32: float32(math.Inf(1))}, {Any: math.NaN()}, {Any: make(chan int)}} {
		checkCanonical(t, &v)
	}
	s := sampleValue()
	checkCanonical(t, &s)

	req := events.APIGatewayProxyRequest{Resource: "/orders", Path: "/orders", HTTPMethod: "POST",
		Headers:               map[string]string{"Content-Type": "application/json", "X-<": "&"},
		MultiValueHeaders:     map[string][]string{"Accept": {"a", "b"}},
		QueryStringParameters: map[string]string{"q": "1"}, Body: `{"order_id":"ord_1"}`,
		RequestContext: events.APIGatewayProxyRequestContext{RequestID: "r", RequestTimeEpoch: 1764669600000,
			Authorizer: map[string]any{"claims": map[string]any{"sub": "u", "n": 1.5}, "big": json.Number("12345678901234567890")}}}
	checkCanonical(t, &req)

	cycle := &codecInner{N: 1}
	cycle.Next = cycle
	checkCanonical(t, &cycle)
	deep := &codecInner{}
	for i := range 3 * maxEncodeDepth {
		deep = &codecInner{N: i, Next: deep}
	}
	checkCanonical(t, &deep)
}
