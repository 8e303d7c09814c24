package jmespath

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The differential tests compare SearchValue and SearchJSON with the
// interpreter on the input as encoding/json encodes and decodes it
// (referenceValue, referenceJSON): on Go values built to reach every rule
// of followGo, and on the sample events of this module and of
// aws-lambda-go, with expressions made from every path into the inputs.

type valueMarshaler struct{ N int }

func (v valueMarshaler) MarshalJSON() ([]byte, error) {
	return []byte(`{"by":"value","n":` + strconv.Itoa(v.N) + `}`), nil
}

type pointerMarshaler struct{ N int }

func (p *pointerMarshaler) MarshalJSON() ([]byte, error) {
	return []byte(`{"by":"pointer","n":` + strconv.Itoa(p.N) + `}`), nil
}

type pointerText struct{ N int }

func (p *pointerText) MarshalText() ([]byte, error) { return []byte("text " + strconv.Itoa(p.N)), nil }

type valueText string

func (s valueText) MarshalText() ([]byte, error) { return []byte("T:" + string(s)), nil }

type pointerTextString string

func (s *pointerTextString) MarshalText() ([]byte, error) { return []byte("P:" + string(*s)), nil }

type name string

type Inner struct {
	ID   int64    `json:"id"`
	Name string   `json:"name,omitempty"`
	Tags []string `json:"tags"`
	Body string   `json:"body,omitempty"`
}

type Base struct {
	E        string
	Shadowed string
}

type withEmbedded struct {
	Base
	X        string
	Shadowed int
}

type withEmbeddedPointer struct {
	*Base
	Y string
}

type withOptions struct {
	Quoted      int            `json:"quoted,string"`
	QuotedS     string         `json:"quoteds,string"`
	Zero        Inner          `json:"zero,omitzero"`
	ZeroTime    time.Time      `json:"zerotime,omitzero"`
	Empty       string         `json:"empty,omitempty"`
	Full        string         `json:"full,omitempty"`
	EmptyPtr    *Inner         `json:"emptyptr,omitempty"`
	EmptyMap    map[string]int `json:"emptymap,omitempty"`
	EmptySlice  []int          `json:"emptyslice,omitempty"`
	EmptyIface  any            `json:"emptyiface,omitempty"`
	EmptyStruct Inner          `json:"emptystruct,omitempty"`
	ZeroNum     float64        `json:"zeronum,omitempty"`
	FalseBool   bool           `json:"falsebool,omitempty"`
	EmptyArr    [0]int         `json:"emptyarr,omitempty"`
	Dash        string         `json:"-"`
	DashComma   string         `json:"-,"`
	BadTag      string         `json:"a\"b"`
	Spaced      string         `json:" spaced"`
	Unicode     string         `json:"café"`
	Untagged    string
	Tagged      string `json:"Untagged"`
	hidden      string
	Hidden      string `json:"hidden"`
}

// failing has a field that json.Marshal refuses whatever its value.
type failing struct {
	F func()
	S string
}

// sometimesFailing has one that it refuses only when not nil.
type sometimesFailing struct {
	C *chan int
	S string
}

type zoo struct {
	S, Invalid, Empty string
	Name              name
	Big               uint64
	Neg               int64
	Small             int8
	F32               float32
	F64, Exp, Frac    float64
	Num, EmptyNum     json.Number
	Bool              bool
	Bytes             []byte
	Arr               [3]int
	ByteArr           [2]byte
	Inners            []Inner
	InnerPtrs         []*Inner
	Ptr, NilPtr       *Inner
	PtrPtr            **Inner
	Map               map[string]Inner
	MapAny            map[string]any
	IntMap            map[int]string
	NamedKeys         map[name]string
	InvalidKeys       map[string]string
	TextKeys          map[valueText]int
	NilMap            map[string]string
	Iface, IfacePtr   any
	IfaceNil          any
	IfaceString       any
	VM                valueMarshaler
	VMPtr             *valueMarshaler
	PM                pointerMarshaler
	PMPtr             *pointerMarshaler
	PMs               []pointerMarshaler
	PMMap             map[string]pointerMarshaler
	PMArr             [1]pointerMarshaler
	PT                pointerText
	VT                valueText
	VTs               []valueText
	PTS               pointerTextString
	Opts              withOptions
	OptsPtr           *withOptions
	Emb               withEmbedded
	EmbPtr            withEmbeddedPointer
	Time              time.Time
	Raw               json.RawMessage
	Body, B64, Gz     string
	BadBody, B64Bad   string
	Nested            struct {
		Deep struct{ Deeper []map[string][]any }
	}
	Matrix [][]any
	Odd    any
}

