package jmespath

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/canonical"
)

func readEvent(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "events", name))
	require.NoError(t, err)
	return b
}

func TestCompileRejectsBadExpressions(t *testing.T) {
	for _, expr := range []string{
		"", "foo[", "foo..bar", "[?]", "unknown_function(body)", "powertools_json()",
		"powertools_json(body, body)", "length(@, @)", "'quoted'(x)",
	} {
		_, err := Compile(expr)
		require.Error(t, err, expr)
		assert.ErrorIs(t, err, ErrInvalidExpression, expr)
		var ce *CompileError
		require.ErrorAs(t, err, &ce, expr)
		assert.Equal(t, expr, ce.Expression)
		assert.True(t, strings.HasPrefix(err.Error(), "jmespath: "), err.Error())
	}
}

func gzipBase64(t testing.TB, data []byte) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func TestPowertoolsFunctions(t *testing.T) {
	body := `{"order_id": 12345678901234567890, "amount": 10.50, "items": ["a", "b"]}`
	doc := map[string]any{
		"body":   body,
		"b64":    base64.StdEncoding.EncodeToString([]byte(body)),
		"gz":     gzipBase64(t, []byte(body)),
		"nested": `{"inner": "{\"x\": 1}"}`,
	}
	for _, tc := range []struct {
		expr string
		want any
	}{
		{"powertools_json(body).order_id", json.Number("12345678901234567890")},
		{"powertools_json(body).amount", 10.5},
		{"powertools_json(body).items[1]", "b"},
		{"powertools_json(powertools_base64(b64)).items", []any{"a", "b"}},
		{"powertools_base64_gzip(gz) | powertools_json(@).amount", 10.5},
		{"powertools_json(powertools_json(nested).inner).x", 1.0},
		{"powertools_json(body).missing", nil},
	} {
		got, err := compile(t, tc.expr).Search(doc)
		require.NoError(t, err, tc.expr)
		assert.Equal(t, tc.want, got, tc.expr)
	}
}

func TestPowertoolsFunctionErrors(t *testing.T) {
	bomb := gzipBase64(t, make([]byte, MaxDecompressedSize+1))
	require.Less(t, len(bomb), 100<<10, "the bomb should be small compressed")
	for _, tc := range []struct {
		expr string
		doc  map[string]any
		want error
	}{
		{"powertools_json(s)", map[string]any{"s": "{not json"}, ErrInvalidJSON},
		{"powertools_json(s)", map[string]any{"s": ""}, ErrInvalidJSON},
		{"powertools_base64(s)", map[string]any{"s": "%%%"}, ErrInvalidBase64},
		{"powertools_base64(s)", map[string]any{"s": base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe})}, ErrNotText},
		{"powertools_base64_gzip(s)", map[string]any{"s": base64.StdEncoding.EncodeToString([]byte("plain"))}, ErrInvalidGzip},
		{"powertools_base64_gzip(s)", map[string]any{"s": bomb}, ErrTooLarge},
		{"powertools_base64_gzip(s)", map[string]any{"s": gzipBase64(t, []byte{0xff})}, ErrNotText},
	} {
		_, err := compile(t, tc.expr).Search(tc.doc)
		require.Error(t, err, tc.expr)
		assert.ErrorIs(t, err, tc.want, tc.expr)
		var se *SearchError
		assert.ErrorAs(t, err, &se)
	}
	// A function given a value of the wrong type is an error, not a panic;
	// null gives null.
	for _, v := range []any{1.0, true, []any{}, map[string]any{}} {
		_, err := compile(t, "powertools_json(n)").Search(map[string]any{"n": v})
		assert.Error(t, err, "%#v", v)
	}
	got, err := compile(t, "powertools_base64_gzip(missing)").Search(map[string]any{})
	assert.NoError(t, err)
	assert.Nil(t, got)
}

func TestNonObjectInputs(t *testing.T) {
	expr := compile(t, "powertools_json(body).order_id")
	for _, doc := range []string{`"a string"`, `42`, `null`, `[1,2]`, `{"other":1}`} {
		got, err := expr.SearchJSON([]byte(doc))
		require.NoError(t, err, doc)
		assert.Nil(t, got, doc)
	}
	_, err := expr.SearchJSON([]byte(`{"body": "x"`))
	assert.ErrorIs(t, err, ErrInvalidJSON)
}

