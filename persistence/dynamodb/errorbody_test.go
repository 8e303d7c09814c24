package dynamodb

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/schemas"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"

	"github.com/retrysafe/retrysafe/persistence"
)

// conditionFailedBody is a failed condition's answer with the record, as
// DynamoDB sends it for ReturnValuesOnConditionCheckFailure ALL_OLD.
const conditionFailedBody = `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed","Item":{"id":{"S":"orders#1"},"expiration":{"N":"1767229200"},"status":{"S":"COMPLETED"},"owner_token":{"S":"QGZWM5GVFV3PZ4LSYUBE4RK7WA"},"data":{"S":"{\"statusCode\":201,\"body\":\"\\\"ok\\\"\"}"},"l":{"L":[{"BOOL":true},{"NULL":true},{"M":{"x":{"NS":["1","2.5e3"]}}}]},"b":{"B":"AAEC"}}}`

// errorResponses are error answers the SDK's protocol and errorProtocol
// must decode alike: DynamoDB's, dynalite's and DynamoDB Local's forms,
// other modelled and unmodelled errors, and bodies the SDK refuses or
// reads in its own way.
var errorResponses = []struct {
	name, header, body string
	status             int
}{
	{"condition failed with the record", "", conditionFailedBody, 400},
	{"condition failed without it", "", `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`, 400},
	{"DynamoDB Local's form", "", `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","Message":"The conditional request failed"}`, 400},
	{"type in the header", "ConditionalCheckFailedException:http://internal.amazon.com/coral/com.amazonaws.dynamodb.v20120810/", `{"message":"x"}`, 400},
	{"header over the body", "ResourceNotFoundException", conditionFailedBody, 400},
	{"type in code", "", `{"code":"ConditionalCheckFailedException","message":"m"}`, 400},
	{"code that is a number", "", `{"code":5,"message":"m"}`, 400},
	{"code set back to null", "", `{"code":"ConditionalCheckFailedException","code":null}`, 400},
	{"type over code", "", `{"code":"ResourceNotFoundException","__type":"ConditionalCheckFailedException"}`, 400},
	{"type in another case", "", `{"__TYPE":"ConditionalCheckFailedException"}`, 400},
	{"last type wins", "", `{"__type":"ResourceNotFoundException","__type":"ConditionalCheckFailedException"}`, 400},
	{"null type keeps the last", "", `{"__type":"ConditionalCheckFailedException","__type":null}`, 400},
	{"escaped type", "", `{"__type":"Conditional\u0043heckFailedException"}`, 400},
	{"escaped name", "", `{"\u005f_type":"ConditionalCheckFailedException"}`, 400},
	{"folded name", "", `{"meſſage":5,"__type":"ConditionalCheckFailedException"}`, 400},
	{"message not a string", "", `{"__type":"ConditionalCheckFailedException","message":5}`, 400},
	{"Message not a string", "", `{"__type":"ConditionalCheckFailedException","MESSAGE":{}}`, 400},
	{"type not a string", "", `{"__type":["ConditionalCheckFailedException"]}`, 400},
	{"throttled", "", `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}`, 400},
	{"unmodelled", "", `{"__type":"com.amazon.coral.service#UnrecognizedClientException","message":"bad key"}`, 400},
	{"no type", "", `{"message":"what"}`, 500},
	{"empty body", "", ``, 500},
	{"empty body, typed header", "ConditionalCheckFailedException", ``, 400},
	{"white space", "", " \n\t{ \"__type\" : \"ConditionalCheckFailedException\" , \"Item\" : { } } \n", 400},
	{"trailing bytes", "", `{"__type":"ConditionalCheckFailedException"}x`, 400},
	{"not an object", "", `["ConditionalCheckFailedException"]`, 400},
	{"null", "", `null`, 400},
	{"syntax error inside", "", `{"__type":"ConditionalCheckFailedException","Item":{"a":{"S":"x"},}}`, 400},
	{"bad escape", "", `{"__type":"ConditionalCheckFailedException","Item":{"a":{"S":"\x"}}}`, 400},
	{"control character", "", "{\"__type\":\"ConditionalCheckFailedException\",\"message\":\"a\tb\"}", 400},
	{"bad number", "", `{"__type":"ConditionalCheckFailedException","n":01}`, 400},
	{"invalid UTF-8", "", "{\"__type\":\"ConditionalCheckFailedException\",\"message\":\"\xff\"}", 400},
	{"item of the wrong shape", "", `{"__type":"ConditionalCheckFailedException","Item":{"a":{"S":1}}}`, 400},
	{"deep", "", `{"__type":"ConditionalCheckFailedException","x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, 400},
	{"cut short", "", conditionFailedBody[:200], 400},
	{"success", "", `{}`, 200},
}

// deserialize decodes an answer to a PutItem with protocol, and returns
// the output and the error. It fails t if protocol replaced the answer's
// body, which its caller closes.
func deserialize(t testing.TB, protocol smithyhttp.ClientProtocol, status int, header, body string) (*dynamodb.PutItemOutput, error) {
	t.Helper()
	h := http.Header{"Content-Type": {"application/x-amz-json-1.0"}}
	if header != "" {
		h.Set("X-Amzn-ErrorType", header)
	}
	original := io.NopCloser(strings.NewReader(body))
	resp := &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: h, Body: original}}
	out := &dynamodb.PutItemOutput{}
	schema := smithy.NewOperationSchema(schemas.PutItem, schemas.PutItemInput, schemas.PutItemOutput)
	err := protocol.DeserializeResponse(context.Background(), schema, dynamodb.TypeRegistry, resp, out)
	if resp.Body != original {
		t.Errorf("the response's body was replaced")
	}
	return out, err
}

// TestErrorProtocolIsTheSDKs checks errorProtocol against the SDK's own
// awsJson protocol: the same error, or the same output, for every answer.
func TestErrorProtocolIsTheSDKs(t *testing.T) {
	sdk := awsjson.New10(schemas.DynamoDB_20120810)
	ours := &errorProtocol{ClientProtocol: sdk}
	for _, r := range errorResponses {
		t.Run(r.name, func(t *testing.T) {
			wantOut, wantErr := deserialize(t, sdk, r.status, r.header, r.body)
			gotOut, gotErr := deserialize(t, ours, r.status, r.header, r.body)
			if !reflect.DeepEqual(gotErr, wantErr) || !reflect.DeepEqual(gotOut, wantOut) {
				t.Errorf("errorProtocol: %#v, %+v\nthe SDK's:     %#v, %+v", gotErr, gotOut, wantErr, wantOut)
			}
		})
	}
}

// TestErrorTypeReadsTheServersAnswers checks that the answers of DynamoDB,
// dynalite and DynamoDB Local take errorProtocol's own path, and which
// bodies it leaves to the SDK.
func TestErrorTypeReadsTheServersAnswers(t *testing.T) {
	for _, c := range []struct {
		header, body, want string
		ok                 bool
	}{
		{"", conditionFailedBody, "ConditionalCheckFailedException", true},
		{"", `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","Message":"The conditional request failed"}`, "ConditionalCheckFailedException", true},
		{"", `{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}`, "ResourceNotFoundException", true},
		{"ConditionalCheckFailedException:http://internal.amazon.com/", `{}`, "ConditionalCheckFailedException", true},
		{"", `{"code":"ConditionalCheckFailedException"}`, "ConditionalCheckFailedException", true},
		{"", `{"__type":"","code":"X"}`, "X", true},
		{"", `{"message":"no type"}`, "", false},
		{"", `{"__type":"Conditional\u0043heckFailedException"}`, "", false},
		{"", `{"__type":"ConditionalCheckFailedException","message":5}`, "", false},
		{"", `{"__type":"ConditionalCheckFailedException"`, "", false},
		{"", `{"__type":"ConditionalCheckFailedException",}`, "", false},
	} {
		got, ok := errorType(c.header, []byte(c.body))
		if got != c.want || ok != c.ok {
			t.Errorf("errorType(%q, %s) = %q, %v; want %q, %v", c.header, c.body, got, ok, c.want, c.ok)
		}
	}
}