// oddTags returns a struct with tags that go vet refuses: two fields
// tagged with one name, and an option after a space.
func oddTags() any {
	str := reflect.TypeFor[string]()
	v := reflect.New(reflect.StructOf([]reflect.StructField{
		{Name: "Dup1", Type: str, Tag: `json:"dup"`},
		{Name: "Dup2", Type: str, Tag: `json:"dup"`},
		{Name: "OptSpace", Type: str, Tag: `json:"optspace, omitempty"`},
		{Name: "X", Type: str},
	})).Elem()
	v.Field(0).SetString("d1")
	v.Field(1).SetString("d2")
	v.Field(3).SetString("x")
	return v.Interface()
}

const zooBody = `{"id": 12345678901234567890, "name": "caf\u00e9", "list": [1, 2.50, {"id": "x"}], "id": "dup"}`

func newZoo(t testing.TB) zoo {
	inner := &Inner{ID: 7, Name: "seven", Tags: []string{"a", "b"}, Body: `{"id": 1}`}
	return zoo{
		S: "plain", Invalid: "a\xffb\xc3\x28\xed\xa0\x80z", Name: "named",
		Big: 1<<63 + 1, Neg: -(1<<53 + 1), Small: -8, F32: 0.1, F64: 1e21, Exp: 1.5e-7, Frac: 2.5,
		Num: "12345678901234567890.5", Bool: true,
		Bytes: []byte(zooBody), Arr: [3]int{1, 2, 3}, ByteArr: [2]byte{1, 2},
		Inners:    []Inner{{ID: 1, Tags: []string{"x"}}, {ID: 2, Name: "two"}},
		InnerPtrs: []*Inner{inner, nil},
		Ptr:       inner, PtrPtr: &inner,
		Map:         map[string]Inner{"a": {ID: 3}, "": {ID: 4}},
		MapAny:      map[string]any{"n": 1, "arr": []any{1, "x", nil}, "obj": map[string]any{"k": "v"}, "body": `{"id": 5}`, "inner": *inner},
		IntMap:      map[int]string{1: "one", -2: "minus two"},
		NamedKeys:   map[name]string{"k": "v"},
		InvalidKeys: map[string]string{"a\xff": "invalid", "a\ufffd": "replacement", "k\xfe\xfd": "two", "ok": "fine"},
		TextKeys:    map[valueText]int{"k": 1},
		Iface:       Inner{ID: 9, Tags: []string{}}, IfacePtr: inner, IfaceString: "in an interface",
		VM: valueMarshaler{1}, VMPtr: &valueMarshaler{2}, PM: pointerMarshaler{3}, PMPtr: &pointerMarshaler{4},
		PMs: []pointerMarshaler{{5}}, PMMap: map[string]pointerMarshaler{"m": {6}}, PMArr: [1]pointerMarshaler{{7}},
		PT: pointerText{8}, VT: "vt", VTs: []valueText{"a", "b"}, PTS: "pts",
		Opts:    withOptions{Quoted: 42, QuotedS: "q", Full: "full", EmptyStruct: Inner{}, Untagged: "u", Tagged: "t", hidden: "h", Hidden: "H", Unicode: "é"},
		OptsPtr: &withOptions{Zero: Inner{ID: 1}, EmptyPtr: &Inner{}, EmptyIface: 0, Dash: "dash", DashComma: "dash comma"},
		Emb:     withEmbedded{Base: Base{E: "e", Shadowed: "base"}, X: "x", Shadowed: 1},
		EmbPtr:  withEmbeddedPointer{Y: "y"},
		Time:    time.Date(2024, 2, 29, 12, 0, 0, 5, time.UTC),
		Raw:     json.RawMessage(`{"raw": [1, 2.0, "three"]}`),
		Body:    zooBody, B64: base64.StdEncoding.EncodeToString([]byte(zooBody)), Gz: gzipBase64(t, []byte(zooBody)),
		BadBody: `{"id": 1`, B64Bad: base64.StdEncoding.EncodeToString([]byte{0xff, '"'}),
		Nested: struct {
			Deep struct{ Deeper []map[string][]any }
		}{Deep: struct{ Deeper []map[string][]any }{
			Deeper: []map[string][]any{{"k": {1, "two", 3.5, nil, map[string]any{"id": 1e300}}}},
		}},
		Matrix: [][]any{{1, 2}, {}, nil, {"a", []any{true}}},
		Odd:    oddTags(),
	}
}