func TestEnvelopes(t *testing.T) {
	var logs events.CloudwatchLogsEvent
	require.NoError(t, json.Unmarshal(readEvent(t, "cloudwatch-logs-event.json"), &logs))
	for _, tc := range []struct {
		envelope, event, path string
		want                  any
	}{
		{EnvelopeSQS, "sqs-event.json", "", []any{}},
		{EnvelopeKinesisDataStream, "kinesis-event.json", "", []any{}},
		{EnvelopeCloudWatchLogs, "cloudwatch-logs-event.json", " | [0].id", nil},
	} {
		expr, err := Compile(tc.envelope + tc.path)
		require.NoError(t, err)
		_, err = expr.SearchJSON(readEvent(t, tc.event))
		// The samples' payloads are not all JSON; the envelope must either
		// decode them or say why, never panic.
		if err != nil {
			assert.True(t, errors.Is(err, ErrInvalidJSON) || errors.Is(err, ErrInvalidBase64), err.Error())
		}
	}

	sqs := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "1", Body: `{"order_id":"o-1"}`},
		{MessageId: "2", Body: `{"order_id":"o-2"}`},
	}}
	got, err := compile(t, EnvelopeSQS+" | [*].order_id").SearchValue(sqs)
	require.NoError(t, err)
	assert.Equal(t, []any{"o-1", "o-2"}, got)

	data := base64.StdEncoding.EncodeToString([]byte(`{"reading": 7}`))
	kinesis := events.KinesisEvent{Records: []events.KinesisEventRecord{{Kinesis: events.KinesisRecord{Data: []byte(`{"reading": 7}`)}}}}
	got, err = compile(t, EnvelopeKinesisDataStream).SearchValue(kinesis)
	require.NoError(t, err)
	assert.Equal(t, []any{map[string]any{"reading": 7.0}}, got, "Kinesis data %s", data)

	got, err = compile(t, EnvelopeCloudWatchLogs+" | [0].message").SearchValue(logs)
	require.NoError(t, err)
	assert.NotEmpty(t, got)

	sns := events.SNSEvent{Records: []events.SNSEventRecord{{SNS: events.SNSEntity{Message: `{"id": 3}`}}}}
	got, err = compile(t, EnvelopeSNS+".id").SearchValue(sns)
	require.NoError(t, err)
	assert.Equal(t, 3.0, got)

	api := events.APIGatewayProxyRequest{Body: `{"order_id": 9}`}
	got, err = compile(t, EnvelopeAPIGatewayREST+".order_id").SearchValue(api)
	require.NoError(t, err)
	assert.Equal(t, 9.0, got)
}

// expressions exercise every kind of syntax node, planned or not.
var expressions = []string{
	"body", "powertools_json(body).order_id", "headers.\"Content-Type\"", "requestContext.identity.sourceIp",
	"[httpMethod, path]", "{m: httpMethod, p: path}", "Records[*].messageId", "Records[0].body",
	"Records[?messageAttributes != `{}`].messageId", "Records[].attributes.SenderId", "Records[:1].md5OfBody",
	"keys(headers)", "length(Records)", "sort_by(Records, &messageId)[0].eventSource", "headers.*",
	"*.Accept", "@", "$.path", "path || resource", "path && !isBase64Encoded", "Records[*].[messageId, body]",
	"requestContext.identity | sourceIp", "multiValueHeaders.Accept[0]", "to_string(headers)",
	"Records[?contains(body, 'test')].receiptHandle", "let $x = path in $x", "max_by(Records, &to_number(attributes.SentTimestamp)).messageId",
	"queryStringParameters.name", "not_there.at.all", "[0]", "Records[-1].awsRegion",
	"map(&messageId, Records)", "Records[*].powertools_json(body)",
}

func TestSearchValueEqualsSearchJSON(t *testing.T) {
	var api events.APIGatewayProxyRequest
	doc := readEvent(t, "apigw-request.json")
	require.NoError(t, json.Unmarshal(doc, &api))
	var sqs events.SQSEvent
	sqsDoc := readEvent(t, "sqs-event.json")
	require.NoError(t, json.Unmarshal(sqsDoc, &sqs))
	for _, expr := range expressions {
		e := compile(t, expr)
		for _, v := range []any{api, &api, sqs} {
			b, err := json.Marshal(v)
			require.NoError(t, err)
			want, wantErr := e.SearchJSON(b)
			got, gotErr := e.SearchValue(v)
			sameOutcome(t, e, want, wantErr, got, gotErr, fmt.Sprintf("%T", v))
		}
	}
}

func TestOrderDependent(t *testing.T) {
	for expr, want := range map[string]bool{
		"headers.*": true, "*.Accept": true, "keys(headers)": true, "values(@)": true, "items(a)": true,
		"body": false, "Records[*].body": false, "to_string(headers)": false, "length(keys(headers))": true,
		"sort(keys(headers))": true, "[a, b]": false, "let $h = headers.* in $h": true, "map(&keys(@), a)": true,
	} {
		assert.Equal(t, want, compile(t, expr).OrderDependent(), expr)
	}
}

func FuzzPowertoolsFunctions(f *testing.F) {
	f.Add(`{"a":1}`, 0)
	f.Add(base64.StdEncoding.EncodeToString([]byte(`{"a":1}`)), 1)
	f.Add(gzipBase64(f, []byte(`{"a":[1,2]}`)), 2)
	f.Add("H4sIAAAAAAAA/w==", 2)
	exprs := []*Expression{
		compile(f, "powertools_json(s)"),
		compile(f, "powertools_base64(s)"),
		compile(f, "powertools_base64_gzip(s)"),
	}
	f.Fuzz(func(t *testing.T, s string, which int) {
		e := exprs[(which%3+3)%3]
		got, err := e.Search(map[string]any{"s": s})
		if err != nil {
			var se *SearchError
			if !errors.As(err, &se) {
				t.Fatalf("%s: error %v is not a *SearchError", e, err)
			}
			return
		}
		if _, err := canonical.Append(nil, got); err != nil {
			t.Fatalf("%s returned %#v, which does not encode: %v", e, got, err)
		}
	})
}
