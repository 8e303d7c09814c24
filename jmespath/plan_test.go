package jmespath

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/canonical"
)

// compile compiles expr, or fails the test.
func compile(t testing.TB, expr string) *Expression {
	t.Helper()
	e, err := Compile(expr)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// referenceJSON is what SearchJSON(doc) must give: the interpreter, with
// the Powertools functions, on doc as encoding/json decodes it.
func referenceJSON(e *Expression, doc []byte) (any, error) {
	data, err := canonical.Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	return e.interpret(exactNumbers(data))
}

// referenceValue is what SearchValue(v) must give: referenceJSON on
// json.Marshal(v).
func referenceValue(e *Expression, v any) (any, error) {
	doc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return referenceJSON(e, doc)
}

// sentinels are the errors whose class two outcomes must share.
var sentinels = []error{ErrInvalidJSON, ErrInvalidBase64, ErrInvalidGzip, ErrTooLarge, ErrNotText}

// outcomeDiff describes how two outcomes of e differ, or is "" when they
// are the same: both errors of the same classes, or equal results (with
// the same canonical encoding, for an order-dependent expression).
func outcomeDiff(e *Expression, want any, wantErr error, got any, gotErr error) string {
	if wantErr != nil || gotErr != nil {
		if (wantErr == nil) != (gotErr == nil) {
			return fmt.Sprintf("want error %v, got error %v (result %#v, want %#v)", wantErr, gotErr, got, want)
		}
		for _, sentinel := range sentinels {
			if errors.Is(wantErr, sentinel) != errors.Is(gotErr, sentinel) {
				return fmt.Sprintf("want error %v, got error %v", wantErr, gotErr)
			}
		}
		return ""
	}
	w, err := canonicalResult(e, want)
	if err != nil {
		return fmt.Sprintf("want %#v, which does not encode: %v", want, err)
	}
	g, err := canonicalResult(e, got)
	if err != nil {
		return fmt.Sprintf("got %#v, which does not encode: %v", got, err)
	}
	if w != g {
		return fmt.Sprintf("want %s, got %s", w, g)
	}
	if !e.OrderDependent() && !reflect.DeepEqual(want, got) {
		// The same encoding, but not the same values: strings that differ
		// in invalid UTF-8, or a number of another type.
		return fmt.Sprintf("want %#v, got %#v", want, got)
	}
	return ""
}

func sameOutcome(t *testing.T, e *Expression, want any, wantErr error, got any, gotErr error, where string) {
	t.Helper()
	if diff := outcomeDiff(e, want, wantErr, got, gotErr); diff != "" {
		t.Errorf("%s on %s: %s", e, where, diff)
	}
}

// canonicalResult encodes a search result; for an order-dependent
// expression, whose arrays may come in any order, it sorts the elements of
// a top-level array first.
func canonicalResult(e *Expression, v any) (string, error) {
	arr, ok := v.([]any)
	if !ok || !e.OrderDependent() {
		b, err := canonical.Append(nil, v)
		return string(b), err
	}
	parts := make([]string, len(arr))
	for i, el := range arr {
		b, err := canonical.Append(nil, el)
		if err != nil {
			return "", err
		}
		parts[i] = string(b)
	}
	slices.Sort(parts)
	return strings.Join(parts, ","), nil
}

// simpleExpressions are expressions that must get a plan.
var simpleExpressions = []string{
	"body", "powertools_json(body).order_id", "powertools_json(body)", "headers.\"Content-Type\"",
	"requestContext.identity.sourceIp", "Records[0].body", "Records[-1].messageId", "Records[0].powertools_json(body).id",
	"powertools_json(powertools_base64(data)).id", "Records[0].kinesis.powertools_base64(data)",
	"[httpMethod, path]", "{m: httpMethod, id: powertools_json(body).order_id}", "@", "body | powertools_json(@).a",
	"multiValueHeaders.Accept[0]", "awslogs.powertools_base64_gzip(data) | powertools_json(@).logGroup",
	"powertools_json(body).lines[1].sku", "[body]", "nothing.here[3]", "powertools_json(body).lines[-1]",
	"powertools_json(powertools_json(body).inner).x", "Records[0].kinesis.data[0]", "headers.Host[0]",
}

func TestSimpleExpressionsHavePlans(t *testing.T) {
	for _, expr := range simpleExpressions {
		assert.NotNil(t, compile(t, expr).plan, expr)
	}
	for _, expr := range []string{"Records[*].body", "a || b", "length(a)", "a[?b]", "`1`", "$.a", "[a, b[*]]", "a.*", "a[1:2]"} {
		assert.Nil(t, compile(t, expr).plan, expr)
	}
}

func planDocuments(t testing.TB) map[string][]byte {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "events", "*.json"))
	require.NoError(t, err)
	docs := map[string][]byte{
		"order":   []byte(`{"body":"{\"order_id\":12345678901234567890,\"lines\":[{\"sku\":\"a\"},{\"sku\":\"b\"}],\"inner\":\"{\\\"x\\\":1}\"}","data":"eyJpZCI6IDd9","httpMethod":"POST","path":"/x"}`),
		"bad":     []byte(`{"body":"{oops","data":"!!"}`),
		"types":   []byte(`{"body":7,"data":[1],"Records":"x","headers":null}`),
		"null":    []byte(`null`),
		"string":  []byte(`"a string" `),
		"array":   []byte(`[{"body":"{}"}]`),
		"escapes": []byte(`{"b\u006fdy":"{\"order_id\":\"\\u00e9\", \"order_id\": 2.50}", "body": "{\"a\":1}"}`),
		"spaces":  []byte(" \t{ \"body\" :\n\"[ 1 , {\\\"order_id\\\" : [ ] } ]\" , \"Records\" : [ { \"body\" : \"{}\" } ] } \n"),
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		docs[filepath.Base(f)] = b
	}
	return docs
}