// FuzzErrorProtocol compares errorProtocol with the SDK's protocol on any
// answer.
func FuzzErrorProtocol(f *testing.F) {
	for _, r := range errorResponses {
		f.Add(uint16(r.status), r.header, []byte(r.body))
	}
	sdk := awsjson.New10(schemas.DynamoDB_20120810)
	ours := &errorProtocol{ClientProtocol: sdk}
	f.Fuzz(func(t *testing.T, status uint16, header string, body []byte) {
		if strings.ContainsAny(header, "\r\n\x00") {
			return // not a header a response can carry
		}
		code := 200 + int(status)%400
		wantOut, wantErr := deserialize(t, sdk, code, header, string(body))
		gotOut, gotErr := deserialize(t, ours, code, header, string(body))
		if !reflect.DeepEqual(gotErr, wantErr) || !reflect.DeepEqual(gotOut, wantOut) {
			t.Errorf("%d %q %q:\nerrorProtocol: %#v, %+v\nthe SDK's:     %#v, %+v", code, header, body, gotErr, gotOut, wantErr, wantOut)
		}
	})
}

// closeCounter is a response body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed *int
}

func (c closeCounter) Close() error { *c.closed++; return nil }

// conditionFailedHTTP answers every request with a failed condition and
// the record, and counts the bodies closed.
type conditionFailedHTTP struct{ closed int }

