package jmespath

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/jsonvalue"
)

// simpleExpressions are expressions that must get a plan.
var simpleExpressions = []string{
	"body", "powertools_json(body).order_id", "powertools_json(body)", "headers.\"Content-Type\"",
	"requestContext.identity.sourceIp", "Records[0].body", "Records[-1].messageId", "Records[0].powertools_json(body).id",
	"powertools_json(powertools_base64(data)).id", "Records[0].kinesis.powertools_base64(data)",
	"[httpMethod, path]", "{m: httpMethod, id: powertools_json(body).order_id}", "@", "body | powertools_json(@).a",
	"multiValueHeaders.Accept[0]", "awslogs.powertools_base64_gzip(data) | powertools_json(@).logGroup",
	"powertools_json(body).lines[1].sku", "[body]", "nothing.here[3]",
}

func TestSimpleExpressionsHavePlans(t *testing.T) {
	for _, expr := range simpleExpressions {
		assert.NotNil(t, MustCompile(expr).plan, expr)
	}
	for _, expr := range []string{"Records[*].body", "a || b", "length(a)", "a[?b]", "`1`", "$.a", "[a, b[*]]", "a.*"} {
		assert.Nil(t, MustCompile(expr).plan, expr)
	}
}

// interpret runs the expression through the interpreter, the reference for
// plans.
func interpret(e *Expression, data any) (any, error) {
	return e.compiled.Search(data)
}

func sameOutcome(t *testing.T, e *Expression, want any, wantErr error, got any, gotErr error, where string) {
	t.Helper()
	if wantErr != nil || gotErr != nil {
		assert.Equal(t, wantErr != nil, gotErr != nil, "%s on %s: interpreter error %v, plan error %v", e, where, wantErr, gotErr)
		for _, sentinel := range []error{ErrInvalidJSON, ErrInvalidBase64, ErrInvalidGzip, ErrNotText} {
			if wantErr != nil && gotErr != nil {
				assert.Equal(t, errors.Is(wantErr, sentinel), errors.Is(gotErr, sentinel), "%s on %s: %v vs %v", e, where, wantErr, gotErr)
			}
		}
		return
	}
	w, err := jsonvalue.AppendCanonical(nil, want)
	require.NoError(t, err)
	g, err := jsonvalue.AppendCanonical(nil, got)
	require.NoError(t, err)
	assert.Equal(t, string(w), string(g), "%s on %s", e, where)
}

func planDocuments(t testing.TB) map[string][]byte {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "events", "*.json"))
	require.NoError(t, err)
	docs := map[string][]byte{
		"order":   []byte(`{"body":"{\"order_id\":12345678901234567890,\"lines\":[{\"sku\":\"a\"},{\"sku\":\"b\"}]}","data":"eyJpZCI6IDd9","httpMethod":"POST","path":"/x"}`),
		"bad":     []byte(`{"body":"{oops","data":"!!"}`),
		"types":   []byte(`{"body":7,"data":[1],"Records":"x","headers":null}`),
		"null":    []byte(`null`),
		"array":   []byte(`[{"body":"{}"}]`),
		"escapes": []byte(`{"b\u006fdy":"{\"order_id\":\"\\u00e9\"}"}`),
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
		full, err := jsonvalue.Decode(doc, nil)
		require.NoError(t, err)
		for _, expr := range simpleExpressions {
			e := MustCompile(expr)
			want, wantErr := interpret(e, full)
			got, gotErr := e.plan.eval(e, input{generic: full, kind: genericInput})
			sameOutcome(t, e, want, wantErr, got, gotErr, name+" (generic)")
			got, gotErr = e.plan.eval(e, input{doc: doc, kind: jsonInput})
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
		full, err := jsonvalue.FromGo(v, nil)
		require.NoError(t, err)
		for _, expr := range simpleExpressions {
			e := MustCompile(expr)
			want, wantErr := interpret(e, full)
			got, gotErr := e.plan.eval(e, input{goValue: v, kind: goInput})
			sameOutcome(t, e, want, wantErr, got, gotErr, "a Go value")
		}
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
		compiled[i] = MustCompile(e)
	}
	f.Fuzz(func(t *testing.T, doc []byte, which int) {
		e := compiled[(which%len(compiled)+len(compiled))%len(compiled)]
		got, gotErr := e.plan.eval(e, input{doc: doc, kind: jsonInput})
		full, err := jsonvalue.Decode(doc, nil)
		if err != nil {
			if gotErr == nil {
				t.Fatalf("%s accepted invalid JSON %q", e, doc)
			}
			return
		}
		want, wantErr := interpret(e, full)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%s on %q: interpreter error %v, plan error %v", e, doc, wantErr, gotErr)
		}
		if wantErr == nil {
			w, _ := jsonvalue.AppendCanonical(nil, want)
			g, _ := jsonvalue.AppendCanonical(nil, got)
			if string(w) != string(g) {
				t.Fatalf("%s on %q: interpreter %s, plan %s", e, doc, w, g)
			}
		}
	})
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
	"{\"order_id\": \"\xff\"}",
}