func TestPlansMatchInterpreter(t *testing.T) {
	for name, doc := range planDocuments(t) {
		full, err := parseJSON(doc)
		require.NoError(t, err)
		for _, expr := range simpleExpressions {
			e := compile(t, expr)
			want, wantErr := e.interpret(full)
			got, gotErr := e.Search(full)
			sameOutcome(t, e, want, wantErr, got, gotErr, name+" (generic)")
			got, gotErr = e.SearchJSON(doc)
			sameOutcome(t, e, want, wantErr, got, gotErr, name+" (JSON)")
		}
	}
}

func TestPlansOnGoValuesMatchInterpreter(t *testing.T) {
	var api events.APIGatewayProxyRequest
	var sqs events.SQSEvent
	var kinesis events.KinesisEvent
	docs := planDocuments(t)
	require.NoError(t, json.Unmarshal(docs["apigw-request.json"], &api))
	require.NoError(t, json.Unmarshal(docs["sqs-event.json"], &sqs))
	require.NoError(t, json.Unmarshal(docs["kinesis-event.json"], &kinesis))
	api.Body = `{"order_id": "o-1", "lines": [{"sku": "a"}, {"sku": "b"}]}`
	for _, v := range []any{api, &api, sqs, &kinesis, nil, (*events.SQSEvent)(nil), map[string]any{"body": `{"order_id":1}`}} {
		for _, expr := range simpleExpressions {
			e := compile(t, expr)
			want, wantErr := referenceValue(e, v)
			got, gotErr := e.SearchValue(v)
			sameOutcome(t, e, want, wantErr, got, gotErr, fmt.Sprintf("%T", v))
		}
	}
}

