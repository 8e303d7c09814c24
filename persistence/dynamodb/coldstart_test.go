package dynamodb_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// noRequests is an HTTP client that fails the test on any request.
type noRequests struct {
	tb testing.TB
	n  atomic.Int64
}

func (c *noRequests) Do(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	c.tb.Errorf("a request at init: %s %s %s", req.Method, req.URL, req.Header.Get("X-Amz-Target"))
	return nil, http.ErrServerClosed
}

// coldStartKey is the key of the cold start's wrapped handler: a JMESPath
// expression through the body of an API Gateway event, as Powertools'
// examples select it.
const coldStartKey = "powertools_json(body).order_id"

func coldStartHandler(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return events.APIGatewayProxyResponse{StatusCode: 201}, nil
}

// initFunction is what a Lambda function's init does with the library: it
// builds the store over the function's DynamoDB client and wraps the
// handler with a JMESPath key.
func initFunction(tb testing.TB, client *awsdynamodb.Client) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	store, err := dynamodb.New(client, "IdempotencyTable")
	if err != nil {
		tb.Fatal(err)
	}
	h, err := idempotency.Wrap(coldStartHandler, store, idempotency.WithKey(coldStartKey))
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

func coldStartClient(h awsHTTPClient) *awsdynamodb.Client {
	return awsdynamodb.New(awsdynamodb.Options{
		Region:       "us-east-1",
		Credentials:  dynalite.Credentials,
		BaseEndpoint: aws.String("http://127.0.0.1:1"),
		HTTPClient:   h,
	})
}

type awsHTTPClient = interface {
	Do(*http.Request) (*http.Response, error)
}

// The library sends nothing at init: building the store (dynamodb.New)
// and wrapping a handler with a JMESPath key make no request, and neither
// does anything in the packages' init (which ran before this test).
// A table that does not exist is found on the first call, or by
// dynamodb.CheckTable where a function asks for it.
func TestNoRequestAtInit(t *testing.T) {
	c := &noRequests{tb: t}
	h := initFunction(t, coldStartClient(c))
	if h == nil {
		t.Fatal("no handler")
	}
	if n := c.n.Load(); n != 0 {
		t.Fatalf("%d requests at init", n)
	}
}

// BenchmarkColdStartInit measures what the library adds to a Lambda
// function's init, apart from its packages' init (GODEBUG=inittrace=1
// shows those; BenchmarkColdStart in examples/payments measures whole
// init phases under the emulator): building the store over the
// function's DynamoDB client and wrapping the handler with a JMESPath key.
// Bare is the same init without the library: the handler as it is, and
// the SDK client the function has either way.
func BenchmarkColdStartInit(b *testing.B) {
	c := &noRequests{tb: b}
	b.Run("Bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = coldStartClient(c)
		}
	})
	b.Run("Library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = initFunction(b, coldStartClient(c))
		}
	})
	b.Run("LibraryOnly", func(b *testing.B) {
		client := coldStartClient(c)
		b.ReportAllocs()
		for b.Loop() {
			_ = initFunction(b, client)
		}
	})
}