// goValues are the Go inputs of the differential tests: a zoo by value
// (nothing addressable), through a pointer and in a slice (addressable),
// in a map and an array by value (not), in interfaces, and a value that
// json.Marshal refuses whatever the values of its fields.
func goValues(t testing.TB) map[string]any {
	z := newZoo(t)
	return map[string]any{
		"zoo":         z,
		"*zoo":        &z,
		"[]zoo":       []zoo{z},
		"map of zoo":  map[string]zoo{"z": z},
		"[1]zoo":      [1]zoo{z},
		"*[1]zoo":     &[1]zoo{z},
		"map of any":  map[string]any{"z": z, "p": &z, "i": any(&z)},
		"interface":   struct{ I any }{I: z},
		"nil":         nil,
		"nil *zoo":    (*zoo)(nil),
		"failing":     failing{S: "s"},
		"not failing": sometimesFailing{S: "s"},
		"inner":       Inner{ID: 1},
		"string":      "a\xff string",
		"json.Number": json.Number("1.50"),
		"marshaler":   pointerMarshaler{1},
		"*marshaler":  &pointerMarshaler{1},
	}
}

// extraNames are names to look up besides the members an input has: Go
// names that are not JSON names, and names that are near ones that are.
var extraNames = []string{"hidden", "Dash", "-", "dup", "Untagged", "BadTag", "quoted", "zero", "E", "X", "Base", "a\ufffd", "id", "missing", " spaced", "optspace"}

// quote writes name as a JMESPath quoted identifier.
func quote(name string) string {
	b, _ := json.Marshal(name)
	return string(b)
}

// pathsInto returns expressions for paths into the generic value v, from
// prefix, down to depth levels: every member, with extra names at each
// object, and the first, last and an out-of-range element of each array.
func pathsInto(prefix string, v any, depth int, extra []string) []string {
	join := func(step string) string {
		if prefix == "" {
			return step
		}
		if strings.HasPrefix(step, "[") {
			return prefix + step
		}
		return prefix + "." + step
	}
	var out []string
	if prefix != "" {
		out = append(out, prefix)
	}
	if depth == 0 {
		return out
	}
	switch v := v.(type) {
	case map[string]any:
		names := slices.Sorted(func(yield func(string) bool) {
			for name := range v {
				if !yield(name) {
					return
				}
			}
		})
		for _, name := range names {
			out = append(out, pathsInto(join(quote(name)), v[name], depth-1, extra)...)
		}
		for _, name := range extra {
			if _, ok := v[name]; !ok {
				out = append(out, join(quote(name)))
			}
		}
	case []any:
		if len(v) > 0 {
			out = append(out, pathsInto(join("[0]"), v[0], depth-1, extra)...)
			out = append(out, pathsInto(join("[-1]"), v[len(v)-1], depth-1, extra)...)
		}
		out = append(out, join("["+strconv.Itoa(len(v))+"]"), join("[-"+strconv.Itoa(len(v)+1)+"]"))
	default:
		out = append(out, join("id"), join("[0]"))
	}
	return out
}

// variants returns expressions over the path p: the path, Powertools
// functions on it, and multi-selects of it.
func variants(p string, all bool) []string {
	if p == "" {
		p = "@"
	}
	out := []string{p, "powertools_json(" + p + ").id", "[" + p + ", S]"}
	if all {
		out = append(out, "powertools_json("+p+")", "powertools_json("+p+").list[-1].id", "powertools_base64("+p+")",
			"powertools_json(powertools_base64("+p+")).name", "powertools_json(powertools_base64_gzip("+p+")).list[0]",
			"{k: "+p+", b: powertools_json(Body).id}", p+" | [0]", "length("+p+")")
	}
	return out
}

type differential struct {
	t       *testing.T
	checked map[string]int // outcomes compared, by kind
}