// keyBodies are bodies for the expressions over powertools_json(body):
// strings with and without escapes, empty, other types, duplicate members,
// and bodies that are not JSON.
var keyBodies = []string{
	`{"order_id": "o-1", "lines": [{"sku": "a"}, {"sku": "b"}]}`,
	`{"order_id": "caf\u00e9 \"x\""}`, `{"order_id": "Zoë"}`, `{"order_id": ""}`, `{"order_id": null}`,
	`{"order_id": 12345678901234567890}`, `{"order_id": 1.0}`, `{"order_id": {"b": 1, "a": [null]}}`,
	`{"order_id": "first", "order_id": {"x": 1}}`, `{"order_id": {"x": "a"}, "order_id": "second"}`,
	`{"lines": [{"sku": "a"}, {"sku": "b", "sku": "c"}]}`, `"just a string"`, `[]`, `{}`, `{oops`, ``,
	"{\"order_id\": \"\xff\"}", `{"order_id": "a"} x`, `"abc" `, ` "abc"`, `"a\"b"`, `{"order_id":"a\\"}`, `{"order_id": "a"}}`, `{"inner": "{\"x\": [1e400, -0]}"}`,
}

var keyExpressions = append(slices.Clone(simpleExpressions), "length(body)", "powertools_json(body).lines[*].sku", "powertools_json(body).lines[5]")

func TestKeyBodiesMatchInterpreter(t *testing.T) {
	for _, body := range keyBodies {
		api := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/x", Body: body}
		for _, v := range []any{api, &api, map[string]any{"body": body}, map[string]any{"body": 7}} {
			for _, expr := range keyExpressions {
				e := compile(t, expr)
				want, wantErr := referenceValue(e, v)
				got, gotErr := e.SearchValue(v)
				sameOutcome(t, e, want, wantErr, got, gotErr, fmt.Sprintf("%T with body %q", v, body))
			}
		}
	}
}

// TestStringKeyAllocations bounds the allocations of the usual key
// extraction: the body as bytes, the key string, and the key in an any.
func TestStringKeyAllocations(t *testing.T) {
	e := compile(t, "powertools_json(body).order_id")
	api := &events.APIGatewayProxyRequest{Body: `{"customer": "cus_1", "order_id": "ord_1", "amount": 1999}`}
	allocs := testing.AllocsPerRun(100, func() {
		if got, err := e.SearchValue(api); err != nil || got != "ord_1" {
			t.Fatalf("got %v, %v", got, err)
		}
	})
	if allocs > 4 {
		t.Errorf("SearchValue allocates %.0f times per call, want at most 4", allocs)
	}
}

func FuzzPlan(f *testing.F) {
	for name, doc := range planDocuments(f) {
		if len(doc) < 2000 {
			f.Add(doc, len(name))
		}
	}
	compiled := make([]*Expression, len(simpleExpressions))
	for i, e := range simpleExpressions {
		compiled[i] = compile(f, e)
	}
	f.Fuzz(func(t *testing.T, doc []byte, which int) {
		e := compiled[(which%len(compiled)+len(compiled))%len(compiled)]
		want, wantErr := referenceJSON(e, doc)
		got, gotErr := e.SearchJSON(doc)
		if diff := outcomeDiff(e, want, wantErr, got, gotErr); diff != "" {
			t.Fatalf("%s on %q: %s", e, doc, diff)
		}
	})
}

func FuzzKeyBody(f *testing.F) {
	for _, body := range keyBodies {
		f.Add(body)
	}
	compiled := make([]*Expression, len(keyExpressions))
	for i, e := range keyExpressions {
		compiled[i] = compile(f, e)
	}
	f.Fuzz(func(t *testing.T, body string) {
		api := events.APIGatewayProxyRequest{Body: body}
		for _, e := range compiled {
			want, wantErr := referenceValue(e, &api)
			got, gotErr := e.SearchValue(&api)
			if diff := outcomeDiff(e, want, wantErr, got, gotErr); diff != "" {
				t.Fatalf("%s on body %q: %s", e, body, diff)
			}
		}
	})
}