func (c *conditionFailedHTTP) Do(req *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, req.Body)
	return &http.Response{
		StatusCode: 400,
		Header:     http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:       closeCounter{strings.NewReader(conditionFailedBody), &c.closed},
		Request:    req,
	}, nil
}

// TestWritesDecodeTheirErrorsOnce sends a reservation through the SDK's
// client: its failed condition comes back as the SDK's error, decoded on
// errorProtocol's path, with the record, and the body is closed.
func TestWritesDecodeTheirErrorsOnce(t *testing.T) {
	h := &conditionFailedHTTP{}
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  aws.AnonymousCredentials{},
		BaseEndpoint: aws.String("http://127.0.0.1:1"),
		HTTPClient:   h,
	})
	var installed smithyhttp.ClientProtocol
	s, err := New(client, "idempotency")
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("t"), Item: map[string]types.AttributeValue{"id": str("x")}},
		append(writeOptions, func(o *dynamodb.Options) { installed = o.Protocol })...)
	var failed *types.ConditionalCheckFailedException
	if !errors.As(err, &failed) || len(failed.Item) != 7 {
		t.Fatalf("PutItem: %v", err)
	}
	if _, ok := installed.(*errorProtocol); !ok {
		t.Errorf("the request's protocol is %T, not errorProtocol", installed)
	}
	err = s.Put(context.Background(), &persistence.Record{Key: "orders#1", Status: persistence.StatusInProgress, Token: "t", ExpiresAt: time.Now().Add(time.Hour)}, time.Now())
	var conflict *persistence.ConflictError
	if !errors.As(err, &conflict) || conflict.Existing == nil || conflict.Existing.Status != persistence.StatusCompleted {
		t.Fatalf("Put: %v", err)
	}
	if h.closed != 2 {
		t.Errorf("%d bodies closed, want 2", h.closed)
	}
}

// BenchmarkErrorProtocol decodes a failed condition's answer with the
// record, with the SDK's protocol and with errorProtocol.
func BenchmarkErrorProtocol(b *testing.B) {
	sdk := awsjson.New10(schemas.DynamoDB_20120810)
	for _, p := range []struct {
		name     string
		protocol smithyhttp.ClientProtocol
	}{{"SDK", sdk}, {"errorProtocol", &errorProtocol{ClientProtocol: sdk}}} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := deserialize(b, p.protocol, 400, "", conditionFailedBody); err == nil {
					b.Fatal("no error")
				}
			}
		})
	}
}

// statusRecorder is a protocol that records the statuses of the responses
// it decodes.
type statusRecorder struct {
	smithyhttp.ClientProtocol
	statuses []int
}

func (r *statusRecorder) DeserializeResponse(ctx context.Context, schema *smithy.OperationSchema, registry *smithy.TypeRegistry, resp *smithyhttp.Response, out smithy.Deserializable) error {
	r.statuses = append(r.statuses, resp.StatusCode)
	return r.ClientProtocol.DeserializeResponse(ctx, schema, registry, resp, out)
}

// TestErrorProtocolDecodesModelledErrorsItself checks which answers
// errorProtocol decodes on its own path, where the wrapped protocol only
// decodes the body as a successful response's, and which it hands over.
func TestErrorProtocolDecodesModelledErrorsItself(t *testing.T) {
	own := map[string]bool{
		"condition failed with the record": true,
		"condition failed without it":      true,
		"DynamoDB Local's form":            true,
		"type in the header":               true,
		"header over the body":             true,
		"throttled":                        true,
		"white space":                      true,
		"type in code":                     true,
		"type over code":                   true,
		"type in another case":             true,
		"last type wins":                   true,
		"null type keeps the last":         true,
		"trailing bytes":                   true,
		"invalid UTF-8":                    true,
	}
	for _, r := range errorResponses {
		if r.status == 200 {
			continue
		}
		rec := &statusRecorder{ClientProtocol: awsjson.New10(schemas.DynamoDB_20120810)}
		deserialize(t, &errorProtocol{ClientProtocol: rec}, r.status, r.header, r.body)
		if got := len(rec.statuses) == 1 && rec.statuses[0] == 200; got != own[r.name] {
			t.Errorf("%s: the wrapped protocol decoded statuses %v", r.name, rec.statuses)
		}
	}
}