// value compares SearchValue(v) with the interpreter on data, v encoded
// and decoded (or the error that encoding gave), for each expression.
func (d *differential) value(where string, v any, exprs []string) {
	doc, marshalErr := json.Marshal(v)
	var data any
	if marshalErr == nil {
		var err error
		data, err = parseJSON(doc)
		require.NoError(d.t, err)
	}
	for _, expr := range exprs {
		e := compile(d.t, expr)
		var want any
		wantErr := marshalErr
		if wantErr == nil {
			want, wantErr = e.interpret(data)
		}
		got, gotErr := e.SearchValue(v)
		sameOutcome(d.t, e, want, wantErr, got, gotErr, where)
		if e.plan == nil {
			d.checked["interpreter"]++
		} else if _, err := e.plan.eval(e, input{goValue: v, isGo: true}); err == errSlow {
			d.checked["Go value, slow path"]++
		} else {
			d.checked["Go value, plan"]++
		}
	}
}

// json compares SearchJSON(doc) with the interpreter on doc decoded.
func (d *differential) json(where string, doc []byte, exprs []string) {
	data, err := parseJSON(doc)
	require.NoError(d.t, err, where)
	for _, expr := range exprs {
		e := compile(d.t, expr)
		want, wantErr := e.interpret(data)
		got, gotErr := e.SearchJSON(doc)
		sameOutcome(d.t, e, want, wantErr, got, gotErr, where)
		d.checked["JSON"]++
	}
}

// expressionsFor returns expressions over the paths into v's encoding,
// down to depth levels: the basic variants of every path, or of limit of
// them, and all variants of allLimit of them.
func expressionsFor(t testing.TB, v any, depth int, extra []string, limit, allLimit int) []string {
	doc, err := json.Marshal(v)
	if err != nil {
		doc = []byte(`{"S": 1}`)
	}
	data, err := parseJSON(doc)
	require.NoError(t, err)
	paths := append(pathsInto("", data, depth, extra), "")
	var exprs []string
	for _, p := range sample(paths, limit) {
		exprs = append(exprs, variants(p, false)...)
	}
	for _, p := range sample(paths, allLimit) {
		exprs = append(exprs, variants(p, true)[3:]...)
	}
	return exprs
}

// sample returns limit of paths, every n-th so that every part of the
// input has some, or all of them if limit is 0.
func sample(paths []string, limit int) []string {
	if limit == 0 || len(paths) <= limit {
		return paths
	}
	sampled := make([]string, 0, limit)
	for i := range limit {
		sampled = append(sampled, paths[i*len(paths)/limit])
	}
	return sampled
}

// sampled reports whether the differential tests compare a sample of
// their expressions, not all: with -short, and under the race detector,
// which finds nothing in these single-goroutine comparisons and makes
// them ten times slower. make test runs them whole without it (the run
// with the oldest Go).
func sampled() bool { return testing.Short() || raceEnabled }

func TestDifferentialGoValues(t *testing.T) {
	d := &differential{t: t, checked: map[string]int{}}
	values := goValues(t)
	zooLimit, limit, allLimit := 200, 300, 100
	if sampled() {
		zooLimit, limit, allLimit = 40, 30, 10
	}
	zooExprs := expressionsFor(t, values["*zoo"], 4, extraNames, zooLimit, zooLimit/4)
	for where, v := range values {
		// Every path into the zoo and the zoo through a pointer, some of
		// those into the other values.
		limit := limit
		if (where == "zoo" || where == "*zoo") && !sampled() {
			limit = 0
		}
		exprs := expressionsFor(t, v, 5, extraNames, limit, allLimit)
		if !strings.Contains(where, "zoo") {
			exprs = append(exprs, zooExprs...)
		}
		d.value(where, v, append(exprs, expressions...))
	}
	t.Logf("outcomes compared: %v", d.checked)
	assert.Greater(t, d.checked["Go value, plan"], d.checked["Go value, slow path"], "most paths must take the plan")
}