func TestAppendCanonicalMatchesSearchValue(t *testing.T) {
	exprs := append(slices.Clone(simpleExpressions), "powertools_json(body).lines[-1].sku", "length(body)", "powertools_json(body).lines[*].sku")
	for _, body := range keyBodies {
		api := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/x", Body: body}
		for _, v := range []any{api, &api, map[string]any{"body": body}, map[string]any{"body": 7}} {
			for _, expr := range exprs {
				e := MustCompile(expr)
				got, gotErr := e.AppendCanonical([]byte("prefix"), v)
				want := []byte("prefix")
				result, wantErr := e.SearchValue(v)
				if wantErr == nil {
					want, wantErr = jsonvalue.AppendCanonical(want, result)
				}
				where := fmt.Sprintf("%s on %T with body %q", expr, v, body)
				if wantErr != nil || gotErr != nil {
					assert.Equal(t, wantErr != nil, gotErr != nil, "%s: %v vs %v", where, wantErr, gotErr)
					assert.Equal(t, errors.Is(wantErr, ErrInvalidJSON), errors.Is(gotErr, ErrInvalidJSON), "%s: %v vs %v", where, wantErr, gotErr)
					continue
				}
				assert.Equal(t, string(want), string(got), where)
			}
		}
	}
}

func TestAppendCanonicalOfAStringKeyDoesNotAllocate(t *testing.T) {
	e := MustCompile("powertools_json(body).order_id")
	api := &events.APIGatewayProxyRequest{Body: `{"customer": "cus_1", "order_id": "ord_1", "amount": 1999}`}
	dst := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		out, err := e.AppendCanonical(dst[:0], api)
		if err != nil || string(out) != `"ord_1"` {
			t.Fatalf("got %s, %v", out, err)
		}
	})
	if allocs > 0 {
		t.Errorf("AppendCanonical allocates %.0f times per call, want 0", allocs)
	}
}

func FuzzAppendCanonical(f *testing.F) {
	for _, body := range keyBodies {
		f.Add(body)
	}
	exprs := []*Expression{
		MustCompile("powertools_json(body).order_id"), MustCompile("powertools_json(body).lines[1].sku"),
		MustCompile("powertools_json(body)"), MustCompile("powertools_json(body).lines[-1]"),
	}
	f.Fuzz(func(t *testing.T, body string) {
		api := events.APIGatewayProxyRequest{Body: body}
		for _, e := range exprs {
			got, gotErr := e.AppendCanonical(nil, &api)
			result, wantErr := e.SearchValue(&api)
			var want []byte
			if wantErr == nil {
				want, wantErr = jsonvalue.AppendCanonical(nil, result)
			}
			if (wantErr == nil) != (gotErr == nil) || string(want) != string(got) {
				t.Fatalf("%s on body %q: AppendCanonical %s (%v), SearchValue %s (%v)", e, body, got, gotErr, want, wantErr)
			}
		}
	})
}