// eventTypes are the Go types of the sample events.
var eventTypes = map[string]func() any{
	"activemq-event.json":                               func() any { return new(events.ActiveMQEvent) },
	"alb-lambda-target-request-headers-only.json":       func() any { return new(events.ALBTargetGroupRequest) },
	"alb-lambda-target-request-multivalue-headers.json": func() any { return new(events.ALBTargetGroupRequest) },
	"apigw-custom-auth-request.json":                    func() any { return new(events.APIGatewayCustomAuthorizerRequest) },
	"apigw-custom-auth-request-type-request.json":       func() any { return new(events.APIGatewayCustomAuthorizerRequestTypeRequest) },
	"apigw-request.json":                                func() any { return new(events.APIGatewayProxyRequest) },
	"apigw-v2-request-iam.json":                         func() any { return new(events.APIGatewayV2HTTPRequest) },
	"apigw-v2-request-jwt-authorizer.json":              func() any { return new(events.APIGatewayV2HTTPRequest) },
	"apigw-v2-request-lambda-authorizer.json":           func() any { return new(events.APIGatewayV2HTTPRequest) },
	"apigw-v2-request-no-authorizer.json":               func() any { return new(events.APIGatewayV2HTTPRequest) },
	"apigw-websocket-request.json":                      func() any { return new(events.APIGatewayWebsocketProxyRequest) },
	"appsync-lambda-auth-request.json":                  func() any { return new(events.AppSyncLambdaAuthorizerRequest) },
	"clientvpn-connectionhandler-request.json":          func() any { return new(events.ClientVPNConnectionHandlerRequest) },
	"cloudwatch-alarm-sns-payload-single-metric.json":   func() any { return new(events.SNSEvent) },
	"cloudwatch-logs-event.json":                        func() any { return new(events.CloudwatchLogsEvent) },
	"code-commit-event.json":                            func() any { return new(events.CodeCommitEvent) },
	"codepipeline-job-event.json":                       func() any { return new(events.CodePipelineJobEvent) },
	"cognito-event.json":                                func() any { return new(events.CognitoEvent) },
	"cognito-event-userpools-presignup.json":            func() any { return new(events.CognitoEventUserPoolsPreSignup) },
	"config-event.json":                                 func() any { return new(events.ConfigEvent) },
	"connect-event.json":                                func() any { return new(events.ConnectEvent) },
	"dynamodb-event.json":                               func() any { return new(events.DynamoDBEvent) },
	"dynamodb-time-window-event.json":                   func() any { return new(events.DynamoDBTimeWindowEvent) },
	"ecr-image-scan-event.json":                         func() any { return new(events.ECRScanEvent) },
	"iot-button-event.json":                             func() any { return new(events.IoTButtonEvent) },
	"iot-custom-auth-request.json":                      func() any { return new(events.IoTCoreCustomAuthorizerRequest) },
	"kafka-event.json":                                  func() any { return new(events.KafkaEvent) },
	"kinesis-event.json":                                func() any { return new(events.KinesisEvent) },
	"kinesis-firehose-event.json":                       func() any { return new(events.KinesisFirehoseEvent) },
	"kinesis-time-window-event.json":                    func() any { return new(events.KinesisTimeWindowEvent) },
	"lambda-urls-request.json":                          func() any { return new(events.LambdaFunctionURLRequest) },
	"lex-event.json":                                    func() any { return new(events.LexEvent) },
	"rabbitmq-event.json":                               func() any { return new(events.RabbitMQEvent) },
	"s3-event.json":                                     func() any { return new(events.S3Event) },
	"s3-batch-job-event-request-1.0.json":               func() any { return new(events.S3BatchJobEvent) },
	"secretsmanager-secret-rotation-event.json":         func() any { return new(events.SecretsManagerSecretRotationEvent) },
	"sns-event.json":                                    func() any { return new(events.SNSEvent) },
	"sqs-event.json":                                    func() any { return new(events.SQSEvent) },
}

// sampleEvents returns the sample events of this module and of
// aws-lambda-go's module, by file name.
func sampleEvents(t testing.TB) map[string][]byte {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "events", "*.json"))
	require.NoError(t, err)
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-lambda-go").Output()
	if err != nil {
		t.Logf("aws-lambda-go's samples are left out: go list: %v", err)
	} else {
		more, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "events", "testdata", "*.json"))
		require.NoError(t, err)
		files = append(files, more...)
	}
	docs := make(map[string][]byte)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		where := filepath.Base(filepath.Dir(filepath.Dir(f))) + "/" + filepath.Base(f)
		if json.Valid(b) {
			docs[where] = b
		}
	}
	return docs
}

// thin keeps every fourth of docs, by name, when the tests compare a
// sample (sampled).
func thin(docs map[string][]byte) map[string][]byte {
	if sampled() {
		for i, name := range slices.Sorted(maps.Keys(docs)) {
			if i%4 != 0 {
				delete(docs, name)
			}
		}
	}
	return docs
}

func TestDifferentialEvents(t *testing.T) {
	d := &differential{t: t, checked: map[string]int{}}
	limit := 40
	if sampled() {
		limit = 10
	}
	for where, doc := range thin(sampleEvents(t)) {
		var generic any
		require.NoError(t, json.Unmarshal(doc, &generic))
		exprs := append(expressionsFor(t, generic, 5, []string{"missing"}, limit, limit/4), expressions...)
		d.json(where, doc, exprs)
		d.value(where+" as a map", generic, exprs)
		if newEvent, ok := eventTypes[filepath.Base(where)]; ok {
			ev := newEvent()
			if json.Unmarshal(doc, ev) == nil {
				d.value(fmt.Sprintf("%s as %T", where, ev), ev, exprs)
				d.value(fmt.Sprintf("%s as %T", where, reflect.ValueOf(ev).Elem().Interface()), reflect.ValueOf(ev).Elem().Interface(), exprs)
			}
		}
	}
	t.Logf("outcomes compared: %v", d.checked)
}

// TestSlowPath lists the values on which a plan gives way to the
// interpreter, and some on which it does not.
func TestSlowPath(t *testing.T) {
	z := newZoo(t)
	for _, tc := range []struct {
		v    any
		expr string
		slow bool
	}{
		{z, "S", false},
		{z, "VM", false}, {z, "VM.by", true}, {&z, "PM", false}, {z, "PM.N", true}, {z, "PMs[0].by", true},
		{z, "PT", false}, {z, "PT.N", true}, {z, "Time.x", true}, {z, "VT", false}, {z, "VT[0]", true},
		{z, "Opts.quoted", true}, {z, "Opts.zero", true}, {z, "Odd.dup", true}, {z, "Odd.X", false}, {z, "Odd.optspace", false}, {z, "Opts.Untagged", true},
		{z, "Opts.empty", false}, {z, "Opts.hidden", false}, {z, "Opts.\"-\"", false}, {z, "Opts.Dash", false},
		{z, "Emb.X", true}, {z, "EmbPtr.Y", true}, {z, "IntMap.\"1\"", true}, {z, "TextKeys.k", false},
		{z, "Bytes[0]", true}, {z, "Bytes", false}, {z, "ByteArr[0]", false},
		{z, "InvalidKeys.ok", false}, {z, "InvalidKeys.\"a\\ufffd\"", true}, {z, "NamedKeys.k", false},
		{z, "Map.a.id", false}, {z, "Iface.id", false}, {z, "IfacePtr.name", false}, {z, "MapAny.inner.id", false},
		{z, "Nested.Deep.Deeper[0].k[-1].id", false}, {z, "Inners[-1].name", false}, {z, "Raw.raw", true},
		{z, "powertools_json(Body).id", false}, {z, "[S, Opts.quoted]", true},
		{failing{}, "S", true}, {sometimesFailing{}, "S", false}, {&z, "OptsPtr.full", false},
	} {
		e := compile(t, tc.expr)
		_, err := e.plan.eval(e, input{goValue: tc.v, isGo: true})
		assert.Equal(t, tc.slow, err == errSlow, "%s on %T: %v", tc.expr, tc.v, err)
	}
}

// TestUnreadPartsAreNotEncoded shows what SearchValue's documentation
// says: a plan encodes only what its paths reach, so an error that
// json.Marshal would report elsewhere in the value is not reported.
func TestUnreadPartsAreNotEncoded(t *testing.T) {
	for _, v := range []any{
		map[string]any{"S": "s", "nan": math.NaN()},
		sometimesFailing{C: new(chan int), S: "s"},
	} {
		_, err := json.Marshal(v)
		require.Error(t, err)
		got, err := compile(t, "S").SearchValue(v)
		assert.NoError(t, err)
		assert.Equal(t, "s", got)
		_, err = compile(t, "length(@)").SearchValue(v)
		assert.Error(t, err)
	}
}

// FuzzDifferential runs fuzzed expressions, seeded with paths into the
// inputs of the differential tests, on those inputs.
func FuzzDifferential(f *testing.F) {
	values := goValues(f)
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range values {
			if !yield(name) {
				return
			}
		}
	})
	docs := map[string][]byte{}
	for _, name := range []string{"apigw-request.json", "sqs-event.json", "kinesis-event.json", "dynamodb-event.json"} {
		docs[name] = readEvent(f, name)
	}
	z, err := json.Marshal(values["*zoo"])
	require.NoError(f, err)
	docs["zoo"] = z
	docNames := slices.Sorted(func(yield func(string) bool) {
		for name := range docs {
			if !yield(name) {
				return
			}
		}
	})
	for i, expr := range expressionsFor(f, values["*zoo"], 3, extraNames, 60, 20) {
		f.Add(expr, uint8(i))
	}
	for i, expr := range append(slices.Clone(simpleExpressions), expressions...) {
		f.Add(expr, uint8(i))
	}
	f.Fuzz(func(t *testing.T, expr string, which uint8) {
		if len(expr) > 200 {
			return
		}
		e, err := Compile(expr)
		if err != nil {
			return
		}
		v := values[names[int(which)%len(names)]]
		want, wantErr := referenceValue(e, v)
		got, gotErr := e.SearchValue(v)
		if diff := outcomeDiff(e, want, wantErr, got, gotErr); diff != "" {
			t.Fatalf("%s on %s: %s", expr, names[int(which)%len(names)], diff)
		}
		doc := docs[docNames[int(which)%len(docNames)]]
		want, wantErr = referenceJSON(e, doc)
		got, gotErr = e.SearchJSON(doc)
		if diff := outcomeDiff(e, want, wantErr, got, gotErr); diff != "" {
			t.Fatalf("%s on %s: %s", expr, docNames[int(which)%len(docNames)], diff)
		}
	})
}

// TestLookupsMatchEncodingJSON checks member and element, which find
// values in JSON text, against encoding/json on every object and array of
// the sample events.
func TestLookupsMatchEncodingJSON(t *testing.T) {
	docs := thin(sampleEvents(t))
	docs["escapes"] = []byte(`{"a\"b": [1, "]", {"}": "\\"}], "\u0061": 2, "a": 3, "k\ud800": 4, "k\ufffd": 5, "x": -1.5e+3, "t": true, "n" : null , "s":"\\\\"}`)
	docs["invalid UTF-8"] = []byte("{\"k\xff\": 1, \"k\xfe\": 2, \"\xff\": [\"\xff\"]}")
	for where, doc := range docs {
		checkLookups(t, where, doc)
	}
}

func checkLookups(t testing.TB, where string, doc []byte) {
	data, err := parseJSON(doc)
	require.NoError(t, err)
	var walk func(raw []byte, v any)
	walk = func(raw []byte, v any) {
		switch v := v.(type) {
		case map[string]any:
			for name, want := range v {
				for _, s := range []step{memberStep(name), {name: name}} {
					got := member(raw, s)
					require.NotNil(t, got, "%s: member %q of %s", where, name, raw)
					assertSameJSON(t, want, got, fmt.Sprintf("%s: member %q", where, name))
					walk(got, want)
				}
			}
			assert.Nil(t, member(raw, memberStep("not a member")), where)
		case []any:
			for i, want := range v {
				for _, index := range []int{i, i - len(v)} {
					got := element(raw, index)
					require.NotNil(t, got, "%s: element %d of %s", where, index, raw)
					assertSameJSON(t, want, got, fmt.Sprintf("%s: element %d", where, index))
					walk(got, want)
				}
			}
			assert.Nil(t, element(raw, len(v)), where)
			assert.Nil(t, element(raw, -len(v)-1), where)
		default:
			assert.Nil(t, member(raw, memberStep("x")), where)
			assert.Nil(t, element(raw, 0), where)
		}
	}
	walk(doc, data)
}

func assertSameJSON(t testing.TB, want any, got []byte, what string) {
	t.Helper()
	decoded, err := decodeValue(got)
	require.NoError(t, err, what)
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(decoded)
	require.NoError(t, err)
	if !bytes.Equal(w, g) {
		t.Fatalf("%s: want %s, got %s (%s)", what, w, g, got)
	}
}

func FuzzLookups(f *testing.F) {
	for _, doc := range planDocuments(f) {
		if len(doc) < 4000 {
			f.Add(doc)
		}
	}
	f.Add([]byte(`{"a\"b": [1, "]", {"}": "\\"}], "\u0061": 2, "a": 3}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		if json.Valid(doc) {
			checkLookups(t, "fuzzed document", doc)
		}
	})
}
